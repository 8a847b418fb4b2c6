"""The forms of a CPU kernel's loops as data (codegen/forms.py): decided from isl's AST
before any text, each refusal with its reason. Printing needs no C compiler."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler
from tc_graph.codegen import forms
from tc_graph.options import AVX512

ROW_SUM = "def f(float(M,K) A) -> (S) { S(m) +=! A(m,r) }"
GATHERED_SUM = "def f(float(M,K) A, int32(K) I) -> (S) { S(m) +=! A(m, I(r)) }"
MATMUL = "def f(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


def decided(
    source: str,
    shapes: Sequence[tuple[int, ...]],
    options: tg.MappingOptions | None,
    monkeypatch: pytest.MonkeyPatch,
    *,
    every_size: bool = False,
    entry: str = "f",
) -> list[forms.LoopForm | forms.NoForm]:
    """The form of every loop the kernel prints (tc_kernel, then its phases: a phase that
    tc_kernel runs through tc_phase is printed once), for an AVX-512 CPU."""
    fn = tg.define(source)[entry]
    args = [
        np.zeros(s, fn.checked.tensors[n].dtype)
        for n, s in zip(fn.checked.inputs, shapes, strict=True)
    ]
    bound = compiler.bind(fn, args)
    prepared = compiler.prepare(bound)
    options = options or compiler.default_options(bound.program, "cpu", AVX512)
    seen: list[forms.LoopForm | forms.NoForm] = []
    form = forms.Chooser.form

    def recorded(self: forms.Chooser, *a: object, **kw: bool) -> forms.LoopForm | forms.NoForm:
        seen.append(form(self, *a, **kw))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(forms.Chooser, "form", recorded)
    if every_size:
        compiler._every_size_text(prepared, options, AVX512)
    else:
        compiler.source(prepared, "cpu", options, AVX512)
    return seen


def test_a_stride_1_reduction_accumulates_in_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    found = decided(ROW_SUM, [(64, 80)], None, monkeypatch)
    (form,) = [f for f in found if isinstance(f, forms.Reduction)]
    assert form.vector and form.st.source.tensor == "S"
    # The loop over the rows around it is the parallel one.
    assert forms.ParallelLoop in {type(f) for f in found}
    off = tg.MappingOptions(register_tile=0)
    again = decided(ROW_SUM, [(64, 80)], off, monkeypatch)
    assert forms.Reduction(form.st, form.env, vector=False) in again


def test_a_gathered_reduction_accumulates_in_a_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    found = decided(GATHERED_SUM, [(64, 80), (80,)], None, monkeypatch)
    reductions = [f for f in found if isinstance(f, forms.Reduction)]
    assert reductions and not any(f.vector for f in reductions)
    tensors = tg.define(GATHERED_SUM).f.checked.tensors
    assert forms.vector_refusal(tensors, reductions[0].st, "r") == (
        "its read of A is not stride-1 in r"
    )


@pytest.mark.parametrize("every_size", [False, True])
def test_a_matmuls_rows_share_a_register_tile(
    every_size: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows tiled by 8: the row loop's 8 iterations are one register tile's rows, each
    with 2 vectors of columns (16 of AVX-512's 32 registers hold accumulators), over the
    83 columns. In a kernel for every size the tile runs where the sizes give all 8."""
    options = tg.MappingOptions(tile=(8,), register_tile=4)
    found = decided(MATMUL, [(24, 37), (37, 83)], options, monkeypatch, every_size=every_size)
    rows = [f for f in found if isinstance(f, forms.RowTile)]
    assert rows
    tile = rows[0].tile
    assert (len(tile.nest.envs), tile.vectors, tile.columns) == (8, 2, (0, 83))
    assert tile.nest.reds == ("k",) and tile.nest.names == {"k": "_r0"}
    assert all((f.full is None) != every_size for f in rows)


LOOKUP = "def f(float(E,D) T, int32(B,L) I) -> (O) { O(b,d) +=! T(I(b,l),d) }"


