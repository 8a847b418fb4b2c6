"""CPU mapping on the schedule tree: tiling, the parallel loop, SIMD loops.

The outermost band whose first member is parallel is tiled (when tile sizes
are given; point loops are sunk below sequences, so imperfect nests tile) and
marked `parallel`: its outer loop becomes the OpenMP `parallel for`. The last
member of each innermost band is split off and marked `simd` when it is
parallel, or `reduce` when it is the reduction loop of one update statement
(the printer then keeps the output element in a local accumulator and lets
the compiler vectorize the reduction).
"""

from __future__ import annotations

import islpy as isl

from ..options import MappingOptions
from .scop import Scop, ScopStmt

_CTX = isl.DEFAULT_CONTEXT
_BAND = isl.schedule_node_type.band
_LEAF = isl.schedule_node_type.leaf


def _names(node: isl.ScheduleNode) -> set[str]:
    out: set[str] = set()
    node.get_domain().foreach_set(lambda s: out.add(s.get_tuple_name()))
    return out


def _has_band_below(node: isl.ScheduleNode) -> bool:
    for i in range(node.n_children()):
        c = node.child(i)
        if c.get_type() == _BAND or _has_band_below(c):
            return True
    return False


def _member_iterators(node: isl.ScheduleNode, scop: Scop) -> tuple[ScopStmt, list[str]] | None:
    """For a band over one statement: the statement, and the iterator each member counts."""
    names = _names(node)
    if len(names) != 1:
        return None
    st = scop.statement(next(iter(names)))
    umap = node.band_get_partial_schedule_union_map()
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    if len(maps) != 1:
        return None
    (m,) = maps
    out: list[str] = []
    for k in range(node.band_n_member()):
        mk = m.project_out(isl.dim_type.out, k + 1, node.band_n_member() - k - 1)
        mk = mk.project_out(isl.dim_type.out, 0, k)
        for pos, v in enumerate(st.iterators):
            probe = isl.Map.universe(mk.get_space()).equate(isl.dim_type.in_, pos, isl.dim_type.out, 0)
            if mk.is_subset(probe):
                out.append(v)
                break
        else:
            return None
    return st, out


def _is_reduction_member(node: isl.ScheduleNode, scop: Scop) -> bool:
    """The band's last member is a reduction loop of an update statement."""
    found = _member_iterators(node, scop)
    if found is None:
        return False
    st, its = found
    return st.kind == "update" and its[-1] in st.source.reduction_vars


def _is_register_tile(node: isl.ScheduleNode, scop: Scop) -> bool:
    """Reduction loops around a stride-1 output loop of one `+=` statement: the output row
    can live in vector registers across the reduction."""
    found = _member_iterators(node, scop)
    if found is None or len(found[1]) < 2:
        return False
    st, its = found
    src = st.source
    return (
        st.kind == "update"
        and src.op == "+"
        and bool(src.lhs)
        and its[-1] == src.lhs[-1]
        and all(v in src.reduction_vars for v in its[:-1])
    )


def map_cpu(schedule: isl.Schedule, scop: Scop, options: MappingOptions) -> isl.Schedule:
    def walk(node: isl.ScheduleNode, parallel_done: bool) -> isl.ScheduleNode:
        """Map the subtree at node; returns the node at the same position (which may
        now hold an inserted mark)."""
        down = 0
        if node.get_type() == _BAND and not any(n.startswith("K") for n in _names(node)):
            if (
                not parallel_done
                and options.parallel_depth > 0
                and node.band_member_get_coincident(0)
            ):
                if options.tile and node.band_get_permutable():
                    node = _tile(node, options.tile)
                node = node.insert_mark(isl.Id("parallel", context=_CTX)).child(0)
                down += 1
                parallel_done = True
            if not _has_band_below(node) and options.register_tile and _is_register_tile(node, scop):
                node = node.insert_mark(isl.Id("regtile", context=_CTX)).child(0)
                down += 1
            elif not _has_band_below(node):
                n = node.band_n_member()
                if n > 1:
                    node = node.band_split(n - 1).child(0)
                    down += 1
                if node.band_member_get_coincident(0):
                    node = node.insert_mark(isl.Id("simd", context=_CTX)).child(0)
                    down += 1
                elif _is_reduction_member(node, scop):
                    node = node.insert_mark(isl.Id("reduce", context=_CTX)).child(0)
                    down += 1
        for i in range(node.n_children()):
            node = walk(node.child(i), parallel_done).parent()
        for _ in range(down):
            node = node.parent()
        return node

    root = walk(schedule.get_root(), False)
    return root.get_schedule()


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
    if point.get_type() == _BAND and point.n_children() == 1 and point.child(0).get_type() != _LEAF:
        point = point.band_sink()
    return point.parent()
