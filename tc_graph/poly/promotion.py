"""Shared-memory promotion: array tiles of read-only tensors per block (TC paper 5.5, A.3).

The mapping (poly/gpu.py) marks one place per kernel, `shared`, below the block-mapped
(and sequential) tile loops and above the thread-mapped ones, and records a `SharedSite`:
the prefix schedule there (statement instance -> the enclosing tile loops c0..c<d-1>) and
the iterator each statement maps to thread x. The printer calls `plan_tiles` when it
reaches the mark, because only then is it known which of c0..c<d-1> isl printed as loops
(a loop isl left out takes one value given the outer ones, so it is projected out).

An array tile is the box over-approximating what one reference group touches for one
value of the tile loops: per tensor dimension the least accessed index (an expression of
the tile loops, the offset) and the largest extent over all tiles (constant, the size).
References to one tensor whose footprints overlap, or whose common box is no larger than
their separate ones, form one group. A group is promoted when an element is reached by
several instances within one tile (reuse: the prefix-and-element map is not injective)
or when one of its references is not coalesced (its last subscript does not follow
thread x), and when it still fits `max_shared_memory` (greedy, in order of first use).

Only tensors that the kernel does not write are promoted: a written tile would need a
copy-out restricted to the elements written (a box copy-out would overwrite other blocks'
results), which this version leaves to the private accumulators. A reference with an
indirect first subscript, `LUT(I(a..), b..)` (paper 5.5, 2LUT), is tiled as the virtual
tensor V(a.., b..): its box is affine in a.. and b.., and the copy-in reads the row
`LUT[I(a..)]` (the index clamped) for each element, so the rows a block reaches sit in
shared memory, copied with coalesced reads along b...
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from .. import ir
from ..options import MappingOptions
from .scop import Scop, ScopStmt, access_map

_CTX = isl.DEFAULT_CONTEXT
_BYTES = {
    "float32": 4, "float64": 8, "float16": 2, "int8": 1, "int16": 2, "int32": 4,
    "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
}  # fmt: skip


@dataclass(frozen=True)
class SharedSite:
    """What the mapping knows at a kernel's `shared` mark."""

    prefix: isl.UnionMap  # instance -> [c0, ..., c<depth-1>]
    depth: int
    thread_x: Mapping[str, str | None]  # statement -> iterator mapped to thread x


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

    @property
    def elements(self) -> int:
        return math.prod(self.sizes)

    @property
    def bytes(self) -> int:
        return self.elements * _BYTES.get(self.dtype, 8)


def references(st: ScopStmt) -> list[ir.Read]:
    """The array reads of a statement, nested ones (index tensors) included."""
    if st.kind == "check":
        assert st.checked is not None
        exprs: list[ir.Expr] = [st.checked.subscripts[st.checked_dim]]
    elif st.kind == "init":
        exprs = []
    else:
        exprs = [st.source.rhs]
    out = [r for e in exprs for r in ir.reads(e) if r.subscripts]
    return list(dict.fromkeys(out))


def _indirect(r: ir.Read) -> bool:
    return any(isinstance(x, ir.Read) for s in r.subscripts for x in ir.walk(s))


def indirect_form(r: ir.Read) -> tuple[ir.Read, tuple[ir.Expr, ...]] | None:
    """`T(I(a..), b..)` with affine a.. and b..: the index read and the subscripts of the
    virtual tensor V(a.., b..) = T(I(a..), b..) whose tile holds the reached rows."""
    first, *rest = r.subscripts
    if not isinstance(first, ir.Read) or any(_indirect_expr(x) for x in first.subscripts):
        return None
    if any(_indirect_expr(x) for x in rest):
        return None
    return first, (*first.subscripts, *rest)


def _indirect_expr(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.Read) for x in ir.walk(e))


def _coalesced(r: ir.Read, x: str | None) -> bool:
    """The last subscript follows thread x and no other one does (or no thread x)."""
    if x is None:
        return True
    return x in ir.index_names(r.subscripts[-1]) and not any(
        x in ir.index_names(s) for s in r.subscripts[:-1]
    )


def _per_stmt(prefix: isl.UnionMap) -> dict[str, isl.Map]:
    out: dict[str, isl.Map] = {}

    def add(m: isl.Map) -> None:
        out[m.get_tuple_name(isl.dim_type.in_)] = m

    prefix.foreach_map(add)
    return out


def _to_params(fp: isl.Map, depth: int, keep: Collection[int]) -> isl.Set:
    """{ [c] -> T[a] } as a set of T[a] with parameters c_k for the kept k (the others
    projected out: isl printed no loop for them, their value follows from the outer)."""
    for k in range(depth):
        fp = fp.set_dim_name(isl.dim_type.in_, k, f"c{k}")
    for k in reversed(range(depth)):
        if k not in keep:
            fp = fp.project_out(isl.dim_type.in_, k, 1)
    n = fp.dim(isl.dim_type.in_)
    return fp.move_dims(isl.dim_type.param, 0, isl.dim_type.in_, 0, n).range()


