"""Local arrays (array contraction) on the CPU: a temporary whose every element is used
within one iteration of a loop lives in an array declared in that loop's body, sized
by what one iteration touches.

Fusion puts a temporary's producer and consumers in one loop; when each element is
written and read in a single iteration (the map from its elements to the loop values
around them is a function), the temporary needs only one iteration's footprint. That
footprint is a box (per dimension, isl's least index as a function of the loop values,
and the largest extent, a constant); the deepest loop whose box fits `LOCAL_BYTES` wins. Softmax's `E(b,h,s,t) = exp(..)` then lives in one row of 128
floats, in L1, instead of a 6 MB buffer malloc'ed per call; a temporary private to one
iteration of the parallel loop lives on its thread's stack.

The decision is a `Local` mark below the chosen band member (the band split after it),
so the array is declared inside the loop. Where isl's AST has put that loop, the AST
build annotates the mark with the box's offset as C expressions of the loops printed
there (`annotate`: a loop with one value is not printed, its value is substituted).
"""

from __future__ import annotations

import math

import islpy as isl

from ..lang.types import SCALARS
from .marks import Local, Loop, LoopMark, insert, parse
from .scop import Scop, maps_of

_CTX = isl.DEFAULT_CONTEXT
_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_DOMAIN = isl.schedule_node_type.domain
# Stack space one local array may take (threads' stacks are small; L1 is 32-48 KiB).
LOCAL_BYTES = 64 * 1024
_Box = tuple[tuple[isl.PwAff, ...], tuple[int, ...]]
# Bands whose loops the printer writes in a form of its own (tiles, vector reductions):
# no declaration can go between their loops.
_WHOLE = (Loop.REGTILE, Loop.DOTTILE, Loop.CONTRACT, Loop.REDUCE, Loop.SIMD)


def localize(schedule: isl.Schedule, scop: Scop) -> isl.Schedule:
    """The mapped schedule with a `Local` mark for each temporary that has a local form.
    Where isl's AST would print a mark in pieces sharing one iteration (`_split`), the
    temporary's array moves out to an enclosing loop, or stays a shared temporary."""
    ceilings: dict[str, int] = {}
    for _ in range(_TRIES):
        marked = _marked(schedule, scop, ceilings)
        split = _split(marked, scop)
        if not split:
            return marked
        ceilings.update(_depths(marked, split))
    return _without(marked, split)


# Rounds of marking and checking on isl's AST (each round moves the split arrays out).
_TRIES = 3


def _marked(schedule: isl.Schedule, scop: Scop, ceilings: dict[str, int]) -> isl.Schedule:
    """Each temporary's `Local` mark at its deepest loop, above `ceilings[tensor]` loops."""
    for tensor in scop.program.temporaries:
        accesses = scop.accesses_of(tensor)
        if accesses.is_empty():
            continue
        ceiling = ceilings.get(tensor, _UNBOUNDED)
        found = _deepest(schedule.get_root(), accesses, scop, tensor, ceiling)
        if found is not None:
            node, member, sizes, loops = found
            if member + 1 < node.band_n_member():
                node = node.band_split(member + 1)
            schedule = insert(node.child(0), Local(tensor, sizes, loops)).get_schedule()
    return schedule


_UNBOUNDED = 1 << 30


def _depths(schedule: isl.Schedule, tensors: set[str]) -> dict[str, int]:
    """The loops around the `Local` marks of `tensors`."""
    out: dict[str, int] = {}

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == _MARK:
            mark = parse(node.mark_get_id())
            if isinstance(mark, Local) and mark.tensor in tensors:
                out[mark.tensor] = node.get_schedule_depth()
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return out


