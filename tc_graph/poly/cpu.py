"""CPU mapping on the schedule tree: tiling, the parallel loop, SIMD loops.

The outermost band whose first member is parallel is tiled (when tile sizes
are given; point loops are sunk below sequences, so imperfect nests tile) and
marked `parallel`: its outer loop becomes the OpenMP `parallel for` (not for an
innermost band of fewer than MIN_PARALLEL statement instances, MIN_PARALLEL_SUMS
where it sums). The last member of each innermost band that has a loop (more
than one iteration) is split off and marked `simd` when it is parallel, or
`reduce` when it is the reduction loop of one update statement (the printer then
keeps the output element in a local accumulator and lets the compiler vectorize
the reduction).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import islpy as isl

from ..options import MappingOptions, outer_product
from .local import localize
from .marks import Loop, LoopMark, insert
from .scop import Scop, ScopStmt, maps_of, sampled, sets_of

_CTX = isl.DEFAULT_CONTEXT
_BAND = isl.schedule_node_type.band


def _names(node: isl.ScheduleNode) -> set[str]:
    return {s.get_tuple_name() for s in sets_of(node.get_domain())}


def _has_band_below(node: isl.ScheduleNode) -> bool:
    for i in range(node.n_children()):
        c = node.child(i)
        if c.get_type() == _BAND or _has_band_below(c):
            return True
    return False


def _counts(m: isl.Map, member: int, pos: int) -> bool:
    """Member `member` of the band schedule `m` counts the statement's iterator `pos`."""
    n = m.dim(isl.dim_type.out)
    mk = m.project_out(isl.dim_type.out, member + 1, n - member - 1)
    mk = mk.project_out(isl.dim_type.out, 0, member)
    probe = isl.Map.universe(mk.get_space()).equate(isl.dim_type.in_, pos, isl.dim_type.out, 0)
    return mk.is_subset(probe)


def _member_iterators(node: isl.ScheduleNode, scop: Scop) -> tuple[ScopStmt, list[str]] | None:
    """For a band over one statement: the statement, and the iterator each member counts."""
    names = _names(node)
    maps = maps_of(node.band_get_partial_schedule_union_map())
    if len(names) != 1 or len(maps) != 1:
        return None
    st = scop.statement(next(iter(names)))
    (m,) = maps
    out: list[str] = []
    for k in range(node.band_n_member()):
        found = next((v for pos, v in enumerate(st.iterators) if _counts(m, k, pos)), None)
        if found is None:
            return None
        out.append(found)
    return st, out


def _counts_product_rows(node: isl.ScheduleNode, scop: Scop) -> bool:
    """The band's first member counts the rows (the output's next-to-last index) of an
    outer-product update statement under it."""
    for m in maps_of(node.band_get_partial_schedule_union_map()):
        st = scop.statement(m.get_tuple_name(isl.dim_type.in_))
        if st.kind == "update" and outer_product(st.source):
            if _counts(m, 0, st.iterators.index(st.source.lhs[-2])):
                return True
    return False


def _is_reduction_member(node: isl.ScheduleNode, scop: Scop) -> bool:
    """The band's first member, the loop its mark falls on (the members after it have one
    iteration each), is a reduction loop of an update statement."""
    found = _member_iterators(node, scop)
    if found is None:
        return False
    st, its = found
    return st.kind == "update" and its[0] in st.source.reduction_vars


def _dot_tile_start(node: isl.ScheduleNode, scop: Scop) -> int | None:
    """Where the output loop and reduction loop of a dot product (contraction.inner_plan)
    start in a band of its statement, when they end it."""
    found = _member_iterators(node, scop)
    if found is None:
        return None
    st, its = found
    plan = st.contraction
    if st.kind != "update" or plan is None or plan.rows is not None:
        return None
    if its[-2:] != [plan.cols, plan.red]:
        return None
    return len(its) - 2


def _register_tile_start(node: isl.ScheduleNode, scop: Scop, width: int) -> int | None:
    """Where a register tile starts in a band of one `+=` statement: the members from
    there on are reduction loops around the stride-1 output loop (of at least one vector),
    so the output row can live in vector registers across the reduction. None when there
    is no such suffix."""
    found = _member_iterators(node, scop)
    if found is None:
        return None
    st, its = found
    src = st.source
    if st.kind != "update" or src.op != "+" or not src.lhs or its[-1] != src.lhs[-1]:
        return None
    k = st.iterators.index(its[-1])
    if _extent(sampled(scop, st.domain), k) < width:
        return None
    start = len(its) - 1
    while start > 0 and its[start - 1] in src.reduction_vars:
        start -= 1
    return None if start == len(its) - 1 else start


