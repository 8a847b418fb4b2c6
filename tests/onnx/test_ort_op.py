"""The native custom-op library (tc_graph/runtime/ort_op.c) inside a real onnxruntime.

One-node TcKernel models run compiled kernels: hand-written ones that pin the ABI of
docs/onnx.md independently of the code generator, and generated ones compared with NumPy.
Every failure the library can see (missing kernel, stale metadata, wrong input, index out
of range) must surface as a Python exception, never a crash, and leave the session usable.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import tc_graph as tg
from tc_graph.graph.rewrite import kernel_key
from tc_graph.onnx_domain import TC_DOMAIN
from tc_graph.runtime import cc
from tc_graph.runtime import ort as tort

# ----------------------------------------------------------------------------- helpers


def _tensor_type(dtype: np.dtype) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def tc_model(
    *,
    key: str | None = None,
    entry: str,
    inputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
    outputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
    source: str = "",
    options: str = "{}",
    dynamic: bool = False,
    attributes: dict[str, object] | None = None,
) -> bytes:
    """A one-node TcKernel model with the attributes docs/onnx.md lists.

    ``dynamic`` leaves the graph inputs' shapes unknown, so onnxruntime passes any shape
    through and the library's own checks are what rejects a wrong one. The key is the one
    the attributes give unless ``key`` says otherwise."""
    attrs: dict[str, object] = {
        "source": source,
        "entry": entry,
        "options": options,
        "input_dtypes": [_tensor_type(d) for _, d, _ in inputs],
        "output_dtypes": [_tensor_type(d) for _, d, _ in outputs],
        "input_ranks": [len(s) for _, _, s in inputs],
        "output_ranks": [len(s) for _, _, s in outputs],
        "input_shapes": [x for _, _, s in inputs for x in s],
        "output_shapes": [x for _, _, s in outputs for x in s],
    }
    attrs.update(attributes or {})
    attrs["kernel_key"] = kernel_key(attrs) if key is None else key
    node = helper.make_node(
        "TcKernel",
        [n for n, _, _ in inputs],
        [n for n, _, _ in outputs],
        domain=TC_DOMAIN,
        **attrs,
    )

    def value(
        name: str, dtype: np.dtype, shape: tuple[int, ...], unknown: bool
    ) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, _tensor_type(dtype), None if unknown else shape)

    graph = helper.make_graph(
        [node],
        f"tc_{entry}",
        [value(*i, dynamic) for i in inputs],
        [value(*o, False) for o in outputs],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TC_DOMAIN, 1)],
    )
    model.ir_version = 8  # onnxruntime 1.31.1 rejects onnx 1.23's default
    return model.SerializeToString()


def session(model: bytes, threads: int = 0) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    tort.register(so)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def kernel_model(
    kernel: tg.Kernel, source: str, entry: str, args: Sequence[np.ndarray], **kw: object
) -> tuple[bytes, list[np.ndarray]]:
    """The TcKernel model of a compiled kernel, and its outputs from the Python API."""
    got = kernel(*args)
    outs = list(got) if isinstance(got, tuple) else [got]
    program = kernel.program
    model = tc_model(
        entry=entry,
        source=source,
        options=kernel.options.to_json(),
        inputs=[(n, a.dtype, a.shape) for n, a in zip(program.inputs, args, strict=True)],
        outputs=[(n, o.dtype, o.shape) for n, o in zip(program.outputs, outs, strict=True)],
        **kw,  # type: ignore[arg-type]
    )
    key = next(
        a.s.decode() for a in onnx.load_from_string(model).graph.node[0].attribute
        if a.name == "kernel_key"
    )  # fmt: skip
    cc.adopt(key, kernel.library, stamp="test")  # filed under the node's key, as prepare does
    return model, outs


def phases(kernel: tg.Kernel) -> list[int]:
    """The trip count of every phase a compiled kernel exports."""
    lib = ctypes.CDLL(str(kernel.library))
    n = ctypes.c_int32.in_dll(lib, "tc_num_phases").value
    return list((ctypes.c_int64 * n).in_dll(lib, "tc_phase_trips"))


# ------------------------------------------------------------------- hand-written kernels

# Y = relu(X + B) through a temporary, S = column sums of Y (S zero-filled by the library):
# phase 0 (N trips) T = X + B, phase 1 (N trips) Y = relu(T), phase 2 (1 trip) S += Y.
ADD_RELU_C = r"""
#include <stdint.h>
#define N 37
#define M 8
const int32_t tc_abi_version = 1;
const int32_t tc_num_inputs = 2, tc_num_outputs = 2;
const int32_t tc_dtypes[] = {1, 1, 1, 1};
const int32_t tc_ranks[] = {2, 1, 2, 1};
const int64_t tc_dims[] = {N, M, M, N, M, M};
const int32_t tc_output_zero[] = {0, 1};
const int32_t tc_num_temps = 1;
const int64_t tc_temp_bytes[] = {N * M * 4};
const int32_t tc_temp_zero[] = {0};
const int32_t tc_num_phases = 3;
const int64_t tc_phase_trips[] = {N, N, 1};
const char *const tc_check_text[] = {0};
int tc_phase(int32_t phase, void *const *args, void *const *temps, int64_t lo, int64_t hi,
             int64_t *err) {
    const float *X = args[0], *B = args[1];
    float *Y = args[2], *S = args[3], *T = temps[0];
    (void)err;
    if (lo < 0 || hi > (phase == 2 ? 1 : N) || lo >= hi) return -2;
    for (int64_t n = lo; n < hi; n++) {
        for (int m = 0; m < M; m++) {
            if (phase == 0) T[n * M + m] = X[n * M + m] + B[m];
            else if (phase == 1) Y[n * M + m] = T[n * M + m] > 0 ? T[n * M + m] : 0;
        }
    }
    if (phase == 2)
        for (int n = 0; n < N; n++)
            for (int m = 0; m < M; m++) S[m] += Y[n * M + m];
    return 0;
}
"""
ADD_RELU_INPUTS = [("X", np.dtype(np.float32), (37, 8)), ("B", np.dtype(np.float32), (8,))]
ADD_RELU_OUTPUTS = [("Y", np.dtype(np.float32), (37, 8)), ("S", np.dtype(np.float32), (8,))]

# O(b, d) = T(I(b), d) with the index checked: check 1 guards subscript 0 of T.
GATHER_C = r"""
#include <stdint.h>
const int32_t tc_abi_version = ABI;
const int32_t tc_num_inputs = 2, tc_num_outputs = 1;
const int32_t tc_dtypes[] = {1, 7, 1};
const int32_t tc_ranks[] = {2, 1, 2};
const int64_t tc_dims[] = {5, 3, 6, 6, 3};
const int32_t tc_output_zero[] = {0};
const int32_t tc_num_temps = 0;
const int32_t tc_num_phases = 1;
const int64_t tc_phase_trips[] = {6};
const int32_t tc_num_checks = 1;
const char *const tc_check_text[] = {"subscript 0 of 'T' (extent 5)"};
int tc_phase(int32_t phase, void *const *args, void *const *temps, int64_t lo, int64_t hi,
             int64_t *err) {
    const float *T = args[0];
    const int64_t *I = args[1];
    float *O = args[2];
    (void)phase; (void)temps;
    for (int64_t b = lo; b < hi; b++) {
        int64_t i = I[b];
        if (i < 0 || i >= 5) { *err = i; return 1; }
        for (int d = 0; d < 3; d++) O[b * 3 + d] = T[i * 3 + d];
    }
    return 0;
}
"""
GATHER_INPUTS = [("T", np.dtype(np.float32), (5, 3)), ("I", np.dtype(np.int64), (6,))]
GATHER_OUTPUTS = [("O", np.dtype(np.float32), (6, 3))]


def hand_kernel(
    name: str,
    text: str,
    entry: str,
    inputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
    outputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
    attributes: dict[str, object] | None = None,
) -> str:
    """Build a hand-written kernel under the key of the node that runs it (its source
    attribute a label, ``name``); return that label for tc_model's ``source``."""
    source = f"hand-written {name}"
    model = onnx.load_from_string(
        tc_model(source=source, entry=entry, inputs=inputs, outputs=outputs, attributes=attributes)
    )
    key = next(a.s.decode() for a in model.graph.node[0].attribute if a.name == "kernel_key")
    cc.build(text, key)
    return source


