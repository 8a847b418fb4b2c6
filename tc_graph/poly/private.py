"""Private tiles, decided on the mapped schedule tree (paper 5.4).

A thread whose block is smaller than its tile owns several outputs of a reduction. With
`use_private_memory` it keeps them in a private array across the reduction loops, which
move outside the thread's own loops, and writes each back once. poly/gpu.py calls `mark`
once per point band after mapping it; the decision, or the reason it does not apply, is a
`PrivateTile` or `NoPrivateTile` mark (poly/marks.py) above the band's first thread-mapped
loop, and the GPU printer prints what it says.

The decision reads isl's objects only: the prefix schedule at the statement (its range is
the set of loop values isl's AST generator scans), the band members' values given the
loops around them (a member with one value gets no loop; a loop's first value is the
constant lower bound, its trips the largest extent), and the statement's write access.
It applies to a perfect nest of thread-mapped loops, each run by several threads and
starting at a constant, over one update statement whose reduction loops below (at least
one) have bounds free of the thread loops, whose target does not follow them, and which
reads no element of its own output; reordering is then sound: distinct thread iterations
write distinct outputs (the mapped members are coincident) and no output is read.

Private elements (`held_element`) are decided on the AST, before printing: statements in
sequence that all write one element (init, reduction, epilogue such as MLP3's bias, sum
and relu) keep it in a register and store it once. isl's expressions of the statements'
arguments say which element each writes and reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import islpy as isl

from .. import ir
from ..options import MappingOptions
from .marks import (
    LoopMark,
    Mapped,
    NoPrivateTile,
    PrivateTile,
    SharedTiles,
    ThreadLoop,
    Unit,
    insert,
    of_node,
    parse,
)
from .promotion import write_ref
from .proof import ast_nodes
from .scop import Scop, ScopStmt, maps_of

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_PRIVATE_MAX = 32  # at most this many private outputs per thread (registers)


def mark(
    node: isl.ScheduleNode, scop: Scop, options: MappingOptions, block: Sequence[int]
) -> isl.ScheduleNode:
    """Record the decision for the point band at node above its first thread-mapped loop
    run by several threads (none when no loop is); returns the node at the same position."""
    if not options.use_private_memory:
        return node
    top = node.get_tree_depth()
    while node.get_type() in (_BAND, _MARK) and not _threads(node, block):
        node = node.child(0)
    if node.get_type() == _MARK:
        node = insert(node, decide(node, scop, options, block))
    return node.ancestor(node.get_tree_depth() - top)


def _threads(node: isl.ScheduleNode, block: Sequence[int]) -> bool:
    """Node is a thread mapping mark of a loop run by several threads."""
    m = parse(node.mark_get_id()) if node.get_type() == _MARK else None
    return isinstance(m, Mapped) and m.unit is Unit.THREAD and block[m.dim] > 1


def decide(
    node: isl.ScheduleNode, scop: Scop, options: MappingOptions, block: Sequence[int]
) -> PrivateTile | NoPrivateTile:
    """The private tile of the thread nest from the thread mark at node, or why not."""
    marks: list[Mapped] = []
    cur = node
    while cur.get_type() == _MARK and isinstance(m := parse(cur.mark_get_id()), Mapped):
        marks.append(m)
        cur = _skip_once(cur.child(0).child(0))
    reductions: list[int] = []
    while cur.get_type() in (_BAND, _MARK):
        if cur.get_type() == _MARK:
            if not isinstance(parse(cur.mark_get_id()), LoopMark):
                return NoPrivateTile("a mapping mark between the reduction loops")
        else:
            top = cur.get_schedule_depth()
            reductions += [top + k for k in range(cur.band_n_member())]
        cur = cur.child(0)
    if cur.get_type() != isl.schedule_node_type.leaf:
        return NoPrivateTile("several statements below the thread loops")
    prefixes = _prefix(cur)
    if len(prefixes) != 1:
        return NoPrivateTile("the statement below the thread loops never runs")
    (prefix,) = prefixes
    name = prefix.get_tuple_name(isl.dim_type.in_)
    values = prefix.range()
    loops = _thread_loops(marks, values, block)
    if isinstance(loops, NoPrivateTile):
        return loops
    reductions = [r for r in reductions if not _once(values, r)]
    why = _refusal(scop, prefix, loops, reductions)
    if why is not None:
        return NoPrivateTile(why)
    # private_depth: reduction loops above that depth enclose the tile's load and store
    # (at least the innermost loop stays inside).
    outside = tuple(r for r in reductions[:-1] if r < options.private_depth)
    return PrivateTile(name, tuple(loops), tuple(reductions), outside)


def _skip_once(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Below node's single-member bands whose loop runs once (isl prints no loop for them:
    a mapped loop right under them is directly in the nest)."""
    while node.get_type() == _BAND and node.band_n_member() == 1:
        ranges = [m.range() for m in _prefix(node.child(0))]
        if not ranges or not _once(reduce(isl.Set.union, ranges), node.get_schedule_depth()):
            break
        node = node.child(0)
    return node


