"""Scheduling: loop order, fusion, permutable bands, parallel members, tiling.

Stock isl (islpy) has no fusion callbacks, so fusion is ours. We start from
TC's canonical schedule (each statement its own nest, in program order) and
fuse, level by level, maximal runs of consecutive sibling nests whose fusion
keeps every dependence lexicographically non-negative. The strategies:
`max` fuses whatever is legal; `preserve3coincident` fuses only while the
fused loops (up to three) stay parallel; `min` fuses nothing. Loops are never
skewed and coefficients are never negative, because every schedule dimension
is one original iterator: a fused loop is the same iterator position of each
statement. With `allow_skewing`, isl's own scheduler (`isl.ScheduleConstraints`
with our dependences as validity, proximity and coincidence constraints) is
used instead; its fusion follows the strategy through isl's options
(`schedule_serialize_sccs` for min, `schedule_whole_component` for max).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from .. import affine, ir
from ..errors import TcWarning
from ..options import MappingOptions
from .proof import crossing
from .scop import Scop, ScopStmt, maps_of, range_product, union_of, union_set_of

_CTX = isl.DEFAULT_CONTEXT


def loop_order(st: ScopStmt) -> tuple[str, ...]:
    """CPU loop order of one statement: left-hand indices, then reduction indices,
    then innermost the index that the fewest accesses read with a stride (an index in
    a subscript before the last: a cache line, or a gather lane, per iteration), and of
    those the one that gives the most stride-1 accesses (ties go to left-hand indices,
    whose loops are parallel). A reduction index can win: Softmax's row maximum
    `mx(i) max=! X(i,k)` keeps k innermost, its element in a register and X read in
    order, where counting stride-1 accesses alone tied and put i innermost, reading X
    with a stride (22x slower on 8x12x128x128)."""
    if st.kind == "check" or not st.iterators:
        return st.iterators
    src = st.source
    accesses = [ir.Read(src.tensor, tuple(ir.Index(v) for v in src.lhs), "")]
    if st.kind != "init":
        # Each distinct access once: a select that tests an index it then uses reads
        # it twice, which must not outvote the operand's own stride-1 dimension.
        accesses += list(dict.fromkeys(r for r in ir.reads(src.rhs) if r.subscripts))

    def score(v: str) -> tuple[int, int, bool]:
        strided = unit = 0
        for r in accesses:
            if not r.subscripts:
                continue
            if any(v in ir.index_names(s) for s in r.subscripts[:-1]):
                strided += 1
            elif v in ir.index_names(r.subscripts[-1]):
                unit += 1
        return -strided, unit, v in src.lhs

    best = max(st.iterators, key=score)
    lhs = [v for v in st.iterators if v in src.lhs and v != best]
    red = [v for v in st.iterators if v not in src.lhs and v != best]
    return (*lhs, *red, best)


@dataclass(frozen=True)
class Band:
    """Consecutive loops shared by `stmts`: member k is position depth+k of each
    statement's loop order."""

    stmts: tuple[str, ...]
    depth: int
    members: int
    coincident: tuple[bool, ...]
    permutable: bool
    child: Node


@dataclass(frozen=True)
class Sequence_:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Leaf:
    stmts: tuple[str, ...]


Node = Band | Sequence_ | Leaf


