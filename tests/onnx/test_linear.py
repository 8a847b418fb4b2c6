"""A Gemm composed into the Gemm that reads it, directly or through a Concat
(tc_graph/graph/linear.py).

The oracle is onnxruntime on the model as written; a composition that lost a bias, took
the wrong rows of the second weight or ignored transB moves outputs far past the
tolerance (the composed weights are rounded once, so the sums differ only in order)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.graph import linear
from tc_graph.graph.linear import linears_composed
from tc_graph.graph.optimize import SUMMARY_KEY
from tc_graph.graph.rewrite import replaced_nodes
from tc_graph.onnx_domain import IR_VERSION

RTOL, ATOL = 1e-4, 1e-4
ROWS = 5


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _weight(rng: np.random.Generator, k: int, n: int, trans_b: int) -> np.ndarray:
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    return np.ascontiguousarray(w.T) if trans_b else w


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, int],
    inits: dict[str, np.ndarray],
    outputs: dict[str, int],
    opset: int = 17,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, [ROWS, w]) for k, w in inputs.items()],
        [
            helper.make_tensor_value_info(k, TensorProto.FLOAT, [ROWS, w])
            for k, w in outputs.items()
        ],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return onnx.shape_inference.infer_shapes(model)


def _wide_concat(
    *, trans_b: tuple[int, int] = (1, 1), biases: tuple[bool, bool] = (True, True),
    alpha: float = 1.0, readers: int = 1, k: int = 40, n1: int = 48, n2: int = 16,
) -> onnx.ModelProto:  # fmt: skip
    """DLRM's shape, small: Gemm wide (k -> n1) and a Relu'd 6-wide input, concatenated
    (the Gemm's output second), into a Gemm n1 + 6 -> n2, then Sigmoid."""
    rng = np.random.default_rng(7)
    inits = {
        "w1": _weight(rng, k, n1, trans_b[0]),
        "w2": _weight(rng, 6 + n1, n2, trans_b[1]),
        "b1": rng.standard_normal(n1).astype(np.float32),
        "b2": rng.standard_normal((1, n2)).astype(np.float32),
    }
    first = ["wide", "w1"] + (["b1"] if biases[0] else [])
    second = ["cat", "w2"] + (["b2"] if biases[1] else [])
    inits = {k: v for k, v in inits.items() if k in first + second}
    nodes = [
        helper.make_node("Gemm", first, ["lin"], transB=trans_b[0], alpha=alpha),
        helper.make_node("Relu", ["dense"], ["r"]),
        helper.make_node("Concat", ["r", "lin"], ["cat"], axis=-1),
        helper.make_node("Gemm", second, ["top"], transB=trans_b[1]),
        helper.make_node("Sigmoid", ["top"], ["y"]),
    ]
    outputs = {"y": n2}
    if readers > 1:
        nodes.append(helper.make_node("Relu", ["lin"], ["z"]))
        outputs["z"] = n1
    return _model(nodes, {"wide": k, "dense": 6}, inits, outputs)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {
        v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for v in model.graph.input
    }


def _gemms(model: onnx.ModelProto) -> int:
    return sum(n.op_type == "Gemm" for n in model.graph.node)


@pytest.mark.parametrize("trans_b", [(1, 1), (0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("biases", [(True, True), (False, True), (True, False), (False, False)])
def test_a_gemm_into_a_concat_composes_into_the_gemm_after_it(
    trans_b: tuple[int, int], biases: tuple[bool, bool]
) -> None:
    model = _wide_concat(trans_b=trans_b, biases=biases)
    composed = linears_composed(model)
    onnx.checker.check_model(composed, full_check=True)
    assert _gemms(composed) == 1
    feeds = _feeds(model)
    (want,), (got,) = _run(model, feeds), _run(composed, feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert {t.name for t in composed.graph.initializer}.isdisjoint({"w1", "b1"})
    (cat,) = [v for v in composed.graph.value_info if v.name == "cat"]
    assert [d.dim_value for d in cat.type.tensor_type.shape.dim] == [ROWS, 6 + 40]


def test_the_composed_gemm_names_the_gemm_it_absorbed() -> None:
    """The user's model loses a node: the one that stands for it says so, and so does a
    TcKernel that replaces it (tc-graph optimize --graph-dot lists them)."""
    model = _wide_concat()
    for k, node in enumerate(model.graph.node):
        node.name = f"n{k}"
    composed = linears_composed(model)
    (gemm,) = [n for n in composed.graph.node if n.op_type == "Gemm"]
    assert sorted(replaced_nodes(gemm)) == [("Gemm", "n0"), ("Gemm", "n3")]
    fused = tg.optimize(model, force=True)
    listed = [e for n in fused.graph.node if n.op_type == "TcKernel" for e in replaced_nodes(n)]
    left = {n.name for n in fused.graph.node}
    assert sorted(listed) == sorted(
        (n.op_type, n.name) for n in model.graph.node if n.name not in left
    )


def test_a_gemm_into_a_gemm_composes_where_it_saves_multiply_adds() -> None:
    """Multiply-adds a row, composed against as written: 40 -> 48 -> 16 composes
    (40 x 16 < 48 x (40 + 16)); a bottleneck 40 -> 4 -> 40 stays (40 x 40 > 4 x 80)."""
    rng = np.random.default_rng(2)
    for (k, n1, n2), composes in (((40, 48, 16), True), ((40, 4, 40), False)):
        inits = {"w1": _weight(rng, k, n1, 0), "w2": _weight(rng, n1, n2, 1),
                 "b2": rng.standard_normal(n2).astype(np.float32)}  # fmt: skip
        nodes = [
            helper.make_node("Gemm", ["x", "w1"], ["h"]),
            helper.make_node("Gemm", ["h", "w2", "b2"], ["y"], transB=1),
        ]
        model = _model(nodes, {"x": k}, inits, {"y": n2})
        composed = linears_composed(model)
        assert _gemms(composed) == (1 if composes else 2)
        feeds = _feeds(model)
        np.testing.assert_allclose(
            _run(composed, feeds)[0], _run(model, feeds)[0], rtol=RTOL, atol=ATOL
        )


@pytest.mark.parametrize(
    "model",
    [
        _wide_concat(alpha=0.5),
        _wide_concat(readers=2),
        _wide_concat(n1=8, k=400, n2=64),  # more multiply-adds composed: 400 x 64 > 8 x 464
    ],
    ids=["alpha", "two_readers", "dearer"],
)
def test_what_does_not_compose_is_left_alone(model: onnx.ModelProto) -> None:
    assert linears_composed(model) is model


def test_a_composition_dearer_than_its_cap_is_not_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Composing costs K x N1 x N2 multiply-adds at optimize time (40 x 48 x 16 here):
    past linear.MAX_COMPOSE_MACS the Gemms stay as written, so optimize stays bounded."""
    monkeypatch.setattr(linear, "MAX_COMPOSE_MACS", 40 * 48 * 16 - 1)
    model = _wide_concat()
    assert linears_composed(model) is model


def test_a_weight_a_run_may_override_is_not_a_constant() -> None:
    model = _wide_concat()
    model.graph.input.append(helper.make_tensor_value_info("w1", TensorProto.FLOAT, [48, 40]))
    assert linears_composed(model) is model


def test_optimize_keeps_the_outputs_of_a_composed_model() -> None:
    """Through the whole pipeline (forced, so the groups are kept whatever they measure):
    the outputs against onnxruntime on the model as written."""
    model = _wide_concat(k=64, n1=96, n2=32)
    fused = tg.optimize(model, force=True)
    assert _gemms(fused) <= 1
    feeds = _feeds(model)
    (want,), (got,) = _run(model, feeds), tg.InferenceSession(fused).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("composed_wins", [True, False])
def test_keeping_no_group_the_composed_model_is_kept_where_its_race_wins(
    composed_wins: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No group wins (a stand-in race: every subgraph 0.5x), so none is kept; the model
    with its Gemms composed then races the user's model alone and is returned where it
    wins (the stand-in: 2x or 0.8x), the user's model otherwise; its values are
    onnxruntime's on the model as written either way."""
    opt = importlib.import_module("tc_graph.graph.optimize")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(opt, "_calibration", lambda: None)
    whole: list[int] = []

    def race(original: onnx.ModelProto, fused: onnx.ModelProto, feeds: dict) -> dict:
        if fused.graph.name == "fused":  # a group's subgraph
            return {"fused_us": 2.0, "ort_us": 1.0, "ratio": 0.5}
        whole.append(_gemms(fused))
        ratio = 2.0 if composed_wins else 0.8
        return {"fused_us": 1.0, "ort_us": ratio, "ratio": ratio}

    monkeypatch.setattr(opt, "_race", race)
    model = _wide_concat()
    result = tg.optimize(model)
    assert whole == [1], "one race, of the composed model alone"
    assert _gemms(result) == (1 if composed_wins else 2)
    summary = {p.key: p.value for p in result.metadata_props}[SUMMARY_KEY]
    assert ("Gemms composed" in summary) == composed_wins
    feeds = _feeds(model)
    np.testing.assert_allclose(_run(result, feeds)[0], _run(model, feeds)[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_a_beta_without_a_bias_does_not_scale_the_composed_bias(beta: float) -> None:
    """Found by fuzzing: beta is moot on a Gemm without C, but the composed Gemm has one
    (b1 times W2's rows), which that beta then scaled (or dropped)."""
    rng = np.random.default_rng(0)
    inits = {"w1": _weight(rng, 40, 48, 0), "b1": rng.standard_normal(48).astype(np.float32),
             "w2": _weight(rng, 48, 16, 0)}  # fmt: skip
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
        helper.make_node("Gemm", ["h", "w2"], ["y"], beta=beta),
    ]
    model = _model(nodes, {"x": 40}, inits, {"y": 16})
    composed = linears_composed(model)
    assert _gemms(composed) == 1
    feeds = _feeds(model)
    np.testing.assert_allclose(
        _run(composed, feeds)[0], _run(model, feeds)[0], rtol=RTOL, atol=ATOL
    )


@pytest.mark.parametrize("width", [None, "W"], ids=["no_shape", "symbolic"])
def test_a_concat_of_no_known_width_keeps_its_declaration(width: str | None) -> None:
    """Found by fuzzing: the Concat's declared width was widened as a number even where
    its value_info had no shape (IndexError) or a symbolic width (it became -4)."""
    model = _wide_concat()
    (cat,) = [v for v in model.graph.value_info if v.name == "cat"]
    if width is None:
        cat.type.tensor_type.ClearField("shape")
    else:
        cat.type.tensor_type.shape.dim[1].dim_param = width
    onnx.checker.check_model(model, full_check=True)
    composed = linears_composed(model)
    onnx.checker.check_model(composed, full_check=True)
    assert _gemms(composed) == 1
    feeds = _feeds(model)
    np.testing.assert_allclose(
        _run(composed, feeds)[0], _run(model, feeds)[0], rtol=RTOL, atol=ATOL
    )


def test_new_weights_take_no_name_a_subgraph_defines() -> None:
    """Found by fuzzing: an If branch's own value named `w2__composed` collided with the
    composed weight (onnxruntime: INVALID_GRAPH)."""
    rng = np.random.default_rng(0)
    inits = {"w1": _weight(rng, 40, 48, 0), "w2": _weight(rng, 48, 16, 0)}

    def branch(name: str, op: str, out: str) -> onnx.GraphProto:
        node = helper.make_node(op, ["x"], [out])
        out_info = helper.make_tensor_value_info(out, TensorProto.FLOAT, [ROWS, 40])
        return helper.make_graph([node], name, [], [out_info])

    nodes = [
        helper.make_node("Gemm", ["x", "w1"], ["h"]),
        helper.make_node("Gemm", ["h", "w2"], ["y"]),
        helper.make_node("If", ["c"], ["z"], then_branch=branch("t", "Identity", "w2__composed"),
                         else_branch=branch("e", "Neg", "o")),
    ]  # fmt: skip
    model = _model(nodes, {"x": 40}, inits, {"y": 16, "z": 40})
    model.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    onnx.checker.check_model(model, full_check=True)
    composed = linears_composed(model)
    onnx.checker.check_model(composed, full_check=True)
    assert _gemms(composed) == 1
    feeds = {**_feeds(model), "c": np.array(True)}
    for got, want in zip(_run(composed, feeds), _run(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def _flattened_dlrm() -> onnx.ModelProto:
    """A dynamic batch N; an interaction flattened as torch exports `view(x.size(0), -1)`
    (Shape, Gather, Concat, Reshape: its width is symbolic until N is pinned), concatenated
    with a Gemm of the dense features into a Gemm."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(_weight(rng, 40, 96, 0), "W1"),
        numpy_helper.from_array(_weight(rng, 96 + 12, 16, 0), "W2"),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([-1], np.int64), "m1"),
    ]
    nodes = [
        helper.make_node("Shape", ["E"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Concat", ["n", "m1"], ["shp"], axis=0),
        helper.make_node("Reshape", ["E", "shp"], ["flat"]),
        helper.make_node("Gemm", ["D", "W1"], ["lin"]),
        helper.make_node("Concat", ["flat", "lin"], ["cat"], axis=1),
        helper.make_node("Gemm", ["cat", "W2"], ["top"]),
        helper.make_node("Sigmoid", ["top"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "flattened",
        [
            helper.make_tensor_value_info("E", TensorProto.FLOAT, ["N", 3, 4]),
            helper.make_tensor_value_info("D", TensorProto.FLOAT, ["N", 40]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 16])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    return model


def test_a_dynamic_model_is_composed_alike_at_every_size() -> None:
    """Found in review: the symbolic model did not compose (the flattened width is not a
    number there) while the pinned ones did, so no group could serve every size ("the
    model's nodes differ at different sizes"). The models optimize decides on and puts the
    groups into must be simplified alike."""
    model = _flattened_dlrm()
    opt = importlib.import_module("tc_graph.graph.optimize")
    symbolic = opt.Graph.from_model(model, {}, simplify=opt._simplified)
    dyn = opt._dynamic(model, {}, symbolic, {})
    assert dyn is not None and dyn.aligned
    counts = {_gemms(x.model) for x in (dyn.symbolic, dyn.pinned, dyn.other)}
    assert len(counts) == 1
    fused = tg.optimize(model, force=True)
    assert any(n.op_type == "TcKernel" for n in fused.graph.node)
    rng = np.random.default_rng(3)
    session = tg.InferenceSession(fused)
    for n in (1, 3, 8):
        feeds = {"E": rng.standard_normal((n, 3, 4)).astype(np.float32),
                 "D": rng.standard_normal((n, 40)).astype(np.float32)}  # fmt: skip
        np.testing.assert_allclose(
            session.run(None, feeds)[0], _run(model, feeds)[0], rtol=RTOL, atol=ATOL
        )
