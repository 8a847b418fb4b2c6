"""The mapping vocabulary: the marks that poly/cpu.py and poly/gpu.py put on the schedule
tree and the printers read back from the isl AST.

A mark is a value of one of the frozen types below; `to_id` is the only place that writes one
as an isl id and `parse` (with `of_node`) the only place that reads it back, so no other
module knows how a mark is spelt. Marks are internal: an id that is not one of these is a
bug, refused with a ValueError that names it.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field, replace

import islpy as isl

from .. import ir
from ..lang.types import SCALARS

_CTX = isl.DEFAULT_CONTEXT


class Loop(enum.Enum):
    """What a mark above a band asks of its loop."""

    PARALLEL = "parallel"  # an OpenMP parallel loop (CPU)
    SIMD = "simd"  # a vector loop (CPU)
    REDUCE = "reduce"  # the output element in a register across the reduction loop(s)
    REGTILE = "regtile"  # a register tile: output row in vectors across the reduction (CPU)
    DOTTILE = "dottile"  # a tile of dot products (CPU, contraction.inner_plan)
    CONTRACT = "contract"  # the printer writes a contraction statement's whole nest (CPU)


class Unit(enum.Enum):
    """The GPU hardware a mapped loop is spread over."""

    BLOCK = "block"
    THREAD = "thread"


@dataclass(frozen=True)
class LoopMark:
    """A request on a loop. `depth`, where known (CPU), is the schedule depth of the loop it
    applies to: the printer applies it to that loop only (poly/proof.py); None means the
    next loop printed."""

    kind: Loop
    depth: int | None = None


@dataclass(frozen=True)
class Mapped:
    """A loop mapped to GPU blocks or threads: hardware dimension `dim` (0 is x), the loop
    at schedule `depth` (isl names it `c<depth>`), stepping by `step` per iteration."""

    unit: Unit
    dim: int
    depth: int
    step: int

    @property
    def iterator(self) -> str:
        """The name isl's AST generator gives the loop this mark sits on."""
        return f"c{self.depth}"


@dataclass(frozen=True)
class Kernel:
    """The root of GPU kernel `index` (its position in the launches)."""

    index: int


@dataclass(frozen=True)
class Shared:
    """Where a GPU kernel's tiles are copied to shared memory (poly/promotion.py). Each
    copy isl's AST generator prints of it holds its decision, `SharedTiles` or
    `NoSharedTiles`, as the mark node's annotation (`annotate`, `of_node`)."""


@dataclass(frozen=True)
class Tile:
    """One promoted reference group: a fixed-size box of `tensor` at `offsets`."""

    name: str
    tensor: str
    dtype: str
    offsets: tuple[str, ...]  # C expressions of the enclosing loop iterators
    sizes: tuple[int, ...]
    refs: frozenset[tuple[str, ir.Read]]  # (statement, reference) rewritten to the tile
    reused: bool
    coalesced: bool
    # Indirect tiles (paper 5.5): the rows of `tensor` reached through `index`, indexed by
    # the index tensor's subscripts then the direct ones; `bounds` is that index space.
    index: str | None = None
    bounds: tuple[int, ...] = ()
    # A tile of a tensor the kernel writes: copied out after the body; copied in only
    # when some read of it is not preceded by a write in the same tile.
    written: bool = False
    load: bool = True

    @property
    def elements(self) -> int:
        return math.prod(self.sizes)

    @property
    def bytes(self) -> int:
        return self.elements * (SCALARS[self.dtype].bytes if self.dtype in SCALARS else 8)


@dataclass(frozen=True)
class SharedTiles:
    """The tiles one copy of a `shared` mark promotes (poly/promotion.py's `promoted_ast`)."""

    tiles: tuple[Tile, ...]


@dataclass(frozen=True)
class NoSharedTiles:
    """Why one copy of a `shared` mark promotes nothing."""

    reason: str


