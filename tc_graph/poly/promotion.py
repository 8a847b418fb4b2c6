"""Shared-memory promotion: array tiles per block, read and written (TC paper 5.5, A.3).

The mapping (poly/gpu.py) marks one place per kernel, `shared`, below the block-mapped
(and sequential) tile loops and above the thread-mapped ones, and records a `SharedSite`.
`promoted_ast` plans each copy isl prints of the mark as isl builds it (an isl_ast_build
callback), because only then is it known which tile loops c0..c<d-1> isl prints (one it
leaves out takes one value given the outer ones, so it is projected out) and which
statements the copy holds; the decision, `SharedTiles` or `NoSharedTiles` with its
reason, is the copy's annotation, which the printer prints.

An array tile is the box over-approximating what one reference group (`_group`) touches
for one value of the tile loops: per tensor dimension the least accessed index (an
expression of the tile loops, the offset) and the largest extent over all tiles (the
size). A group is promoted when an element is reached by several instances within one
tile (reuse) or when one of its references is not coalesced (its last subscript does not
follow thread x), while it fits `max_shared_memory` (`_fit`). A reference with an
indirect first subscript, `LUT(I(a..), b..)` (paper 5.5, 2LUT), is tiled as a virtual
tensor (`indirect_form`): the copy-in reads the rows a block reaches, coalesced along b...

A tensor the kernel writes is one group of all its references (paper 5.5), computed on in
the tile and copied out whole after a barrier: it needs `_writable` and `_copy_out_exact`,
and is copied in only where some read is exposed (`_exposed_reads`). With
`use_private_memory` registers keep a thread's reused outputs, so reuse alone does not
promote a written group; a reference that is not coalesced does, and the registers are
then written back to the shared tile, whose copy-out is coalesced.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import reduce

import islpy as isl

from .. import ir
from ..options import MappingOptions
from .local import footprint_box
from .marks import Kernel, Mapped, NoSharedTiles, Shared, SharedTiles, Tile, Unit, annotate, parse
from .proof import ast_build, ast_nodes
from .scop import Scop, ScopStmt, access_map, maps_of, union_of

_CTX = isl.DEFAULT_CONTEXT


@dataclass(frozen=True)
class SharedSite:
    """What the mapping knows at a kernel's `shared` mark."""

    prefix: isl.UnionMap  # instance -> [c0, ..., c<depth-1>]
    depth: int
    thread_x: Mapping[str, str | None]  # statement -> iterator mapped to thread x
    schedule: isl.Schedule  # the mapped tree (statement order, for copy-in analysis)


def promoted_ast(
    scop: Scop,
    schedule: isl.Schedule,
    sites: Sequence[SharedSite | None],
    blocks: Sequence[tuple[int, ...]],
    options: MappingOptions,
) -> isl.AstNode:
    """The AST of a mapped tree (kernel k's site and thread block: sites[k], blocks[k]),
    each copy isl prints of a `shared` mark holding its decision (marks.annotate)."""
    planner = _Planner(scop, sites, blocks, options)
    build = ast_build(schedule)
    # The handles keep the callbacks alive while isl builds.
    build, _kernel = build.set_before_each_mark(planner.kernel)
    build, _mark = build.set_after_each_mark(planner.mark)
    ast = build.node_from_schedule(schedule)
    if planner.failure is not None:
        raise planner.failure
    return ast


