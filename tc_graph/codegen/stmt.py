"""The statement printer every C-family target shares: statements, index checks and the
isl AST's loops, ifs, blocks and marks as C text, over `ExprPrinter` (codegen/expr.py).

A target extends it where it prints a loop or a mark its own way (the CPU's OpenMP loops
and tiles in codegen/c.py, the GPU's mapped loops and shared tiles in codegen/gpu.py) and
where a statement stores (`target`); what differs in the text alone is its `Dialect`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence

import islpy as isl

from ..lang.types import C_TYPES, compute_type, promote
from ..poly.marks import Loop, LoopMark, Mark, of_node
from ..poly.proof import children
from ..poly.scop import Scop, ScopStmt, indirect_reads
from .expr import Dialect, ExprPrinter, acc_start, cname, combine, identity, store


class StatementPrinter(ExprPrinter):
    """The AST walk of every target: `lines` holds the text printed so far; `loop` and
    `mark` are the hooks a target extends, `target` where a statement stores."""

    def __init__(self, scop: Scop, dialect: Dialect) -> None:
        super().__init__(scop, dialect)
        self.lines: list[str] = []
        self.check_codes = {
            s.name: k + 1 for k, s in enumerate(s for s in scop.statements if s.kind == "check")
        }

    def out(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    # -- statements ----------------------------------------------------
    def stmt_env(self, st: ScopStmt, args: Sequence[str]) -> dict[str, str]:
        return dict(zip(st.iterators, args, strict=True))

    def target(self, st: ScopStmt, env: Mapping[str, str]) -> str:
        """The element a statement stores to."""
        src = st.source
        return f"{cname(src.tensor)}[{self.linear(src.tensor, [env[v] for v in src.lhs])}]"

    def statement(self, st: ScopStmt, args: Sequence[str], depth: int) -> None:
        env = self.stmt_env(st, args)
        src = st.source
        if st.kind == "check":
            self.index_check(st, env, depth)
            return
        target = self.target(st, env)
        tdt = self.program.tensors[src.tensor].dtype
        tc = C_TYPES[tdt]
        if st.kind == "init":
            self.out(depth, f"{target} = ({tc})({identity(src.op, tdt)});")
            return
        value = self.expr(src.rhs, env)
        if st.kind == "assign":
            self.out(depth, f"{target} = {store(value, tdt, src.rhs.dtype)};")
            return
        acc_t = compute_type(promote(tdt, src.rhs.dtype))
        acc = C_TYPES[acc_t]
        new = combine(src.op, acc_start(src.op, target, acc_t), f"({acc})({value})", acc)
        self.out(depth, f"{target} = {store(new, tdt, acc_t)};")

    def index_check(self, st: ScopStmt, env: Mapping[str, str], depth: int) -> None:
        """The check of one indirect subscript; the dialect's `record_error(code)` runs on
        a bad value `v`. Every indirect subscript nested in it is checked first, innermost
        first, each with its own code: checking only the final value read through
        unchecked indices (a crash, or a garbage value in the message: issue 12). Each
        check stands alone, whatever order the schedule gives the check statements."""
        assert st.checked is not None
        codes = {
            (s.checked, s.checked_dim): self.check_codes[s.name]
            for s in self.scop.statements
            if s.kind == "check"
        }
        own = (st.checked, st.checked_dim)
        codes[own] = self.check_codes[st.name]
        # indirect_reads lists parents before children: reversed, innermost first.
        chain = [*reversed(indirect_reads(st.checked.subscripts[st.checked_dim])), own]
        self.out(depth, "if (check) { int64_t v;")
        for n, (r, k) in enumerate(chain):
            value = self.expr(r.subscripts[k], env)
            test = f"(v = (int64_t)({value})) < 0 || v >= {self.extent(r.tensor, k)}"
            fail = self.dialect.record_error(codes[r, k])
            text = f"{'else ' if n else ''}if ({test}) {{ {fail} }}"
            self.out(depth + 1, text + (" }" if n == len(chain) - 1 else ""))

    def reduces(self, node: isl.AstNode) -> bool:
        """Whether a `reduce` mark's loop keeps its output element in a local (`reduced`)."""
        return not isinstance(reduced(self.scop, node), str)

    def reduction_loop(self, node: isl.AstNode, depth: int) -> None:
        """A loop over a reduction index of one update statement: accumulate in a local."""
        found = reduced(self.scop, node)
        assert not isinstance(found, str), found
        self.accumulate(node, *found, depth)

    def accumulate(
        self, node: isl.AstNode, st: ScopStmt, env: Mapping[str, str], depth: int
    ) -> None:
        """The reduction loop `node` of st with the output element in a local `acc`."""
        src = st.source
        acc, store_acc = self.open_accumulator(st, env, depth)
        self.out(depth + 1, self.dialect.reduction_pragma(src.op, "acc"))
        self.out(depth + 1, self.for_header(node))
        value = self.expr(src.rhs, env)
        self.out(depth + 2, f"acc = {combine(src.op, 'acc', f'({acc})({value})', acc)};")
        self.out(depth + 1, store_acc)
        self.out(depth, "}")

    def open_accumulator(self, st: ScopStmt, env: Mapping[str, str], depth: int) -> tuple[str, str]:
        """Open a block holding st's output element in a local `acc` of the reduction's
        compute type: that C type, and the statement that stores `acc` back."""
        src = st.source
        tdt = self.program.tensors[src.tensor].dtype
        acc_t = compute_type(promote(tdt, src.rhs.dtype))
        target = self.target(st, env)
        self.out(depth, "{")
        self.out(depth + 1, f"{C_TYPES[acc_t]} acc = {acc_start(src.op, target, acc_t)};")
        return C_TYPES[acc_t], f"{target} = {store('acc', tdt, acc_t)};"

    # -- AST -------------------------------------------------------------
    def user(self, node: isl.AstNode) -> tuple[ScopStmt, list[str]]:
        st, args = user_exprs(self.scop, node)
        return st, [a.to_C_str() for a in args]

    def for_header(self, node: isl.AstNode) -> str:
        it = node.for_get_iterator().to_C_str()
        init = node.for_get_init().to_C_str()
        cond = node.for_get_cond().to_C_str()
        inc = node.for_get_inc().to_C_str()
        return f"for (int {it} = {init}; {cond}; {it} += {inc})"

    def loop_open(self, c: isl.AstNode) -> str:
        """The opening line of a loop printed in place (a degenerate one as a constant)."""
        it = c.for_get_iterator().to_C_str()
        if c.for_is_degenerate():
            return f"{{ const int {it} = {c.for_get_init().to_C_str()};"
        return self.for_header(c) + " {"

    def node(self, node: isl.AstNode, depth: int, marks: frozenset[Loop] = frozenset()) -> None:
        """Print an AST node; `marks` are the loop marks in force for the next loop."""
        t = node.get_type()
        if t == isl.ast_node_type.for_ and node.for_is_degenerate():
            self.out(depth, self.loop_open(node))
            self.node(node.for_get_body(), depth + 1)
            self.out(depth, "}")
        elif t == isl.ast_node_type.for_:
            self.loop(node, depth, marks)
        elif t == isl.ast_node_type.if_:
            self.out(depth, f"if ({node.if_get_cond().to_C_str()}) {{")
            self.node(node.if_get_then_node(), depth + 1, marks)
            if node.if_has_else_node():
                self.out(depth, "} else {")
                self.node(node.if_get_else_node(), depth + 1, marks)
            self.out(depth, "}")
        elif t == isl.ast_node_type.block:
            for child in children(node):
                self.node(child, depth, marks)
        elif t == isl.ast_node_type.mark:
            self.mark(node.mark_get_node(), of_node(node), depth, marks)
        elif t == isl.ast_node_type.user:
            st, args = self.user(node)
            self.statement(st, args, depth)
        else:
            raise TypeError(f"unexpected isl AST node {t}")

    def loop(self, node: isl.AstNode, depth: int, marks: frozenset[Loop]) -> None:
        """A loop that runs more than once: a reduction in a local where marked so."""
        if Loop.REDUCE in marks and self.reduces(node):
            self.reduction_loop(node, depth)
            return
        if Loop.SIMD in marks:
            self.out(depth, self.dialect.simd_pragma())
        self.out(depth, self.for_header(node) + " {")
        self.node(node.for_get_body(), depth + 1)
        self.out(depth, "}")

    def mark(self, node: isl.AstNode, mark: Mark, depth: int, marks: frozenset[Loop]) -> None:
        """The node under a mark: a loop mark is in force for the loops below."""
        if isinstance(mark, LoopMark):
            marks = marks | {mark.kind}
        self.node(node, depth, marks)


