"""Nodes for every size (docs/onnx.md, "Kernels for every size"): one TcKernel, one kernel,
every batch and sequence length; the native op reads the sizes off its inputs and sizes
its outputs and temporaries from the kernel's own expressions.

The kernels are compiled by tg.prepare from hand-written TCs; the oracle is NumPy.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import tc_graph as tg
from tc_graph.graph.rewrite import NodeAttrs, kernel_key, make_tc_node, other_key, special_key
from tc_graph.onnx_domain import TC_DOMAIN, TC_DOMAIN_VERSION
from tc_graph.runtime import cc
from tc_graph.runtime import ort as tort

_ATTENTION = """
def attention(float(B, S, 8) Q, float(B, S, 8) K, float(B, S, 8) V) -> (O) {
  s(b, i, j) +=! Q(b, i, d) * K(b, j, d)
  m(b, i) max=! s(b, i, j)
  e(b, i, j) = exp(s(b, i, j) - m(b, i))
  z(b, i) +=! e(b, i, j)
  O(b, i, d) +=! e(b, i, j) * V(b, j, d)
  O(b, i, d) = O(b, i, d) / z(b, i)
}
"""

_CONV = """
def conv(float(N, W) X, float(3) F) -> (Y) {
  Y(n, w) +=! X(n, w + k) * F(k)
}
"""
_F = np.array([0.5, -1.0, 2.0], np.float32)


def _opset(graph: onnx.GraphProto) -> onnx.ModelProto:
    return helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid(TC_DOMAIN, TC_DOMAIN_VERSION),
        ],
        ir_version=9,
    )


def _node(attrs: NodeAttrs) -> onnx.NodeProto:
    return make_tc_node("every", replace(attrs, kernel_key=kernel_key(attrs.attributes())))


def _attention_model(
    every_size: bool = True,
    at: tuple[tuple[int, ...], ...] = (),
    chosen_at: tuple[tuple[int, ...], ...] = (),
) -> onnx.ModelProto:
    attrs = NodeAttrs(
        source=_ATTENTION,
        entry="attention",
        options="{}",
        kernel_key="",
        inputs=("q", "k", "v"),
        outputs=("o",),
        input_dtypes=(1, 1, 1),
        output_dtypes=(1,),
        input_shapes=((2, 16, 8),) * 3,
        output_shapes=((2, 16, 8),),
        every_size=every_size,
        every_size_at=at,
        every_size_from=chosen_at,
    )
    value = [
        helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["batch", "seq", 8])
        for n in ("q", "k", "v", "o")
    ]
    graph = helper.make_graph([_node(attrs)], "every", value[:3], value[3:])
    return _opset(graph)


def _conv_model() -> onnx.ModelProto:
    attrs = NodeAttrs(
        source=_CONV,
        entry="conv",
        options="{}",
        kernel_key="",
        inputs=("x", "f"),
        outputs=("y",),
        input_dtypes=(1, 1),
        output_dtypes=(1,),
        input_shapes=((4, 20), (3,)),
        output_shapes=((4, 18),),
        every_size=True,
    )
    graph = helper.make_graph(
        [_node(attrs)],
        "every",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", "w"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", "w_out"])],
        [numpy_helper.from_array(_F, "f")],
    )
    return _opset(graph)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = np.einsum("bid,bjd->bij", q.astype(np.float64), k)
    e = np.exp(s - s.max(axis=2, keepdims=True, initial=-np.inf))
    return (np.einsum("bij,bjd->bid", e, v) / e.sum(axis=2)[..., None]).astype(np.float32)


@pytest.fixture(scope="module")
def attention() -> ort.InferenceSession:
    return tg.InferenceSession(_attention_model())


def _inputs(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal((batch, seq, 8)).astype(np.float32) for n in "qkv"}


@pytest.mark.parametrize(("batch", "seq"), [(1, 1), (3, 77), (1, 128), (5, 16), (2, 0)])
def test_attention_at_every_size(attention: ort.InferenceSession, batch: int, seq: int) -> None:
    feeds = _inputs(batch, seq, batch * 1000 + seq)
    (got,) = attention.run(None, feeds)
    assert got.shape == (batch, seq, 8)
    np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 9), seq=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_attention_at_drawn_sizes(
    attention: ort.InferenceSession, batch: int, seq: int, seed: int
) -> None:
    feeds = _inputs(batch, seq, seed)
    (got,) = attention.run(None, feeds)
    np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


def test_output_extent_is_the_kernel_expression() -> None:
    """The output's width is W - 2 at any W (none below 3)."""
    session = tg.InferenceSession(_conv_model())
    for n, w in [(4, 20), (1, 3), (3, 2), (2, 101)]:
        x = np.random.default_rng(w).standard_normal((n, w)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        want = sum(x[:, k : k + max(0, w - 2)] * _F[k] for k in range(3))
        assert got.shape == (n, max(0, w - 2))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_mismatched_dimension_is_an_onnxruntime_error(attention: ort.InferenceSession) -> None:
    feeds = _inputs(2, 4, 0)
    feeds["k"] = np.zeros((2, 5, 8), np.float32)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument) as e:
        attention.run(None, feeds)
    assert "dimension 1 of input 1 ('K') is 5, expected S = 4" in str(e.value)