@pytest.fixture(scope="module")
def add_relu_source() -> str:
    return hand_kernel("addrelu", ADD_RELU_C, "addrelu", ADD_RELU_INPUTS, ADD_RELU_OUTPUTS)


@pytest.fixture(scope="module")
def gather_source() -> str:
    return hand_kernel("gather", GATHER_C.replace("ABI", "1"), "g", GATHER_INPUTS, GATHER_OUTPUTS)


def _add_relu_feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "X": rng.standard_normal((37, 8)).astype(np.float32),
        "B": rng.standard_normal(8).astype(np.float32),
    }


def _add_relu_want(feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    y = np.maximum(feeds["X"] + feeds["B"], 0)
    return y, y.sum(axis=0)


# ------------------------------------------------------------------------------- library


def test_library_is_built_once_and_exports_only_its_entry_point() -> None:
    path = tort.library_path()
    before = cc.compilations
    assert tort.library_path() == path
    assert cc.compilations == before
    assert Path(path).parent.parent == cc.cache_dir()
    lib = ctypes.CDLL(path)
    assert lib.RegisterCustomOps  # visible
    with pytest.raises(AttributeError):
        lib.create_kernel_v2  # noqa: B018 -- hidden by -fvisibility=hidden


def test_library_is_rebuilt_when_the_cache_entry_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cache of its own: removing the shared one's entry broke the sessions of the other
    # xdist worker, which loaded the library from it at that moment.
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))
    path = Path(tort.library_path())
    assert path.parent.parent == tmp_path
    shutil.rmtree(path.parent)  # `tc-graph cache clear`; loaded copies stay mapped
    assert tort.library_path() == str(path)
    assert cc.lookup(path.parent.name) == path


