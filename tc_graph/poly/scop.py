"""The polyhedral model of a program, specialized to concrete sizes or for every size.

Each `ir.Statement` becomes up to two scop statements: `S<n>_init` (the `!`
of a reduction: the left-hand region set to the identity) and `S<n>`. Every
indirect read adds a check statement `K<n>_<j>` that tests the final subscript
value before anything runs. Accesses are isl maps; a subscript that is not
affine (an indirect one) becomes a may-access of the whole dimension.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, reduce
from typing import TypeVar

import islpy as isl

from .. import affine, ir
from .contraction import Contraction, inner_plan, plan

_CTX = isl.DEFAULT_CONTEXT
_NO_PARAMS = isl.Space.params_alloc(_CTX, 0)


def maps_of(u: isl.UnionMap) -> list[isl.Map]:
    """A union map's pieces, one per pair of spaces (isl hands them over by callback)."""
    out: list[isl.Map] = []
    u.foreach_map(out.append)
    return out


def sets_of(u: isl.UnionSet) -> list[isl.Set]:
    """A union set's pieces, one per space."""
    out: list[isl.Set] = []
    u.foreach_set(out.append)
    return out


def union_of(pieces: Iterable[isl.Map | isl.UnionMap]) -> isl.UnionMap:
    """The union of maps in any spaces (a Map's union needs one space); empty for none."""
    return reduce(isl.UnionMap.union, pieces, isl.UnionMap.empty(_NO_PARAMS))


def range_product(sp: isl.Space, pieces: Sequence[isl.Map]) -> isl.Map:
    """{ sp -> [the pieces' ranges side by side] } (a zero-dimensional range for none)."""
    if not pieces:
        zero = isl.Set.universe(isl.Space.create_from_names(_CTX, set=[]))
        return isl.Map.from_domain_and_range(isl.Set.universe(sp), zero)
    return reduce(isl.Map.flat_range_product, pieces)


def union_set_of(pieces: Iterable[isl.Set]) -> isl.UnionSet:
    """The union of sets in any spaces; empty for none."""
    return reduce(isl.UnionSet.union, pieces, isl.UnionSet.empty(_NO_PARAMS))


@dataclass(frozen=True)
class ScopStmt:
    name: str
    kind: str  # "init", "assign", "update", "contract" (see contraction.py) or "check"
    source: ir.Statement = field(compare=False)
    iterators: tuple[str, ...]
    domain: isl.Set = field(compare=False)
    reads: isl.UnionMap = field(compare=False)
    writes: isl.UnionMap = field(compare=False)
    checked: ir.Read | None = field(default=None, compare=False)  # for "check" statements
    checked_dim: int = 0
    # "contract" statements: their kernel's tile; "update" ones: their innermost 1 x C tile
    contraction: Contraction | None = None


@dataclass(frozen=True)
class Symbolic:
    """What a scop for every size adds: the sizes its kernel reads at run time (in the
    order of its `sizes` argument), each tensor's extents as C text over them, and the
    sample point (the scop's `sizes`) at which size-dependent mapping choices are made;
    the choices change speed only, never what the code computes."""

    params: tuple[str, ...]
    extents: Mapping[str, tuple[str, ...]]
    sample: isl.Set = field(compare=False)