def _prefix(node: isl.ScheduleNode) -> list[isl.Map]:
    """The prefix schedule at node per statement, over node's domain."""
    return maps_of(node.get_prefix_schedule_union_map().intersect_domain(node.get_domain()))


def _upto(values: isl.Set, depth: int) -> isl.Set:
    """The values of loops c0..c<depth>."""
    n = values.dim(isl.dim_type.set)
    return values.project_out(isl.dim_type.set, depth + 1, n - depth - 1)


def _once(values: isl.Set, depth: int) -> bool:
    """Loop c<depth> has one value given the loops around it (isl prints no loop for it)."""
    s = _upto(values, depth)
    return (
        isl.Map.from_range(s)
        .move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, depth)
        .is_single_valued()
    )


def _thread_loops(
    marks: Sequence[Mapped], values: isl.Set, block: Sequence[int]
) -> list[ThreadLoop] | NoPrivateTile:
    """The nest's thread loops with their constant first value, stride and trips."""
    loops = []
    for m in marks:
        s = _upto(values, m.depth)
        outer = isl.Map.from_range(s).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, m.depth)
        if outer.is_single_valued():
            return NoPrivateTile(f"thread loop c{m.depth} runs once (isl prints no loop)")
        if block[m.dim] <= 1:
            return NoPrivateTile(f"thread loop c{m.depth} has one thread")
        low = outer.lexmin_pw_multi_aff().get_pw_aff(0)
        if not low.is_cst():
            return NoPrivateTile(f"thread loop c{m.depth} starts at no constant")
        first = s.dim_min_val(m.depth).to_python()
        stride = s.get_stride(m.depth).to_python()
        trips = (s.dim_max_val(m.depth).to_python() - first) // stride + 1
        loops.append(ThreadLoop(m.depth, m.dim, block[m.dim], first, stride, trips))
    return loops


def _refusal(
    scop: Scop, prefix: isl.Map, loops: Sequence[ThreadLoop], reductions: Sequence[int]
) -> str | None:
    """Why the nest over the statement whose prefix schedule is `prefix` keeps no private
    tile, or None when it does."""
    name = prefix.get_tuple_name(isl.dim_type.in_)
    st = scop.statement(name)
    values = prefix.range()
    size = math.prod(lp.per_thread for lp in loops)
    if size <= 1 or size > _PRIVATE_MAX:
        return f"{size} outputs per thread (a private tile holds 2 to {_PRIVATE_MAX})"
    if not reductions:
        return "no reduction loop below the thread loops"
    for r in reductions:
        for lp in loops:
            if not _independent(_upto(values, r), r, lp.depth):
                return f"the bounds of loop c{r} follow thread loop c{lp.depth}"
    if st.kind != "update":
        return f"statement {name} is not a reduction"
    if reads_own(st):
        return f"statement {name} reads its own output {st.source.tensor}"
    target = prefix.reverse().apply_range(isl.Map.from_union_map(st.writes)).wrap().flatten()
    n = target.dim(isl.dim_type.set) - len(st.source.lhs)
    if any(
        not _independent(target, n + j, r) for r in reductions for j in range(len(st.source.lhs))
    ):
        return f"the target of {name} follows a reduction loop"
    return None


