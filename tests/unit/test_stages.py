"""The compiler driver's stages (tc_graph/compiler.py) as data, not as printed source: the
scop's statements, domains, accesses and dependences, the fusion groups of the schedule,
the shared-memory tiles of the GPU mapping and the marks of the CPU mapping, each compared
with what tests/data/stages.toml works out by hand (the way the original TC's
test_cuda_mapper_memory_promotion.cc checks its promotion groups). Relations are compared
as isl objects with is_equal. Nothing here runs a C compiler or needs a GPU."""

from __future__ import annotations

import functools
import tomllib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import islpy as isl
import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler, ir
from tc_graph.options import MappingOptions
from tc_graph.poly.marks import (
    Kernel,
    Local,
    LoopMark,
    NoSharedTiles,
    SharedTiles,
    Tile,
    of_node,
    parse,
)
from tc_graph.poly.proof import ast_nodes
from tc_graph.poly.scop import Scop, ScopStmt, original_order, union_of

TABLE = Path(__file__).resolve().parents[1] / "data" / "stages.toml"
with TABLE.open("rb") as _f:
    DATA = tomllib.load(_f)

Case = Mapping[str, Any]


def _id(case: Case) -> str:
    options = ",".join(f"{k}={v}" for k, v in case.get("options", {}).items()) or "defaults"
    return f"{case['program']}-{case.get('target', 'cpu')}-{options}"


def _cases(kind: str) -> Any:
    return pytest.mark.parametrize("case", DATA[kind], ids=[_id(c) for c in DATA[kind]])


@functools.cache
def _function(program: str) -> tg.TcFunction:
    module = tg.define(DATA["program"][program]["source"])
    (name,) = module.names
    return module[name]


def _options(case: Case) -> MappingOptions:
    return MappingOptions.from_json(dict(case.get("options", {})))


def _scop(case: Case) -> Scop:
    """The scop stage of the case's program for its input shapes, target and options."""
    fn = _function(case["program"])
    shapes = case["shapes"]
    args = [np.zeros(shapes[n], dtype=fn.checked.tensors[n].dtype) for n in fn.checked.inputs]
    prepared = compiler.prepare(compiler.bind(fn, args))
    return compiler.scop(prepared, case.get("target", "cpu"), _options(case))


def _union_set(sets: Sequence[isl.Set]) -> isl.UnionSet:
    out = isl.UnionSet.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
    for s in sets:
        out = out.union(isl.UnionSet.from_set(s))
    return out