@dataclass(frozen=True)
class Scop:
    program: ir.Program = field(compare=False)
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]
    statements: tuple[ScopStmt, ...]
    dependences: isl.UnionMap = field(compare=False)
    symbolic: Symbolic | None = field(default=None, compare=False)

    @property
    def domain(self) -> isl.UnionSet:
        return union_set_of(s.domain for s in self.statements)

    def statement(self, name: str) -> ScopStmt:
        return self._by_name[name]

    def accesses_of(self, tensor: str) -> isl.UnionMap:
        """Every read and write of `tensor`: statement instance -> element."""
        return self._accesses.get(ir.isl_name(tensor), union_of(()))

    @cached_property
    def _accesses(self) -> dict[str, isl.UnionMap]:
        """Each tensor's accesses, gathered in one pass (local arrays ask per temporary
        and per copy of their marks)."""
        out: dict[str, list[isl.Map]] = {}
        for st in self.statements:
            for m in maps_of(st.reads.union(st.writes)):
                out.setdefault(m.get_tuple_name(isl.dim_type.out), []).append(m)
        return {name: union_of(ms) for name, ms in out.items()}

    @cached_property
    def _by_name(self) -> dict[str, ScopStmt]:
        """Statements by name, built once: the printer looks one up per AST leaf."""
        return {s.name: s for s in self.statements}


def specialize(
    e: ir.Expr, sizes: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]] | None
) -> ir.Expr:
    """Sizes and `T.d` replaced by their values; with `shapes` None (a scop for every
    size) only the sizes in `sizes` (the program's constants) are."""

    def fn(n: ir.Expr) -> ir.Expr:
        if isinstance(n, ir.Size) and n.name in sizes:
            return ir.Const(sizes[n.name], n.dtype, span=n.span)
        if isinstance(n, ir.DimSize) and shapes is not None:
            return ir.Const(shapes[n.tensor][n.dim], n.dtype, span=n.span)
        return n

    return ir.map_expr(e, fn)


def unsigned_divisions(e: ir.Expr, lows: Mapping[str, int]) -> ir.Expr:
    """Integer `/` and `%` by a positive constant of a value that cannot be negative (each
    iterator at least its lower bound in `lows`) computed unsigned: the same values, and
    C then divides by shifting, as a panel's `B(n / w, k, n % w)` needs to vectorize (a
    floor division's sign tests kept a batch-1 layer scalar)."""

    def fn(n: ir.Expr) -> ir.Expr:
        if (
            isinstance(n, ir.Binary)
            and n.op in ("/", "%")
            and n.compute in ("int32", "int64")
            and isinstance(n.right, ir.Const)
            and n.right.value > 0
            and _nonnegative(n.left, lows)
        ):
            return replace(n, compute=f"u{n.compute}")
        return n

    return ir.map_expr(e, fn)


def _nonnegative(e: ir.Expr, lows: Mapping[str, int]) -> bool:
    match e:
        case ir.Const(value=v):
            return not isinstance(v, float) and v >= 0
        case ir.Index(name=n):
            return lows.get(n, -1) >= 0
        case ir.Binary(op="+" | "*" | "/" | "%", left=a, right=b, compute="int32" | "int64"):
            return _nonnegative(a, lows) and _nonnegative(b, lows)
    return False


def _space(name: str, iters: Sequence[str]) -> isl.Space:
    sp = isl.Space.create_from_names(_CTX, set=[ir.isl_name(v) for v in iters])
    return sp.set_tuple_name(isl.dim_type.set, name)


_Ranges = Sequence[tuple[int, int]]


def _domain(
    name: str,
    st: ir.Statement,
    iters: Sequence[str],
    ranges: _Ranges,
    program: ir.Program | None,
) -> isl.Set:
    """The instances of `iters` (some of st's iterators, in order) named `name`: the box of
    their ranges, or, given the program (a scop for every size), st's own domain over them."""
    if program is None:
        return _box(name, iters, [ranges[st.iterators.index(v)] for v in iters])
    d = st.domain
    for k in reversed(range(len(st.iterators))):
        if st.iterators[k] not in iters:
            d = d.project_out(isl.dim_type.set, k, 1)
    return d.set_tuple_name(name)


def _lhs_box(name: str, st: ir.Statement, program: ir.Program | None, ranges: _Ranges) -> isl.Set:
    """The instances of a reduction's `!`: the box of its left-hand iterators' bounds,
    however many elements the reduction has (none: the outputs are still set)."""
    if program is None:
        return _box(name, st.lhs, ranges[: len(st.lhs)])
    sp = _domain(name, st, st.lhs, ranges, program).get_space()
    return affine.box(sp, st.bounds[: len(st.lhs)])


