"""What an optimized model shows of its fusion: each TcKernel's doc_string (Netron
displays it) and the DOT text of `tc-graph optimize --graph-dot`.

The oracle is the original model: the nodes a TcKernel says it replaced must be exactly
the original nodes that the optimized graph no longer holds."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import tc_graph as tg
from tc_graph import cli
from tc_graph.graph import bench_models
from tc_graph.graph.rewrite import replaced_nodes
from tc_graph.onnx_domain import IR_VERSION, OPSET

F32 = onnx.TensorProto.FLOAT


def _model() -> onnx.ModelProto:
    """Gemm+Relu, an untranslatable Hardmax, Gemm+Relu: two kernels around a kept node.
    One node is unnamed and one name holds a quote and a newline."""
    rng = np.random.default_rng(3)
    inits = {
        "w0": rng.standard_normal((6, 5)).astype(np.float32),
        "w1": rng.standard_normal((3, 6)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["X", "w0"], ["g0"], name="fc0", transB=1),
        helper.make_node("Relu", ["g0"], ["h0"]),
        helper.make_node("Hardmax", ["h0"], ["m"], name="hard"),
        helper.make_node("Gemm", ["m", "w1"], ["g1"], name='fc "1"\nsecond', transB=1),
        helper.make_node("Relu", ["g1"], ["Y"], name="relu1"),
    ]
    graph = helper.make_graph(
        nodes,
        "view",
        [helper.make_tensor_value_info("X", F32, [4, 5])],
        [helper.make_tensor_value_info("Y", F32, [4, 3])],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )


def _tc_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "TcKernel"]


def test_doc_string_lists_exactly_the_replaced_nodes() -> None:
    model = _model()
    optimized = tg.optimize(model, force=True)
    kernels = _tc_nodes(optimized)
    assert len(kernels) == 2
    left = Counter((n.op_type, n.name) for n in optimized.graph.node)
    gone = Counter((n.op_type, n.name) for n in model.graph.node) - left
    listed = Counter(entry for k in kernels for entry in replaced_nodes(k))
    assert listed == gone
    assert sorted(replaced_nodes(kernels[1])) == [("Gemm", 'fc "1"\nsecond'), ("Relu", "relu1")]
    assert "Gemm" in kernels[0].doc_string and '"fc0"' in kernels[0].doc_string


def test_doc_string_of_a_whole_model_kernel() -> None:
    model = bench_models.build("prodmodel", small=True)
    optimized = tg.optimize(model, force=True)
    listed = [entry for k in _tc_nodes(optimized) for entry in replaced_nodes(k)]
    left = {(n.op_type, n.name) for n in optimized.graph.node}
    assert sorted(listed) == sorted(
        (n.op_type, n.name) for n in model.graph.node if (n.op_type, n.name) not in left
    )


def _unquoted(text: str) -> str:
    """DOT text with its double-quoted strings removed (what braces may be counted in)."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def test_graph_dot_writes_the_optimized_graph(tmp_path: Path) -> None:
    onnx.save(_model(), tmp_path / "in.onnx")
    out, dot = tmp_path / "out.onnx", tmp_path / "g.dot"
    argv = ["optimize", str(tmp_path / "in.onnx"), str(out), "--force", "--graph-dot", str(dot)]
    assert cli.main(argv) == 0
    optimized = onnx.load(out)
    text = dot.read_text(encoding="utf-8")
    bare = _unquoted(text)
    assert bare.startswith("digraph ") and bare.rstrip().endswith("}")
    assert bare.count("{") == bare.count("}") == 1
    statements = re.findall(r"^\s*n(\d+) \[label=", bare, flags=re.M)
    assert sorted(map(int, statements)) == list(range(len(optimized.graph.node)))
    producer = {v: i for i, n in enumerate(optimized.graph.node) for v in n.output}
    for i, node in enumerate(optimized.graph.node):
        for v in node.input:
            if v in producer:
                assert f"n{producer[v]} -> n{i} [label={_q(v)}];" in text
    for i, node in enumerate(optimized.graph.node):
        (line,) = re.findall(rf"^  n{i} \[label=.*$", text, flags=re.M)
        if node.op_type == "TcKernel":
            assert "replaces 2 nodes" in line and "#9ecae1" in line
            assert all(op in line for op, _ in replaced_nodes(node))
        else:
            assert "#9ecae1" not in line
    assert '\\"1\\"\\nsecond' in text  # the quoted name, escaped


def _q(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_listings_written_before_any_node_could_carry_one_still_read() -> None:
    """Found in review: TcKernels optimized by earlier versions say "this TcKernel
    replaces"; their listings still read (--graph-dot showed "replaces 0 nodes")."""
    node = helper.make_node("TcKernel", ["x"], ["y"], domain="ai.tc_graph")
    node.doc_string = (
        "tc_graph: this TcKernel replaces these nodes of the original model (op_type name):\n"
        'Gemm "fc0"\nRelu ""'
    )
    assert replaced_nodes(node) == [("Gemm", "fc0"), ("Relu", "")]
