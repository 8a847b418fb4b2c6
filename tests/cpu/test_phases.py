"""The phase entry point of compiled kernels (docs/onnx.md, what onnxruntime's thread pool
runs) against the reference evaluator: every accepted conformance program, run phase by
phase with each phase's iterations split into chunks executed in a shuffled order."""

from __future__ import annotations

import ctypes
import itertools
import math
from typing import Any

import numpy as np
import pytest

import tc_graph as tg
from tc_graph.lang.types import ONNX_TYPES
from tests.cpu.test_row_reductions import SOFTMAX
from tests.tolerances import assert_matches
from tests.unit import test_conformance as conf
from tests.unit import test_reference as ref

_FROM_ONNX = {code: np.dtype(name) for name, code in ONNX_TYPES.items()}


def _ints(lib: ctypes.CDLL, name: str, ctype: Any, count: int) -> list[int]:
    return list((ctype * max(count, 1)).in_dll(lib, name))[:count]


def run_phases(kernel: tg.Kernel, args: list[np.ndarray], seed: int) -> tuple[np.ndarray, ...]:
    """Run a kernel as the native library does, from its exported metadata only."""
    lib = ctypes.CDLL(str(kernel.library))
    assert ctypes.c_int32.in_dll(lib, "tc_abi_version").value == 1
    n_in = ctypes.c_int32.in_dll(lib, "tc_num_inputs").value
    n_out = ctypes.c_int32.in_dll(lib, "tc_num_outputs").value
    dtypes = _ints(lib, "tc_dtypes", ctypes.c_int32, n_in + n_out)
    ranks = _ints(lib, "tc_ranks", ctypes.c_int32, n_in + n_out)
    dims = _ints(lib, "tc_dims", ctypes.c_int64, sum(ranks))
    shapes, at = [], 0
    for r in ranks:
        shapes.append(tuple(dims[at : at + r]))
        at += r
    assert len(args) == n_in
    for a, dt, shape in zip(args, dtypes, shapes, strict=False):
        assert (a.dtype, a.shape) == (_FROM_ONNX[dt], shape)
    zero = _ints(lib, "tc_output_zero", ctypes.c_int32, n_out)
    outputs = [
        (np.zeros if z else np.empty)(shape, _FROM_ONNX[dt])
        for z, dt, shape in zip(zero, dtypes[n_in:], shapes[n_in:], strict=True)
    ]
    n_temps = ctypes.c_int32.in_dll(lib, "tc_num_temps").value
    temp_bytes = _ints(lib, "tc_temp_bytes", ctypes.c_int64, n_temps)
    temp_zero = _ints(lib, "tc_temp_zero", ctypes.c_int32, n_temps)
    # Garbage, not zeros, where the kernel does not ask for zeros.
    temps = [
        np.zeros(b, np.uint8) if z else np.full(b, 0xA5, np.uint8)
        for b, z in zip(temp_bytes, temp_zero, strict=True)
    ]
    arrays = [np.ascontiguousarray(a) for a in args] + outputs
    ptrs = (ctypes.c_void_p * len(arrays))(*(a.ctypes.data for a in arrays))
    tptrs = (ctypes.c_void_p * max(1, n_temps))(*(t.ctypes.data for t in temps))
    phase = lib.tc_phase
    phase.restype = ctypes.c_int
    phase.argtypes = [
        ctypes.c_int32,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_int64),
    ]
    rng = np.random.default_rng(seed)
    err = ctypes.c_int64(0)
    trips = _ints(
        lib, "tc_phase_trips", ctypes.c_int64, ctypes.c_int32.in_dll(lib, "tc_num_phases").value
    )
    for p, n in enumerate(trips):
        cuts = sorted({0, n, *rng.integers(0, n + 1, size=3).tolist()})
        chunks = list(itertools.pairwise(cuts))
        rng.shuffle(chunks)
        for lo, hi in chunks:
            assert phase(p, ptrs, tptrs, lo, hi, ctypes.byref(err)) == 0
    return tuple(outputs)


def _as_tuple(x: Any) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("case", conf.SHAPE_CASES, ids=[c["name"] for c in conf.SHAPE_CASES])
def test_phases_match_reference(case: dict[str, Any]) -> None:
    fn = conf.define(case)[conf.entry_of(case)]
    args = conf.build_args(case)
    if any(not isinstance(a, np.ndarray) or a.ndim == 0 for a in args):
        pytest.skip("scalar arguments are not kernel inputs inside onnxruntime")
    want = _as_tuple(fn(*args, target="reference"))
    got = run_phases(fn.compile(*args), list(args), seed=len(case["name"]))
    for k, (g, e) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, e, f"{case['name']} output {k}")