def _box(name: str, iters: Sequence[str], ranges: Sequence[tuple[int, int]]) -> isl.Set:
    s = isl.Set.universe(_space(name, iters))
    for k, (lo, hi) in enumerate(ranges):
        s = s.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(_CTX, lo))
        s = s.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(_CTX, hi - 1))
    return s


def _no_extent(_t: str, _k: int) -> None:
    return None


def _pa(
    e: ir.Expr, sp: isl.Space, iters: Sequence[str], program: ir.Program | None
) -> isl.PwAff | None:
    """e over the iterators; over the program's sizes too when `program` is given (a scop
    for every size), where `T.d` is the tensor's extent."""
    if program is None:
        return affine.to_pw_aff(e, sp, iters, params=(), constants={}, extent=_no_extent)

    def extent(t: str, k: int) -> isl.PwAff:
        return program.tensors[t].shape[k]

    return affine.to_pw_aff(
        e, sp, iters, params=program.params, constants=program.constants, extent=extent
    )


def _whole(k: int, shape: Sequence[int], tensor: ir.Tensor | None) -> isl.Set:
    """{ [t] : 0 <= t < extent k }, the extent a number or, given the tensor, its own."""
    rng = isl.Set.universe(isl.Space.create_from_names(_CTX, set=["t"]))
    rng = rng.lower_bound_val(isl.dim_type.set, 0, isl.Val.zero(_CTX))
    if tensor is None:
        return rng.upper_bound_val(isl.dim_type.set, 0, isl.Val.int_from_si(_CTX, shape[k] - 1))
    extent = tensor.shape[k]
    t = affine.var(extent.get_domain_space().add_dims(isl.dim_type.set, 1), 0)
    return rng.intersect(t.lt_set(affine.lift(extent, t.get_domain_space())))


def access_map(
    domain: isl.Set,
    iters: Sequence[str],
    tensor: str,
    subs: Sequence[ir.Expr],
    shape: Sequence[int],
    program: ir.Program | None = None,
) -> isl.Map:
    """{ S[iters] -> T[subscripts] }; non-affine subscripts cover the whole dimension.
    Given the program, subscripts and extents are over its sizes (a scop for every size)."""
    sp = domain.get_space()
    pieces = []
    for k, sub in enumerate(subs):
        pa = _pa(sub, sp, iters, program)
        if pa is not None:
            pieces.append(pa.as_map())
        else:
            whole = _whole(k, shape, None if program is None else program.tensors[tensor])
            pieces.append(isl.Map.from_domain_and_range(isl.Set.universe(sp), whole))
    out = range_product(sp, pieces).set_tuple_name(isl.dim_type.out, ir.isl_name(tensor))
    return out.intersect_domain(domain)


def checked_reads(rhs: ir.Expr, constants: Collection[str]) -> list[tuple[int, ir.Read, int]]:
    """(position among the reads, read, dimension) of every subscript checked on its
    values: those that read a tensor (indirect_reads) and those that are not quasi-affine
    (`A(i * i)`, `A(M * i)`, `A(i % -3)`), which no inference covers (they read outside A,
    unchecked: found by fuzzing). `rhs` is the program's own, its sizes names."""
    return [
        (p, r, k)
        for p, r in enumerate(ir.reads(rhs))
        for k, sub in enumerate(r.subscripts)
        if ir.reads_tensor(sub) or not affine.quasi_affine(sub, constants)
    ]


def indirect_reads(rhs: ir.Expr) -> list[tuple[ir.Read, int]]:
    """(read, dimension) of every subscript that reads a tensor, in a fixed order."""
    return [
        (r, k) for r in ir.reads(rhs) for k, sub in enumerate(r.subscripts) if ir.reads_tensor(sub)
    ]