def reads_own(st: ScopStmt) -> bool:
    """The statement reads an element of the tensor it writes (which a register held
    across its loops would miss)."""
    return any(r.tensor == st.source.tensor for r in ir.reads(st.source.rhs))


def _free(s: isl.Set, k: int) -> isl.Set:
    """s with dimension k unconstrained."""
    return s.project_out(isl.dim_type.set, k, 1).insert_dims(isl.dim_type.set, k, 1)


def _independent(s: isl.Set, k: int, j: int) -> bool:
    """In s, the values of dimension k do not depend on those of dimension j."""
    return s.is_equal(_free(s, k).intersect(_free(s, j)))


@dataclass(frozen=True)
class HeldElement:
    """The element of `tensor` a block's statements all write, kept in a register: its
    accesses (statement, reference), the first statement (its target is stored) and how
    many there are."""

    tensor: str
    refs: frozenset[tuple[str, ir.Read]]
    first: isl.AstNode
    statements: int


def held_element(scop: Scop, node: isl.AstNode) -> HeldElement | str:
    """The element the statements of the block at node keep in a register, or why none:
    they all write one element (isl's expressions of its subscripts are equal), which no
    loop inside the block moves, and read the tensor at no other; no tile of it is copied
    to shared memory inside."""
    nodes = list(ast_nodes(node))
    users = [n for n in nodes if n.get_type() == isl.ast_node_type.user]
    calls = [_call(scop, n) for n in users]
    if len(calls) < 2 or any(st.kind == "check" for st, _ in calls):
        return "fewer than two statements, or an index check among them"
    tensor = calls[0][0].source.tensor
    if any(st.source.tensor != tensor for st, _ in calls):
        return "the statements write several tensors"
    element = _at(*calls[0], calls[0][0].source.lhs)
    refs = set()
    for st, args in calls:
        accesses = [write_ref(st), *(ir.reads(st.source.rhs) if st.kind != "init" else ())]
        for r in (r for r in accesses if r.tensor == tensor):
            names = [x.name for x in r.subscripts if isinstance(x, ir.Index)]
            if len(names) < len(r.subscripts) or not all(
                a.is_equal(b) for a, b in zip(_at(st, args, names), element, strict=True)
            ):
                return f"{st.name} accesses another element of {tensor}"
            refs.add((st.name, r))
    inner = {n.for_get_iterator().get_id().get_name() for n in nodes if n.get_type() == _FOR}
    if any(_ids(e) & inner for e in element):
        return f"the element of {tensor} follows a loop inside the block"
    for n in nodes:
        if n.get_type() == isl.ast_node_type.mark and isinstance(d := of_node(n), SharedTiles):
            if any(tensor in (t.tensor, t.index) for t in d.tiles):
                return f"a tile of {tensor} is copied to shared memory inside the block"
    return HeldElement(tensor, frozenset(refs), users[0], len(users))


_FOR = isl.ast_node_type.for_


def _call(scop: Scop, node: isl.AstNode) -> tuple[ScopStmt, list[isl.AstExpr]]:
    """The statement of an AST user node and isl's expressions of its iterators."""
    e = node.user_get_expr()
    args = [e.get_op_arg(k) for k in range(1, e.get_op_n_arg())]
    return scop.statement(e.get_op_arg(0).get_id().get_name()), args


def _at(st: ScopStmt, args: Sequence[isl.AstExpr], names: Sequence[str]) -> list[isl.AstExpr]:
    """isl's expressions of some of a statement's iterators."""
    return [args[st.iterators.index(v)] for v in names]


def _ids(e: isl.AstExpr) -> set[str]:
    """The identifiers an AST expression reads."""
    if e.get_type() == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if e.get_type() == isl.ast_expr_type.op:
        return {i for k in range(e.get_op_n_arg()) for i in _ids(e.get_op_arg(k))}
    return set()
