"""Tuning on the OpenCL target: the GPU search space (blocks, grids, promotion switches)
yields kernels that compute the reference's values."""

from __future__ import annotations

import concurrent.futures as cf
from pathlib import Path

import numpy as np
import pytest

import tc_graph as tg
from tc_graph.tune.space import search_space
from tc_graph.tune.tuner import tune

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


def test_tuning_the_opencl_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((24, 40)).astype(np.float32)
    b = rng.standard_normal((40, 20)).astype(np.float32)
    fn = tg.define(MM).mm
    with cf.ThreadPoolExecutor(1) as ex:
        result = tune(
            fn, a, b, target="opencl", generations=2, population=6, seed=1, executor=ex,
            progress=False,
        )  # fmt: skip
    met = {c for h in result.history for c in h.candidates}
    # The candidates vary the GPU knobs, not the CPU ones.
    assert len({c.block for c in met}) > 1
    assert {c.vector_width for c in met} == {tg.MappingOptions().vector_width}
    assert result.best_s <= result.default_s
    want = a.astype(np.float64) @ b
    got = fn(a, b, target="opencl", options=result.best)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # options=None on this target now takes the tuned options.
    assert fn.compile(a, b, target="opencl").options == result.best


FUZZ = {
    "mm": (MM, lambda a, b: a.astype(np.float64) @ b, [(24, 40), (40, 20)]),
    "tmm_relu": (
        "def tmm_relu(float(M,K) A, float(N,K) B) -> (C) {\n"
        "  C(m,n) +=! A(m,k) * B(n,k)\n  C(m,n) = fmax(C(m,n), 0)\n}",
        lambda a, b: np.maximum(a.astype(np.float64) @ b.T, 0),
        [(19, 33), (13, 33)],
    ),
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n == "tmm_relu" else n for n in sorted(FUZZ)],
)
def test_random_points_of_the_gpu_space_compute_the_right_values(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the tuner may try on a GPU target: blocks, grids, promotion and tiles drawn at
    random (the guard discards a wrong candidate, but none should be wrong)."""
    import random

    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    source, oracle, shapes = FUZZ[name]
    rng = np.random.default_rng(len(name))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fn = tg.define(source)[name]
    sizes = sorted({d for s in shapes for d in s})
    space = search_space(sizes, 3, [tg.MappingOptions()], target="opencl")
    pick = random.Random(7)
    for _ in range(12):
        options = space.decode(space.random_genome(pick))
        got = fn(*args, target="opencl", options=options)
        np.testing.assert_allclose(got, oracle(*args), rtol=1e-4, atol=1e-4, err_msg=str(options))