def map_cpu(schedule: isl.Schedule, scop: Scop, options: MappingOptions) -> isl.Schedule:
    def walk(node: isl.ScheduleNode, parallel_done: bool) -> isl.ScheduleNode:
        """Map the subtree at node; returns the node at the same position (which may
        now hold an inserted mark)."""
        down = 0
        if node.get_type() == _BAND and any(
            scop.statement(n).kind == "contract" for n in _names(node)
        ):
            # The printer writes the whole nest (tiles, parallel loop, vectors).
            return _mark(node, Loop.CONTRACT)
        if node.get_type() == _BAND and not any(n.startswith("K") for n in _names(node)):
            parallel_here = False
            if node.band_n_member() > 1 and _trip_count(node, scop) <= 1:
                # isl prints no loop for a one-iteration member: a mark above it would
                # land on the next loop down, which may carry a reduction.
                node = node.band_split(1).child(0)
                down += 1
            if (
                not parallel_done
                and options.parallel_depth > 0
                and node.band_member_get_coincident(0)
                and _trip_count(node, scop) > 1
                and (_has_band_below(node) or _work(node, scop) >= _least_work(node, scop))
            ):
                # A first tile size that covers its loop would leave a one-iteration
                # tile loop, which isl does not print: the parallel mark would land on
                # the next loop printed, maybe a reduction. No tiling then.
                if (
                    options.tile
                    and node.band_get_permutable()
                    and options.tile[0] < _trip_count(node, scop)
                ):
                    node = _tile(node, options.tile)
                node = _mark(node, Loop.PARALLEL).child(0)
                down += 1
                parallel_done = parallel_here = True
            elif (
                # Below the parallel loop of a kernel for every size (a batch's, where a
                # row reads all of its batch's rows), the rows of a product are tiled as
                # the parallel loop of a specialised kernel is, so its register tiles
                # share each weight load among ROW_TILE rows. A BERT-style layer for
                # every size, one thread: 76-78 -> 45-58 us at 8 x 16 tokens, 10 -> 6 us
                # at 1 x 16 (specialised: 77, 6.3-7.4). Tiling every band there instead
                # made the layer's kernel decided at 128 tokens 2.5x slower at 137.
                parallel_done
                and scop.symbolic is not None
                and options.tile
                and node.band_member_get_coincident(0)
                and node.band_get_permutable()
                and options.tile[0] < _trip_count(node, scop)
                and _counts_product_rows(node, scop)
            ):
                node = _tile(node, options.tile)
            node, inner = _mark_inner(node, scop, options, parallel_here=parallel_here)
            down += inner
        for i in range(node.n_children()):
            node = walk(node.child(i), parallel_done).parent()
        for _ in range(down):
            node = node.parent()
        return node

    root = walk(schedule.get_root(), False)
    return localize(root.get_schedule(), scop)


def _mark_inner(
    node: isl.ScheduleNode, scop: Scop, options: MappingOptions, *, parallel_here: bool
) -> tuple[isl.ScheduleNode, int]:
    """The marks of a band's innermost loops (a dot or register tile; else a simd or
    reduce mark on its last loop), and how many levels below `node` the node returned
    lies. `parallel_here`: the band's first loop was just marked parallel."""
    down = 0
    innermost = options.register_tile and not _has_band_below(node)
    dot = _dot_tile_start(node, scop) if innermost else None
    if dot == 0 and parallel_here:
        # The tile's output loop is the parallel loop, and a loop is one or the
        # other: each thread's dot products reduce in vectors instead (a batch-1
        # Gemm over a (N, K) weight streams one row at a time).
        dot = None
    start = (
        _register_tile_start(node, scop, options.vector_width)
        if innermost and dot is None
        else None
    )
    if dot is not None or start is not None:
        split = dot if dot is not None else start
        assert split is not None
        if split > 0:
            node = node.band_split(split).child(0)
            down += 1
        mark = Loop.DOTTILE if dot is not None else Loop.REGTILE
        node = _mark(node, mark).child(0)
        down += 1
    elif not _has_band_below(node):
        # the last member that isl prints a loop for (one iteration prints none:
        # a softmax over (1000, 1, 1) reduces along the 1000)
        last = _last_loop(node, scop)
        if last > 0:
            node = node.band_split(last).child(0)
            down += 1
        if options.unroll > 1 and _trip_count(node, scop) <= options.unroll:
            node = node.band_member_set_ast_loop_type(0, isl.ast_loop_type.unroll)
        elif _trip_count(node, scop) <= 1:
            pass
        elif node.band_member_get_coincident(0):
            node = _mark(node, Loop.SIMD).child(0)
            down += 1
        elif _is_reduction_member(node, scop):
            node = _mark(node, Loop.REDUCE).child(0)
            down += 1
    return node, down