def _inputs_only(program: ir.Program, sub: ir.Expr) -> bool:
    return all(x.tensor in program.inputs for x in ir.reads(sub))


def checked_accesses(program: ir.Program) -> list[tuple[ir.Read, int]]:
    """The indirect accesses in the order of a kernel's check codes 1, 2, ...: those
    whose index values come from inputs (checked first), then the others."""
    early: list[tuple[ir.Read, int]] = []
    late: list[tuple[ir.Read, int]] = []
    for st in program.statements:
        for _, r, k in checked_reads(st.rhs, program.constants):
            (early if _inputs_only(program, r.subscripts[k]) else late).append((r, k))
    return early + late


def _checks(
    program: ir.Program,
    n: int,
    st: ir.Statement,
    ranges: Sequence[tuple[int, int]],
    trips: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    symbolic: bool,
) -> list[ScopStmt]:
    """One check statement per indirect subscript of statement n, over the box of the
    subscript's own variables; empty when the statement runs nowhere (issue 12 item 12:
    nothing it reads is checked then, whatever the ranges of those variables)."""
    out = []
    sym = program if symbolic else None
    # Decided on the program's statement (sizes as names, as checked_accesses sees
    # them), checked on st's read at the same position (sizes substituted).
    reads = list(ir.reads(st.rhs))
    for j, (p, _, k) in enumerate(checked_reads(program.statements[n].rhs, program.constants)):
        r = reads[p]
        sub = r.subscripts[k]
        used = [v for v in st.iterators if v in ir.index_names(sub)]
        cdom = _domain(f"K{n}_{j}", st, used, ranges, sym)
        if not symbolic and any(t == 0 for t in trips.values()):
            cdom = isl.Set.empty(cdom.get_space())
        creads = [
            access_map(cdom, used, x.tensor, x.subscripts, shapes[x.tensor], sym)
            for x in ir.reads(sub)
        ]
        out.append(
            ScopStmt(
                f"K{n}_{j}",
                "check",
                st,
                tuple(used),
                cdom,
                union_of(creads),
                union_of(()),
                checked=r,
                checked_dim=k,
            )
        )
    return out


_Prepared = tuple[ir.Statement, list[tuple[int, int]], dict[str, int]]


def _prepared(
    program: ir.Program,
    sizes: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    symbolic: bool,
) -> list[_Prepared]:
    """Each statement with its sizes substituted (the constants only in a scop for every
    size), its iterators' ranges and trip counts (at `sizes`)."""
    point = ir.param_point(program, sizes)
    out = []
    for st in program.statements:
        ranges = [(ir.eval_pw(lo, point), ir.eval_pw(hi, point)) for lo, hi in st.bounds]
        lows = {v: lo for v, (lo, _) in zip(st.iterators, ranges, strict=True)}
        if symbolic:
            fixed = [affine.constant_value(lo) for lo, _ in st.bounds]
            lows = {v: -1 if lo is None else lo for v, lo in zip(st.iterators, fixed, strict=True)}
            rhs = unsigned_divisions(specialize(st.rhs, program.constants, None), lows)
        else:
            rhs = unsigned_divisions(specialize(st.rhs, sizes, shapes), lows)
        st = ir.Statement(
            st.tensor, st.lhs, st.iterators, st.op, st.init, rhs, st.domain, st.bounds, st.span
        )
        trips = {v: max(0, hi - lo) for v, (lo, hi) in zip(st.iterators, ranges, strict=True)}
        out.append((st, ranges, trips))
    return out