def _relation(texts: Sequence[str], domains: isl.UnionSet) -> isl.UnionMap:
    """The union of hand-written relations between statement instances, restricted to the
    statements' domains."""
    out = isl.UnionMap.empty(isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
    for t in texts:
        out = out.union(isl.UnionMap(t))
    return out.intersect_domain(domains).intersect_range(domains)


@_cases("scop")
def test_the_scop_is_the_hand_written_one(case: Case) -> None:
    scop = _scop(case)
    want = case["statements"]
    assert [s.name for s in scop.statements] == list(want)
    domains = []
    for name, w in want.items():
        st = scop.statement(name)
        domain = isl.Set(w["domain"])
        domains.append(domain)
        assert st.kind == w["kind"], name
        assert st.domain.is_equal(domain), f"{name}: domain {st.domain}"
        for access in ("reads", "writes"):
            expected = isl.UnionMap(w[access]).intersect_domain(isl.UnionSet.from_set(domain))
            got = getattr(st, access)
            assert got.is_equal(expected), f"{name}: {access} {got}"
        if "contraction" in w:
            assert _contraction(st) == w["contraction"], name
    every = _union_set(domains)
    flow = _relation(case["flow"], every)
    got = _flow_dependences(scop.statements)
    assert got.is_equal(flow), f"flow dependences {got}"
    assert scop.dependences.is_equal(flow.union(_relation(case.get("other", []), every)))


def _flow_dependences(statements: Sequence[ScopStmt]) -> isl.UnionMap:
    """The read-after-write dependences alone (`Scop.dependences` adds the anti and output
    ones), to compare as data."""
    reads = union_of(s.reads for s in statements)
    writes = union_of(s.writes for s in statements)
    info = isl.UnionAccessInfo.from_sink(reads).set_may_source(writes)
    return info.set_schedule_map(original_order(statements)).compute_flow().get_may_dependence()


def _contraction(st: ScopStmt) -> dict[str, str]:
    """A statement's contraction form as the data table writes it."""
    plan = st.contraction
    assert plan is not None and plan.rows is not None
    out = {"rows": plan.rows, "cols": plan.cols, "red": plan.red}
    if plan.packed is not None and plan.scalar is not None:
        out.update(packed=ir.to_text(plan.packed), scalar=ir.to_text(plan.scalar))
    if plan.start is not None:
        out["start"] = ir.to_text(plan.start)
    if plan.end is not None:
        out["end"] = ir.to_text(plan.end.rhs)
    if plan.span is not None:
        out["span"] = plan.span
    if plan.flat_end:
        out["flat_end"] = "yes"
    if not plan.keep:
        out["keep"] = "no"
    return out


def _statements(node: isl.ScheduleNode) -> frozenset[str]:
    names: set[str] = set()
    node.get_domain().foreach_set(lambda s: names.add(s.get_tuple_name()))
    return frozenset(names)


def _nodes(node: isl.ScheduleNode) -> Iterator[isl.ScheduleNode]:
    """node and every node below it, top down (a walk of our own: an exception raised in
    isl's foreach callbacks is lost, and the nodes they pass do not outlive the call)."""
    yield node
    for i in range(node.n_children()):
        yield from _nodes(node.child(i))


def _fusion_groups(tree: isl.Schedule) -> list[set[frozenset[str]]]:
    """For each schedule depth, the sets of statements that share a loop there (a band
    member at that depth)."""
    depths: dict[int, set[frozenset[str]]] = {}
    for node in _nodes(tree.get_root()):
        if node.get_type() == isl.schedule_node_type.band:
            for k in range(node.band_n_member()):
                depths.setdefault(node.get_schedule_depth() + k, set()).add(_statements(node))
    return [depths[d] for d in sorted(depths)]


@_cases("fusion")
def test_the_fusion_groups_are_the_hand_worked_ones(case: Case) -> None:
    target = case["target"]
    tree = compiler.schedule(_scop(case), target, _options(case))
    want = [{frozenset(g) for g in groups} for groups in case["groups"]]
    assert _fusion_groups(tree)[: len(want)] == want


def _tile_box(tile: Tile, depth: int) -> isl.Set:
    """The tile's box as an isl set over its index space, with the tile loops c0, c1, ...
    as parameters (offsets are the printer's C expressions of those loops)."""
    params = ", ".join(f"c{k}" for k in range(depth))
    dims = ", ".join(f"a{k}" for k in range(len(tile.sizes)))
    bounds = " and ".join(
        f"({o}) <= a{k} < ({o}) + {n}"
        for k, (o, n) in enumerate(zip(tile.offsets, tile.sizes, strict=True))
    )
    return isl.Set(f"[{params}] -> {{ [{dims}] : {bounds} }}")


def _decisions(ast: isl.AstNode, kernel: int) -> list[SharedTiles | NoSharedTiles]:
    """The decision held by each copy of kernel `kernel`'s `shared` mark in the AST."""
    out: list[SharedTiles | NoSharedTiles] = []
    index = -1
    for node in ast_nodes(ast):
        if node.get_type() == isl.ast_node_type.mark:
            mark = of_node(node)
            index = mark.index if isinstance(mark, Kernel) else index
            if isinstance(mark, SharedTiles | NoSharedTiles) and index == kernel:
                out.append(mark)
    return out


@_cases("promotion")
def test_the_promoted_tiles_are_the_hand_computed_ones(case: Case) -> None:
    """The tiles of one kernel's site as the AST stage records them, before any printing
    (isl prints the cases' site once, each tile loop as a loop)."""
    scop = _scop(case)
    options = _options(case)
    target = case["target"]
    done = compiler.mapped(scop, compiler.schedule(scop, target, options), target, options)
    gpu = done.gpu
    assert gpu is not None
    launches = [(lc.grid, lc.block) for lc in gpu.launches]
    assert launches == [(tuple(w["grid"]), tuple(w["block"])) for w in case["launches"]]
    site = gpu.sites[case["kernel"]]
    assert site is not None
    ast = compiler.ast(scop, done, options)
    assert ast is not None
    (decision,) = _decisions(ast, case["kernel"])
    if "refused" in case:
        assert isinstance(decision, NoSharedTiles)
        assert case["refused"] in decision.reason
        return
    assert isinstance(decision, SharedTiles), decision
    tiles = decision.tiles
    assert [(t.tensor, t.index) for t in tiles] == [
        (w["tensor"], w.get("index")) for w in case["tiles"]
    ]
    for t, w in zip(tiles, case["tiles"], strict=True):
        assert t.sizes == tuple(w["sizes"]), t.tensor
        box = _tile_box(t, site.depth)
        assert box.is_equal(isl.Set(w["box"])), f"{t.tensor}: box {box}"
        assert (t.reused, t.coalesced) == (w["reused"], w["coalesced"]), t.tensor
        assert (t.written, t.load) == (w.get("written", False), w.get("load", True)), t.tensor


def _member_loops(band: isl.ScheduleNode) -> tuple[str, ...]:
    """The iterator each member of a band follows (joined by '|' where its statements'
    iterators differ)."""
    mupa = band.band_get_partial_schedule()
    out = []
    for k in range(band.band_n_member()):
        names: set[str] = set()

        def piece(_s: isl.Set, aff: isl.Aff, names: set[str] = names) -> None:
            for j in range(aff.dim(isl.dim_type.in_)):
                if aff.involves_dims(isl.dim_type.in_, j, 1):  # a tile loop's too: 8*(m//8)
                    names.add(aff.get_dim_name(isl.dim_type.in_, j))

        mupa.get_at(k).foreach_pw_aff(lambda pa, piece=piece: pa.foreach_piece(piece))
        out.append("|".join(sorted(names)))
    return tuple(out)


def _cpu_marks(tree: isl.Schedule) -> Counter[tuple[str, int | None, frozenset[str], tuple]]:
    """Every loop mark: its kind, its schedule depth, the statements of the band it sits
    on (through any marks between) and the iterator each member of that band follows."""
    found: Counter[tuple[str, int | None, frozenset[str], tuple]] = Counter()
    for node in _nodes(tree.get_root()):
        if node.get_type() != isl.schedule_node_type.mark:
            continue
        mark = parse(node.mark_get_id())
        if isinstance(mark, Local):
            continue
        assert isinstance(mark, LoopMark), mark
        band = node.child(0)
        while band.get_type() == isl.schedule_node_type.mark:
            band = band.child(0)
        assert band.get_type() == isl.schedule_node_type.band, mark
        found[(mark.kind.value, mark.depth, _statements(band), _member_loops(band))] += 1
    return found


def _locals(tree: isl.Schedule) -> Counter[tuple[str, int, tuple[int, ...]]]:
    """Every local array: its temporary, the schedule depth of the loop whose body
    declares it, its sizes."""
    found: Counter[tuple[str, int, tuple[int, ...]]] = Counter()
    for node in _nodes(tree.get_root()):
        if node.get_type() == isl.schedule_node_type.mark:
            mark = parse(node.mark_get_id())
            if isinstance(mark, Local):
                found[(mark.tensor, node.get_schedule_depth(), mark.sizes)] += 1
    return found


@_cases("marks")
def test_the_cpu_marks_are_the_hand_worked_ones(case: Case) -> None:
    scop = _scop(case)
    options = _options(case)
    tree = compiler.mapped(scop, compiler.schedule(scop, "cpu", options), "cpu", options)
    want = Counter(
        (w["mark"], w["depth"], frozenset(w["statements"]), tuple(w["loops"]))
        for w in case["marks"]
    )
    assert _cpu_marks(tree.schedule) == want
    local = Counter((w["tensor"], w["depth"], tuple(w["sizes"])) for w in case.get("locals", []))
    assert _locals(tree.schedule) == local
