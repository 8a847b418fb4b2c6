"""The TC paper kernels for scripts/bench.py: TC source, seeded inputs, an ONNX model of the
same computation for onnxruntime and a straightforward NumPy version, plus the setup of the
three contenders (compile, compile latency, correctness check).

Imported by bench.py only after it has set the thread environment, because NumPy's BLAS
and OpenMP read it when they are loaded.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

import tc_graph as tg
from tc_graph.graph.bench_models import make_model as _model
from tc_graph.graph.bench_models import normal as _normal
from tc_graph.graph.bench_models import weight as _weight
from tc_graph.graph.optimize import SPIN_US

RTOL = ATOL = 1e-3  # every output here is float32
VERSIONS = f"onnxruntime {ort.__version__}, NumPy {np.__version__}"


@dataclass
class Case:
    """One kernel: the TC def and its arguments, the ONNX model and its feeds, NumPy."""

    name: str
    source: str
    args: tuple[np.ndarray, ...]
    numpy_fn: Callable[..., tuple[np.ndarray, ...]]
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]


@dataclass
class Prepared:
    """Zero-argument calls of the three contenders, checked, and the compile latency."""

    calls: dict[str, Callable[[], object]]
    compile_cold_s: float | None
    compile_warm_ms: float | None
    note: str | None


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0))


# Weights packed input-major (in, out), as tc_graph.optimize packs a constant Gemm weight
# and as an ONNX MatMul stores it: the output row is contiguous, so the register tiles are
# outer products. onnxruntime gets the same arrays (Gemm without transB).
MLP3_TC = """
def MLP3(float(B,N) I, float(N,O) W2, float(O) B2, float(O,P) W3, float(P) B3,
         float(P,Q) W4, float(Q) B4) -> (O2, O3, O4) {
  O2(b,o) = B2(o)
  O2(b,o) += I(b,n) * W2(n,o)
  O2(b,o) = fmax(O2(b,o), 0)
  O3(b,p) = B3(p)
  O3(b,p) += O2(b,o) * W3(o,p)
  O3(b,p) = fmax(O3(b,p), 0)
  O4(b,q) = B4(q)
  O4(b,q) += O3(b,p) * W4(p,q)
  O4(b,q) = fmax(O4(b,q), 0)
}
"""


def _np_mlp3(
    i: np.ndarray,
    w2: np.ndarray,
    b2: np.ndarray,
    w3: np.ndarray,
    b3: np.ndarray,
    w4: np.ndarray,
    b4: np.ndarray,
) -> tuple[np.ndarray, ...]:
    o2 = _relu(i @ w2 + b2)
    o3 = _relu(o2 @ w3 + b3)
    return o2, o3, _relu(o3 @ w4 + b4)


def _mlp3(small: bool) -> Case:
    b, n, o, p, q = (16, 16, 8, 4, 2) if small else (128, 128, 64, 32, 2)
    rng = np.random.default_rng(3)
    i = _normal(rng, (b, n))
    w2, b2 = _weight(rng, (n, o), n), _normal(rng, (o,), 0.1)
    w3, b3 = _weight(rng, (o, p), o), _normal(rng, (p,), 0.1)
    w4, b4 = _weight(rng, (p, q), p), _normal(rng, (q,), 0.1)
    # Each layer is Gemm+Relu (onnxruntime fuses them); every Relu is an output, as in the TC.
    nodes = []
    for k, (x, w, bias) in enumerate([("I", "W2", "B2"), ("O2", "W3", "B3"), ("O3", "W4", "B4")]):
        nodes.append(helper.make_node("Gemm", [x, w, bias], [f"G{k}"]))
        nodes.append(helper.make_node("Relu", [f"G{k}"], [f"O{k + 2}"]))
    weights = {"W2": w2, "B2": b2, "W3": w3, "B3": b3, "W4": w4, "B4": b4}
    model = _model(nodes, {"I": i}, weights, {"O2": (b, o), "O3": (b, p), "O4": (b, q)})
    return Case("MLP3", MLP3_TC, (i, w2, b2, w3, b3, w4, b4), _np_mlp3, model, {"I": i})


# Weights packed input-major, as for MLP3 (optimize packs a constant Gemm weight the same
# way; onnxruntime gets the same arrays through Gemm without transB).
MLP1_TC = """
def MLP1(float(B,M) I, float(M,N) W1, float(N) B1) -> (O1) {
  O1(b,n) = B1(n)
  O1(b,n) += I(b,m) * W1(m,n)
  O1(b,n) = fmax(O1(b,n), 0)
}
"""


def _np_mlp1(i: np.ndarray, w1: np.ndarray, b1: np.ndarray) -> tuple[np.ndarray, ...]:
    return (_relu(i @ w1 + b1),)


def _mlp1(small: bool) -> Case:
    b, m, n = (16, 250, 16) if small else (128, 2000, 128)
    rng = np.random.default_rng(1)
    i, w1, b1 = _normal(rng, (b, m)), _weight(rng, (m, n), m), _normal(rng, (n,), 0.1)
    nodes = [
        helper.make_node("Gemm", ["I", "W1", "B1"], ["G"]),
        helper.make_node("Relu", ["G"], ["O1"]),
    ]
    model = _model(nodes, {"I": i}, {"W1": w1, "B1": b1}, {"O1": (b, n)})
    return Case("MLP1", MLP1_TC, (i, w1, b1), _np_mlp1, model, {"I": i})


def _np_matmul_t(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    return (a @ b.T,)


def _matmul_t(name: str, source: str, shape: tuple[int, int, int], seed: int) -> Case:
    """`O = A·Bᵀ` with A (M×K) the input and B (N×K) the weight: C3 and tmm."""
    m, k, n = shape
    rng = np.random.default_rng(seed)
    a, b = _normal(rng, (m, k)), _weight(rng, (n, k), k)
    model = _model(
        [helper.make_node("Gemm", ["A", "B"], ["O"], transB=1)], {"A": a}, {"B": b}, {"O": (m, n)}
    )
    return Case(name, source, (a, b), _np_matmul_t, model, {"A": a})


C3_TC = """
def C3(float(B,WX) I, float(WY,WX) W) -> (O) {
  O(b,wy) +=! I(b,wxx) * W(wy,wxx)
}
"""


def _c3(small: bool) -> Case:
    return _matmul_t("C3", C3_TC, (16, 125, 128) if small else (128, 1000, 1024), 4)


TMM_TC = """
def tmm(float(M,K) A, float(N,K) B) -> (C) {
  C(m,n) +=! A(m,kk) * B(n,kk)
}
"""


def _tmm(small: bool) -> Case:
    return _matmul_t("tmm", TMM_TC, (16, 128, 128) if small else (128, 1024, 1024), 7)


LUT2_TC = """
def 2LUT(float(E1,D) LUT1, int(B,L1) I1, float(E2,D) LUT2, int(B,L2) I2) -> (O1, O2) {
  O1(i,j) +=! LUT1(I1(i,k),j)
  O2(i,j) +=! LUT2(I2(i,k),j)
}
"""


def _np_2lut(
    lut1: np.ndarray, i1: np.ndarray, lut2: np.ndarray, i2: np.ndarray
) -> tuple[np.ndarray, ...]:
    return lut1[i1].sum(axis=1), lut2[i2].sum(axis=1)


def _2lut(small: bool) -> Case:
    b, length, d, e = (16, 6, 8, 125_000) if small else (128, 50, 64, 1_000_000)
    rng = np.random.default_rng(2)
    lut1, lut2 = _normal(rng, (e, d)), _normal(rng, (e, d))
    i1 = rng.integers(0, e, (b, length), dtype=np.int32)
    i2 = rng.integers(0, e, (b, length), dtype=np.int32)
    nodes = [helper.make_node("Gather", [f"LUT{t}", f"I{t}"], [f"G{t}"], axis=0) for t in (1, 2)]
    nodes += [
        helper.make_node("ReduceSum", [f"G{t}", "axis1"], [f"O{t}"], keepdims=0) for t in (1, 2)
    ]
    feeds = {"I1": i1.astype(np.int64), "I2": i2.astype(np.int64)}
    tables = {"LUT1": lut1, "LUT2": lut2, "axis1": np.array([1], dtype=np.int64)}
    model = _model(nodes, feeds, tables, {"O1": (b, d), "O2": (b, d)})
    return Case("2LUT", LUT2_TC, (lut1, i1, lut2, i2), _np_2lut, model, feeds)


TBMM_TC = """
def tbmm(float(B,N,M) X, float(B,K,M) Y) -> (Z) {
  Z(b,n,k) +=! X(b,n,m) * Y(b,k,m)
}
"""


def _np_tbmm(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    return (x @ y.transpose(0, 2, 1),)


def _tbmm(small: bool) -> Case:
    b, n, m = (62, 3, 9) if small else (500, 26, 72)
    rng = np.random.default_rng(5)
    x, y = _normal(rng, (b, n, m)), _normal(rng, (b, n, m))
    nodes = [
        helper.make_node("Transpose", ["Y"], ["YT"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["X", "YT"], ["Z"]),
    ]
    model = _model(nodes, {"X": x, "Y": y}, {}, {"Z": (b, n, n)})
    return Case("tbmm", TBMM_TC, (x, y), _np_tbmm, model, {"X": x, "Y": y})


GCONV_TC = """
def gconv(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1) -> (O) {
  O(n,g,f,h,w) +=! I(n,g,c,h+kh,w+kw) * W1(g,f,c,kh,kw)
}
"""


def _np_gconv(i: np.ndarray, w1: np.ndarray) -> tuple[np.ndarray, ...]:
    """im2col per group, one batched matmul, back to (N, G, F, OH, OW)."""
    n, g, c, _, _ = i.shape
    _, f, _, kh, kw = w1.shape
    windows = np.lib.stride_tricks.sliding_window_view(i, (kh, kw), axis=(3, 4))
    oh, ow = windows.shape[3:5]
    cols = windows.transpose(1, 0, 3, 4, 2, 5, 6).reshape(g, n * oh * ow, c * kh * kw)
    out = cols @ w1.reshape(g, f, c * kh * kw).transpose(0, 2, 1)
    return (np.ascontiguousarray(out.reshape(g, n, oh, ow, f).transpose(1, 0, 4, 2, 3)),)


def _gconv(small: bool) -> Case:
    n, g, c, hw, k = (4, 4, 2, 6, 3) if small else (32, 32, 16, 14, 3)
    f, out = c, hw - k + 1
    rng = np.random.default_rng(6)
    x = _normal(rng, (n, g * c, hw, hw))
    w = _weight(rng, (g * f, c, k, k), c * k * k)
    conv = helper.make_node("Conv", ["I", "W"], ["O"], group=g, kernel_shape=[k, k])
    model = _model([conv], {"I": x}, {"W": w}, {"O": (n, g * f, out, out)})
    args = (x.reshape(n, g, c, hw, hw), w.reshape(g, f, c, k, k))
    return Case("gconv", GCONV_TC, args, _np_gconv, model, {"I": x})


BUILDERS: dict[str, Callable[[bool], Case]] = {
    "MLP3": _mlp3,
    "MLP1": _mlp1,
    "C3": _c3,
    "2LUT": _2lut,
    "tbmm": _tbmm,
    "gconv": _gconv,
    "tmm": _tmm,
}


def _as_tuple(result: object) -> tuple[np.ndarray, ...]:
    return result if isinstance(result, tuple) else (np.asarray(result),)


def _check(
    name: str,
    who: str,
    got: tuple[np.ndarray, ...],
    want: tuple[np.ndarray, ...],
    reference: str = "NumPy",
) -> None:
    """Raise SystemExit, naming kernel and output, unless `got` matches the reference's `want`."""
    if len(got) != len(want):
        raise SystemExit(
            f"FAILED {name}: {who} returned {len(got)} outputs, {reference} {len(want)}"
        )
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.size != w.size:
            raise SystemExit(
                f"FAILED {name}: {who} output {k} has shape {g.shape}, {reference} {w.shape}"
            )
        g = g.reshape(w.shape)
        if not np.allclose(g, w, rtol=RTOL, atol=ATOL):
            err = float(np.max(np.abs(g.astype(np.float64) - w)))
            raise SystemExit(
                f"FAILED {name}: {who} output {k} differs from {reference} "
                f"(max abs error {err:.3g}, rtol={RTOL}, atol={ATOL})"
            )


