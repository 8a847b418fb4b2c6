"""Types past a contrib operator (issue 17, deliverable 1): onnx's shape inference has no
schema for com.microsoft's ops, so every value after the first one lost its type and
nothing after it could fuse. onnxruntime's symbolic shape inference fills them in. The
oracle is onnxruntime on the original model; nothing is timed (groups are forced)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.onnx_domain import IR_VERSION, OPSET, TC_OP


def _with_gelu_in_the_middle() -> onnx.ModelProto:
    """MatMul -> com.microsoft::Gelu -> MatMul+Add+Relu."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Gelu", ["h"], ["g"], domain="com.microsoft"),
        helper.make_node("MatMul", ["g", "w2"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "contrib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        inits,
    )
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def test_nodes_after_a_contrib_op_fuse() -> None:
    model = _with_gelu_in_the_middle()
    optimized = tg.optimize(model, force=True)
    assert [n.op_type for n in optimized.graph.node] == [TC_OP, "Gelu", TC_OP]
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = plain.run(None, {"x": x})
    (got,) = tg.InferenceSession(optimized).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