def user_exprs(scop: Scop, node: isl.AstNode) -> tuple[ScopStmt, list[isl.AstExpr]]:
    """The statement a user node runs, and its arguments as isl's expressions."""
    e = node.user_get_expr()
    name = e.get_op_arg(0).get_id().get_name()
    return scop.statement(name), [e.get_op_arg(i) for i in range(1, e.get_op_n_arg())]


def reduced(scop: Scop, node: isl.AstNode) -> tuple[ScopStmt, dict[str, str]] | str:
    """The update statement that is a loop's whole body, with its iterators' values,
    when the loop runs over one of its reduction indices; else why not."""
    body = node.for_get_body()
    if body.get_type() != isl.ast_node_type.user:
        return "the loop's body is not one statement"
    st, exprs = user_exprs(scop, body)
    it = node.for_get_iterator().to_C_str()
    args = dict(zip(st.iterators, exprs, strict=True))
    if st.kind != "update" or any(mentions(args[v], it) for v in st.source.lhs):
        return f"loop {it} runs over no reduction index of an update"
    return st, {v: e.to_C_str() for v, e in args.items()}


def _loop_bounds(node: isl.AstNode) -> tuple[isl.AstExpr, isl.AstExpr, int, int] | None:
    """(init, bound, step, offset) of a loop of the isl AST counting up by a positive
    integer to `bound + offset` inclusive (offset 0 for `<=`, -1 for `<`); None for any
    other."""
    cond = node.for_get_cond()
    step = ast_int(node.for_get_inc())
    op = cond.get_op_type()
    if step is None or step < 1 or op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
        return None
    offset = 0 if op == isl.ast_expr_op_type.le else -1
    return node.for_get_init(), cond.get_op_arg(1), step, offset