def _contracts(
    program: ir.Program,
    prepared: Sequence[_Prepared],
    shapes: Mapping[str, tuple[int, ...]],
    every_size: bool,
) -> dict[int, Contraction]:
    """The kernel-of-its-own plan of each statement that has one, given the statement
    before it, which it may take as its accumulators' start (a bias: `plan`). For every
    size, boxes are compared as isl's expressions of the sizes (equal at the sample is
    not enough), columns are not flattened (`dense`: the sample's shapes say nothing of
    the others), and the outer form needs a constant window (its panel is an array)."""
    out = {}
    readers: dict[str, set[int]] = {}  # tensor -> the statements that read it, found once
    for m, (s, _, _) in enumerate(prepared):
        for r in ir.reads(s.rhs):
            readers.setdefault(r.tensor, set()).add(m)
    boxes = [_compared_box(st, ranges, every_size) for st, ranges, _ in prepared]
    for n, (st, ranges, trips) in enumerate(prepared):
        shape = shapes[st.tensor]
        dense = not every_size and bool(st.lhs) and tuple(ranges[len(st.lhs) - 1]) == (0, shape[-1])
        start = end = None
        if n and _starts(prepared[n - 1][0], boxes[n - 1], st, boxes[n]):
            start = prepared[n - 1][0]
        if n + 1 < len(prepared) and _ends(st, boxes[n], prepared[n + 1][0], boxes[n + 1]):
            end = prepared[n + 1][0]
        flat = end is not None and _flat(st, end, shapes)
        folded = {n - 1, n, n + 1} if start is not None else {n, n + 1}
        elsewhere = program.tensors[st.tensor].role != "temp" or bool(
            readers.get(st.tensor, set()) - folded
        )
        contract = plan(
            program,
            st,
            trips,
            start=start,
            end=end,
            dense=dense,
            flat_end=flat,
            read_elsewhere=elsewhere,
            packs=not every_size or _fixed_window(st),
        )
        if contract is not None:
            out[n] = contract
    return out


def _compared_box(
    st: ir.Statement, ranges: Sequence[tuple[int, int]], every_size: bool
) -> list[tuple[object, object]]:
    """A statement's box as `_starts` and `_ends` compare it: its ranges, or for every size
    the text of isl's bounds."""
    if not every_size:
        return list(ranges)
    return [(str(lo), str(hi)) for lo, hi in st.bounds]


def _fixed_window(st: ir.Statement) -> bool:
    """The reduction indices after the first have constant bounds (the outer form packs
    their box into each panel row)."""
    inner = set(st.reduction_vars[1:])
    return all(
        affine.constant_value(lo) is not None and affine.constant_value(hi) is not None
        for v, (lo, hi) in zip(st.iterators, st.bounds, strict=True)
        if v in inner
    )


def _starts(
    prev: ir.Statement,
    prev_ranges: Sequence[tuple[object, object]],
    st: ir.Statement,
    ranges: Sequence[tuple[object, object]],
) -> bool:
    """prev sets st's whole output region, which st then accumulates into (`T(..) = b`,
    `T(..) += ...` over the same box): its value can start st's sums."""
    return (
        prev.tensor == st.tensor
        and prev.op == "="
        and st.op == "+"
        and not st.init
        and tuple(prev.lhs) == tuple(st.lhs)
        and tuple(prev.iterators) == tuple(prev.lhs)
        and list(prev_ranges) == list(ranges[: len(st.lhs)])
        and not indirect_reads(prev.rhs)
        and all(r.tensor != prev.tensor for r in ir.reads(prev.rhs))
    )


def _ends(
    st: ir.Statement,
    ranges: Sequence[tuple[object, object]],
    nxt: ir.Statement,
    nxt_ranges: Sequence[tuple[object, object]],
) -> bool:
    """nxt maps st's output elementwise, once each element is final (`Z(..) = f(T(..))`
    over the same box, reading T only at the element it writes): it can run on each
    block of st's outputs as soon as the block's sums are done."""
    lhs = tuple(ir.Index(v) for v in st.lhs)
    st_reads = {r.tensor for r in ir.reads(st.rhs)}
    return (
        nxt.op == "="
        and tuple(nxt.lhs) == tuple(st.lhs)
        and tuple(nxt.iterators) == tuple(nxt.lhs)
        and list(nxt_ranges) == list(ranges[: len(st.lhs)])
        and not indirect_reads(nxt.rhs)
        and nxt.tensor not in st_reads
        and all(
            tuple(r.subscripts) == lhs
            for r in ir.reads(nxt.rhs)
            if r.tensor in (st.tensor, nxt.tensor)
        )
        and (nxt.tensor == st.tensor or all(r.tensor != nxt.tensor for r in ir.reads(nxt.rhs)))
    )