@pytest.mark.parametrize(
    "options",
    [tg.MappingOptions(), tg.MappingOptions(tile=(4,)), tg.MappingOptions(fusion="min")],
    ids=str,
)
@pytest.mark.parametrize("name", ["MLP3_temporaries", "2LUT", "softmax", "matmul"])
def test_phases_under_options(name: str, options: tg.MappingOptions) -> None:
    c = next(c for c in ref.CASES if c.name == name)
    args = c.args()
    expected = c.oracle(*args)
    call_args, _ = ref._split(c, args, len(expected))
    fn = tg.define(c.source)[c.entry]
    got = run_phases(fn.compile(*call_args, options=options), list(call_args), seed=1)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert_matches(g, e, f"{name} output {k}")


GEMM_SOFTMAX = """
def reshape(float32(D0, D1, D2, D3) X) -> (Y) {
  Y(i0, i1) = X(0, i1, 0, 0) where i0 in 0:1, i1 in 0:8
}
def gemm(float32(M, K) A, float32(N, K) B, float32(N) C) -> (float32 Y) {
  Y(m, n) = C(n)
  Y(m, n) += A(m, k) * B(n, k)
}
def softmax(float32(D0, D1) X) -> (float32 Y) {
  mx(i0) max=! X(i0, k1)
  E(i0, i1) = exp(X(i0, i1) - mx(i0))
  s(i0) +=! E(i0, k1)
  Y(i0, i1) = E(i0, i1) / s(i0)
}
def fused(float32(1, 8, 1, 1) x, float32(5, 8) w, float32(5) b) -> (float32(1, 5) y) {
  xr = reshape(x)
  g = gemm(xr, w, b)
  y = softmax(g)
}
"""


def test_code_beside_a_phases_parallel_loop_runs_once() -> None:
    """A phase whose parallel loop (Y = C) is followed by a serial nest (the reduction, the
    max) is not chunked: each chunk ran the serial nest again, so onnxruntime summed the
    Gemm several times (light_inception_v1's Reshape+Gemm+Softmax, by up to 0.1)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    w = rng.standard_normal((5, 8)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    fn = tg.define(GEMM_SOFTMAX).fused
    g = x.reshape(1, 8).astype(np.float64) @ w.T + b
    e = np.exp(g - g.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    for seed in range(4):
        (got,) = run_phases(fn.compile(x, w, b), [x, w, b], seed=seed)
        assert_matches(got, want, f"gemm + softmax by phases, seed {seed}")


def test_a_product_of_one_row_runs_its_columns_in_parallel() -> None:
    """(1, 1, 256) by a (1024, 256) weight read transposed, a rows node's kernel for one
    row: the loops of one iteration print none, so its zeroing and its sums are a block
    inside the kernel's sequence; each is a phase of its own, and the sums' columns are
    a parallel loop (as one serial phase, the product ran on one thread: 0.6x
    onnxruntime)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1, 1, 256)).astype(np.float32)
    w = rng.standard_normal((1024, 256)).astype(np.float32)
    source = """
    def mm(float(B, M, K) A, float(N, K) W) -> (Y, Z) {
      Y(b, m, n) +=! A(b, m, k) * W(n, k)
      Z(b, m, n) = Y(b, m, n) * 2.0
    }"""
    kernel = tg.define(source).mm.compile(a, w)
    lib = ctypes.CDLL(str(kernel.library))
    count = ctypes.c_int32.in_dll(lib, "tc_num_phases").value
    assert 1024 in _ints(lib, "tc_phase_trips", ctypes.c_int64, count)
    got = run_phases(kernel, [a, w], seed=3)
    want = a.astype(np.float64) @ w.T
    assert_matches(got[0], want.astype(np.float32), "one row by phases")
    assert_matches(got[1], (2 * want).astype(np.float32), "its double")