class _Scheduler:
    def __init__(self, scop: Scop, options: MappingOptions) -> None:
        self.scop = scop
        self.options = options
        self.order = {s.name: loop_order(s) for s in scop.statements}
        self.by_name = {s.name: s for s in scop.statements}
        self.deps = scop.dependences
        self.deps_from = _by_source(self.deps)
        # The scop statements of each TC statement (`S3_init` and `S3`).
        self.origins: dict[str, set[str]] = {}
        for st in scop.statements:
            self.origins.setdefault(_origin(st.name), set()).add(st.name)

    def prefix(self, name: str, depth: int) -> isl.Map:
        """{ S[iterators] -> [the first `depth` loops] }"""
        s = self.by_name[name]
        sp = s.domain.get_space()
        loops = [affine.var(sp, s.iterators.index(v)).as_map() for v in self.order[name][:depth]]
        return range_product(sp, loops).intersect_domain(s.domain)

    def prefix_union(self, names: Sequence[str], depth: int) -> isl.UnionMap:
        return union_of(self.prefix(n, depth) for n in names)

    def deps_among(self, names: Sequence[str]) -> isl.UnionMap:
        """The dependences between statements of names: the pieces of `deps` indexed by
        source statement, so the cost follows the dependences among names, not all."""
        among = set(names)
        return union_of(m for n in among for sink, m in self.deps_from.get(n, ()) if sink in among)

    def distances(self, names: Sequence[str], depth: int) -> isl.UnionMap:
        """Dependences among names as pairs of loop prefixes of length `depth`."""
        p = self.prefix_union(names, depth)
        return self.deps_among(names).apply_domain(p).apply_range(p)

    def legal(self, names: Sequence[str], depth: int) -> bool:
        """Fusing names over `depth` loops keeps every dependence forward."""
        if depth == 0:
            return True
        pairs = self.distances(names, depth)
        backward = pairs.intersect(_lex_gt(depth))
        return backward.is_empty()

    def carried_free(self, names: Sequence[str], depth: int, at: int) -> bool:
        """No dependence among names with equal first `at` loops differs at loop `at`."""
        pairs = self.distances(names, depth)
        return pairs.intersect(isl.UnionMap.from_map(crossing(_pairs(depth), at))).is_empty()

    def nonnegative(self, names: Sequence[str], depth: int, outer: int, at: int) -> bool:
        """Loop `at` has non-negative distance for deps not carried by the first `outer` loops."""
        pairs = self.distances(names, depth)
        return pairs.intersect(_equal_prefix_negative(depth, outer, at)).is_empty()

    # -- the tree ------------------------------------------------------
    def build(self, names: tuple[str, ...], depth: int) -> Node:
        deep = [n for n in names if len(self.order[n]) > depth]
        if not deep:
            # Statements at the same point still run in program order.
            if len(names) == 1:
                return Leaf(names)
            return Sequence_(tuple(Leaf((n,)) for n in names))
        groups = self.partition(names, depth)
        if len(groups) > 1:
            return Sequence_(tuple(self.build(g, depth) for g in groups))
        members = 1
        while all(len(self.order[n]) > depth + members for n in names):
            if len(self.partition(names, depth + members)) > 1:
                break
            if not self.nonnegative(names, depth + members + 1, depth, depth + members):
                break
            members += 1
        coincident = tuple(
            self.carried_free(names, depth + k + 1, depth + k) for k in range(members)
        )
        permutable = all(
            self.nonnegative(names, depth + members, depth, depth + k) for k in range(members)
        )
        return Band(
            names, depth, members, coincident, permutable, self.build(names, depth + members)
        )

    def partition(self, names: tuple[str, ...], depth: int) -> list[tuple[str, ...]]:
        """Maximal runs of consecutive statements that can share loop `depth`."""
        groups: list[list[str]] = []
        for k, n in enumerate(names):
            if len(self.order[n]) <= depth:
                groups.append([n])
                continue
            cur = groups[-1] if groups else None
            if (
                cur is not None
                and all(len(self.order[m]) > depth for m in cur)
                and self.may_fuse(cur, n, depth)
                and self.reduction_follows(cur, n, names[k + 1 :], depth)
            ):
                cur.append(n)
            else:
                groups.append([n])
        return [tuple(g) for g in groups]

    def reduction_follows(self, group: list[str], n: str, rest: Sequence[str], depth: int) -> bool:
        """A reduction's `!` statement joins a group only with its reduction: apart, the
        accumulator would be set in one nest and accumulated in another."""
        if self.by_name[n].kind != "init":
            return True
        red = next((m for m in rest if _origin(m) == _origin(n)), None)
        return red is None or self.may_fuse([*group, n], red, depth)

    def alone(self, name: str) -> bool:
        """Index checks leave by `goto`, which a parallel loop forbids; contractions get a
        kernel of their own. Both keep nests of their own."""
        return self.by_name[name].kind in ("check", "contract")

    def related(self, group: Sequence[str], n: str) -> bool:
        """Some dependence links n, or the reduction n initializes (`S3_init` stands for
        `S3` too: the init shares no data with the statements before it, but the
        reduction that follows it does, as Softmax's sum reads the exp row before it),
        with a statement of group."""
        members = set(group)
        ours = self.origins[_origin(n)]
        forward = (
            not d.is_empty()
            for m in members
            for sink, d in self.deps_from.get(m, ())
            if sink in ours
        )
        backward = (
            not d.is_empty()
            for o in ours
            for sink, d in self.deps_from.get(o, ())
            if sink in members
        )
        return any(forward) or any(backward)

    def keeps_loop(self, name: str, depth: int) -> bool:
        """A dot product's output loop stays its own: the printer tiles it with the
        reduction loop inside (contraction.inner_plan)."""
        st = self.by_name[name]
        plan = st.contraction
        return (
            st.kind == "update"
            and plan is not None
            and plan.rows is None
            and len(self.order[name]) > depth
            and self.order[name][depth] == plan.cols
        )

    def may_fuse(self, group: list[str], n: str, depth: int) -> bool:
        if self.alone(n) or self.alone(group[0]):
            return False
        if self.keeps_loop(n, depth) or any(self.keeps_loop(m, depth) for m in group):
            return False
        fusion = self.options.fusion
        if fusion == "min" and _origin(group[0]) != _origin(n):
            return False
        names = [*group, n]
        if depth > 0 and not self.related(group, n):
            # Below the outer (parallel) loop, fusing nests that share no data only
            # entangles their loops (2LUT's second bag would split the first one's tile).
            return False
        if not self.legal(names, depth + 1):
            return False
        if fusion == "preserve3coincident" and _origin(group[0]) != _origin(n):
            keep = min(3, depth + 1)
            return all(self.carried_free(names, depth + 1, k) for k in range(keep))
        return True