@pytest.mark.parametrize("distance", [0, 32])
def test_a_tile_prefetches_the_rows_found_through_its_index(
    distance: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup's register tile: the table's rows, found through I as l moves, are the
    reads it prefetches, where a prefetch distance is set."""
    options = tg.MappingOptions(tile=(4,), register_tile=1, prefetch_distance=distance)
    found = decided(LOOKUP, [(5000, 64), (16, 50)], options, monkeypatch)
    nests = [f.tile.nest for f in found if isinstance(f, forms.RowTile)]
    assert nests
    for nest in nests:
        assert nest.reds == ("l",)
        assert [r.tensor for r in nest.prefetched] == (["T"] if distance else [])


ROW_MAX = """
def f(float(B,H,S) X) -> (O) {
  m(b,h) max=! X(b,h,s)
  O(b,h,s) = X(b,h,s) - m(b,h)
}
"""


@pytest.mark.parametrize("every_size", [False, True])
def test_a_kernel_for_every_size_folds_the_heads_into_the_batch(
    every_size: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch loop is the parallel one; in a kernel for every size the heads' loop,
    parallel too, runs as one loop with it (a batch of 1 still has work for every
    thread), in the phase, which tc_kernel runs too."""
    found = decided(ROW_MAX, [(8, 2, 77)], None, monkeypatch, every_size=every_size)
    parallel = [f for f in found if isinstance(f, forms.ParallelLoop)]
    assert len(parallel) == 1 and not any(f.simd for f in parallel)
    assert {len(f.loops) for f in parallel} == {2 if every_size else 1}


@pytest.mark.parametrize("every_size", [False, True])
def test_a_short_simd_loop_is_specialised_to_the_sample(
    every_size: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two columns at the sample: a kernel for every size also prints the simd loop for
    exactly two iterations; a kernel for these sizes has no other count to serve."""
    found = decided(MATMUL, [(64, 32), (32, 2)], None, monkeypatch, every_size=every_size)
    specialised = [f for f in found if isinstance(f, forms.SpecialisedLoop)]
    assert specialised == ([forms.SpecialisedLoop(2)] * 2 if every_size else [])


SOFTMAX = """
def f(float(B,S) X) -> (Y) {
  mx(b) max=! X(b,k)
  E(b,s) = exp(X(b,s) - mx(b))
  sm(b) +=! E(b,k)
  Y(b,s) = E(b,s) / sm(b)
}
"""


@pytest.mark.parametrize("every_size", [False, True])
def test_a_rows_exp_is_written_in_vectors(
    every_size: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of a softmax's row loops, the one computing exp is written in vectors (its lane is
    the row's stride-1 index); the division keeps gcc's own vector loop, and says why."""
    found = decided(SOFTMAX, [(8, 77)], None, monkeypatch, every_size=every_size)
    vectors = [f for f in found if isinstance(f, forms.VectorLoop)]
    assert vectors and {(f.st.source.tensor, f.lane) for f in vectors} == {("E", "s")}
    assert any(isinstance(f, forms.NoForm) and "no exp" in f.reason for f in found)


TMM = "def f(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }"


@pytest.mark.parametrize(
    ("rows", "depth", "outer"),
    [(4, 300, False), (16, 300, True), (16, 1024, False), (512, 300, True), (512, 1024, True)],
)
def test_a_contractions_kernel_is_decided_before_printing(
    rows: int, depth: int, outer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long dot product under a `contract` mark is one kernel: very few rows, or few
    and a reduction of 1024 steps or more, take the dot-product form (no blocking), the
    others the outer-product form, whose register block and panel packing are decided
    with it."""
    seen: list[forms.ContractionKernel] = []
    contraction = forms.Chooser.contraction

    def recorded(self: forms.Chooser, node: object) -> forms.ContractionKernel:
        seen.append(contraction(self, node))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(forms.Chooser, "contraction", recorded)
    fn = tg.define(TMM).f
    args = [np.zeros((rows, depth), np.float32), np.zeros((48, depth), np.float32)]
    bound = compiler.bind(fn, args)
    options = compiler.default_options(bound.program, "cpu", AVX512)
    compiler.source(compiler.prepare(bound), "cpu", options, AVX512)
    assert seen and all(k.st.source.tensor == "C" and k.outer == () for k in seen)
    assert all((k.blocking is not None) == outer for k in seen)
    assert all(k.ranges["k"] == (0, depth) for k in seen)