# -------------------------------------------------------------------- hand-written: runs


@pytest.mark.parametrize("threads", [1, 2])
def test_phases_temporaries_and_zero_filled_outputs(add_relu_source: str, threads: int) -> None:
    model = tc_model(
        source=add_relu_source, entry="addrelu", inputs=ADD_RELU_INPUTS, outputs=ADD_RELU_OUTPUTS
    )
    sess = session(model, threads)
    for seed in range(3):  # S accumulates: a second run must start from zero again
        feeds = _add_relu_feeds(seed)
        y, s = sess.run(None, feeds)
        want_y, want_s = _add_relu_want(feeds)
        np.testing.assert_array_equal(y, want_y)
        np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-5)


def test_hand_gather_reports_the_bad_index_and_stays_usable(gather_source: str) -> None:
    model = tc_model(source=gather_source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    sess = session(model, 2)
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    good = np.array([4, 0, 2, 1, 3, 3])
    np.testing.assert_array_equal(sess.run(None, {"T": t, "I": good})[0], t[good])
    bad = np.array([4, 0, 2, 1, 7, 3])
    with pytest.raises(Exception, match=r"kernel 'g': index 7 out of range: subscript 0 of 'T'"):
        sess.run(None, {"T": t, "I": bad})
    with pytest.raises(Exception, match=r"index -[1-5] out of range"):
        sess.run(None, {"T": t, "I": -good - 1})
    np.testing.assert_array_equal(sess.run(None, {"T": t, "I": good})[0], t[good])


def test_a_check_code_beyond_the_kernels_texts_reads_no_text() -> None:
    """A phase's failure code indexes tc_check_text only below tc_num_checks: a code past
    the table (a kernel bug) gives the generic message, not a read past the array."""
    text = GATHER_C.replace("ABI", "1").replace("*err = i; return 1;", "*err = i; return 1000000;")
    source = hand_kernel("gather-bad-code", text, "g", GATHER_INPUTS, GATHER_OUTPUTS)
    model = tc_model(source=source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    sess = session(model, 1)
    t = np.zeros((5, 3), np.float32)
    with pytest.raises(Exception, match=r"index 7 out of range: an indirect subscript"):
        sess.run(None, {"T": t, "I": np.array([0, 7, 0, 0, 0, 0])})


# ------------------------------------------------------------------ hand-written: errors


def test_missing_kernel_fails_session_creation_with_the_fix() -> None:
    model = tc_model(
        source="never built", entry="addrelu", inputs=ADD_RELU_INPUTS, outputs=ADD_RELU_OUTPUTS
    )
    key = next(
        a.s.decode() for a in onnx.load_from_string(model).graph.node[0].attribute
        if a.name == "kernel_key"
    )  # fmt: skip
    with pytest.raises(Exception) as info:
        session(model)
    message = str(info.value)
    assert f"tc_graph kernel 'addrelu' (key {key})" in message
    assert "is not compiled on this machine" in message
    assert "tc_graph.prepare(model)" in message
    assert "`tc-graph prepare MODEL.onnx`" in message
    assert "tc_graph.InferenceSession" in message


@pytest.mark.parametrize("key", ["../etc", ".hidden", "a/b", ""])
def test_kernel_keys_that_are_not_plain_names_are_rejected(key: str) -> None:
    model = tc_model(key=key, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    with pytest.raises(Exception, match="invalid kernel_key"):
        session(model)


def test_node_without_kernel_key_is_an_error() -> None:
    node = helper.make_node("TcKernel", ["T"], ["O"], domain=TC_DOMAIN, entry="g")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("T", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("O", onnx.TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TC_DOMAIN, 1)]
    )
    model.ir_version = 8
    with pytest.raises(Exception, match="no string attribute 'kernel_key'"):
        session(model.SerializeToString())


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("output_shapes", [6, 4]),
        ("input_dtypes", [1, 6]),
        ("output_ranks", [1]),
        ("input_shapes", [5, 3]),
    ],
)
def test_node_attributes_must_match_the_kernel(attribute: str, value: list[int]) -> None:
    # The gather kernel filed under the key of a node that describes it wrongly.
    io = {"entry": "g", "inputs": GATHER_INPUTS, "outputs": GATHER_OUTPUTS}
    text = GATHER_C.replace("ABI", "1")
    source = hand_kernel(f"gather-{attribute}", text, **io, attributes={attribute: value})
    model = tc_model(source=source, **io, attributes={attribute: value})  # type: ignore[arg-type]
    with pytest.raises(Exception, match=f"node's {attribute} attribute does not match"):
        session(model)


