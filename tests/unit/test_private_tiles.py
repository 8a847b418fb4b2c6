"""Private tiles are decided on the mapped schedule tree (tc_graph/poly/private.py) and
recorded there as data: the thread loops, their trips and the reduction loops, or the
reason a nest keeps none. The expected trips follow from the sizes and options alone.
Private elements are decided on the AST before printing, with their reason too."""

from __future__ import annotations

import islpy as isl
import numpy as np

import tc_graph as tg
from tc_graph import compiler, ir
from tc_graph.options import MappingOptions
from tc_graph.poly.gpu import gpu_schedule, map_gpu
from tc_graph.poly.marks import NoPrivateTile, PrivateTile, ThreadLoop, in_tree
from tc_graph.poly.private import HeldElement, held_element
from tc_graph.poly.promotion import ast_nodes
from tc_graph.poly.scop import build_scop
from tests.regen_golden import kernels

TMM = "def tmm(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,kk) * B(n,kk) }"


def decisions(
    source: str, shapes: list[tuple[int, ...]], options: MappingOptions
) -> list[PrivateTile | NoPrivateTile]:
    """The private-tile decisions of the mapped tree, top down."""
    fn = tg.define(source)[source.split()[1].split("(")[0]]
    args = [np.zeros(s, np.float32) for s in shapes]
    bound = compiler.bind(fn, args)
    shapes_ = {**{n: a.shape for n, a in bound.arrays.items()}, **bound.shapes}
    scop = build_scop(bound.program, bound.sizes, shapes_, contractions=False)
    mapping = map_gpu(gpu_schedule(scop, options), scop, options)
    return [m for m in in_tree(mapping.schedule) if isinstance(m, PrivateTile | NoPrivateTile)]


def test_a_block_smaller_than_its_tile_keeps_a_private_tile() -> None:
    """tmm, 16 x 16 tiles, 4 x 4 threads: 4 x 4 outputs per thread across the kk loop.
    M = 70 fills every tile's 16 rows of c2; N = 10 leaves 10 columns of c3 (3 per thread)."""
    init, update = decisions(TMM, [(70, 30), (10, 30)], MappingOptions(tile=(16, 16), block=(4, 4)))
    assert init == NoPrivateTile("no reduction loop below the thread loops")
    assert update == PrivateTile(
        "S0",
        (ThreadLoop(2, 1, 4, 0, 1, 16), ThreadLoop(3, 0, 4, 0, 1, 10)),
        reductions=(4,),
    )
    assert [lp.per_thread for lp in update.loops] == [4, 3]
    assert update.size == 12


def test_private_depth_moves_the_outer_reduction_loops_out() -> None:
    """A 2-D reduction under 2 outputs per thread (8-row tiles, 4 threads): at private
    depth 3 the kh loop (c2) encloses the tile, the innermost one (kw, c3) stays inside."""
    (_, update) = decisions(
        "def conv(float(H,KH) I, float(KH,KW) F) -> (O) { O(h) +=! I(h,kh) * F(kh,kw) }",
        [(12, 5), (5, 3)],
        MappingOptions(tile=(8,), block=(4,), private_depth=3),
    )
    assert isinstance(update, PrivateTile)
    assert update.loops == (ThreadLoop(1, 0, 4, 0, 1, 8),)
    assert update.reductions == (2, 3)
    assert update.outside == (2,)


def test_a_nest_that_does_not_apply_records_why() -> None:
    """64 x 64 tiles on 4 x 4 threads would be 256 registers per thread; one thread per
    tile row leaves one output per thread; without private memory nothing is decided."""
    big = decisions(TMM, [(64, 8), (64, 8)], MappingOptions(tile=(64, 64), block=(4, 4)))
    assert big[-1] == NoPrivateTile("256 outputs per thread (a private tile holds 2 to 32)")
    one = decisions(TMM, [(64, 8), (64, 8)], MappingOptions(tile=(4, 8), block=(8, 4)))
    assert one[-1] == NoPrivateTile("1 outputs per thread (a private tile holds 2 to 32)")
    off = MappingOptions(tile=(16, 16), block=(4, 4), use_private_memory=False)
    assert decisions(TMM, [(64, 8), (64, 8)], off) == []


def held(source: str, name: str, shapes: dict[str, tuple[int, ...]]) -> list[HeldElement | str]:
    """The private-element decision of every block of the CUDA AST stage (default options),
    top down."""
    fn = tg.define(source)[name]
    bound = compiler.bind(fn, [np.zeros(shapes[n], np.float32) for n in fn.checked.inputs])
    options = compiler.default_options(bound.program, "cuda")
    scop = compiler.scop(compiler.prepare(bound), "cuda", options)
    tree = compiler.mapped(scop, compiler.schedule(scop, "cuda", options), "cuda", options)
    ast = compiler.ast(scop, tree, options)
    assert ast is not None
    blocks = [n for n in ast_nodes(ast) if n.get_type() == isl.ast_node_type.block]
    return [held_element(scop, n) for n in blocks]


def test_a_layers_bias_sum_and_relu_keep_their_element_in_a_register() -> None:
    """MLP3: per layer, bias, sum and relu write one element, which the relu reads: each
    such block holds it (three writes and a read, all of that element); every other
    block says why not."""
    (mlp3,) = [k for k in kernels() if k.name == "MLP3"]
    decisions = held(mlp3.source, mlp3.name, dict(mlp3.shapes))
    kept = [d for d in decisions if isinstance(d, HeldElement)]
    assert [(d.tensor, d.statements) for d in kept] == [("O2", 3), ("O3", 3), ("O4", 3)]
    for d, column in zip(kept, "opq", strict=True):
        assert len(d.refs) == 4
        element = (ir.Index("b"), ir.Index(column))
        assert all((r.tensor, r.subscripts) == (d.tensor, element) for _, r in d.refs)
    assert all(isinstance(d, str) and d for d in decisions if not isinstance(d, HeldElement))
