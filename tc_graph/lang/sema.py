"""The checker: names, types, statement rules and call inlining.

It turns an `ast.Module` into one `CheckedDef` per def: tensors with dtypes
and ranks, and statements whose expressions are typed `ir` trees. Range
inference (ranges.py) reads this and nothing before it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .. import ir
from ..errors import Span, TcError, TcWarning, render_location
from . import ast, builtins
from .types import (
    TYPE_NAMES,
    canonical,
    compute_type,
    is_float,
    is_integral,
    literal_int_type,
    narrowing_store,
    promote,
    value_type,
)

IDENTITY_OPS = {"+": "+=", "*": "*=", "min": "min=", "max": "max="}


@dataclass(frozen=True)
class TensorDecl:
    """A tensor of a def. Inputs have `dims` (Size or Const nodes); the shapes of
    outputs and temporaries come from range inference."""

    name: str
    dtype: str
    role: str  # "input", "output", "temp"
    rank: int
    dims: tuple[ir.Expr, ...] | None = None
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedStmt:
    tensor: str
    lhs: tuple[str, ...]
    op: str  # "=", "+", "*", "min", "max"
    init: bool
    rhs: ir.Expr
    ranges: tuple[tuple[str, ir.Expr, ir.Expr], ...]  # `where v in lo:hi`
    exists: tuple[ir.Expr, ...]
    iterators: tuple[str, ...]  # lhs first, then reduction variables
    span: Span | None = field(default=None, compare=False)
    lhs_spans: tuple[Span, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Equality:
    """A condition on sizes that only the call can settle (from calls and typed outputs)."""

    left: ir.Expr
    right: ir.Expr
    message: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedDef:
    name: str
    source: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tensors: Mapping[str, TensorDecl]
    statements: tuple[CheckedStmt, ...]
    sizes: tuple[str, ...]
    index_scalars: tuple[str, ...]
    equalities: tuple[Equality, ...] = ()
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CheckedModule:
    source: str
    defs: Mapping[str, CheckedDef]  # in source order
    warnings: tuple[str, ...] = ()


def _index(name: str, span: Span | None = None) -> ir.Index:
    return ir.Index(name, span=span)


class _DefChecker:
    """Checks one def; callees are already checked."""

    def __init__(
        self,
        d: ast.Def,
        source: str,
        checked: Mapping[str, CheckedDef],
        def_names: set[str],
        *,
        lenient: bool = False,
    ) -> None:
        self.d = d
        self.lenient = lenient
        self.hinted: dict[str, str] = {}
        self.source = source
        self.checked = checked
        self.def_names = def_names
        self.tensors: dict[str, TensorDecl] = {}
        self.sizes: dict[str, None] = {}
        self.index_scalars: dict[str, None] = {}
        self.statements: list[CheckedStmt] = []
        self.equalities: list[Equality] = []
        self.written: set[str] = set()
        self.returns = {r.name: r for r in d.returns}
        self.declared: dict[str, str] = {}
        self.weak: dict[str, str] = {}  # tensors so far defined by literal-only right sides
        self.stores: list[tuple[str, str, Span]] = []  # (tensor, value type, span)
        self.warnings: list[str] = []
        self.fresh = 0

    def err(self, message: str, span: Span | None, hint: str | None = None) -> TcError:
        return TcError(message, source=self.source, span=span, hint=hint)

    def warn(self, message: str, span: Span | None) -> None:
        text = f"warning: {message}"
        if span is not None:
            text += "\n" + render_location(self.source, span)
        self.warnings.append(text)

    # -- declarations --------------------------------------------------
    def check(self) -> CheckedDef | None:
        d = self.d
        for p in d.params:
            if p.name in self.tensors or p.name in self.sizes:
                raise self.err(f"duplicate parameter '{p.name}'", p.span)
            dims: list[ir.Expr] = []
            for dim in p.type.dims or ():
                if isinstance(dim, ast.Num):
                    dims.append(_literal(dim, self.source))
                    continue
                if dim.name in self.tensors:
                    raise self.err(
                        f"'{dim.name}' is a tensor and cannot also be a size name "
                        "(sizes, tensors and indices share one namespace)",
                        dim.span,
                    )
                self.sizes.setdefault(dim.name)
                dims.append(ir.Size(dim.name, span=dim.span))
            if p.name in self.sizes:
                raise self.err(f"'{p.name}' is a size name and cannot also be a tensor", p.span)
            if p.name in TYPE_NAMES:
                raise self.err(f"the type name '{p.name}' cannot name a parameter", p.span)
            self.tensors[p.name] = TensorDecl(
                p.name, canonical(p.type.dtype), "input", len(dims), tuple(dims), p.span
            )
        seen: set[str] = set()
        for r in d.returns:
            if r.name in seen:
                raise self.err(f"duplicate output '{r.name}'", r.span)
            seen.add(r.name)
            if r.name in self.tensors:
                raise self.err(
                    f"duplicate name '{r.name}': it is both an input and an output",
                    r.span,
                    hint="give the output its own name",
                )
            if r.name in self.sizes:
                raise self.err(f"'{r.name}' is a size name and cannot be an output", r.span)
            if r.type is not None:
                self.declared[r.name] = canonical(r.type.dtype)
        if self.lenient:
            for stmt in d.body:
                self.statement(stmt)
            return None
        # Pass one only learns the types of tensors that are read (in place) before
        # the statement that decides their type, as sgemm's `C(i,j) = b * C(i,j)`.
        first = _DefChecker(d, self.source, self.checked, self.def_names, lenient=True)
        first.check()
        for name, t in first.tensors.items():
            dtype = t.dtype or first.weak.get(name, "")
            if t.role != "input" and dtype and name in self.returns:
                self.declared.setdefault(name, dtype)
            elif t.role == "temp" and dtype:
                self.hinted[name] = dtype
        for stmt in d.body:
            self.statement(stmt)
        for r in d.returns:
            if r.name not in self.written:
                raise self.err(
                    f"output '{r.name}' is never defined",
                    r.span,
                    hint=f"add a statement such as `{r.name}(i) = ...`",
                )
        self.finish_types()
        self.typed_output_equalities()
        return CheckedDef(
            d.name,
            self.source,
            tuple(p.name for p in d.params),
            tuple(r.name for r in d.returns),
            dict(self.tensors),
            tuple(self.statements),
            tuple(self.sizes),
            tuple(self.index_scalars),
            tuple(self.equalities),
            d.span,
        )

    def finish_types(self) -> None:
        for name, dtype in self.weak.items():
            t = self.tensors[name]
            if t.dtype == "":
                self.tensors[name] = replace(t, dtype=dtype)
        for name, stored, span in self.stores:
            target = self.tensors[name].dtype
            if narrowing_store(stored, target):
                raise self.err(
                    f"storing a {stored} value into {target} tensor '{name}' loses information",
                    span,
                    hint=f"cast explicitly, e.g. `{target}(...)`, or declare the output's type",
                )

    def typed_output_equalities(self) -> None:
        for r in self.d.returns:
            if r.type is None or r.type.dims is None:
                continue
            t = self.tensors[r.name]
            if len(r.type.dims) != t.rank:
                raise self.err(
                    f"output '{r.name}' is declared with {len(r.type.dims)} dimensions but "
                    f"its statements use {t.rank} subscripts",
                    r.span,
                )
            for k, dim in enumerate(r.type.dims):
                if isinstance(dim, ast.Num):
                    want: ir.Expr = _literal(dim, self.source)
                elif dim.name in self.sizes:
                    want = ir.Size(dim.name)
                else:
                    raise self.err(
                        f"undefined size '{dim.name}' in the type of output '{r.name}'",
                        dim.span,
                        hint="output dimensions must be size names of the inputs or integers",
                    )
                self.equalities.append(
                    Equality(
                        ir.DimSize(r.name, k),
                        want,
                        f"output '{r.name}' is declared with dimension {k} of size "
                        f"{ir.to_text(want)}, but its statements give",
                        r.span,
                    )
                )

    # -- statements ----------------------------------------------------
    def statement(self, s: ast.Stmt) -> None:
        if isinstance(s, ast.CallStmt):
            self.inline_call(s.outputs, s.callee, s.args, s.span, s.callee_span)
            return
        if (
            not s.indices
            and s.op == "="
            and not s.init
            and not s.wheres
            and isinstance(s.rhs, ast.Apply)
            and s.rhs.name in self.def_names
        ):
            args = []
            for a in s.rhs.args:
                if not isinstance(a, ast.Ident):
                    raise self.err("call arguments must be tensor names", a.span)
                args.append(a)
            self.inline_call(
                (ast.Ident(s.tensor, s.tensor_span),),
                s.rhs.name,
                tuple(args),
                s.span,
                s.rhs.name_span,
            )
            return
        self.assign(s)

    def lhs_tensor(self, name: str, rank: int, span: Span) -> None:
        """Declare (or re-check) a tensor that a statement or call writes."""
        t = self.tensors.get(name)
        if t is not None and t.role == "input":
            raise self.err(
                f"cannot write input '{name}'",
                span,
                hint="inputs are read-only; write to an output or a temporary",
            )
        if name in self.sizes:
            raise self.err(f"cannot write size '{name}'", span)
        if name in TYPE_NAMES:
            raise self.err(f"the type name '{name}' cannot name a tensor", span)
        if name in self.def_names:
            raise self.err(f"'{name}' is a def and cannot be written", span)
        if t is None:
            role = "output" if name in self.returns else "temp"
            dtype = self.declared.get(name) or self.hinted.get(name, "")
            self.tensors[name] = TensorDecl(name, dtype, role, rank, None, span)
        elif t.rank != rank:
            raise self.err(
                f"wrong number of subscripts: '{name}' has {_n(t.rank, 'dimension')} but is "
                f"written with {rank}",
                span,
            )

    def lhs_indices(self, s: ast.Assign) -> list[str]:
        """The left-hand side's index names: distinct, and not sizes or tensors."""
        lhs_names: list[str] = []
        for ix in s.indices:
            if ix.name in lhs_names:
                raise self.err(f"index '{ix.name}' appears twice on the left-hand side", ix.span)
            if ix.name in self.sizes or ix.name in self.tensors:
                raise self.err(
                    f"'{ix.name}' is a {'size' if ix.name in self.sizes else 'tensor'}, not an "
                    "index variable (sizes, tensors and indices share one namespace)",
                    ix.span,
                )
            lhs_names.append(ix.name)
        return lhs_names

    def assign(self, s: ast.Assign) -> None:
        lhs_names = self.lhs_indices(s)
        self.lhs_tensor(s.tensor, len(s.indices), s.tensor_span)
        scope = _Scope(self, lhs=s.tensor)
        ranges: list[tuple[str, ir.Expr, ir.Expr]] = []
        exists: list[ir.Expr] = []
        where_spans: dict[str, Span] = {}
        for w in s.wheres:
            if isinstance(w, ast.LetWhere | ast.RangeWhere):
                if w.var in self.sizes or w.var in self.tensors or w.var in scope.lets:
                    raise self.err(f"'{w.var}' is already defined", w.span)
            if isinstance(w, ast.LetWhere):
                scope.lets[w.var] = scope.expr(w.value)
            elif isinstance(w, ast.RangeWhere):
                if w.var in where_spans:
                    raise self.err(f"'{w.var}' has two ranges", w.span)
                where_spans[w.var] = w.span
                ranges.append((w.var, scope.size_expr(w.lo), scope.size_expr(w.hi)))
            else:
                exists.append(scope.expr(w.expr))
        rhs = scope.expr(s.rhs)
        if s.op == "=" and s.init:
            raise self.err("'!' only applies to reductions", s.op_span)
        order: dict[str, None] = dict.fromkeys(lhs_names)
        for e in (rhs, *exists):
            for n in ir.walk(e):
                if isinstance(n, ir.Index):
                    order.setdefault(n.name)
        for v, _, _ in ranges:
            order.setdefault(v)
        reductions = [v for v in order if v not in lhs_names]
        if reductions and s.op == "=":
            v = reductions[0]
            raise self.err(
                f"'{v}' appears only on the right: a reduction variable needs a reduction "
                "operator such as +=!",
                scope.index_spans.get(v, where_spans.get(v, s.op_span)),
                hint=f"write `{s.tensor}(...) +=! ...` (or max=!, min=!, *=!), or put '{v}' "
                "on the left",
            )
        self.check_in_place(s, lhs_names, (rhs, *exists))
        self.warn_suspicious(s, ir.index_names(rhs) | set(lhs_names), where_spans)
        self.record_type(s.tensor, rhs, s.span)
        self.written.add(s.tensor)
        self.statements.append(
            CheckedStmt(
                s.tensor,
                tuple(lhs_names),
                s.op,
                s.init,
                rhs,
                tuple(ranges),
                tuple(exists),
                tuple(order),
                s.span,
                tuple(ix.span for ix in s.indices),
            )
        )

    def warn_suspicious(self, s: ast.Assign, used: set[str], where_spans: dict[str, Span]) -> None:
        """Legal but likely unintended: an unused where variable, `+=` into nothing."""
        for v, span in where_spans.items():
            if v not in used:
                self.warn(
                    f"where variable '{v}' is never used on either side: the statement is "
                    "repeated for each of its values",
                    span,
                )
        if s.op != "=" and not s.init and s.tensor not in self.written:
            self.warn(
                f"'{IDENTITY_OPS[s.op]}' without ! on '{s.tensor}', which no earlier statement "
                "writes: it accumulates into zeros (or the caller's out= values)",
                s.op_span,
            )

    def check_in_place(self, s: ast.Assign, lhs: list[str], exprs: tuple[ir.Expr, ...]) -> None:
        want = tuple(_index(n) for n in lhs)
        for e in exprs:
            for r in ir.reads(e):
                if r.tensor == s.tensor and r.subscripts != want:
                    raise self.err(
                        f"in-place update of '{s.tensor}' reads it at other indices than it "
                        "writes; only pointwise and accumulating in-place updates are allowed",
                        r.span,
                        hint=f"write the result to a new tensor, e.g. `{s.tensor}2(...) = ...`",
                    )

    def record_type(self, tensor: str, rhs: ir.Expr, span: Span) -> None:
        t = self.tensors[tensor]
        has_operand = any(isinstance(n, ir.Read) for n in ir.walk(rhs))
        if t.dtype == "":
            if has_operand:
                self.tensors[tensor] = replace(t, dtype=rhs.dtype)
            else:
                self.weak.setdefault(tensor, rhs.dtype)
        self.stores.append((tensor, rhs.dtype, span))

    # -- calls -----------------------------------------------------------
    def inline_call(
        self,
        outs: tuple[ast.Ident, ...],
        callee_name: str,
        args: tuple[ast.Ident, ...],
        span: Span,
        callee_span: Span,
    ) -> None:
        if callee_name not in self.def_names:
            raise self.err(f"undefined def '{callee_name}'", callee_span)
        callee = self.checked[callee_name]
        if len(args) != len(callee.inputs):
            raise self.err(
                f"wrong number of arguments: '{callee_name}' takes {len(callee.inputs)}, got {len(args)}",
                span,
            )
        if len(outs) != len(callee.outputs):
            raise self.err(
                f"wrong number of outputs: '{callee_name}' returns {len(callee.outputs)}, but {len(outs)} "
                "names receive them",
                span,
            )
        tensor_map: dict[str, str] = {}
        size_map: dict[str, ir.Expr] = {}
        for param_name, arg in zip(callee.inputs, args, strict=True):
            self.bind_argument(callee, param_name, arg, size_map)
            tensor_map[param_name] = arg.name
        for mine_tensor, theirs in zip(outs, callee.outputs, strict=True):
            t = callee.tensors[theirs]
            self.lhs_tensor(mine_tensor.name, t.rank, mine_tensor.span)
            tensor_map[theirs] = mine_tensor.name
        self.fresh += 1
        for name in callee.tensors:
            if name not in tensor_map:
                tensor_map[name] = f"__{callee_name}{self.fresh}_{name}"
                t = callee.tensors[name]
                self.tensors[tensor_map[name]] = replace(t, name=tensor_map[name])
        self.splice_body(callee, outs, tensor_map, size_map)

    def bind_argument(
        self, callee: CheckedDef, param_name: str, arg: ast.Ident, size_map: dict[str, ir.Expr]
    ) -> None:
        """Check one argument of a call against its parameter; record the sizes the
        parameter names (size_map) and the equalities its other dimensions demand."""
        callee_name = callee.name
        param = callee.tensors[param_name]
        actual = self.tensors.get(arg.name)
        if actual is None or (arg.name not in self.written and actual.role != "input"):
            raise self.err(f"undefined tensor '{arg.name}' passed to '{callee_name}'", arg.span)
        if actual.dtype == "" and arg.name in self.weak:
            # A literal-only tensor that a call reads takes its literal's type here: the
            # call fixes it, like a typed statement would (issue 12 item 9).
            actual = replace(actual, dtype=self.weak[arg.name])
            self.tensors[arg.name] = actual
        if actual.dtype != param.dtype:
            raise self.err(
                f"'{callee_name}' expects {param.dtype} for '{param_name}', but "
                f"'{arg.name}' has dtype {actual.dtype}",
                arg.span,
            )
        if actual.rank != param.rank:
            raise self.err(
                f"'{callee_name}' expects rank {param.rank} for '{param_name}', but "
                f"'{arg.name}' has rank {actual.rank}",
                arg.span,
            )
        if param_name in callee.index_scalars:
            if actual.role != "input" or not is_integral(actual.dtype):
                raise self.err(
                    f"'{callee_name}' uses '{param_name}' as a size, so '{arg.name}' must be "
                    "an integer scalar input",
                    arg.span,
                )
            size_map[param_name] = ir.Size(arg.name)
            self.index_scalars.setdefault(arg.name)
        for k, dim in enumerate(param.dims or ()):
            mine = self.dim_expr(arg.name, k)
            if isinstance(dim, ir.Size) and dim.name not in size_map:
                size_map[dim.name] = mine
                continue
            want = size_map[dim.name] if isinstance(dim, ir.Size) else dim
            self.equalities.append(
                Equality(
                    mine,
                    want,
                    f"in the call of '{callee_name}', dimension {k} of '{arg.name}' must "
                    f"equal {ir.to_text(want)}",
                    arg.span,
                )
            )

    def splice_body(
        self,
        callee: CheckedDef,
        outs: tuple[ast.Ident, ...],
        tensor_map: dict[str, str],
        size_map: dict[str, ir.Expr],
    ) -> None:
        """The callee's statements and equalities, renamed into this def's tensors."""

        def subst(e: ir.Expr) -> ir.Expr:
            match e:
                case ir.Read(tensor=t):
                    return replace(e, tensor=tensor_map[t])
                case ir.Size(name=n):
                    return size_map[n]
                case ir.DimSize(tensor=t, dim=k):
                    return self.dim_expr(tensor_map[t], k)
            return e

        def sub(e: ir.Expr) -> ir.Expr:
            return ir.map_expr(e, subst)

        for st in callee.statements:
            self.statements.append(
                replace(
                    st,
                    tensor=tensor_map[st.tensor],
                    rhs=sub(st.rhs),
                    ranges=tuple((v, sub(lo), sub(hi)) for v, lo, hi in st.ranges),
                    exists=tuple(sub(e) for e in st.exists),
                )
            )
            self.written.add(tensor_map[st.tensor])
        for eq in callee.equalities:
            self.equalities.append(replace(eq, left=sub(eq.left), right=sub(eq.right)))
        for mine_tensor, theirs in zip(outs, callee.outputs, strict=True):
            t = self.tensors[mine_tensor.name]
            dtype = callee.tensors[theirs].dtype
            if t.dtype == "":
                self.tensors[mine_tensor.name] = replace(t, dtype=dtype)
            self.stores.append((mine_tensor.name, dtype, mine_tensor.span))

    def dim_expr(self, tensor: str, k: int) -> ir.Expr:
        t = self.tensors[tensor]
        if t.dims is not None:
            return t.dims[k]
        return ir.DimSize(tensor, k)