@contextmanager
def _fresh_cache() -> Iterator[str]:
    """TC_GRAPH_CACHE pointing at a new empty directory, restored afterwards."""
    old = os.environ.get("TC_GRAPH_CACHE")
    with tempfile.TemporaryDirectory(prefix="tc_graph_bench_cache_") as path:
        os.environ["TC_GRAPH_CACHE"] = path
        try:
            yield path
        finally:
            if old is None:
                del os.environ["TC_GRAPH_CACHE"]
            else:
                os.environ["TC_GRAPH_CACHE"] = old


def _tc_graph_call(
    case: Case, target: str, cache: str
) -> tuple[Callable[[], object], float | None, float | None, str | None]:
    """The call to time (a compiled kernel where `fn.compile` exists), the cold compile
    in seconds and the warm one in milliseconds, and a note when they were not measured."""
    fn = tg.define(case.source)[case.name]
    uncompiled = partial(fn, *case.args, target=target)
    if not hasattr(fn, "compile"):
        return uncompiled, None, None, "fn.compile does not exist yet: compile latency not measured"
    try:
        start = time.perf_counter()
        kernel = fn.compile(*case.args, target=target)
        cold_s = time.perf_counter() - start
    except tg.TcError as e:
        if target != "reference":
            raise
        return uncompiled, None, None, f"fn.compile(target='reference') failed ({e}): not measured"
    note = None
    if not os.listdir(cache):
        note = "the cold compile left TC_GRAPH_CACHE empty: the warm one may not have used it"
    fresh = tg.define(case.source)[case.name]
    start = time.perf_counter()
    fresh.compile(*case.args, target=target)
    warm_ms = (time.perf_counter() - start) * 1e3
    return partial(kernel, *case.args), cold_s, warm_ms, note