def _box(fp: isl.Set) -> tuple[list[isl.PwAff], list[int]] | None:
    """Offsets (least index, per tile) and constant sizes (largest extent), or None
    when some extent is unbounded."""
    offsets, sizes = [], []
    ctx = fp.params()
    for k in range(fp.dim(isl.dim_type.set)):
        lo = fp.dim_min(k)
        hi = fp.dim_max(k)
        ext = hi.sub(lo).max_val()
        if not ext.is_int():
            return None
        offsets.append(lo.gist(ctx))
        sizes.append(int(ext.to_python()) + 1)
    return offsets, sizes


def plan_tiles(
    site: SharedSite,
    scop: Scop,
    defined: Collection[str],
    options: MappingOptions,
    prefix_name: str,
    present: Collection[str],
) -> list[Tile]:
    """The tiles promoted at a site for the statements `present` in the printed subtree
    (isl may print a site once per statement), given the loop iterators defined there."""
    per = _per_stmt(site.prefix)
    # Written anywhere in the site (not only in this printed part): not read-only.
    written = {scop.statement(n).source.tensor for n in per if scop.statement(n).kind != "check"}
    per = {n: m for n, m in per.items() if n in present}
    stmts = [scop.statement(n) for n in per]
    keep = {k for k in range(site.depth) if f"c{k}" in defined}
    # Every reference to a read-only tensor, with its footprint per tile.
    # Keyed by tensor, or tensor@index for indirect references (their own index space).
    refs: dict[str, list[tuple[str, ir.Read, isl.Map, isl.Map]]] = {}
    bad: set[str] = set()
    spaces: dict[str, tuple[int, ...]] = {}
    for st in stmts:
        for r in references(st):
            key, subs, shape = r.tensor, r.subscripts, scop.shapes[r.tensor]
            if _indirect(r):
                form = indirect_form(r)
                if form is None or form[0].tensor in written:
                    bad.add(r.tensor)
                    continue
                key = f"{r.tensor}@{form[0].tensor}"
                subs = form[1]
                shape = (*scop.shapes[form[0].tensor], *shape[1:])
            if r.tensor in written or key in bad:
                continue
            spaces[key] = tuple(shape)
            acc = access_map(st.domain, st.iterators, r.tensor, subs, shape)
            pre = per[st.name]
            fp = pre.reverse().apply_range(acc)
            refs.setdefault(key, []).append((st.name, r, fp, pre.range_product(acc)))
    groups: list[tuple[str, list[tuple[str, ir.Read, isl.Map, isl.Map]]]] = []
    for key, rs in refs.items():
        if key in bad:
            continue
        for g in _group(rs, site.depth, keep):
            groups.append((key, g))
    tiles: list[Tile] = []
    used = 0
    for key, g in groups:
        tensor, _, index = key.partition("@")
        fp = g[0][2]
        for _, _, f, _ in g[1:]:
            fp = fp.union(f)
        box = _box(_to_params(fp, site.depth, keep))
        if box is None:
            continue
        offsets, sizes = box
        inj = isl.UnionMap.from_map(g[0][3])
        for _, _, _, m in g[1:]:
            inj = inj.union(isl.UnionMap.from_map(m))
        reused = not inj.is_injective()
        coalesced = all(_coalesced(r, site.thread_x.get(s)) for s, r, _, _ in g)
        if not reused and coalesced:
            continue
        dtype = scop.program.tensors[tensor].dtype
        tile = Tile(
            f"{prefix_name}{len(tiles)}",
            tensor,
            dtype,
            tuple(_c_expr(o) for o in offsets),
            tuple(sizes),
            frozenset((s, r) for s, r, _, _ in g),
            reused,
            coalesced,
            index or None,
            spaces[key],
        )
        if used + tile.bytes > options.max_shared_memory:
            continue
        used += tile.bytes
        tiles.append(tile)
    # An index tensor's tile read only inside promoted indirect references is dead: the
    # copy-in of the reached rows reads the index tensor itself.
    inside = {
        (s, form[0]) for t in tiles if t.index for s, r in t.refs if (form := indirect_form(r))
    }
    return [t for t in tiles if t.index or not t.refs <= inside]


def _group(
    rs: Sequence[tuple[str, ir.Read, isl.Map, isl.Map]], depth: int, keep: Collection[int]
) -> list[list[tuple[str, ir.Read, isl.Map, isl.Map]]]:
    """Union-find over references: overlapping footprints (for one tile) are one group,
    and so are references whose joint box is no larger than their two boxes."""
    parent = list(range(len(rs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    def size(fp: isl.Map) -> int | None:
        box = _box(_to_params(fp, depth, keep))
        return None if box is None else math.prod(box[1])

    for i in range(len(rs)):
        for j in range(i):
            if find(i) == find(j):
                continue
            a, b = rs[i][2], rs[j][2]
            merge = not a.intersect(b).is_empty()
            if not merge:
                sa, sb, sab = size(a), size(b), size(a.union(b))
                merge = None not in (sa, sb, sab) and sab <= sa + sb  # type: ignore[operator]
            if merge:
                parent[find(i)] = find(j)
    out: dict[int, list[tuple[str, ir.Read, isl.Map, isl.Map]]] = {}
    for i, r in enumerate(rs):
        out.setdefault(find(i), []).append(r)
    return list(out.values())


def _c_expr(pa: isl.PwAff) -> str:
    """A piecewise affine expression of the tile loops (parameters) as C."""
    build = isl.AstBuild.from_context(isl.Set.universe(pa.get_space().params()))
    return build.expr_from_pw_aff(pa).to_C_str()