class _Scope:
    """Name resolution and typing of the expressions of one statement."""

    def __init__(self, checker: _DefChecker, *, lhs: str) -> None:
        self.c = checker
        self.lhs = lhs
        self.lets: dict[str, ir.Expr] = {}
        self.index_spans: dict[str, Span] = {}

    def err(self, message: str, span: Span | None, hint: str | None = None) -> TcError:
        return self.c.err(message, span, hint)

    def tensor(self, name: str) -> TensorDecl | None:
        c = self.c
        t = c.tensors.get(name)
        if t is None:
            return None
        if t.role != "input" and name not in c.written and name != self.lhs:
            return None
        return t

    def dtype_of(self, t: TensorDecl, span: Span) -> str:
        if t.dtype or self.c.lenient:
            return t.dtype
        raise self.err(
            f"the type of '{t.name}' cannot be inferred: it is read before any statement "
            "gives it a type",
            span,
            hint=f"declare its type in the output list, e.g. `-> (float(M, N) {t.name})`",
        )

    # -- value expressions -----------------------------------------------
    def expr(self, e: ast.Expr, *, subscript: bool = False) -> ir.Expr:
        match e:
            case ast.Num():
                return _literal(e, self.c.source)
            case ast.Ident(name=name, span=span):
                return self.ident(name, span, subscript=subscript)
            case ast.DimOf():
                return self.dim_of(e)
            case ast.Unary(op=op, operand=x, span=span):
                v = self.expr(x, subscript=subscript)
                if op == "!":
                    return ir.Unary("!", v, "bool", span=span)
                return ir.Unary("-", v, value_type(v.dtype), span=span)
            case ast.Binary(op=op, left=a, right=b, span=span):
                return self.binary(
                    op, self.expr(a, subscript=subscript), self.expr(b, subscript=subscript), span
                )
            case ast.Ternary(cond=c, then=a, other=b, span=span):
                cv = self.expr(c, subscript=subscript)
                av = self.expr(a, subscript=subscript)
                bv = self.expr(b, subscript=subscript)
                return ir.Select(cv, av, bv, promote(av.dtype, bv.dtype), span=span)
            case ast.Apply():
                return self.apply(e, subscript=subscript)
        raise TypeError(e)

    def binary(self, op: str, a: ir.Expr, b: ir.Expr, span: Span) -> ir.Expr:
        if op in ir.LOGICAL:
            return ir.Binary(op, a, b, "bool", "bool", span=span)
        t = promote(a.dtype, b.dtype)
        if op in ir.COMPARISONS:
            return ir.Binary(op, a, b, "bool", compute_type(t), span=span)
        if op == "%" and is_float(t):
            raise self.err(
                "'%' is only defined on integers", span, hint="use fmod(a, b) for floats"
            )
        return ir.Binary(op, a, b, t, compute_type(t), span=span)

    def ident(self, name: str, span: Span, *, subscript: bool) -> ir.Expr:
        c = self.c
        if name in self.lets:
            return self.lets[name]
        if name in c.sizes:
            return ir.Size(name, span=span)
        t = self.tensor(name)
        if t is not None:
            if t.rank:
                raise self.err(
                    f"'{name}' is a {t.rank}-d tensor: index it, e.g. "
                    f"{name}({', '.join('ijkl'[: min(t.rank, 4)])})",
                    span,
                )
            if subscript and t.role == "input" and is_integral(t.dtype):
                c.index_scalars.setdefault(name)
                return ir.Size(name, span=span)
            return ir.Read(name, (), self.dtype_of(t, span), span=span)
        if name in c.tensors:
            raise self.err(
                f"'{name}' is read before any statement defines it",
                span,
                hint=f"define '{name}' in an earlier statement",
            )
        if name in TYPE_NAMES:
            raise self.err(f"the type name '{name}' is not a value", span)
        self.index_spans.setdefault(name, span)
        return _index(name, span)

    def dim_of(self, e: ast.DimOf) -> ir.Expr:
        t = self.tensor(e.tensor)
        if t is None:
            raise self.err(f"undefined tensor '{e.tensor}' in '{e.tensor}.{e.dim}'", e.span)
        if e.dim >= t.rank:
            raise self.err(
                f"'{e.tensor}' has {_n(t.rank, 'dimension')}, so '{e.tensor}.{e.dim}' does not exist",
                e.span,
            )
        if e.tensor == self.lhs and e.tensor not in self.c.written:
            raise self.err(
                f"'{e.tensor}.{e.dim}' is used before any statement defines '{e.tensor}'", e.span
            )
        return replace(self.c.dim_expr(e.tensor, e.dim), span=e.span)

    def apply(self, e: ast.Apply, *, subscript: bool) -> ir.Expr:
        c = self.c
        name = e.name
        t = self.tensor(name)
        if t is not None:
            if len(e.args) != t.rank:
                raise self.err(
                    f"wrong number of subscripts: '{name}' has {_n(t.rank, 'dimension')} but is "
                    f"indexed with {len(e.args)}",
                    e.span,
                )
            subs = []
            for a in e.args:
                v = self.expr(a, subscript=True)
                if not is_integral(v.dtype):
                    raise self.err(
                        f"subscript must be an integer, but this is {v.dtype}",
                        a.span,
                        hint="convert with int32(...) if truncation is what you mean",
                    )
                subs.append(v)
            return ir.Read(name, tuple(subs), self.dtype_of(t, e.span), span=e.span)
        if name in c.tensors:
            raise self.err(
                f"'{name}' is read before any statement defines it",
                e.name_span,
                hint=f"define '{name}' in an earlier statement",
            )
        args = [self.expr(a, subscript=subscript) for a in e.args]
        if name in TYPE_NAMES:
            if len(args) != 1:
                raise self.err(f"the cast '{name}' takes 1 argument, got {len(args)}", e.span)
            return ir.Cast(args[0], canonical(name), span=e.span)
        fn = builtins.resolve(name)
        if fn is not None:
            n = builtins.arity(fn)
            if len(args) != n:
                raise self.err(f"'{name}' takes {_n(n, 'argument')}, got {len(args)}", e.span)
            if fn in builtins.GENERIC_BUILTINS:
                dtype = args[0].dtype
                for a in args[1:]:
                    dtype = promote(dtype, a.dtype)
                dtype = value_type(dtype)
            else:
                dtype = "float64" if any(a.dtype == "float64" for a in args) else "float32"
            return ir.Call(fn, tuple(args), dtype, span=e.span)
        if name in c.def_names:
            raise self.err(
                f"'{name}' is a def: calls are statements of their own",
                e.name_span,
                hint=f"write `(X) = {name}(...)` on its own line",
            )
        if name in c.sizes:
            raise self.err(f"'{name}' is a size, not a tensor or function", e.name_span)
        raise self.err(f"undefined name '{name}': not a tensor, a builtin or a def", e.name_span)

    # -- size expressions ------------------------------------------------
    def size_expr(self, e: ast.Expr) -> ir.Expr:
        """An integer expression of sizes, integer scalars and `T.d` (the bounds of a range)."""
        match e:
            case ast.Num(is_float=False):
                return _literal(e, self.c.source)
            case ast.Ident(name=name, span=span):
                if name in self.c.sizes:
                    return ir.Size(name, span=span)
                t = self.tensor(name)
                if t is not None and t.rank == 0 and t.role == "input" and is_integral(t.dtype):
                    self.c.index_scalars.setdefault(name)
                    return ir.Size(name, span=span)
            case ast.DimOf():
                return self.dim_of(e)
            case ast.Unary(op="-", operand=x, span=span):
                v = self.size_expr(x)
                return ir.Unary("-", v, v.dtype, span=span)
            case ast.Binary(op=op, left=a, right=b, span=span) if op in "+-*/%":
                return self.binary(op, self.size_expr(a), self.size_expr(b), span)
            case ast.Apply(name=fn, args=args, span=span) if (
                fn in ("min", "max") and len(args) == 2
            ):
                vs = tuple(self.size_expr(a) for a in args)
                return ir.Call(fn, vs, promote(vs[0].dtype, vs[1].dtype), span=span)
        if (
            isinstance(e, ast.Ident)
            and self.c.tensors.get(e.name) is None
            and not (e.name in self.lets or e.name in TYPE_NAMES or e.name in self.c.def_names)
        ):
            raise self.err(
                f"undefined size '{e.name}' in a size expression",
                e.span,
                hint="range bounds may use size names of the inputs, integer scalar "
                "parameters, integers and T.d",
            )
        raise self.err(
            "not a size expression: range bounds may use integers, size names, integer "
            "scalar parameters, T.d and + - * / % min max",
            e.span,
            hint="tensor reads, float values and index variables cannot bound a range",
        )


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _literal(e: ast.Num, source: str) -> ir.Const:
    if e.is_float:
        return ir.Const(float(e.value), "float32", span=e.span)
    if not -(2**63) <= int(e.value) < 2**63:
        raise TcError(
            f"integer literal {e.text} does not fit in 64 bits",
            source=source,
            span=e.span,
            hint="use a float",
        )
    return ir.Const(int(e.value), literal_int_type(int(e.value)), span=e.span)