def test_sizes_alternate_across_threads(attention: ort.InferenceSession) -> None:
    """Each run has its own sizes, outputs and temporaries: threads running different
    sizes at once see their own results."""
    failures: list[str] = []

    def work(batch: int, seq: int) -> None:
        feeds = _inputs(batch, seq, seq)
        want = _attention(*feeds.values())
        for _ in range(10):
            (got,) = attention.run(None, feeds)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                failures.append(f"batch {batch}, seq {seq}")
                return

    threads = [threading.Thread(target=work, args=p) for p in [(1, 3), (4, 50), (2, 17), (3, 1)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_large_temporaries_are_not_mapped_afresh_on_every_run(
    attention: ort.InferenceSession,
) -> None:
    """A run's temporaries come from onnxruntime's allocator, whose arena keeps them for
    the next run: with malloc, those over glibc's largest mmap threshold (32 MiB; here the
    scores of 2 x 2100 x 2100) were mapped on every run and each page faulted in again
    (17,000 page faults a run here; a BERT layer at 15 x 137 tokens ran 4x slower)."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 2100, 8)).astype(np.float32) for _ in range(3))
    feeds = {"q": q, "k": k, "v": v}
    for _ in range(3):
        (out,) = attention.run(None, feeds)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        attention.run(None, feeds)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3
    assert faults < 2000, f"{faults:.0f} page faults a run"
    np.testing.assert_allclose(out, _attention(q, k, v), rtol=1e-4, atol=1e-5)


def test_large_temporaries_without_onnxruntimes_arena() -> None:
    """With the session's CPU arena off, onnxruntime's allocator is its plain one: large
    temporaries still come from it, and the values are the reference's."""
    model = _attention_model()
    tg.prepare(model)
    so = ort.SessionOptions()
    so.enable_cpu_mem_arena = False
    tort.register(so)
    session = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    for seq in (2100, 700):
        feeds = _inputs(2, seq, seq)
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


def test_malformed_every_size_is_refused() -> None:
    model = _attention_model()
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name == "every_size":
            a.ints[:] = [2]
    with pytest.raises(tg.TcError, match="malformed every_size"):
        tg.prepare(model)


# A kernel of fixed shapes (ABI 1) for batch 2, sequence 16 that writes 7 everywhere: where
# the node runs it, its output says so.
_SEVENS_C = r"""
#include <stdint.h>
const int32_t tc_abi_version = 1;
const int32_t tc_num_inputs = 3, tc_num_outputs = 1;
const int32_t tc_dtypes[] = {1, 1, 1, 1};
const int32_t tc_ranks[] = {3, 3, 3, 3};
const int64_t tc_dims[] = {2, 16, 8, 2, 16, 8, 2, 16, 8, 2, 16, 8};
const int32_t tc_output_zero[] = {0};
const int32_t tc_num_temps = 0;
const int32_t tc_num_phases = 1;
const int64_t tc_phase_trips[] = {1};
const char *const tc_check_text[] = {0};
int tc_phase(int32_t phase, void *const *args, void *const *temps, int64_t lo, int64_t hi,
             int64_t *err) {
    float *o = args[3];
    (void)phase; (void)temps; (void)lo; (void)hi; (void)err;
    for (int k = 0; k < 2 * 16 * 8; k++) o[k] = 7.0f;
    return 0;
}
"""


def test_sizes_with_a_specialised_kernel_run_it() -> None:
    """every_size_at (2, 16): the node runs that kernel at batch 2, sequence 16 exactly
    (here a stand-in that writes 7s), and the kernel for every size at any other."""
    model = _attention_model(at=((2, 16),))
    tg.prepare(model)
    key = next(a.s.decode() for a in model.graph.node[0].attribute if a.name == "kernel_key")
    cc.build(_SEVENS_C, special_key(key, 0))
    so = ort.SessionOptions()
    tort.register(so)
    session = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(None, _inputs(2, 16, 0))
    assert np.all(got == 7.0)
    for batch, seq in [(2, 15), (3, 16), (1, 1)]:
        feeds = _inputs(batch, seq, seq)
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


_PLUS_SEVEN = """
def attention(float(B, S, 8) Q, float(B, S, 8) K, float(B, S, 8) V) -> (O) {
  O(b, i, d) = Q(b, i, d) + 7.0
}
"""


def test_sizes_nearer_another_kernels_choices_run_it() -> None:
    """every_size_from (64, 128), then (2, 4): the node's other kernel for every size (here
    a stand-in that adds 7 to Q) runs at sizes nearer (2, 4) than (64, 128), their ratios
    multiplied, and the node's own at the others (ties included)."""
    model = _attention_model(chosen_at=((64, 128), (2, 4)))
    tg.prepare(model)
    key = next(a.s.decode() for a in model.graph.node[0].attribute if a.name == "kernel_key")
    stand_in = tg.define(_PLUS_SEVEN).attention.compile(*_inputs(2, 4, 0).values(), parametric=True)
    cc.build((stand_in.library.parent / "kernel.c").read_text(), other_key(key, 0))
    so = ort.SessionOptions()
    tort.register(so)
    session = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    for batch, seq in [(2, 4), (1, 3), (5, 20), (11, 23)]:  # their ratios 1 to 31.6, below own's
        feeds = _inputs(batch, seq, seq)
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, feeds["q"] + 7.0, rtol=1e-6)
    for batch, seq in [(64, 128), (40, 100), (12, 23), (8, 32)]:  # own's 1 to 32, the last a tie
        feeds = _inputs(batch, seq, seq)
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


def test_other_kernels_for_every_size_are_compiled_by_prepare() -> None:
    session = tg.InferenceSession(_attention_model(at=((2, 16),), chosen_at=((8, 64), (2, 5))))
    for batch, seq in [(2, 16), (1, 3), (9, 70)]:
        feeds = _inputs(batch, seq, seq)
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


_MISSING_SPECIAL = """
import os, sys
import onnxruntime as ort
from tc_graph.runtime import ort as tort
so = ort.SessionOptions()
tort.register(so)
try:
    ort.InferenceSession(sys.stdin.buffer.read(), so, providers=["CPUExecutionProvider"])
except Exception as e:
    print("refused:", str(e).splitlines()[0][:300])
os.fstat(0)
print("stdin open")
"""


def test_a_missing_specialised_kernel_is_an_error_that_leaves_descriptors_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first of two specialised kernels is missing from the cache (a cache of the
    test's own): creating the session fails with tc_graph's message, and releasing the
    kernels not yet loaded closes no file descriptor (they held 0, and descriptor 0 was
    closed)."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    model = _attention_model(at=((2, 16), (1, 5)))
    tg.prepare(model)
    key = next(a.s.decode() for a in model.graph.node[0].attribute if a.name == "kernel_key")
    library = cc.lookup(special_key(key, 0))
    assert library is not None
    shutil.rmtree(library.parent)
    run = subprocess.run(
        [sys.executable, "-c", _MISSING_SPECIAL],
        input=model.SerializeToString(),
        capture_output=True,
        timeout=120,
    )
    out = run.stdout.decode()
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert "refused:" in out and "is not compiled on this machine" in out
    assert out.rstrip().endswith("stdin open")


def test_specialised_kernels_are_compiled_by_prepare() -> None:
    """tg.InferenceSession compiles the kernel for every size and each specialised one;
    both give the reference's values."""
    session = tg.InferenceSession(_attention_model(at=((2, 16), (1, 5))))
    for batch, seq in [(2, 16), (1, 5), (4, 9)]:
        feeds = _inputs(batch, seq, seq)
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, _attention(*feeds.values()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [{"at": ((2, 16, 3),)}, {"chosen_at": ((2, 16), (3,))}])
def test_every_size_at_without_whole_size_lists_is_refused(kw: dict) -> None:
    """Three values for a kernel of two sizes (B, S)."""
    with pytest.raises(tg.TcError, match="not a whole number of lists of its 2 sizes, at most 64"):
        tg.prepare(_attention_model(**kw))
