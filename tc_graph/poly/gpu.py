"""GPU mapping on the schedule tree: kernels, blocks, threads, private accumulators.

Each top-level nest of the schedule (a child of the root sequence, or the whole tree)
becomes one kernel; kernels are launched in order on one queue, so a dependence between
nests is honoured by the launch boundary (the paper's single kernel per TC would need a
grid-wide barrier, which neither CUDA nor OpenCL offer portably). Inside a kernel:

- the outer band is tiled (`tile`; the default tile of a thread-mapped loop is its block
  size), point loops sunk below sequences as on the CPU;
- the tile loops of its leading parallel (coincident) members map to blocks (up to 3,
  x = innermost), the point loops of the last of them to threads (up to 3, as many as
  `block` has dims). Mapped loops are printed as strided loops, so a grid or a block
  smaller than the iteration space covers it (tails included);
- every dependence inside a kernel has equal values on those members (they are
  coincident), so each thread computes its own outputs entirely: reductions run
  sequentially per thread and never race, and no barrier is needed for global memory;
- with `use_private_memory`, an innermost reduction loop keeps its output element in a
  register (the `reduce` mark the CPU printer already honours); `private_depth` d > 0
  puts the mark on the outermost enclosing reduction loop at schedule depth >= d, so
  the register is held across that whole nest (the GPU printer's `reduction_nest`).

Marks (poly/marks.py) carry what the printer needs: `Kernel(k)` at each kernel's root,
and `Mapped(unit, dim, depth, step)` on each block- or thread-mapped loop, whose schedule
depth names the AST loop the mark must sit on (isl names loop `c<depth>`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import islpy as isl

from .. import ir
from ..options import MappingOptions
from . import private
from .cpu import _has_band_below, _is_reduction_member, _tile
from .cpu import _member_iterators as _band_iterators
from .marks import Kernel, Loop, LoopMark, Mapped, Shared, Unit, insert
from .promotion import SharedSite
from .schedule import _Scheduler, to_isl
from .scop import Scop, ScopStmt, sets_of

_BAND = isl.schedule_node_type.band
_SEQ = isl.schedule_node_type.sequence
# No schedule depth: the GPU printer proves no loops (poly/proof.py); it finds the nest itself.
_REDUCE = LoopMark(Loop.REDUCE)


@dataclass(frozen=True)
class Launch:
    """Geometry of one kernel: blocks and threads per dim, x first."""

    name: str
    grid: tuple[int, ...]
    block: tuple[int, ...]


@dataclass(frozen=True)
class GpuMapping:
    schedule: isl.Schedule
    launches: tuple[Launch, ...]
    # Per launch: where its shared tiles go (the `shared` mark), None without promotion.
    sites: tuple[SharedSite | None, ...] = ()


def gpu_loop_order(st: ScopStmt) -> tuple[str, ...]:
    """Left-hand indices first (the parallel loops, mapped to blocks and threads), the one
    with the most stride-1 accesses last among them (thread x: coalesced accesses), then
    the reduction indices (sequential inside a thread)."""
    if st.kind == "check" or not st.iterators:
        return st.iterators
    src = st.source
    lhs = [v for v in st.iterators if v in src.lhs]
    red = [v for v in st.iterators if v not in src.lhs]
    accesses = [ir.Read(src.tensor, tuple(ir.Index(v) for v in src.lhs), "")]
    if st.kind != "init":
        accesses += list(dict.fromkeys(r for r in ir.reads(src.rhs) if r.subscripts))

    def unit(v: str) -> int:
        return sum(
            v in ir.index_names(r.subscripts[-1])
            and not any(v in ir.index_names(s) for s in r.subscripts[:-1])
            for r in accesses
            if r.subscripts
        )

    if lhs:
        best = max(reversed(lhs), key=unit)
        lhs = [v for v in lhs if v != best] + [best]
    return (*lhs, *red)


def gpu_schedule(scop: Scop, options: MappingOptions) -> isl.Schedule:
    """Our fusion (schedule.py) over the GPU loop order. isl's own scheduler is not used
    for GPU targets (allow_skewing is ignored): mapping needs the plain parallel loops."""
    sch = _Scheduler(scop, options)
    sch.order = {s.name: gpu_loop_order(s) for s in scop.statements}
    node = sch.build(tuple(s.name for s in scop.statements), 0)
    return to_isl(node, scop, sch.order)


def _member_range(node: isl.ScheduleNode, k: int) -> tuple[int, int]:
    """[lo, hi] of member k of a band over its domain."""
    umap = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
    sets = sets_of(umap.range())
    if not sets:
        return 0, -1
    lo = min(s.dim_min_val(k).to_python() for s in sets)
    return int(lo), int(max(s.dim_max_val(k).to_python() for s in sets))


def _split_and_mark(
    node: isl.ScheduleNode, labels: Sequence[Callable[[int], Mapped] | None]
) -> isl.ScheduleNode:
    """Split a band into one band per member, with a mark above each labelled one (the
    label makes it from the member's schedule depth); returns the node at the original
    position."""
    top = node.get_tree_depth()
    for k, label in enumerate(labels):
        if k < len(labels) - 1:
            node = node.band_split(1)
        if label is not None:
            node = insert(node, label(node.get_schedule_depth())).child(0)
        if k < len(labels) - 1:
            node = node.child(0)
    return node.ancestor(node.get_tree_depth() - top)


def _point_bands(node: isl.ScheduleNode) -> list[isl.ScheduleNode]:
    """The point band copies below a tile band (one, or one per child of a sequence)."""
    child = node.child(0)
    if child.get_type() == _BAND:
        return [child]
    assert child.get_type() == _SEQ
    return [child.child(i).child(0) for i in range(child.n_children())]


def _map_component(
    node: isl.ScheduleNode, scop: Scop, options: MappingOptions, name: str
) -> tuple[isl.ScheduleNode, Launch, SharedSite | None]:
    """Map one kernel's subtree; returns its (marked) root, its launch geometry and where
    its shared tiles go."""
    n = node.band_n_member() if node.get_type() == _BAND else 0
    nb = 0
    while nb < n and node.band_member_get_coincident(nb):
        nb += 1
    ranges = [_member_range(node, k) for k in range(nb)]
    # Members that run at least twice; blocks on the first three, threads on the last ones.
    live = [k for k in range(nb) if ranges[k][1] > ranges[k][0]]
    if not live:
        return _private(node, scop, options), Launch(name, (1,), (1,)), None
    blocks = live[:3]
    threads = live[-min(3, len(options.block)) :]
    ntile = max(nb, min(n, len(options.tile))) if node.band_get_permutable() else nb
    # Tile sizes: the option's, else a thread-mapped member's block size, else 1.
    sizes = list(options.tile[:ntile])
    for k in range(len(sizes), ntile):
        sizes.append(options.block[len(threads) - 1 - threads.index(k)] if k in threads else 1)
    # The geometry: x is the last mapped member.
    grid_dims = []
    for j, k in enumerate(reversed(blocks)):
        lo, hi = ranges[k]
        count = hi // sizes[k] - lo // sizes[k] + 1
        grid_dims.append(min(count, options.grid[j]) if j < len(options.grid) else count)
    block_dims = []
    for j, k in enumerate(reversed(threads)):
        lo, hi = ranges[k]
        block_dims.append(min(options.block[j], sizes[k], hi - lo + 1))
    launch = Launch(name, tuple(grid_dims), tuple(block_dims))
    thread_x = _member_iterators(node, threads[-1], scop)
    node = _tile(node, tuple(sizes))

    def label(unit: Unit, members: list[int], k: int, step: int) -> Callable[[int], Mapped] | None:
        if k not in members:
            return None
        return partial(Mapped, unit, len(members) - 1 - members.index(k), step=step)

    # Point bands first (below), then the tile band (its splitting moves the child).
    top = node.get_tree_depth()
    for i in range(len(_point_bands(node))):
        p = _point_bands(node)[i]
        p = _split_and_mark(p, [label(Unit.THREAD, threads, k, 1) for k in range(ntile)])
        node = _map_inner(p, scop, options, ntile)
        node = private.mark(node, scop, options, launch.block)
        node = node.ancestor(node.get_tree_depth() - top)
    node = _split_and_mark(node, [label(Unit.BLOCK, blocks, k, sizes[k]) for k in range(ntile)])
    site = None
    if options.use_shared_memory and math.prod(block_dims) > 1:
        node, site = _shared_mark(node, blocks, ntile, options, thread_x)
    return node, launch, site


def _member_iterators(node: isl.ScheduleNode, k: int, scop: Scop) -> dict[str, str | None]:
    """Per statement, the iterator that band member k follows (thread x: coalescing)."""
    upa = node.band_get_partial_schedule().get_at(k)
    out: dict[str, str | None] = {}

    def one(pa: isl.PwAff) -> None:
        st = scop.statement(pa.get_domain_space().get_tuple_name(isl.dim_type.set))
        found: list[str] = []

        def piece(_s: isl.Set, aff: isl.Aff) -> None:
            for j, v in enumerate(st.iterators):
                if not aff.get_coefficient_val(isl.dim_type.in_, j).is_zero():
                    found.append(v)

        pa.foreach_piece(piece)
        out[st.name] = found[0] if len(set(found)) == 1 else None

    upa.foreach_pw_aff(one)
    return out


def _shared_mark(
    node: isl.ScheduleNode,
    blocks: Sequence[int],
    ntile: int,
    options: MappingOptions,
    thread_x: dict[str, str | None],
) -> tuple[isl.ScheduleNode, SharedSite]:
    """Insert the `shared` mark after `shared_depth` tile members (0: after all of them,
    directly above the thread-mapped loops; never above a block-mapped one); returns the
    node at the original position and the site."""
    want = max(min(options.shared_depth or ntile, ntile), max(blocks) + 1)
    top = node.get_tree_depth()
    passed = 0
    while passed < want:
        if node.get_type() == _BAND:
            passed += 1
        node = node.child(0)
    depth = node.get_schedule_depth()
    prefix = node.get_prefix_schedule_union_map()
    node = insert(node, Shared())
    node = node.ancestor(node.get_tree_depth() - top)
    return node, SharedSite(prefix, depth, thread_x, node.get_schedule())


def _map_inner(
    node: isl.ScheduleNode, scop: Scop, options: MappingOptions, skip: int
) -> isl.ScheduleNode:
    """Below the mapped point loops (`skip` single-member bands from node on): private
    accumulators on innermost reduction loops. Returns the node at the same position."""
    top = node.get_tree_depth()
    for _ in range(skip):
        while node.get_type() != _BAND:
            node = node.child(0)
        node = node.child(0)
    node = _private(node, scop, options)
    return node.ancestor(node.get_tree_depth() - top)


def _private(node: isl.ScheduleNode, scop: Scop, options: MappingOptions) -> isl.ScheduleNode:
    """Mark innermost reduction loops `reduce` (the output element in a register); with
    `private_depth`, the mark rises to the outermost enclosing reduction loop at that
    schedule depth or deeper (`_reduce_start`)."""
    if not options.use_private_memory:
        return node
    if options.private_depth and node.get_type() == _BAND:
        k = _reduce_start(node, scop, options.private_depth)
        if k is not None:
            if k == 0:
                return insert(node, _REDUCE)
            node = node.band_split(k).child(0)
            return insert(node, _REDUCE).parent()
    top = node.get_tree_depth()
    if node.get_type() == _BAND and not _has_band_below(node):
        n = node.band_n_member()
        if n > 1:
            node = node.band_split(n - 1).child(0)
        if not node.band_member_get_coincident(0) and _is_reduction_member(node, scop):
            lo, hi = _member_range(node, 0)
            if hi > lo:
                node = insert(node, _REDUCE).child(0)
    for i in range(node.n_children()):
        node = _private(node.child(i), scop, options).parent()
    return node.ancestor(node.get_tree_depth() - top)


def _reduce_start(node: isl.ScheduleNode, scop: Scop, depth: int) -> int | None:
    """Where the register of a thread's output starts at private depth `depth`, when that
    is member k of this band and not the default place (the innermost loop): the band
    heads a chain of bands (each the only child of the one above) over one update
    statement reading no element of its output, whose last member is a reduction loop;
    the register spans the chain's trailing reduction members (not coincident, counting a
    reduction index) whose schedule depth is at least `depth`, from the outermost that
    runs more than once (isl prints no loop to mark for one that runs once)."""
    members: list[tuple[bool, bool]] = []  # (a reduction loop, runs once), outermost first
    cur = node
    while cur.get_type() == _BAND:
        found = _band_iterators(cur, scop)
        if found is None or found[0].kind != "update" or private.reads_own(found[0]):
            return None
        st, its = found
        for k in range(cur.band_n_member()):
            lo, hi = _member_range(cur, k)
            red = its[k] in st.source.reduction_vars and not cur.band_member_get_coincident(k)
            members.append((red, hi <= lo))
        cur = cur.child(0)
    if cur.get_type() != isl.schedule_node_type.leaf or not members:
        return None
    last = len(members) - 1
    if not members[last][0] or members[last][1]:
        return None
    top = node.get_schedule_depth()
    s = last
    while s > 0 and members[s - 1][0] and top + s - 1 >= depth:
        s -= 1
    while members[s][1]:
        s += 1
    if s == last or s >= node.band_n_member():
        return None
    return s


def map_gpu(schedule: isl.Schedule, scop: Scop, options: MappingOptions) -> GpuMapping:
    """One kernel per top-level nest, each mapped to blocks and threads."""
    if not scop.statements:
        return GpuMapping(schedule, ())
    root = schedule.get_root().child(0)
    launches: list[Launch] = []
    sites: list[SharedSite | None] = []

    def one(node: isl.ScheduleNode) -> isl.ScheduleNode:
        name = f"tc_kernel_{len(launches)}"
        node, launch, site = _map_component(node, scop, options, name)
        launches.append(launch)
        sites.append(site)
        return insert(node, Kernel(len(launches) - 1))

    if root.get_type() == _SEQ:
        for i in range(root.n_children()):
            root = one(root.child(i).child(0)).parent().parent()
    else:
        root = one(root)
    return GpuMapping(root.get_schedule(), tuple(launches), tuple(sites))