def check(module: ast.Module) -> CheckedModule:
    """Check every def of a parsed module (callees before callers) and emit warnings."""
    source = module.source
    by_name: dict[str, ast.Def] = {}
    for d in module.defs:
        if d.name in by_name:
            raise TcError(f"duplicate def '{d.name}'", source=source, span=d.name_span)
        by_name[d.name] = d
    names = set(by_name)
    checked: dict[str, CheckedDef] = {}
    messages: list[str] = []
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in checked:
            return
        d = by_name[name]
        visiting.append(name)
        for callee, span in _callees(d, names):
            if callee in visiting:
                raise TcError(
                    f"recursive call of '{callee}': calls are inlined, so defs cannot recurse",
                    source=source,
                    span=span,
                )
            visit(callee)
        visiting.pop()
        dc = _DefChecker(d, source, checked, names)
        checked[name] = dc.check()
        messages.extend(dc.warnings)

    for d in module.defs:
        visit(d.name)
    for m in messages:
        # Attributed to the caller of tg.define (check <- TcModule <- define <- user).
        warnings.warn(TcWarning(m), stacklevel=4)
    return CheckedModule(source, {d.name: checked[d.name] for d in module.defs}, tuple(messages))


def _callees(d: ast.Def, names: set[str]) -> list[tuple[str, Span]]:
    out = []
    for s in d.body:
        if isinstance(s, ast.CallStmt):
            if s.callee in names:
                out.append((s.callee, s.callee_span))
        elif not s.indices and s.op == "=" and isinstance(s.rhs, ast.Apply) and s.rhs.name in names:
            out.append((s.rhs.name, s.rhs.name_span))
    return out