@dataclass(frozen=True)
class ThreadLoop:
    """One thread-mapped loop of a private tile: the loop at schedule `depth` (isl names it
    `c<depth>`), over thread dimension `dim` of `threads` threads, from the constant `first`
    by `stride`, at most `trips` iterations for any block."""

    depth: int
    dim: int
    threads: int
    first: int
    stride: int
    trips: int

    @property
    def per_thread(self) -> int:
        """The iterations one thread owns (its private elements along this loop)."""
        return -(-self.trips // self.threads)


@dataclass(frozen=True)
class PrivateTile:
    """Decided by poly/private.py: a thread keeps its outputs of `statement` over the
    thread-mapped `loops` (outermost first) in a private array across the reduction loops
    at schedule depths `reductions` (outermost first); those in `outside` enclose the
    array's load and store instead (private_depth)."""

    statement: str
    loops: tuple[ThreadLoop, ...]
    reductions: tuple[int, ...]
    outside: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """Private elements per thread."""
        return math.prod(lp.per_thread for lp in self.loops)


@dataclass(frozen=True)
class NoPrivateTile:
    """Why the thread nest below keeps no private tile (poly/private.py)."""

    reason: str


@dataclass(frozen=True)
class Local:
    """Decided by poly/local.py: temporary `tensor` lives in a local array of `sizes`
    declared in the body of the loop this mark sits in (one iteration's elements)."""

    tensor: str
    sizes: tuple[int, ...]
    # The tensor's accessing instances -> the values of the loops around the array.
    loops: isl.UnionMap | None = field(default=None, compare=False, repr=False)
    # Where isl's AST put the mark: the box's offsets as C expressions of the loops
    # printed around it (poly/local.annotate; `of_node` reads them back), None where
    # that piece of the AST does not fit the box.
    offsets: tuple[str, ...] | None = ()


Mark = (
    LoopMark
    | Mapped
    | Kernel
    | Shared
    | SharedTiles
    | NoSharedTiles
    | PrivateTile
    | NoPrivateTile
    | Local
)

_MAPPED = re.compile(r"map:(block|thread):(\d+):c(\d+):(\d+)")
_KERNEL = re.compile(r"kernel:(\d+)")
_LOOPS = {k.value: k for k in Loop}
# The marks an id holds as its user (a name cannot hold a tuple of loops): its name, the
# types it holds and what they are, for parse's errors. A `shared` id holding none is Shared.
_HOLDING: dict[str, tuple[tuple[type, ...], str]] = {
    "shared": ((SharedTiles, NoSharedTiles), "a shared-tile decision"),
    "private": ((PrivateTile, NoPrivateTile), "a private-tile decision"),
    "local": ((Local,), "a local array"),
}


def to_id(mark: Mark) -> isl.Id:
    """The isl id of a mark (its name spells the mark; a loop mark's depth is its user)."""
    if isinstance(mark, LoopMark):
        return isl.Id(mark.kind.value, user=mark.depth, context=_CTX)
    if isinstance(mark, Mapped):
        name = f"map:{mark.unit.value}:{mark.dim}:{mark.iterator}:{mark.step}"
        return isl.Id(name, context=_CTX)
    if isinstance(mark, Kernel):
        return isl.Id(f"kernel:{mark.index}", context=_CTX)
    for name, (types, _) in _HOLDING.items():
        if isinstance(mark, types):
            return isl.Id(name, user=mark, context=_CTX)
    return isl.Id("shared", context=_CTX)


def parse(ident: isl.Id) -> Mark:
    """The mark an isl id spells (the inverse of to_id); ValueError for any other id."""
    name = ident.get_name()
    if name in _LOOPS:
        depth = ident.get_user()
        if depth is not None and not isinstance(depth, int):
            raise ValueError(f"mark '{name}' holds {depth!r}, not a schedule depth")
        return LoopMark(_LOOPS[name], depth)
    if name in _HOLDING:
        types, what = _HOLDING[name]
        held = ident.get_user()
        if held is None and name == "shared":
            return Shared()
        if not isinstance(held, types):
            raise ValueError(f"mark '{name}' holds {held!r}, not {what}")
        return held
    if m := _MAPPED.fullmatch(name):
        return Mapped(Unit(m[1]), int(m[2]), int(m[3]), int(m[4]))
    if m := _KERNEL.fullmatch(name):
        return Kernel(int(m[1]))
    raise ValueError(f"'{name}' is not a mapping mark (tc_graph/poly/marks.py)")


def of_node(node: isl.AstNode) -> Mark:
    """The mark of a mark node of the isl AST; for a copy of a `shared` mark, its decision;
    for a local array's, its offsets there."""
    mark = parse(node.mark_get_id())
    if isinstance(mark, Shared):
        return parse(node.get_annotation())
    if isinstance(mark, Local):
        offsets = node.get_annotation().get_user()
        assert offsets is None or isinstance(offsets, tuple), "a local array's AST mark"
        return replace(mark, offsets=offsets)
    return mark


def annotate(node: isl.AstNode, decision: SharedTiles | NoSharedTiles) -> isl.AstNode:
    """A copy of a `shared` mark in the AST holding its decision."""
    return node.set_annotation(to_id(decision))


def is_loop(mark: Mark, kind: Loop) -> bool:
    """The mark asks `kind` of its loop."""
    return isinstance(mark, LoopMark) and mark.kind is kind


def in_tree(schedule: isl.Schedule) -> list[Mark]:
    """The marks of a schedule tree, top down (what the mapping decided, as data)."""
    out: list[Mark] = []

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == isl.schedule_node_type.mark:
            out.append(parse(node.mark_get_id()))
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return out


def insert(node: isl.ScheduleNode, mark: Mark) -> isl.ScheduleNode:
    """node under a new mark node holding `mark` (returns the mark node)."""
    return node.insert_mark(to_id(mark))