@dataclass
class _Planner:
    """The decisions taken while isl builds the AST, in the order it prints them: the
    kernel there, the shared bytes the kernel's earlier copies of its site took, and the
    copies numbered so far (their tiles' names)."""

    scop: Scop
    sites: Sequence[SharedSite | None]
    blocks: Sequence[tuple[int, ...]]
    options: MappingOptions
    index: int = 0
    used: int = 0
    copies: int = 0
    failure: Exception | None = None

    def kernel(self, ident: isl.Id, build: isl.AstBuild) -> None:
        if isinstance(mark := parse(ident), Kernel):
            self.index, self.used = mark.index, 0

    def mark(self, node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        if self.failure is not None or not isinstance(parse(node.mark_get_id()), Shared):
            return node
        try:
            return annotate(node, self.decide(node, build))
        except Exception as e:  # raised once isl returns: no exception may cross isl's C
            self.failure = e
            return node

    def decide(self, node: isl.AstNode, build: isl.AstBuild) -> SharedTiles | NoSharedTiles:
        """The tiles of this copy of the site for its statements and the loops isl printed
        around it: the dimensions of the build's schedule space, from which isl drops the
        loops it prints none for (they take one value given the outer ones). The budget is
        what the kernel's earlier copies left of `max_shared_memory`."""
        site = self.sites[self.index]
        assert site is not None, "a shared mark in a kernel without a site"
        below = mapped_below(node)
        block = self.blocks[self.index]
        if idle := [d for d, n in enumerate(block) if n > 1 and (Unit.THREAD, d) not in below]:
            return NoSharedTiles(f"no loop of thread dim {idle[0]}: a barrier would diverge")
        space = isl.Set.universe(build.get_schedule_space()).flatten()
        loops = {
            space.get_dim_name(isl.dim_type.set, k) for k in range(space.dim(isl.dim_type.set))
        }
        names = {
            n.user_get_expr().get_op_arg(0).get_id().get_name()
            for n in ast_nodes(node)
            if n.get_type() == isl.ast_node_type.user
        }
        prefix = f"tc_sh{self.copies}_"
        self.copies += 1
        budget = self.options.max_shared_memory - self.used
        tiles = plan_tiles(site, self.scop, loops, self.options, prefix, names, budget)
        self.used += sum(t.bytes for t in tiles)
        if tiles:
            return SharedTiles(tuple(tiles))
        return NoSharedTiles(
            f"no reference group is reused or not coalesced (written: with an exact copy-out) within the {budget} bytes left"
        )


def mapped_below(node: isl.AstNode) -> set[tuple[Unit, int]]:
    """The (unit, dim) of every mapped loop in an AST subtree."""
    return {
        (m.unit, m.dim)
        for n in ast_nodes(node)
        if n.get_type() == isl.ast_node_type.mark
        and isinstance(m := parse(n.mark_get_id()), Mapped)
    }


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
    return any(map(ir.reads_tensor, r.subscripts))


def indirect_form(r: ir.Read) -> tuple[ir.Read, tuple[ir.Expr, ...]] | None:
    """`T(I(a..), b..)` with affine a.. and b..: the index read and the subscripts of the
    virtual tensor V(a.., b..) = T(I(a..), b..) whose tile holds the reached rows."""
    first, *rest = r.subscripts
    if not isinstance(first, ir.Read) or _indirect(first) or any(map(ir.reads_tensor, rest)):
        return None
    return first, (*first.subscripts, *rest)


def _coalesced(r: ir.Read, x: str | None) -> bool:
    """The last subscript follows thread x and no other one does (or no thread x)."""
    if x is None:
        return True
    return x in ir.index_names(r.subscripts[-1]) and not any(
        x in ir.index_names(s) for s in r.subscripts[:-1]
    )


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


def _site_references(
    stmts: Sequence[ScopStmt],
    scop: Scop,
    per: Mapping[str, isl.Map],
    written: Collection[str],
    bad: set[str],
) -> tuple[dict[str, list[_Ref]], dict[str, tuple[int, ...]]]:
    """Every reference of the statements with its footprint per tile (and a write flag),
    in order of first use, keyed by tensor, or tensor@index for indirect references
    (their own space); and each key's space. Tensors that cannot be promoted are added to
    `bad`."""
    refs: dict[str, list[_Ref]] = {}
    spaces: dict[str, tuple[int, ...]] = {}
    for st in stmts:
        accesses = [(r, False) for r in references(st)]
        if st.kind != "check":
            accesses.append((write_ref(st), True))
        for r, is_write in accesses:
            key, subs, shape = r.tensor, r.subscripts, scop.shapes[r.tensor]
            if _indirect(r):
                form = indirect_form(r)
                if form is None or {r.tensor, form[0].tensor} & written:
                    bad.add(r.tensor)
                    continue
                key = f"{r.tensor}@{form[0].tensor}"
                subs = form[1]
                shape = (*scop.shapes[form[0].tensor], *shape[1:])
            if key in bad:
                continue
            spaces[key] = tuple(shape)
            acc = access_map(st.domain, st.iterators, r.tensor, subs, shape)
            pre = per[st.name]
            fp = pre.reverse().apply_range(acc)
            reads = not is_write or st.kind == "update"
            tagged = pre.range_product(acc)
            refs.setdefault(key, []).append(_Ref(st, r, fp, tagged, reads=reads, writes=is_write))
    return refs, spaces


def plan_tiles(
    site: SharedSite,
    scop: Scop,
    defined: Collection[str],
    options: MappingOptions,
    prefix_name: str,
    present: Collection[str],
    budget: int,
) -> list[Tile]:
    """The tiles promoted at a site for the statements `present` in the printed subtree
    (isl may print a site once per statement), given the loop iterators defined there,
    within `budget` bytes: what `max_shared_memory` leaves after the tiles the kernel's
    earlier copies of the site declared (the limit holds per kernel, not per copy)."""
    every = {m.get_tuple_name(isl.dim_type.in_): m for m in maps_of(site.prefix)}
    # Written anywhere in the site (not only in this printed part): not read-only.
    written = {scop.statement(n).source.tensor for n in every if scop.statement(n).kind != "check"}
    per = {n: m for n, m in every.items() if n in present}
    stmts = [scop.statement(n) for n in per]
    keep = {k for k in range(site.depth) if f"c{k}" in defined}
    bad: set[str] = {t for t in written if not _writable(t, every, present, scop)}
    refs, spaces = _site_references(stmts, scop, per, written, bad)
    groups = [  # all references of a written tensor together
        (key, g)
        for key, rs in refs.items()
        if key not in bad
        for g in ([rs] if key in written else _group(rs, site.depth, keep))
    ]
    tiles: list[Tile] = []
    for key, g in groups:
        tensor, _, index = key.partition("@")
        params = _to_params(reduce(isl.Map.union, (r.footprint for r in g)), site.depth, keep)
        box = footprint_box(params)
        if box is None:
            continue
        offsets = [o.gist(params.params()) for o in box[0]]
        sizes = box[1]
        reused = not union_of(r.tagged for r in g).is_injective()
        coalesced = all(_coalesced(r.ref, site.thread_x.get(r.stmt.name)) for r in g)
        load = True
        if tensor in written:
            # Registers keep a thread's reused outputs when private promotion is on, so a
            # written tile pays off through reuse only without it (or by coalescing).
            if coalesced and (options.use_private_memory or not reused):
                continue
            if not _copy_out_exact(g, params, offsets, sizes, site, per, keep, scop):
                continue
            load = _exposed_reads(g, site.schedule)
        elif not reused and coalesced:
            continue
        tile = Tile(
            f"{prefix_name}{len(tiles)}",
            tensor,
            scop.program.tensors[tensor].dtype,
            tuple(_c_expr(o) for o in offsets),
            sizes,
            frozenset((r.stmt.name, r.ref) for r in g),
            reused,
            coalesced,
            index or None,
            spaces[key],
            written=tensor in written,
            load=load,
        )
        tiles.append(tile)
    return _fit(tiles, budget, prefix_name)


def _fit(tiles: Sequence[Tile], budget: int, prefix_name: str) -> list[Tile]:
    """The candidates kept greedily, in order of first use, while their bytes fit the
    budget, named in order. An index tensor's tile read only inside kept indirect
    references is dead (the copy-in of the reached rows reads the index tensor itself):
    it is dropped and takes no bytes, which may leave room for a later candidate, so this
    repeats until stable (dropping only frees bytes: what was kept stays kept)."""
    dead: set[int] = set()
    while True:
        kept: list[int] = []
        used = 0
        for i, t in enumerate(tiles):
            if i not in dead and used + t.bytes <= budget:
                kept.append(i)
                used += t.bytes
        inside = {
            (s, form[0])
            for i in kept
            if tiles[i].index
            for s, r in tiles[i].refs
            if (form := indirect_form(r))
        }
        now = {i for i in kept if not tiles[i].index and tiles[i].refs <= inside}
        if now <= dead:
            out = [tiles[i] for i in kept if i not in dead]
            return [replace(t, name=f"{prefix_name}{k}") for k, t in enumerate(out)]
        dead |= now


@dataclass(frozen=True)
class _Ref:
    """One reference of a statement: its footprint per tile ({ [c] -> T[a] }) and its
    instances tagged with their tile ({ S[i] -> [[c] -> T[a]] })."""

    stmt: ScopStmt
    ref: ir.Read
    footprint: isl.Map
    tagged: isl.Map
    reads: bool  # an explicit read, or the target of an update (`+=` reads its output)
    writes: bool


def write_ref(st: ScopStmt) -> ir.Read:
    """The target of a statement as a reference (the key of its tile rewriting)."""
    return ir.Read(st.source.tensor, tuple(ir.Index(v) for v in st.source.lhs), "")


def _writable(
    tensor: str, every: Mapping[str, isl.Map], present: Collection[str], scop: Scop
) -> bool:
    """A written tensor can have a tile when every statement of the site that touches it
    is printed here (no other copy of the site reads or writes it around this one's
    copies), is a plain statement, and reads it only directly (no indirect subscript
    into it, no use as an index: the copy-in of rows would read what the block writes).
    So every access to it in this copy is a reference of its group, which the printer
    points at the tile; a scalar's reads are no references (they have no subscripts)."""
    if not scop.shapes[tensor]:
        return False
    for n in every:
        st = scop.statement(n)
        touches = st.kind != "check" and st.source.tensor == tensor
        for r in references(st):
            if any(x.tensor == tensor for s in r.subscripts for x in ir.reads(s)):
                return False
            if r.tensor == tensor:
                if _indirect(r):
                    return False
                touches = True
        if touches and (n not in present or st.kind not in ("init", "assign", "update")):
            return False
    return True


def _copy_out_exact(
    g: Sequence[_Ref],
    params: isl.Set,
    offsets: Sequence[isl.PwAff],
    sizes: Sequence[int],
    site: SharedSite,
    per: Mapping[str, isl.Map],
    keep: Collection[int],
    scop: Scop,
) -> bool:
    """Whether copying the whole box out (within the tensor's bounds) stores exactly what
    the block wrote: for each value of the tile loops the written elements are the box
    (tails: the box within bounds), every tile value the site visits writes, and distinct
    tile values write disjoint elements (distinct blocks, or sequential tile iterations,
    never store over each other's results)."""
    full = reduce(isl.Map.union, (r.footprint for r in g if r.writes))
    if not full.reverse().is_single_valued():
        return False
    done = _to_params(full, site.depth, keep)
    space = params.get_space()
    lo = isl.PwAffList.alloc(_CTX, len(sizes))
    hi = isl.PwAffList.alloc(_CTX, len(sizes))
    for o, n in zip(offsets, sizes, strict=True):
        lo = lo.add(o)
        hi = hi.add(o.add_constant_val(isl.Val.int_from_si(_CTX, n - 1)))
    box = (
        isl.Set.universe(space)
        .lower_bound_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(space, lo))
        .upper_bound_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(space, hi))
    )
    shape = scop.shapes[g[0].ref.tensor]
    for k, n in enumerate(shape):
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val.zero(_CTX))
        box = box.upper_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(_CTX, n - 1))
    if not box.intersect_params(done.params()).is_equal(done):
        return False
    visited = [_to_params(m.reverse(), site.depth, keep).params() for m in per.values()]
    return all(v.is_subset(done.params()) for v in visited)


