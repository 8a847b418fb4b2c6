"""BatchNormalization folded into the Conv before it (tc_graph/graph/fold.py).

The oracle is onnxruntime on the unfolded model; a fold that dropped the bias, scaled
the wrong axis or forgot epsilon moves outputs by far more than the tolerance."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.graph.fold import batch_norms_folded
from tc_graph.graph.rewrite import replaced_nodes
from tc_graph.onnx_domain import IR_VERSION

RTOL, ATOL = 1e-4, 1e-5


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def _conv_bn(
    *,
    bias: bool = True,
    relu: bool = True,
    shared: bool = False,
    outputs: tuple[str, ...] = ("y",),
    training: bool = False,
) -> onnx.ModelProto:
    """x (1, 5, 9, 7) -> Conv 3x3 pad 1 (7 channels) -> BatchNormalization [-> Relu];
    with `shared`, a second Conv reads the same weights (they must stay for it)."""
    rng = np.random.default_rng(3)
    f, c = 7, 5
    inits = {
        "w": rng.standard_normal((f, c, 3, 3)).astype(np.float32),
        "scale": rng.uniform(0.5, 2, f).astype(np.float32),
        "shift": rng.standard_normal(f).astype(np.float32),
        "mean": rng.standard_normal(f).astype(np.float32),
        "var": rng.uniform(0.1, 3, f).astype(np.float32),
    }
    conv_in = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(f).astype(np.float32)
        conv_in.append("b")
    nodes = [
        helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization",
            ["c", "scale", "shift", "mean", "var"],
            ["n"],
            epsilon=0.01,
            **({"training_mode": 1} if training else {}),
        ),
    ]
    nodes.append(helper.make_node("Relu", ["n"], ["y"]) if relu else helper.make_node(
        "Identity", ["n"], ["y"]))  # fmt: skip
    if shared:
        nodes.append(helper.make_node("Conv", ["x", "w"], ["z"], pads=[1, 1, 1, 1]))
    shapes = {"y": [1, f, 9, 7], "z": [1, f, 9, 7], "c": [1, f, 9, 7]}
    graph = helper.make_graph(
        nodes,
        "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 9, 7])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = IR_VERSION
    return model


def _x() -> np.ndarray:
    return np.random.default_rng(4).standard_normal((1, 5, 9, 7)).astype(np.float32)


@pytest.mark.parametrize("bias", [True, False])
def test_conv_batch_norm_folds_into_one_conv(bias: bool) -> None:
    model = _conv_bn(bias=bias)
    before = model.SerializeToString()
    folded = batch_norms_folded(model)
    assert model.SerializeToString() == before, "the input model was mutated"
    assert [n.op_type for n in folded.graph.node] == ["Conv", "Relu"]
    assert len(folded.graph.node[0].input) == 3, "the folded Conv has a bias"
    assert sorted(replaced_nodes(folded.graph.node[0])) == [
        ("BatchNormalization", ""),
        ("Conv", ""),
    ]
    names = {t.name for t in folded.graph.initializer}
    assert not names & {"w", "b", "scale", "shift", "mean", "var"}, "old tensors kept twice"
    onnx.checker.check_model(folded)
    np.testing.assert_allclose(_run(folded, _x())[0], _run(model, _x())[0], RTOL, ATOL)


def test_shared_weights_stay_for_their_other_reader() -> None:
    model = _conv_bn(shared=True, outputs=("y", "z"))
    folded = batch_norms_folded(model)
    assert [n.op_type for n in folded.graph.node] == ["Conv", "Relu", "Conv"]
    assert "w" in {t.name for t in folded.graph.initializer}
    for got, want in zip(_run(folded, _x()), _run(model, _x()), strict=True):
        np.testing.assert_allclose(got, want, RTOL, ATOL)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(_conv_bn(outputs=("y", "c")), id="conv-output-is-a-graph-output"),
        pytest.param(_conv_bn(training=True), id="training-mode"),
    ],
)
def test_unfoldable_pairs_are_left_alone(model: onnx.ModelProto) -> None:
    assert batch_norms_folded(model) is model


def test_optimize_fuses_conv_batch_norm_relu_as_one_conv_kernel() -> None:
    model = _conv_bn()
    fused = tg.optimize(model, force=True)
    kinds = [n.op_type for n in fused.graph.node]
    assert kinds == ["TcKernel"], kinds
    source = next(a.s for a in fused.graph.node[0].attribute if a.name == "source").decode()
    assert "BatchNormalization" not in source and "var" not in source
    got = tg.InferenceSession(fused).run(None, {"x": _x()})
    np.testing.assert_allclose(got[0], _run(model, _x())[0], RTOL, ATOL)


def _ir3(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model as IR version 3 writes it (onnx's light_* models): every initializer
    also a graph input, which onnxruntime then treats as a constant, not an input."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.ir_version = 3
    del out.opset_import[:]
    out.opset_import.extend([helper.make_opsetid("", 9)])
    for t in out.graph.initializer:
        out.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    onnx.checker.check_model(out)
    return out


def test_initializers_listed_as_inputs_before_ir_4_are_constants() -> None:
    """Before IR version 4 an initializer was also a graph input and onnxruntime does not
    let a feed override it: the pair folds, the model stays valid (its new initializers
    declared as inputs, the folded ones gone from the inputs too) and runs the same."""
    model = _ir3(_conv_bn())
    folded = batch_norms_folded(model)
    assert [n.op_type for n in folded.graph.node] == ["Conv", "Relu"]
    onnx.checker.check_model(folded)
    inits = {t.name for t in folded.graph.initializer}
    assert {v.name for v in folded.graph.input} == inits | {"x"}
    np.testing.assert_allclose(_run(folded, _x())[0], _run(model, _x())[0], RTOL, ATOL)
    fused = tg.optimize(model, force=True)
    onnx.checker.check_model(fused)
    assert [n.op_type for n in fused.graph.node] == ["TcKernel"]
    got = tg.InferenceSession(fused).run(None, {"x": _x()})
    np.testing.assert_allclose(got[0], _run(model, _x())[0], RTOL, ATOL)


def test_initializers_listed_as_inputs_from_ir_4_on_are_inputs() -> None:
    """From IR version 4 on a graph input overrides its initializer: no fold."""
    model = _conv_bn()
    for t in model.graph.initializer:
        model.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    assert batch_norms_folded(model) is model


def test_weights_of_an_ir_3_model_are_packed_and_declared() -> None:
    """A Gemm's constant weight in an IR version 3 model is packed as panels like any
    other: the new initializer is declared as an input (the checker requires it), the
    weight it replaces leaves both lists, and the model runs as onnxruntime runs it."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((256, 50)).astype(np.float32)
    c = rng.standard_normal(50).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "c"], ["y"])],  # opset 9: C is required
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [33, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [33, 50])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(c, "c")],
    )
    model = _ir3(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]))
    fused = tg.optimize(model, force=True)
    onnx.checker.check_model(fused)
    inits = {t.name for t in fused.graph.initializer}
    assert "W" not in inits and any(name.startswith("W__tc_p") for name in inits)
    assert {v.name for v in fused.graph.input} == inits | {"x"}
    x = rng.standard_normal((33, 256)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = tg.InferenceSession(fused).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, RTOL, ATOL)


def test_weights_made_by_constant_of_shape_fold() -> None:
    """onnx's light_* models make each weight with a ConstantOfShape of a constant shape:
    such a weight is a constant too; the node and its shape go with the fold."""
    model = _conv_bn()
    (w,) = [t for t in model.graph.initializer if t.name == "w"]
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [0.25])
    model.graph.node.insert(0, helper.make_node("ConstantOfShape", ["w_shape"], ["w"], value=fill))
    model.graph.initializer.remove(w)
    model.graph.initializer.append(numpy_helper.from_array(np.array(w.dims, np.int64), "w_shape"))
    folded = batch_norms_folded(model)
    assert [n.op_type for n in folded.graph.node] == ["Conv", "Relu"]
    assert "w_shape" not in {t.name for t in folded.graph.initializer}
    np.testing.assert_allclose(_run(folded, _x())[0], _run(model, _x())[0], RTOL, ATOL)