def _flat(st: ir.Statement, end: ir.Statement, shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """Every access of `end` to st's last two output indices takes them as its last two
    subscripts, in a tensor whose last two dimensions are the output's: at one flattened
    column (`contraction._span`) those elements lie one after the other, as the output's
    do, and need no division back into a row and a column."""
    if len(st.lhs) < 2:
        return False
    last = (ir.Index(st.lhs[-2]), ir.Index(st.lhs[-1]))
    dims = shapes[st.tensor][-2:]

    def fits(tensor: str, subscripts: Sequence[ir.Expr]) -> bool:
        head = set().union(*(ir.index_names(x) for x in subscripts[:-2]))
        if not {st.lhs[-2], st.lhs[-1]} & set().union(*(ir.index_names(x) for x in subscripts)):
            return True
        return (
            tuple(subscripts[-2:]) == last
            and not head & set(st.lhs[-2:])
            and shapes[tensor][-2:] == dims
        )

    return fits(end.tensor, [ir.Index(v) for v in end.lhs]) and all(
        fits(r.tensor, r.subscripts) for r in ir.reads(end.rhs)
    )


def build_scop(
    program: ir.Program,
    sizes: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    *,
    contractions: bool = True,
    kernels: bool = True,
    symbolic: Symbolic | None = None,
) -> Scop:
    """The scop of program for concrete sizes (`shapes` holds every tensor's shape), or,
    given `symbolic`, for every size (`sizes` and `shapes` then the sample's).
    With `contractions`, dot products get their tiled forms: with `kernels` too, the
    long ones become single "contract" statements, which need a nest of their own (our
    scheduler gives them one; isl's may fuse or skew them, so it is given none). A
    contract statement that starts from the statement before it (a bias) takes its place.
    A scop for every size has the same forms, planned at the sample (`_contracts` says
    what it leaves out)."""
    sym = program if symbolic is not None else None
    prepared = _prepared(program, sizes, shapes, sym is not None)
    every_size = sym is not None
    contracts = (
        _contracts(program, prepared, shapes, every_size) if contractions and kernels else {}
    )
    folded = {n - 1 for n, c in contracts.items() if c.start is not None}
    folded |= {n + 1 for n, c in contracts.items() if c.end is not None}
    checks: list[ScopStmt] = []
    body: list[ScopStmt] = []
    for n, (st, ranges, trips) in enumerate(prepared):
        if n in folded:
            continue
        shape = shapes[st.tensor]
        contract = contracts.get(n)
        inner = inner_plan(program, st, trips) if contractions and not contract else None
        if st.init and contract is None:
            dom = _lhs_box(f"S{n}_init", st, sym, ranges)
            w = access_map(dom, st.lhs, st.tensor, [ir.Index(v) for v in st.lhs], shape, sym)
            body.append(
                ScopStmt(f"S{n}_init", "init", st, st.lhs, dom, union_of(()), union_of([w]))
            )
        name = f"S{n}"
        dom = _domain(name, st, st.iterators, ranges, sym)
        lhs_idx = [ir.Index(v) for v in st.lhs]
        write = access_map(dom, st.iterators, st.tensor, lhs_idx, shape, sym)
        start = contract.start if contract and contract.start is not None else None
        end = contract.end if contract else None
        reads = [
            access_map(dom, st.iterators, r.tensor, r.subscripts, shapes[r.tensor], sym)
            for r in (
                *ir.reads(st.rhs),
                *(ir.reads(start) if start is not None else ()),
                *(ir.reads(end.rhs) if end is not None else ()),
            )
        ]
        if end is not None:
            ends = access_map(dom, st.iterators, end.tensor, lhs_idx, shapes[end.tensor])
            write = write.union(ends) if end.tensor == st.tensor else write
        kind = "assign" if st.op == "=" else "contract" if contract else "update"
        if kind != "assign":
            reads.append(write)
        for check in _checks(program, n, st, ranges, trips, shapes, sym is not None):
            # Index values read from inputs are checked before anything runs; values
            # computed by the program are checked right before the statement that uses them.
            inputs_only = _inputs_only(program, check.checked.subscripts[check.checked_dim])
            (checks if inputs_only else body).append(check)
        body.append(
            ScopStmt(
                name,
                kind,
                st,
                st.iterators,
                dom,
                union_of(reads),
                union_of([write, *([ends] if end is not None and end.tensor != st.tensor else [])]),
                contraction=contract or inner,
            )
        )
    statements = (*checks, *body)
    deps = _dependences(statements)
    return Scop(program, dict(sizes), dict(shapes), statements, deps, symbolic)


_Domain = TypeVar("_Domain", isl.Set, isl.UnionSet)


def sampled(scop: Scop, s: _Domain) -> _Domain:
    """s at the scop's sizes: itself, or in a scop for every size, at the sample where
    its size-dependent choices are made."""
    return s if scop.symbolic is None else s.intersect_params(scop.symbolic.sample)


def symbolic_for(program: ir.Program, sample: Mapping[str, int]) -> Symbolic:
    """The sizes a kernel for every size reads (the program's parameters that are not
    constants), its tensors' extents as exact C text over them (isl's, for every size
    the program's context allows, zero included), and the sample point."""
    params = tuple(n for n in program.params if n not in program.constants)
    build = isl.AstBuild.from_context(program.context)

    def text(pa: isl.PwAff) -> str:
        return build.expr_from_pw_aff(pa.gist_params(program.context)).to_C_str()

    extents = {n: tuple(text(d) for d in t.shape) for n, t in program.tensors.items()}
    return Symbolic(params, extents, ir.param_point(program, sample))


def original_order(statements: Sequence[ScopStmt]) -> isl.UnionMap:
    """The sequential order: statement after statement, each in lexicographic order."""
    depth = max((len(s.iterators) for s in statements), default=0)
    out = []
    for pos, s in enumerate(statements):
        sp = s.domain.get_space()
        terms = [affine.constant(sp, pos)]
        terms += [affine.var(sp, k) for k in range(len(s.iterators))]
        terms += [affine.constant(sp, 0)] * (depth - len(s.iterators))
        out.append(range_product(sp, [t.as_map() for t in terms]).intersect_domain(s.domain))
    return union_of(out)


def _may_flow(sink: isl.UnionMap, source: isl.UnionMap, order: isl.UnionMap) -> isl.UnionMap:
    info = isl.UnionAccessInfo.from_sink(sink).set_may_source(source).set_schedule_map(order)
    return info.compute_flow().get_may_dependence()


def _accesses(statements: Sequence[ScopStmt]) -> tuple[isl.UnionMap, isl.UnionMap]:
    """Every read, and every write, of the statements."""
    return union_of(s.reads for s in statements), union_of(s.writes for s in statements)


def _dependences(statements: Sequence[ScopStmt]) -> isl.UnionMap:
    """Flow, anti and output dependences under the original order (validity for every
    transformation)."""
    if not statements:
        return union_of(())
    order = original_order(statements)
    reads, writes = _accesses(statements)
    pairs = ((reads, writes), (writes, reads), (writes, writes))  # flow, anti, output
    return union_of(_may_flow(a, b, order) for a, b in pairs).coalesce()