def _exposed_reads(g: Sequence[_Ref], schedule: isl.Schedule) -> bool:
    """Whether the tile must be copied in: some read of the group (an update reads its
    target) is not preceded by a write of the same element in the same tile (isl's flow
    analysis on the accesses tagged with their tile value)."""
    sink = union_of(r.tagged for r in g if r.reads)
    source = union_of(r.tagged for r in g if r.writes)
    info = isl.UnionAccessInfo.from_sink(sink).set_must_source(source).set_schedule(schedule)
    return not info.compute_flow().get_may_no_source().is_empty()


def _group(rs: Sequence[_Ref], depth: int, keep: Collection[int]) -> list[list[_Ref]]:
    """Union-find over references: overlapping footprints (for one tile) are one group,
    and so are references whose joint box is no larger than their two boxes."""
    parent = list(range(len(rs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    def size(fp: isl.Map) -> int | None:
        box = footprint_box(_to_params(fp, depth, keep))
        return None if box is None else math.prod(box[1])

    for i in range(len(rs)):
        for j in range(i):
            if find(i) == find(j):
                continue
            a, b = rs[i].footprint, rs[j].footprint
            merge = not a.intersect(b).is_empty()
            if not merge:
                sa, sb, sab = size(a), size(b), size(a.union(b))
                merge = None not in (sa, sb, sab) and sab <= sa + sb  # type: ignore[operator]
            if merge:
                parent[find(i)] = find(j)
    out: dict[int, list[_Ref]] = {}
    for i, r in enumerate(rs):
        out.setdefault(find(i), []).append(r)
    return list(out.values())


def _c_expr(pa: isl.PwAff) -> str:
    """A piecewise affine expression of the tile loops (parameters) as C."""
    build = isl.AstBuild.from_context(isl.Set.universe(pa.get_space().params()))
    return build.expr_from_pw_aff(pa).to_C_str()