def _split(schedule: isl.Schedule, scop: Scop) -> set[str]:
    """The local arrays whose mark isl's AST prints more than once within one value of
    the loops around it: isl prints a loop in pieces where its statements' ranges differ
    (a statement with one value there apart from one with a loop), and each copy of the
    mark would hold part of one iteration's elements. They stay shared temporaries."""
    seen: dict[str, isl.UnionSet] = {}
    split: set[str] = set()

    def after_mark(node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        mark = parse(node.mark_get_id())
        if isinstance(mark, Local) and mark.loops is not None:
            touched = scop.accesses_of(mark.tensor).intersect_domain(build.get_schedule().domain())
            if _overlaps(seen, mark, touched):
                split.add(mark.tensor)
        return node

    build = isl.AstBuild.from_context(isl.Set.universe(isl.Space.params_alloc(_CTX, 0)))
    build, _handle = build.set_after_each_mark(after_mark)
    build.node_from_schedule(schedule)
    return split


def _without(schedule: isl.Schedule, tensors: set[str]) -> isl.Schedule:
    """The schedule with the `Local` marks of `tensors` deleted."""

    def drop(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == _MARK:
            mark = parse(node.mark_get_id())
            if isinstance(mark, Local) and mark.tensor in tensors:
                return node.delete()
        return node

    return schedule.map_schedule_node_bottom_up(drop)


def _deepest(
    node: isl.ScheduleNode, accesses: isl.UnionMap, scop: Scop, tensor: str, ceiling: int
) -> tuple[isl.ScheduleNode, int, tuple[int, ...], isl.UnionMap] | None:
    """The deepest band member below node, inside fewer than `ceiling` loops (the band,
    the member, the box's sizes, the accesses' loop values there), inside which tensor
    has its local form, or None."""
    if node.get_type() != _DOMAIN and not accesses.domain().is_subset(node.get_domain()):
        return None
    for i in range(node.n_children()):
        found = _deepest(node.child(i), accesses, scop, tensor, ceiling)
        if found is not None:
            return found
    if node.get_type() != _BAND or _printed_whole(node):
        return None
    prefix = node.get_prefix_schedule_union_map()
    partial = node.band_get_partial_schedule()
    n = node.band_n_member()
    for member in reversed(range(min(n, ceiling - node.get_schedule_depth() - 1))):
        if _one_value(partial.get_at(member), node.get_domain()):
            # isl prints no loop for it, and may print what lies below once per statement
            # group: copies of the array within one iteration. The member above has the
            # same box.
            continue
        own = partial.drop_dims(isl.dim_type.set, member + 1, n - member - 1)
        loops = prefix.flat_range_product(isl.UnionMap.from_multi_union_pw_aff(own))
        sizes = _footprint(loops, accesses, scop, tensor)
        if sizes is not None:
            return node, member, sizes, loops.intersect_domain(accesses.domain())
    return None


def _one_value(member: isl.UnionPwAff, domain: isl.UnionSet) -> bool:
    """The band member takes a single value over the band's statements."""
    values = isl.UnionMap.from_union_pw_aff(member).intersect_domain(domain).range()
    return isl.Set.from_union_set(values).is_singleton()


def _printed_whole(node: isl.ScheduleNode) -> bool:
    """The band sits under a mark whose loops the printer writes in a form of its own."""
    if not node.has_parent():
        return False
    parent = node.parent()
    if parent.get_type() != _MARK:
        return False
    mark = parse(parent.mark_get_id())
    return isinstance(mark, LoopMark) and mark.kind in _WHOLE


def _footprint(
    prefix: isl.UnionMap, accesses: isl.UnionMap, scop: Scop, tensor: str
) -> tuple[int, ...] | None:
    """The sizes of the box one value of the loops `prefix` gives touches, when every
    element is touched under one value only and the box fits LOCAL_BYTES."""
    prefix = prefix.intersect_domain(accesses.domain())
    if not accesses.reverse().apply_range(prefix).is_single_valued():
        return None
    box = _box(prefix, accesses)
    if box is None:
        return None
    _, sizes = box
    count = math.prod(sizes)
    if count * SCALARS[scop.program.tensors[tensor].dtype].bytes > LOCAL_BYTES:
        return None
    # The whole tensor for one loop value: the loop runs once, nothing is saved.
    return None if count == math.prod(scop.shapes[tensor]) else sizes


def _box(prefix: isl.UnionMap, accesses: isl.UnionMap) -> _Box | None:
    """The box of the elements per value of the loops (None unless of one tensor)."""
    maps = maps_of(prefix.reverse().apply_range(accesses))
    return footprint_box(maps[0]) if len(maps) == 1 else None


def footprint_box(fp: isl.Map | isl.Set) -> _Box | None:
    """The box of a map's range (a set's elements) per value of its domain (a set's
    parameters): per dimension the least index, a function of those values, and the
    largest extent, a constant; None when one is unbounded."""
    offsets, sizes = [], []
    for k in range(fp.dim(isl.dim_type.out)):
        lo = fp.dim_min(k)
        extent = fp.dim_max(k).sub(lo).max_val()
        if not extent.is_int():
            return None
        offsets.append(lo)
        sizes.append(int(extent.to_python()) + 1)
    return tuple(offsets), tuple(sizes)


def _overlaps(seen: dict[str, isl.UnionSet], mark: Local, touched: isl.UnionMap) -> bool:
    """This copy of a local array's mark touches the array (`touched`: its accesses in
    the copy) at a value of the loops around it where an earlier copy did; `seen` holds
    those values of the copies so far, this one's added."""
    assert mark.loops is not None
    values = mark.loops.intersect_domain(touched.domain()).range()
    before = seen.get(mark.tensor)
    seen[mark.tensor] = values if before is None else before.union(values)
    return before is not None and not before.intersect(values).is_empty()


def annotate(
    node: isl.AstNode, build: isl.AstBuild, scop: Scop, seen: dict[str, isl.UnionSet]
) -> isl.AstNode:
    """For isl's AST build, after each mark: a `Local` mark's node gets the offsets of its
    box as C expressions of the loops printed around it. isl may print the mark once per
    piece of a loop it splits; a piece whose statements do not touch the array gets
    zeros, and a piece whose loop isl did not print (one value) sees part of the box.
    Two copies that touch the array at one value of the loops around it (`seen`: those
    values of the copies so far) would each hold part of one iteration's array: that
    copy, like a box that does not fit, is annotated None, which the printer refuses.
    It never raises (an exception cannot cross isl's callback)."""
    mark = parse(node.mark_get_id())
    if not isinstance(mark, Local) or mark.loops is None:
        return node
    schedule = build.get_schedule()
    accesses = scop.accesses_of(mark.tensor).intersect_domain(schedule.domain())
    exprs: tuple[str, ...] | None = ("0",) * len(mark.sizes)
    if _overlaps(seen, mark, accesses):
        exprs = None
    elif not accesses.is_empty():
        box = _box(schedule, accesses)
        fits = box is not None and all(n <= m for n, m in zip(box[1], mark.sizes, strict=True))
        exprs = tuple(build.expr_from_pw_aff(lo).to_C_str() for lo in box[0]) if fits else None
    return node.set_annotation(isl.Id("offsets", user=exprs, context=_CTX))