def _mark(node: isl.ScheduleNode, kind: Loop) -> isl.ScheduleNode:
    """node under a mark that records its schedule depth: the printer applies the mark to
    the loop of that depth only (poly/proof.py)."""
    return insert(node, LoopMark(kind, node.get_schedule_depth()))


def _trip_count(node: isl.ScheduleNode, scop: Scop, member: int = 0) -> int:
    """Iterations of a band member's loop (the first by default); in a scop for every
    size, at its sample."""
    schedule = node.band_get_partial_schedule().get_at(member)
    domain = sampled(scop, node.get_domain())
    values = isl.UnionMap.from_union_pw_aff(schedule).intersect_domain(domain).range()
    return max((_extent(s, 0) for s in sets_of(values)), default=0)


def _extent(s: isl.Set, k: int) -> int:
    """The values dimension k of s takes, from its least to its greatest (its box); 0
    for an empty s (a sample of a kernel for every size may have no outputs)."""
    if s.is_empty():
        return 0
    return s.dim_max_val(k).to_python() - s.dim_min_val(k).to_python() + 1


def _last_loop(node: isl.ScheduleNode, scop: Scop) -> int:
    """The band's last member with more than one iteration (0 if none has)."""
    n = node.band_n_member()
    return next((j for j in reversed(range(n)) if _trip_count(node, scop, j) > 1), 0)


# An innermost band with fewer statement instances than these is not worth a parallel
# loop: the threads' start (a parallel phase in onnxruntime, 2-3 us) costs more than its
# work (a softmax over 1000 values ran 1000 one-element iterations on the pool). Sums
# need more: a DLRM's batch-1 Gemm of 64 by 128 x 64 (8192 multiply-adds) and the
# 32-column one after it made the model 0.85x onnxruntime at batch 1, 1.29x serial.
MIN_PARALLEL = 4096
MIN_PARALLEL_SUMS = 32768


def instances(scop: Scop, names: Iterable[str], at: isl.Set | None = None) -> int:
    """The instances of these statements (each one's box; in a scop for every size, at
    its sample, or at the parameter point `at`)."""
    if at is None:
        return sum(_box(sampled(scop, scop.statement(n).domain)) for n in names)
    return sum(_box(scop.statement(n).domain.intersect_params(at)) for n in names)


def _box(s: isl.Set) -> int:
    """The points of s's box (0 for an empty s)."""
    if s.is_empty():
        return 0
    return math.prod(_extent(s, k) for k in range(s.dim(isl.dim_type.set)))


def _least_work(node: isl.ScheduleNode, scop: Scop) -> int:
    """The fewest statement instances of an innermost band worth a parallel loop."""
    sums = any(scop.statement(n).kind == "update" for n in _names(node))
    return MIN_PARALLEL_SUMS if sums else MIN_PARALLEL


def _work(node: isl.ScheduleNode, scop: Scop) -> int:
    """The statement instances at and below node (each statement's box; in a scop for
    every size, at its sample)."""
    return sum(_box(s) for s in sets_of(sampled(scop, node.get_domain())))


def _tile(node: isl.ScheduleNode, sizes: tuple[int, ...]) -> isl.ScheduleNode:
    n = min(len(sizes), node.band_n_member())
    if n < node.band_n_member():
        node = node.band_split(n)
    space = node.band_get_space()
    mv = isl.MultiVal.zero(space)
    for k in range(n):
        mv = mv.set_val(k, isl.Val.int_from_si(_CTX, sizes[k]))
    node = node.band_tile(mv)
    point = node.child(0)
    if point.child(0).get_type() == isl.schedule_node_type.sequence:
        point = _sink_below_sequence(point)
    return point.parent()


def _sink_below_sequence(point: isl.ScheduleNode) -> isl.ScheduleNode:
    """Imperfectly nested tiling (TC paper 5.3): the point band moves below the sequence,
    one copy on top of each child, so each statement's own inner loops stay inside it.
    (isl's band_sink would sink it below those loops too.) Returns the sequence node."""
    mupa = point.band_get_partial_schedule()
    coincident = [point.band_member_get_coincident(k) for k in range(point.band_n_member())]
    permutable = point.band_get_permutable()
    seq = point.delete()
    for i in range(seq.n_children()):
        filt = seq.child(i)
        below = filt.child(0).insert_partial_schedule(
            mupa.intersect_domain(filt.filter_get_filter())
        )
        below = below.band_set_permutable(permutable)
        for k, c in enumerate(coincident):
            below = below.band_member_set_coincident(k, c)
        seq = below.parent().parent()
    return seq
