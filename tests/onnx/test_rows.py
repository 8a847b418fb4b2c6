"""Rows nodes (docs/onnx.md, "Symbolic dimensions"): one TcKernel serves every size of a symbolic leading
dimension, with a kernel per listed size and chunks of them for every other size.

The kernels are compiled by tg.prepare from a hand-written TC; the oracle is NumPy.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import tc_graph as tg
from tc_graph.graph.rewrite import NodeAttrs, kernel_key, make_tc_node
from tc_graph.onnx_domain import TC_DOMAIN, TC_DOMAIN_VERSION

_SOURCE = """
def dense(float(R, 7) X, float(7, 5) W, float(5) b) -> (float(R, 5) Y, float(R) S) {
  Y(i, j) = b(j)
  Y(i, j) += X(i, k) * W(k, j)
  Y(i, j) = fmax(Y(i, j), 0.0)
  S(i) +=! Y(i, j)
}
"""

_RNG = np.random.default_rng(7)
_W = _RNG.standard_normal((7, 5)).astype(np.float32)
_B = _RNG.standard_normal(5).astype(np.float32)


def _attrs(sizes: tuple[int, ...], flags: tuple[int, ...] = (1, 0, 0, 1, 1)) -> NodeAttrs:
    first = sizes[0]
    attrs = NodeAttrs(
        source=_SOURCE,
        entry="dense",
        options="{}",
        kernel_key="",
        inputs=("x", "W", "b"),
        outputs=("y", "s"),
        input_dtypes=(1, 1, 1),
        output_dtypes=(1, 1),
        input_shapes=((first, 7), (7, 5), (5,)),
        output_shapes=((first, 5), (first,)),
        row_sizes=sizes,
        row_tensors=flags,
        row_symbols=("batch",),
    )
    return replace(attrs, kernel_key=kernel_key(attrs.attributes()))


def _model(attrs: NodeAttrs, features: int | str = 7) -> onnx.ModelProto:
    """The node in a model whose input x is (batch, features)."""
    graph = helper.make_graph(
        [make_tc_node("rows", attrs)],
        "rows",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", features])],
        [
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 5]),
            helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, ["batch"]),
        ],
        [numpy_helper.from_array(_W, "W"), numpy_helper.from_array(_B, "b")],
    )
    return helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid(TC_DOMAIN, TC_DOMAIN_VERSION),
        ],
        ir_version=9,
    )


def _expected(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.maximum(x @ _W + _B, 0.0)
    return y, y.sum(axis=1)


@pytest.fixture(scope="module")
def session() -> ort.InferenceSession:
    return tg.InferenceSession(_model(_attrs((4, 2, 1))))


@pytest.mark.parametrize("batch", [0, 1, 2, 3, 4, 5, 7, 13])
def test_a_rows_node_computes_every_batch(session: ort.InferenceSession, batch: int) -> None:
    """Listed sizes run their own kernel; the others run in chunks (13 = 4+4+4+1)."""
    x = _RNG.standard_normal((batch, 7)).astype(np.float32)
    y, s = session.run(None, {"x": x})
    want_y, want_s = _expected(x)
    assert y.shape == (batch, 5) and s.shape == (batch,)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-4)


def test_a_rows_node_refuses_a_wrong_fixed_dimension() -> None:
    """Only the leading dimension varies: the op itself says what it wanted."""
    session = tg.InferenceSession(_model(_attrs((4, 2, 1)), features="f"))
    want = r"input 0 must be float32 of shape \(3, 7\), got float32 of shape \(3, 6\)"
    with pytest.raises(Exception, match=want):
        session.run(None, {"x": np.zeros((3, 6), np.float32)})
    y, _ = session.run(None, {"x": np.ones((2, 7), np.float32)})  # still usable
    np.testing.assert_allclose(y, _expected(np.ones((2, 7), np.float32))[0], rtol=1e-5)


@pytest.mark.parametrize("batch", [3, 1, 16])
def test_a_rows_node_in_a_model_with_its_batch_pinned_runs(batch: int) -> None:
    """Found by fuzzing: pinned afterwards (onnxruntime's make_dim_param_fixed, or
    optimize's fix_shapes on an optimized model), the model was refused, its declared
    batch not the first row size ('computes x as [4, 7], the graph declares [3, 7]')."""
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

    model = _model(_attrs((4, 2, 1)))
    make_dim_param_fixed(model.graph, "batch", batch)
    x = _RNG.standard_normal((batch, 7)).astype(np.float32)
    y, s = tg.InferenceSession(model).run(None, {"x": x})
    want_y, want_s = _expected(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-4)


def test_a_rows_node_still_checks_its_other_declared_dimensions() -> None:
    model = _model(_attrs((4, 2, 1)), features=6)
    with pytest.raises(
        tg.TcError,
        match=r"takes 'x' as TensorProto.FLOAT \[4, 7\], but the graph "
        r"declares it TensorProto.FLOAT \[\?, 6\]",
    ):
        tg.InferenceSession(model)


def test_threads_alternating_sizes_share_one_session(session: ort.InferenceSession) -> None:
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(20):
            batch = int(rng.integers(1, 12))
            x = rng.standard_normal((batch, 7)).astype(np.float32)
            y, _ = session.run(None, {"x": x})
            if not np.allclose(y, _expected(x)[0], rtol=1e-5, atol=1e-5):
                errors.append(f"batch {batch}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize(
    ("sizes", "flags"),
    [
        ((4, 2), (1, 0, 0, 1, 1)),  # no kernel for 1 row
        ((2, 4, 1), (1, 0, 0, 1, 1)),  # not descending
        ((4, 1), (1, 0, 0, 1, 0)),  # an output without the rows
        ((4, 1), (0, 0, 0, 1, 1)),  # no input with them
        ((4, 1), (1, 0, 1, 1)),  # a flag short
    ],
)
def test_malformed_rows_attributes_are_refused(
    sizes: tuple[int, ...], flags: tuple[int, ...]
) -> None:
    with pytest.raises(tg.TcError, match="malformed row_sizes and row_tensors"):
        tg.prepare(_model(_attrs(sizes, flags)))


@pytest.mark.parametrize("dropped", ["row_tensors", "row_sizes"])
def test_rows_attributes_without_their_pair_are_refused(dropped: str) -> None:
    """row_sizes without row_tensors raised KeyError while the key was checked (found by
    fuzzing hand-edited TcKernel nodes)."""
    model = _model(_attrs((4, 1)))
    node = model.graph.node[0]
    kept = [a for a in node.attribute if a.name != dropped]
    del node.attribute[:]
    node.attribute.extend(kept)
    with pytest.raises(tg.TcError, match="malformed row_sizes and row_tensors"):
        tg.prepare(model)


def test_the_key_covers_the_row_sizes() -> None:
    assert _attrs((4, 1)).kernel_key != _attrs((4, 2, 1)).kernel_key


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(min_value=0, max_value=70), seed=st.integers(0, 2**16))
def test_any_batch_matches_numpy(session_any: ort.InferenceSession, batch: int, seed: int) -> None:
    """Chunks of every mix of sizes (kernels for 16, 4 and 1) against NumPy."""
    x = np.random.default_rng(seed).standard_normal((batch, 7)).astype(np.float32)
    y, s = session_any.run(None, {"x": x})
    want_y, want_s = _expected(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-4)


@pytest.fixture(scope="module")
def session_any() -> ort.InferenceSession:
    return tg.InferenceSession(_model(_attrs((16, 4, 1))))