def run_every_size_phases(
    kernel: tg.ParametricKernel, args: list[np.ndarray], seed: int
) -> tuple[tuple[np.ndarray, ...], list[int], list[int]]:
    """Run a kernel for every size as the native library does (ABI 2: tc_shapes, then
    each phase in shuffled chunks of its iterations); its outputs, each phase's
    iterations and the fewest it says are worth the pool."""
    lib = ctypes.CDLL(str(kernel.library))
    assert ctypes.c_int32.in_dll(lib, "tc_abi_version").value == 2
    n_out = ctypes.c_int32.in_dll(lib, "tc_num_outputs").value
    n_temps = ctypes.c_int32.in_dll(lib, "tc_num_temps").value
    n_phases = ctypes.c_int32.in_dll(lib, "tc_num_phases").value
    n_sizes = ctypes.c_int32.in_dll(lib, "tc_num_sizes").value
    dtypes = _ints(lib, "tc_dtypes", ctypes.c_int32, len(args) + n_out)
    ranks = _ints(lib, "tc_ranks", ctypes.c_int32, len(args) + n_out)
    in_dims = (ctypes.c_int64 * max(1, sum(a.ndim for a in args)))(
        *[d for a in args for d in a.shape]
    )
    sizes = (ctypes.c_int64 * max(1, n_sizes))()
    out_dims = (ctypes.c_int64 * max(1, sum(ranks[len(args) :])))()
    temp_bytes = (ctypes.c_int64 * max(1, n_temps))()
    trips = (ctypes.c_int64 * max(1, n_phases))()
    why = ctypes.create_string_buffer(512)
    assert lib.tc_shapes(in_dims, sizes, out_dims, temp_bytes, trips, why, 512) == 0, why.value
    outputs, at = [], 0
    for dt, rank in zip(dtypes[len(args) :], ranks[len(args) :], strict=True):
        outputs.append(np.zeros(tuple(out_dims[at : at + rank]), _FROM_ONNX[dt]))
        at += rank
    temps = [np.full(max(1, temp_bytes[t]), 0xA5, np.uint8) for t in range(n_temps)]
    for t, zero in enumerate(_ints(lib, "tc_temp_zero", ctypes.c_int32, n_temps)):
        temps[t][:] = 0 if zero else 0xA5
    arrays = [np.ascontiguousarray(a) for a in args] + outputs
    ptrs = (ctypes.c_void_p * len(arrays))(*(a.ctypes.data for a in arrays))
    tptrs = (ctypes.c_void_p * max(1, n_temps))(*(t.ctypes.data for t in temps))
    err = ctypes.c_int64(0)
    rng = np.random.default_rng(seed)
    for p in range(n_phases):
        cuts = sorted({0, trips[p], *rng.integers(0, trips[p] + 1, size=3).tolist()})
        chunks = list(itertools.pairwise(cuts))
        rng.shuffle(chunks)
        for lo, hi in chunks:
            assert lib.tc_phase(p, ptrs, tptrs, sizes, ctypes.c_int64(lo), ctypes.c_int64(hi),
                                ctypes.byref(err)) == 0  # fmt: skip
    least = _ints(lib, "tc_phase_least", ctypes.c_int64, n_phases)
    return tuple(outputs), list(trips)[:n_phases], least


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("shape", [(1, 2, 77, 77), (3, 2, 5, 5), (1, 1, 1, 1), (2, 3, 17, 17)])
def test_a_kernel_for_every_size_folds_its_rows_into_the_batchs_parallel_loop(
    shape: tuple[int, ...],
) -> None:
    """Choices made at batch 8 put the parallel loop on the batch: at batch 1 its phase
    had one iteration, and onnxruntime ran a BERT-style layer's softmax on one thread.
    The loops inside it that are parallel too fold into it (batch x heads x rows
    iterations), cut anywhere into chunks."""
    rng = np.random.default_rng(4)
    fn = tg.define(SOFTMAX).softmax
    kernel = fn.compile(rng.standard_normal((8, 2, 32, 32)).astype(np.float32), parametric=True)
    x = rng.standard_normal(shape).astype(np.float32)
    (got,), trips, least = run_every_size_phases(kernel, [x], seed=sum(shape))
    assert_matches(got, _softmax(x), f"softmax {shape} by phases")
    assert math.prod(shape[:3]) in trips
    assert all(n >= 1 for n in least)
    assert_matches(kernel(x), _softmax(x), f"softmax {shape} in OpenMP")


ROWS_OF_32 = """
def center(float(B, S, 32) X) -> (Y) {
  m(b, s) +=! X(b, s, k)
  Y(b, s, i) = X(b, s, i) - m(b, s) / 32.0
}
"""


def test_only_a_phase_whose_iterations_keep_their_work_may_stay_off_the_pool() -> None:
    """tc_phase_least counts iterations at the sample's work per iteration, which holds
    only where an iteration's work is the same at every size: rows of 32 columns keep
    theirs (a phase of a few rows stays on the calling thread), a softmax's rows grow
    with their columns (decided at 32 columns, rows of 2048 ran on one thread)."""
    rng = np.random.default_rng(6)
    center = tg.define(ROWS_OF_32).center
    kernel = center.compile(rng.standard_normal((8, 128, 32)).astype(np.float32), parametric=True)
    x = rng.standard_normal((1, 5, 32)).astype(np.float32)
    got, trips, least = run_every_size_phases(kernel, [x], seed=1)
    assert_matches(got[0], (x - x.astype(np.float64).mean(-1, keepdims=True)).astype(np.float32),
                   "rows of 32 by phases")  # fmt: skip
    assert 5 in trips and least[trips.index(5)] > 5
    fn = tg.define(SOFTMAX).softmax
    kernel = fn.compile(rng.standard_normal((8, 2, 32, 32)).astype(np.float32), parametric=True)
    x = rng.standard_normal((1, 1, 8, 2048)).astype(np.float32)
    (got,), trips, least = run_every_size_phases(kernel, [x], seed=2)
    assert_matches(got, _softmax(x), "long softmax rows by phases")
    assert 8 in trips and least[trips.index(8)] == 1
