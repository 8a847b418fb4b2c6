"""Patterns that must become one TcKernel under optimize(force=True), checked against
onnxruntime on the unfused model: a transformer's attention core, elementwise chains,
LayerNormalization with its residual Add, BatchNormalization after a Conv, weights that
constant subgraphs compute; and the report of what stays with onnxruntime and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.onnx_domain import TC_DOMAIN, TC_OP

F = TensorProto.FLOAT


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[int, ...]],
    outputs: Sequence[str],
    weights: Mapping[str, np.ndarray],
    opset: int = 17,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "pattern",
        [helper.make_tensor_value_info(n, F, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(o, F, None) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return _typed_outputs(model)


def _typed_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Graph outputs with the types shape inference gives them (the checker wants them)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.output)}
    outputs = [known.get(o.name, o) for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return model


def _fused_once(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """optimize(force=True) leaves one TcKernel and no other computing node, and it
    matches onnxruntime on the original model."""
    optimized = tg.optimize(model, force=True)
    kernels = [n for n in optimized.graph.node if n.domain == TC_DOMAIN and n.op_type == TC_OP]
    others = [n.op_type for n in optimized.graph.node if n.op_type not in (TC_OP, "Constant")]
    assert len(kernels) == 1 and not others, [n.op_type for n in optimized.graph.node]
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = plain.run(None, dict(feeds))
    got = tg.InferenceSession(optimized).run(None, dict(feeds))
    for w, r in zip(want, got, strict=True):
        np.testing.assert_allclose(r, w, rtol=1e-4, atol=1e-5)
    return optimized


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("opset", [11, 17])
def test_attention_core(opset: int) -> None:
    """softmax(Q K^T * scale + mask) V: MatMul, scale, Add mask, Softmax, MatMul."""
    rng = np.random.default_rng(0)
    b, h, s, d = 2, 3, 5, 8
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=3 if opset < 13 else -1),
        helper.make_node("MatMul", ["p", "v"], ["out"]),
    ]
    mask = np.where(rng.random((1, 1, s, s)) < 0.2, -1e4, 0).astype(np.float32)
    weights = {"scale": np.array(d**-0.5, np.float32), "mask": mask}
    shape = (b, h, s, d)
    model = _model(nodes, {"q": shape, "k": shape, "v": shape}, ["out"], weights, opset)
    feeds = {n: _rand(rng, *shape) for n in ("q", "k", "v")}
    _fused_once(model, feeds)


def test_elementwise_chain() -> None:
    rng = np.random.default_rng(1)
    ops = [
        ("Sub", ["x", "c"]),
        ("Mul", [None, "x"]),
        ("Sigmoid", [None]),
        ("Div", [None, "c"]),
        ("Tanh", [None]),
        ("LeakyRelu", [None]),
        ("Pow", [None, "two"]),
        ("Sqrt", [None]),
        ("Neg", [None]),
        ("Exp", [None]),
        ("Max", [None, "x", "c"]),
        ("Clip", [None, "lo", "hi"]),
    ]
    nodes, prev = [], ""
    for k, (op, ins) in enumerate(ops):
        out = f"t{k}"
        nodes.append(helper.make_node(op, [prev if i is None else i for i in ins], [out]))
        prev = out
    weights = {
        "c": _rand(rng, 7),
        "two": np.array(2.0, np.float32),
        "lo": np.array(0.1, np.float32),
        "hi": np.array(1.5, np.float32),
    }
    model = _model(nodes, {"x": (3, 7)}, [prev], weights)
    _fused_once(model, {"x": _rand(rng, 3, 7)})


def test_layer_norm_with_residual() -> None:
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "x"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], epsilon=1e-5),
    ]
    weights = {"w": _rand(rng, 16, 16), "gamma": _rand(rng, 16), "beta": _rand(rng, 16)}
    model = _model(nodes, {"x": (2, 4, 16)}, ["y"], weights)
    _fused_once(model, {"x": _rand(rng, 2, 4, 16)})


def test_conv_batch_norm_relu_pool() -> None:
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    weights = {
        "w": _rand(rng, 4, 3, 3, 3),
        "s": _rand(rng, 4),
        "b": _rand(rng, 4),
        "m": _rand(rng, 4),
        "v": rng.random(4).astype(np.float32) + 0.5,
    }
    model = _model(nodes, {"x": (2, 3, 8, 8)}, ["y"], weights)
    _fused_once(model, {"x": _rand(rng, 2, 3, 8, 8)})


def test_weights_from_constant_subgraphs_fuse() -> None:
    """A Gemm weight built by Constant + shape arithmetic + Reshape, and a bias from
    ConstantOfShape, are folded before partitioning: the Gemm and Relu still fuse."""
    rng = np.random.default_rng(4)
    w = _rand(rng, 6 * 5)
    nodes = [
        helper.make_node("Constant", [], ["flat"], value=numpy_helper.from_array(w)),
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "one"], ["cols"], axis=0),
        helper.make_node("Concat", ["six", "cols"], ["wshape"], axis=0),
        helper.make_node("Reshape", ["flat", "wshape"], ["wt"]),
        helper.make_node(
            "ConstantOfShape",
            ["six"],
            ["bias"],
            value=numpy_helper.from_array(np.array([0.25], np.float32)),
        ),
        helper.make_node("Gemm", ["x", "wt", "bias"], ["g"], transB=1),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "consts",
        [helper.make_tensor_value_info("x", F, [4, 5])],
        [helper.make_tensor_value_info("y", F, None)],
        [
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array([6], np.int64), "six"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model = _typed_outputs(model)
    optimized = tg.optimize(model, force=True)
    kernels = [n for n in optimized.graph.node if n.op_type == TC_OP]
    assert len(kernels) == 1
    fused_inputs = set(kernels[0].input)
    assert "x" in fused_inputs and "bias" in fused_inputs
    feeds = {"x": _rand(rng, 4, 5)}
    want = np.maximum(feeds["x"] @ w.reshape(6, 5).T + 0.25, 0)
    got = tg.InferenceSession(optimized).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_report_lists_untranslated_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Hardmax", ["h"], ["m"], name="hm"),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    model = _model(nodes, {"x": (2, 3)}, ["y"], {"w": _rand(rng, 3, 4)})
    tg.optimize(model, force=True, report=True)
    err = capsys.readouterr().err
    assert "not translated (1 node):" in err
    assert "Hardmax 'hm': left to onnxruntime: no TC translation for op type Hardmax" in err
    assert err.rstrip().splitlines()[-1] == "2 of 2 groups fused (forced: not measured)"


def test_summary_of_a_model_with_nothing_to_translate(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [helper.make_node("Hardmax", ["x"], ["y"], name="hm")]
    optimized = tg.optimize(_model(nodes, {"x": (2, 3)}, ["y"], {}), report=True)
    assert not [n for n in optimized.graph.node if n.op_type == "TcKernel"]
    line = "nothing fused: no TC translation for op type Hardmax (1 of 1 node)"
    assert capsys.readouterr().err.rstrip().splitlines()[-1] == line
    (summary,) = [p.value for p in optimized.metadata_props if p.key == "tc_graph.summary"]
    assert summary == line


def test_summary_of_a_model_of_identities(capsys: pytest.CaptureFixture[str]) -> None:
    """Found by fuzzing: the summary said "the model has no nodes" of an Identity."""
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="id")]
    tg.optimize(_model(nodes, {"x": (2, 3)}, ["y"], {}), force=True, report=True)
    line = "nothing fused: no group computes anything (1 node: copies and constants only)"
    assert capsys.readouterr().err.rstrip().splitlines()[-1] == line


def test_report_counts_untranslated_nodes_of_one_reason_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """densenet121 has 836 ConstantOfShape nodes: the report names a few, counts the rest."""
    nodes = [helper.make_node("Hardmax", [f"x{k}"], [f"x{k + 1}"]) for k in range(6)]
    tg.optimize(_model(nodes, {"x0": (2, 3)}, ["x6"], {}), report=True)
    err = capsys.readouterr().err
    (line,) = [s for s in err.splitlines() if s.startswith("  ") and "Hardmax" in s]
    why = "left to onnxruntime: no TC translation for op type Hardmax"
    assert line == f"  6 nodes, {why}: Hardmax #0, Hardmax #1, Hardmax #2 and 3 more"