def _session_options(threads: int) -> ort.SessionOptions:
    """onnxruntime at its best: every graph optimization, `threads` intra-op threads.
    Idle threads spin for at most a millisecond, so that the side timed next has the
    cores (as in optimize's race)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.spin_duration_us", str(SPIN_US))
    return so


def _ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    return ort.InferenceSession(
        model.SerializeToString(), _session_options(threads), providers=["CPUExecutionProvider"]
    )


@contextmanager
def prepared(
    name: str, small: bool, target: str, threads: int, parametric: bool = False
) -> Iterator[Prepared]:
    """Build kernel `name`, compile it for `target` in a fresh cache (timing cold and warm),
    check tc_graph and onnxruntime against NumPy, and yield the three calls; with
    `parametric`, a fourth: the kernel for every size (`fn.compile(..., parametric=True)`),
    checked too. The cache directory lives until the context exits."""
    case = BUILDERS[name](small)
    with _fresh_cache() as cache:
        tc_call, cold_s, warm_ms, note = _tc_graph_call(case, target, cache)
        want = case.numpy_fn(*case.args)
        _check(name, f"tc_graph (target {target})", _as_tuple(tc_call()), want)
        ort_call = partial(_ort_session(case.model, threads).run, None, case.feeds)
        _check(name, "onnxruntime", tuple(ort_call()), want)
        calls = {"tc_graph": tc_call, "ort": ort_call, "numpy": partial(case.numpy_fn, *case.args)}
        if parametric:
            fn = tg.define(case.source)[case.name]
            every = partial(fn.compile(*case.args, parametric=True), *case.args)
            _check(name, "tc_graph for every size", _as_tuple(every()), want)
            calls["parametric"] = every
        del case, want  # the ONNX model (512 MB for 2LUT) is not needed while timing
        yield Prepared(calls, cold_s, warm_ms, note)