def constant_loop(node: isl.AstNode) -> tuple[int, int, int] | None:
    """(first, iterations, step) of a loop of the isl AST whose bounds are constants
    (sizes are baked in); None for any other."""
    bounds = _loop_bounds(node)
    if bounds is None:
        return None
    init, bound, step, offset = bounds
    first, last = ast_int(init), ast_int(bound)
    if first is None or last is None:
        return None
    return first, max(0, (last + offset - first) // step + 1), step


def counted_loop(node: isl.AstNode) -> tuple[str, str, int] | None:
    """(first, iterations, step) of a loop of the isl AST whose bounds are expressions of
    the sizes (a kernel for every size), as C text; None for any other (a loop whose
    step is not a positive integer)."""
    bounds = _loop_bounds(node)
    if bounds is None:
        return None
    init, bound, step, offset = bounds
    first = init.to_C_str()
    last = f"({bound.to_C_str()})" + (" - 1" if offset else "")
    count = f"max((int64_t)0, floord((int64_t){last} - ({first}), {step}) + 1)"
    return first, count, step


def sample_trips(node: isl.AstNode, sizes: Mapping[str, int]) -> int | None:
    """The iterations of a loop of the isl AST at these sizes, where its bounds are
    expressions of the sizes alone; None where they read another iterator."""
    bounds = _loop_bounds(node)
    if bounds is None:
        return None
    init, bound, step, offset = bounds
    first, last = ast_value(init, sizes), ast_value(bound, sizes)
    if first is None or last is None:
        return None
    return max(0, (last + offset - first) // step + 1)


# isl's AST operations on integers. pdiv_q and pdiv_r have a nonnegative dividend and a
# positive divisor, where floor and C's truncation agree; a zdiv_r is only compared with
# zero, which either remainder is exactly when the other is.
_INT_OPS: Mapping[isl.ast_expr_op_type, Callable[..., int]] = {
    isl.ast_expr_op_type.add: operator.add,
    isl.ast_expr_op_type.sub: operator.sub,
    isl.ast_expr_op_type.mul: operator.mul,
    isl.ast_expr_op_type.minus: operator.neg,
    isl.ast_expr_op_type.div: operator.floordiv,
    isl.ast_expr_op_type.fdiv_q: operator.floordiv,
    isl.ast_expr_op_type.pdiv_q: operator.floordiv,
    isl.ast_expr_op_type.pdiv_r: operator.mod,
    isl.ast_expr_op_type.zdiv_r: operator.mod,
    isl.ast_expr_op_type.max: max,
    isl.ast_expr_op_type.min: min,
    isl.ast_expr_op_type.eq: lambda a, b: int(a == b),
    isl.ast_expr_op_type.le: lambda a, b: int(a <= b),
    isl.ast_expr_op_type.lt: lambda a, b: int(a < b),
    isl.ast_expr_op_type.ge: lambda a, b: int(a >= b),
    isl.ast_expr_op_type.gt: lambda a, b: int(a > b),
    isl.ast_expr_op_type.and_: lambda a, b: int(bool(a and b)),
    isl.ast_expr_op_type.and_then: lambda a, b: int(bool(a and b)),
    isl.ast_expr_op_type.or_: lambda a, b: int(bool(a or b)),
    isl.ast_expr_op_type.or_else: lambda a, b: int(bool(a or b)),
    isl.ast_expr_op_type.select: lambda c, a, b: a if c else b,
    isl.ast_expr_op_type.cond: lambda c, a, b: a if c else b,
}


def ast_value(e: isl.AstExpr, values: Mapping[str, int]) -> int | None:
    """The value of an expression of isl's AST whose identifiers all have `values` (a
    condition's as 1 or 0); None where one has none or an operation is not integer
    arithmetic, a comparison or a selection."""
    t = e.get_type()
    if t == isl.ast_expr_type.int:
        return ast_int(e)
    if t == isl.ast_expr_type.id:
        return values.get(e.get_id().get_name())
    fn = _INT_OPS.get(e.get_op_type())
    if fn is None:
        return None
    args = [ast_value(e.get_op_arg(k), values) for k in range(e.get_op_n_arg())]
    if any(a is None for a in args):
        return None
    return fn(*args)


def with_value(e: isl.AstExpr, name: str, value: int) -> isl.AstExpr:
    """e with the iterator `name` replaced by the integer `value`, rebuilt by isl (whose
    printer then prints it as it prints every expression)."""
    if e.get_type() == isl.ast_expr_type.id:
        if e.get_id().get_name() != name:
            return e
        return isl.AstExpr.from_val(isl.Val.int_from_si(e.get_ctx(), value))
    if e.get_type() != isl.ast_expr_type.op:
        return e
    for k in range(e.get_op_n_arg()):
        e = e.set_op_arg(k, with_value(e.get_op_arg(k), name, value))
    return e


# The operations of an affine expression of isl's AST (integer literals and iterators
# combined by these): no division, remainder, min, max or selection.
_AFFINE = frozenset({
    isl.ast_expr_op_type.add, isl.ast_expr_op_type.sub, isl.ast_expr_op_type.mul,
    isl.ast_expr_op_type.minus,
})  # fmt: skip


def mentions(e: isl.AstExpr, name: str) -> bool:
    """Whether the iterator `name` appears in e."""
    if e.get_type() == isl.ast_expr_type.id:
        return e.get_id().get_name() == name
    return e.get_type() == isl.ast_expr_type.op and any(
        mentions(e.get_op_arg(k), name) for k in range(e.get_op_n_arg())
    )


def affine(e: isl.AstExpr) -> bool:
    """Whether e is integers and iterators under +, -, * only (isl prints a product
    only of an integer and an expression)."""
    if e.get_type() != isl.ast_expr_type.op:
        return True
    return e.get_op_type() in _AFFINE and all(
        affine(e.get_op_arg(k)) for k in range(e.get_op_n_arg())
    )


def ast_int(e: isl.AstExpr) -> int | None:
    """The value of an integer literal of isl's AST; None for any other expression (read
    from isl's object, not its printed text)."""
    return e.get_val().to_python() if e.get_type() == isl.ast_expr_type.int else None