def test_node_arity_must_match_the_kernel() -> None:
    io = {"entry": "g", "inputs": GATHER_INPUTS[:1], "outputs": GATHER_OUTPUTS}
    source = hand_kernel("gather-arity", GATHER_C.replace("ABI", "1"), **io)  # type: ignore[arg-type]
    model = tc_model(source=source, **io)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="takes 2 inputs and 1 outputs, the node has 1 and 1"):
        session(model)


def test_other_abi_version_is_refused() -> None:
    text = GATHER_C.replace("ABI", "3")
    source = hand_kernel("gather-abi3", text, "g", GATHER_INPUTS, GATHER_OUTPUTS)
    model = tc_model(source=source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    with pytest.raises(Exception, match="ABI version 3, this library expects 1 or 2"):
        session(model)


def test_fixed_shape_kernel_under_a_node_for_every_size_is_refused() -> None:
    every = {"every_size": [1]}
    text = GATHER_C.replace("ABI", "1")
    source = hand_kernel("gather-every", text, "g", GATHER_INPUTS, GATHER_OUTPUTS, every)
    model = tc_model(
        source=source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS, attributes=every
    )
    with pytest.raises(Exception, match="is a kernel of fixed shapes, the node serves every size"):
        session(model)


def test_kernel_without_the_phase_entry_point_is_refused() -> None:
    text = "int tc_kernel(void) { return 0; }\n"
    source = hand_kernel("no-phase", text, "g", GATHER_INPUTS, GATHER_OUTPUTS)
    model = tc_model(source=source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    with pytest.raises(Exception, match="lacks the symbol tc_abi_version"):
        session(model)


def test_wrong_input_shape_or_dtype_is_an_error_at_run(gather_source: str) -> None:
    model = tc_model(
        source=gather_source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS, dynamic=True
    )
    sess = session(model)
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    i = np.array([0, 1, 2, 3, 4, 0])
    with pytest.raises(
        Exception, match=r"input 0 must be float32 of shape \(5, 3\), got float32 of shape \(4, 3\)"
    ):
        sess.run(None, {"T": t[:4], "I": i})
    with pytest.raises(
        Exception, match=r"input 1 must be int64 of shape \(6,\), got int64 of shape \(6, 1\)"
    ):
        sess.run(None, {"T": t, "I": i[:, None]})
    np.testing.assert_array_equal(sess.run(None, {"T": t, "I": i})[0], t[i])


def test_wrong_input_dtype_is_an_error_at_run(gather_source: str) -> None:
    # The graph declares I as int32 (the node's attributes still say int64): onnxruntime
    # accepts the model, the library refuses the run.
    inputs = [GATHER_INPUTS[0], ("I", np.dtype(np.int32), (6,))]
    model = tc_model(
        source=gather_source,
        entry="g",
        inputs=inputs,
        outputs=GATHER_OUTPUTS,
        attributes={"input_dtypes": [1, 7]},
    )
    sess = session(model)
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    with pytest.raises(Exception, match=r"input 1 must be int64 of shape \(6,\), got int32"):
        sess.run(None, {"T": t, "I": np.zeros(6, np.int32)})


# --------------------------------------------------------------------- cache directory


def _gather_in(cache: Path) -> str:
    """Build the hand gather kernel into another cache root; return its source label."""
    text = GATHER_C.replace("ABI", "1")
    source = hand_kernel("gather", text, "g", GATHER_INPUTS, GATHER_OUTPUTS)
    model = tc_model(source=source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    key = next(
        a.s.decode() for a in onnx.load_from_string(model).graph.node[0].attribute
        if a.name == "kernel_key"
    )  # fmt: skip
    # Built in the suite's cache (cc.build follows the environment), then copied.
    shutil.copytree(cc.cache_dir() / key, cache / key)
    return source


@pytest.mark.parametrize("variable", ["TC_GRAPH_CACHE", "XDG_CACHE_HOME", "HOME"])
def test_the_library_finds_the_cache_as_the_runtime_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    library = tort.library_path()  # built in the suite's cache before the environment moves
    root = {
        "TC_GRAPH_CACHE": tmp_path / "custom",
        "XDG_CACHE_HOME": tmp_path / "xdg" / "tc_graph",
        "HOME": tmp_path / ".cache" / "tc_graph",
    }[variable]
    source = _gather_in(root)
    if variable == "TC_GRAPH_CACHE":
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("TC_GRAPH_CACHE", "~/custom")  # ~ is expanded, as in cc.py
    else:
        monkeypatch.delenv("TC_GRAPH_CACHE")
        if variable == "XDG_CACHE_HOME":
            monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        else:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
            monkeypatch.setenv("HOME", str(tmp_path))
    assert cc.cache_dir() == root
    model = tc_model(source=source, entry="g", inputs=GATHER_INPUTS, outputs=GATHER_OUTPUTS)
    so = ort.SessionOptions()
    so.register_custom_ops_library(library)
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    i = np.array([4, 3, 2, 1, 0, 0])
    np.testing.assert_array_equal(sess.run(None, {"T": t, "I": i})[0], t[i])


# --------------------------------------------------------------------- generated kernels

SRC = """
def mmr(float(M,K) A, float(K,N) B) -> (C) {
  C(m,n) +=! A(m,k) * B(k,n)
  C(m,n) = fmax(C(m,n), 0)
}
def center(float(M,N) X) -> (T, Y) {
  T +=! X(m,n)
  Y(m,n) = X(m,n) - T / (M*N)
}
def g(float(N,D) T, int64(B) I) -> (O) { O(b,d) = T(I(b),d) }
def mixed(float(M,N) X, int32(N) S, float64(M) D) -> (Y, Z, W) {
  Y(m,n) = X(m,n) * S(n) + D(m)
  Z(n) +=! S(n) * X(m,n)
  W(m) = X(m,0) > 0
}
"""
MLP2 = """
def mlp2(float(B,N) I, float(O,N) W2, float(O) B2, float(P,O) W3, float(P) B3) -> (O3) {
  O2(b,o) = B2(o)
  O2(b,o) += I(b,n) * W2(o,n)
  O2(b,o) = fmax(O2(b,o), 0)
  O3(b,p) = B3(p)
  O3(b,p) += O2(b,o) * W3(p,o)
  O3(b,p) = fmax(O3(b,p), 0)
}
"""


@pytest.fixture(scope="module")
def mod() -> tg.TcModule:
    return tg.define(SRC)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("threads", [1, 2])
def test_generated_matmul_relu(mod: tg.TcModule, threads: int) -> None:
    a = _rng(0).standard_normal((70, 33)).astype(np.float32)
    b = _rng(1).standard_normal((33, 45)).astype(np.float32)
    kernel = mod.mmr.compile(a, b)
    model, _ = kernel_model(kernel, SRC, "mmr", [a, b])
    sess = session(model, threads)
    for seed in range(2):
        a = _rng(seed + 10).standard_normal((70, 33)).astype(np.float32)
        (c,) = sess.run(None, {"A": a, "B": b})
        np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_generated_kernel_of_several_phases(mod: tg.TcModule, threads: int) -> None:
    x = _rng(2).standard_normal((300, 40)).astype(np.float32)
    kernel = mod.center.compile(x)
    trips = phases(kernel)
    assert len(trips) >= 2 and max(trips) > 1, trips
    model, _ = kernel_model(kernel, SRC, "center", [x])
    sess = session(model, threads)
    for seed in range(2):  # the zero-filled sum starts from zero on every run
        x = _rng(seed + 20).standard_normal((300, 40)).astype(np.float32)
        t, y = sess.run(None, {"X": x})
        np.testing.assert_allclose(t, x.sum(dtype=np.float64), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(y, x - x.sum(dtype=np.float64) / x.size, rtol=1e-4, atol=1e-4)


def test_generated_kernel_with_shared_temporaries() -> None:
    shapes = [(16, 24), (32, 24), (32,), (8, 32), (8,)]
    args = [_rng(k).standard_normal(s).astype(np.float32) for k, s in enumerate(shapes)]
    kernel = tg.define(MLP2).mlp2.compile(*args, options=tg.MappingOptions(fusion="min"))
    lib = ctypes.CDLL(str(kernel.library))
    assert ctypes.c_int32.in_dll(lib, "tc_num_temps").value >= 1
    assert len(phases(kernel)) >= 2
    model, (want,) = kernel_model(kernel, MLP2, "mlp2", args)
    sess = session(model, 2)
    feeds = dict(zip(kernel.program.inputs, args, strict=True))
    (got,) = sess.run(None, feeds)
    i, w2, b2, w3, b3 = args
    ref = np.maximum(np.maximum(i @ w2.T + b2, 0) @ w3.T + b3, 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, want)


def test_generated_kernel_with_mixed_dtypes(mod: tg.TcModule) -> None:
    x = _rng(3).standard_normal((9, 5)).astype(np.float32)
    s = np.arange(-2, 3, dtype=np.int32)
    d = _rng(4).standard_normal(9)
    kernel = mod.mixed.compile(x, s, d)
    model, want = kernel_model(kernel, SRC, "mixed", [x, s, d])
    got = session(model, 2).run(None, {"X": x, "S": s, "D": d})
    assert [g.dtype for g in got] == [w.dtype for w in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("rows", [10, 20_000])
def test_generated_gather_out_of_range_is_an_exception(mod: tg.TcModule, rows: int) -> None:
    """A small run (10 rows) runs on the calling thread, a large one (320 KB of table) on
    onnxruntime's pool: the bad index is reported either way."""
    t = _rng(5).standard_normal((rows, 4)).astype(np.float32)
    good = np.array([9, 0, 3, 3, 1, 7, 2, 8], np.int64)
    kernel = mod.g.compile(t, good)
    model, _ = kernel_model(kernel, SRC, "g", [t, good])
    sess = session(model, 2)
    np.testing.assert_array_equal(sess.run(None, {"T": t, "I": good})[0], t[good])
    bad = good.copy()
    bad[5] = rows
    with pytest.raises(Exception, match=rf"kernel 'g': index {rows} out of range: .*'T'"):
        sess.run(None, {"T": t, "I": bad})
    bad[5] = -3
    with pytest.raises(Exception, match="index -3 out of range"):
        sess.run(None, {"T": t, "I": bad})
    np.testing.assert_array_equal(sess.run(None, {"T": t, "I": good})[0], t[good])


def test_concurrent_runs_on_one_session(mod: tg.TcModule) -> None:
    a0 = _rng(6).standard_normal((64, 32)).astype(np.float32)
    b = _rng(7).standard_normal((32, 48)).astype(np.float32)
    kernel = mod.mmr.compile(a0, b)
    model, _ = kernel_model(kernel, SRC, "mmr", [a0, b])
    sess = session(model, 2)
    inputs = [_rng(100 + k).standard_normal((64, 32)).astype(np.float32) for k in range(8)]
    failures: list[str] = []

    def worker(offset: int) -> None:
        for r in range(12):
            a = inputs[(offset + r) % len(inputs)]
            (c,) = sess.run(None, {"A": a, "B": b})
            if not np.allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4):
                failures.append(f"thread {offset} run {r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_bare_onnxruntime_in_another_process(mod: tg.TcModule, tmp_path: Path) -> None:
    """A saved model runs in a process that only has onnxruntime and the library path."""
    a = _rng(8).standard_normal((12, 7)).astype(np.float32)
    b = _rng(9).standard_normal((7, 5)).astype(np.float32)
    kernel = mod.mmr.compile(a, b)
    model, (want,) = kernel_model(kernel, SRC, "mmr", [a, b])
    (tmp_path / "m.onnx").write_bytes(model)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    script = f"""
import numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.register_custom_ops_library({tort.library_path()!r})
s = ort.InferenceSession({str(tmp_path / "m.onnx")!r}, so, providers=["CPUExecutionProvider"])
a, b = np.load({str(tmp_path / "a.npy")!r}), np.load({str(tmp_path / "b.npy")!r})
np.save({str(tmp_path / "c.npy")!r}, s.run(None, {{"A": a, "B": b}})[0])
"""
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ), timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), want)