def _by_source(deps: isl.UnionMap) -> dict[str, list[tuple[str, isl.Map]]]:
    """Each dependence map under the name of its source statement, with its sink's."""
    out: dict[str, list[tuple[str, isl.Map]]] = {}
    for m in maps_of(deps):
        source = m.get_tuple_name(isl.dim_type.in_)
        out.setdefault(source, []).append((m.get_tuple_name(isl.dim_type.out), m))
    return out


def _origin(name: str) -> str:
    """The TC statement a scop statement comes from (`S3_init` and `S3` are both `S3`):
    a reduction's `!` always fuses with the reduction, whatever the strategy."""
    return name.split("_")[0]


def _lex_gt(n: int) -> isl.UnionMap:
    """{ [x] -> [y] : x >lex y } on n-tuples."""
    sp = isl.Space.create_from_names(_CTX, set=[f"x{k}" for k in range(n)])
    return isl.UnionMap.from_map(isl.Map.lex_gt(sp))


def _pairs(n: int) -> isl.Space:
    """The space { [x] -> [y] } of pairs of n-tuples."""
    return isl.Space.create_from_names(
        _CTX, in_=[f"x{k}" for k in range(n)], out=[f"y{k}" for k in range(n)]
    )


def _equal_prefix_negative(n: int, outer: int, at: int) -> isl.UnionMap:
    m = isl.Map.universe(_pairs(n))
    for k in range(outer):
        m = m.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    return isl.UnionMap.from_map(m.order_gt(isl.dim_type.in_, at, isl.dim_type.out, at))


def schedule_tree(scop: Scop, options: MappingOptions) -> tuple[Node, dict[str, tuple[str, ...]]]:
    """Our schedule as a small tree, and each statement's loop order."""
    sch = _Scheduler(scop, options)
    return sch.build(tuple(s.name for s in scop.statements), 0), sch.order


def to_isl(node: Node, scop: Scop, order: dict[str, tuple[str, ...]]) -> isl.Schedule:
    """Our tree as an isl schedule tree (bands carry their coincident flags)."""
    stmts = {s.name: s for s in scop.statements}
    sched = isl.Schedule.from_domain(scop.domain)

    def filter_of(names: Sequence[str]) -> isl.UnionSet:
        return union_set_of(stmts[n].domain for n in names)

    def band_schedule(b: Band) -> isl.MultiUnionPwAff:
        cols = []
        for k in range(b.members):
            upa = None
            for n in b.stmts:
                s = stmts[n]
                pa = affine.var(s.domain.get_space(), s.iterators.index(order[n][b.depth + k]))
                piece = isl.UnionPwAff.from_pw_aff(pa.intersect_domain(s.domain))
                upa = piece if upa is None else upa.union_add(piece)
            cols.append(upa)
        mupa = isl.MultiUnionPwAff.from_union_pw_aff(cols[0])
        for c in cols[1:]:
            mupa = mupa.flat_range_product(isl.MultiUnionPwAff.from_union_pw_aff(c))
        return mupa

    def insert(pos: isl.ScheduleNode, node: Node) -> isl.ScheduleNode:
        """Insert node at leaf position pos; returns a node inside the same tree."""
        match node:
            case Leaf():
                return pos
            case Band():
                pos = pos.insert_partial_schedule(band_schedule(node))
                pos = pos.band_set_permutable(int(node.permutable))
                for k, c in enumerate(node.coincident):
                    pos = pos.band_member_set_coincident(k, int(c))
                return insert(pos.child(0), node.child).parent()
            case Sequence_():
                filters = isl.UnionSetList.alloc(_CTX, len(node.children))
                for child in node.children:
                    filters = filters.add(filter_of(_stmts_of(child)))
                pos = pos.insert_sequence(filters)
                for k, child in enumerate(node.children):
                    pos = insert(pos.child(k).child(0), child).parent().parent()
                return pos
        raise TypeError(node)

    root = sched.get_root().child(0)
    return insert(root, node).get_schedule()


def _stmts_of(node: Node) -> tuple[str, ...]:
    match node:
        case Leaf(stmts=s) | Band(stmts=s):
            return s
        case Sequence_(children=cs):
            return tuple(n for c in cs for n in _stmts_of(c))
    raise TypeError(node)


SKEW_MAX_CONSTANT = 8
"""Largest shift isl's scheduler may give a statement. Unbounded (isl's default), its ILP
ran for minutes on MLP3's fused layers, whose sizes are constants; 8 takes 0.2 s."""


SCHEDULE_MAX_OPERATIONS = 25_000
"""isl's operation budget for one scheduling: past it isl gives up with an error and ours is
used (a TcWarning says so). The programs of tests/unit/test_reference.py need at most 20,000
(2LUT, the convolutions, the norms); a fuzzed program of five statements needed over 200,000
and kept isl's ILP busy for minutes."""


def isl_schedule(scop: Scop, options: MappingOptions) -> isl.Schedule:
    """isl's scheduler on our dependences (used when skewing is allowed)."""
    deps = scop.dependences
    sc = isl.ScheduleConstraints.on_domain(scop.domain)
    sc = sc.set_validity(deps.union(_checks_first(scop))).set_proximity(deps)
    sc = sc.set_coincidence(deps)
    settings = {
        "schedule_serialize_sccs": int(options.fusion == "min"),
        "schedule_whole_component": int(options.fusion == "max"),
        "schedule_max_constant_term": SKEW_MAX_CONSTANT,
        "max_operations": SCHEDULE_MAX_OPERATIONS,
    }

    def apply(values: dict[str, int]) -> None:
        for name, value in values.items():
            getattr(_CTX, f"set_{name}")(value)
        _CTX.reset_operations()

    saved = {name: getattr(_CTX, f"get_{name}")() for name in settings}
    try:
        apply(settings)
        return sc.compute_schedule()
    finally:
        apply(saved)


def _checks_first(scop: Scop) -> isl.UnionMap:
    """Every index check before every statement that follows it in the scop: a check
    shares only reads with the statements it guards, so no dependence orders them, and
    isl may otherwise run the guarded reads first. Not before the statements ahead of it:
    a check of index values the program computes follows their writers (a flow
    dependence), and ordering it before every statement, as the seeds did, made a cycle
    that isl's scheduler reported as "unable to carry dependences"."""
    stmts = scop.statements
    return union_of(
        isl.Map.from_domain_and_range(k.domain, s.domain)
        for n, k in enumerate(stmts)
        if k.kind == "check"
        for s in stmts[n + 1 :]
        if s.kind != "check"
    )


def _has_negative_coefficient(schedule: isl.Schedule) -> bool:
    affs: list[isl.Aff] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.band:
            mupa = node.band_get_partial_schedule()
            for k in range(mupa.dim(isl.dim_type.out)):
                mupa.get_at(k).foreach_pw_aff(
                    lambda pa: pa.foreach_piece(lambda _dom, aff: affs.append(aff))
                )
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return any(
        a.get_coefficient_val(isl.dim_type.in_, i).is_neg()
        for a in affs
        for i in range(a.dim(isl.dim_type.in_))
    )


def build_schedule(scop: Scop, options: MappingOptions) -> isl.Schedule:
    """isl's schedule when skewing is allowed and it finds one (without negative
    coefficients unless those are allowed too), else ours. isl's scheduler can fail where
    ours cannot (its shifts are bounded by SKEW_MAX_CONSTANT): then a TcWarning says why
    and ours is used, as for any option that does not apply."""
    if options.allow_skewing:
        try:
            sched = isl_schedule(scop, options)
        except isl.Error as e:
            reason = str(e).split(" in /")[0]
            warnings.warn(
                TcWarning(
                    f"allow_skewing: isl's scheduler found no schedule ({reason}); "
                    "using the unskewed one"
                ),
                stacklevel=2,
            )
        else:
            if options.allow_negative or not _has_negative_coefficient(sched):
                return sched
    node, order = schedule_tree(scop, options)
    return to_isl(node, scop, order)
