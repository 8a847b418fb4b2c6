"""optimize on models whose declarations are wrong or hostile: a Gather axis out of
range, inputs declared too large to sample, value_info that contradicts the inputs, a
TcKernel entry that names no def. Each must give a clean TcError, or a node left to
onnxruntime with a stated reason, and never a model that fails or computes otherwise.

Oracles: NumPy, and onnxruntime running the original model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.graph import bench_models
from tc_graph.graph import optimize as opt
from tc_graph.graph.model import Graph
from tc_graph.graph.rewrite import kernel_key
from tc_graph.onnx_domain import TC_DOMAIN, TC_OP


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    *,
    initializers: Sequence[onnx.TensorProto] = (),
    value_info: Sequence[onnx.ValueInfoProto] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes), "g", list(inputs), list(outputs), list(initializers), value_info=value_info
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _fused(model: onnx.ModelProto) -> int:
    return sum(n.domain == TC_DOMAIN and n.op_type == TC_OP for n in model.graph.node)


def _decisions(model: onnx.ModelProto) -> list[dict]:
    (entry,) = [p.value for p in model.metadata_props if p.key == "tc_graph.decisions"]
    return json.loads(entry)


def _f32(name: str, shape: Sequence[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def test_gather_axis_out_of_range() -> None:
    """It was an IndexError in the sampling of Gather indices (_index_extents); now the
    Gather is left to onnxruntime, with the reason, and the rest is still optimized."""
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "T")
    model = _model(
        [
            helper.make_node("Gather", ["T", "I"], ["G"], axis=2),
            helper.make_node("Relu", ["X"], ["Y"]),
        ],
        [helper.make_tensor_value_info("I", TensorProto.INT64, [2]), _f32("X", [8])],
        [_f32("G", [2, 3]), _f32("Y", [8])],
        initializers=[table],
    )
    g = Graph.from_model(model)
    assert opt._index_extents(g, range(2)) == {}
    left = opt.untranslated(g, lambda n: tg.graph.translate.translatable(n, g.types, g.constants))
    assert any("Gather" in label and "out of range" in why for label, why in left), left
    optimized = tg.optimize(model)  # measures: the whole model is sampled too
    assert [n.op_type for n in optimized.graph.node] == ["Gather", "Relu"]


# 2^20 x 2^20 float32: 4 TiB, far beyond any machine's memory.
_HUGE = [1 << 20, 1 << 20]


def _huge_model() -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["X"], ["Y"])], [_f32("X", _HUGE)], [_f32("Y", _HUGE)])


def test_force_allocates_no_sample_inputs() -> None:
    """force=True measures nothing, so it makes no samples: the kernel compiles for the
    declared shape (it was a MemoryError)."""
    optimized = tg.optimize(_huge_model(), force=True)
    assert _fused(optimized) == 1
    assert [d["why"] for d in _decisions(optimized)] == ["forced"]


def test_prepare_compiles_for_huge_declared_inputs_without_allocating_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiling reads only shapes and dtypes, so prepare (and a session) of a forced
    model with a 4 TiB input compiles its kernel; it used to allocate the input first."""
    optimized = tg.optimize(_huge_model(), force=True)
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))
    tg.prepare(optimized)
    assert any(tmp_path.glob("tck-*/kernel.so"))


def test_inputs_too_large_to_sample_are_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost model is off: with this machine's calibration it may predict the group
    to lose first (a CI run found "predicted 0.42x, not measured"), and the subject here
    is the refusal to make samples of 4 TiB."""
    monkeypatch.setattr(opt, "_calibration", lambda: None)
    optimized = tg.optimize(_huge_model())
    assert _fused(optimized) == 0
    (decision,) = _decisions(optimized)
    assert not decision["fused"]
    assert decision["why"].startswith("not measured: its sample inputs would take 4194304 MiB")


def test_value_info_that_contradicts_the_inputs() -> None:
    """h is annotated [4, 5] (and the output so), but x is [2, 3]: onnxruntime runs the
    original (a warning); the optimized model used to hold a kernel compiled for [4, 5]
    that failed at run time. The inputs' shapes win."""
    model = _model(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Exp", ["h"], ["y"])],
        [_f32("x", [2, 3])],
        [_f32("y", [4, 5])],
        value_info=[_f32("h", [4, 5])],
    )
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = np.exp(np.maximum(x, 0))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    plain = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(plain.run(None, {"x": x})[0], want, rtol=1e-6)
    optimized = tg.optimize(model, force=True)
    assert _fused(optimized) == 1
    (got,) = tg.InferenceSession(optimized).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5)
    (out,) = optimized.graph.output
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [2, 3]


def test_value_info_that_agrees_completes_the_inferred_types() -> None:
    """Where inference knows a size, it wins over a symbolic annotation; where it does
    not (a symbolic input), an agreeing annotation fills it in."""

    def h_dims(x_shape: list, h_shape: list) -> list:
        model = _model(
            [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Exp", ["h"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, x_shape)],
            value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, h_shape)],
        )
        (h,) = [v for v in Graph.from_model(model).model.graph.value_info if v.name == "h"]
        return [d.dim_value or d.dim_param for d in h.type.tensor_type.shape.dim]

    assert h_dims([2, 3], [2, "cols"]) == [2, 3]
    assert h_dims([2, "n"], [2, 3]) == [2, 3]
    assert h_dims([2, 3], [2, 4]) == [2, 3]


def test_missing_entry_is_a_tc_error(tmp_path, monkeypatch) -> None:
    """A TcKernel whose entry names no def of its source: a TcError (it was a KeyError)."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_f32("x", [4])], [_f32("y", [4])])
    optimized = tg.optimize(model, force=True)
    for node in optimized.graph.node:
        for a in node.attribute:
            if a.name == "entry":
                a.s = b"nope"
        # The key names the content: an edited node with a stale key is refused sooner.
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        for a in node.attribute:
            if a.name == "kernel_key":
                a.s = kernel_key(attrs).encode()
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "fresh"))
    with pytest.raises(tg.TcError, match="names entry 'nope', which its source does not define"):
        tg.prepare(optimized)
    with pytest.raises(tg.TcError, match="no def named 'g'"):
        tg.define("def f(float(N) A) -> (B) { B(i) = A(i) }")["g"]


def test_unknown_model_name_is_a_tc_error() -> None:
    with pytest.raises(tg.TcError, match="unknown model 'resnet'"):
        bench_models.build("resnet")


def test_agreeing_annotations_still_propagate_through_unknown_ops() -> None:
    """An annotation on a custom op's output is all inference has there: the values
    computed from it get static types (fusable) as before."""
    model = _model(
        [
            helper.make_node("Mystery", ["x"], ["h"], domain="my.ops"),
            helper.make_node("Relu", ["h"], ["z"]),
            helper.make_node("Exp", ["z"], ["y"]),
        ],
        [_f32("x", [2, 3])],
        [_f32("y", [2, 3])],
        value_info=[_f32("h", [2, 3])],
    )
    model.opset_import.append(helper.make_opsetid("my.ops", 1))
    types = Graph.from_model(model).types
    assert types["z"] == (np.dtype(np.float32), (2, 3))


# Found by fuzzing the API: each raised TypeError or AttributeError from inside.
@pytest.mark.parametrize("entry", [tg.optimize, tg.prepare, tg.InferenceSession])
@pytest.mark.parametrize("model", [5, b"\x08\x07", None])
def test_a_model_of_the_wrong_type_is_a_tc_error(
    entry: Callable[..., object], model: object
) -> None:
    with pytest.raises(tg.TcError, match=r"a path .* or an onnx.ModelProto, not "):
        entry(model)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (
            {"sess_options": 5},
            "sess_options must be an onnxruntime.SessionOptions or None, not int",
        ),
        ({"providers": 5}, "providers must be a list of execution provider names, not int"),
        ({"providers": [5]}, "providers must be a list of execution provider names, not \\[5\\]"),
    ],
)
def test_bad_session_arguments_are_a_tc_error(kw: dict, message: str) -> None:
    model = tg.optimize(bench_models.build("mlp1", small=True), force=True)
    with pytest.raises(tg.TcError, match=message):
        tg.InferenceSession(model, **kw)


@pytest.mark.parametrize("entry", [tg.optimize, tg.prepare])
def test_a_directory_is_no_model_file(entry: Callable[..., object], tmp_path: Path) -> None:
    """Found by fuzzing the API: a directory was reported as a file that does not exist."""
    with pytest.raises(tg.TcError, match="is a directory, not an ONNX model file"):
        entry(tmp_path)


@pytest.mark.parametrize("entry", [tg.prepare, tg.InferenceSession])
def test_an_empty_model_proto_is_no_model(entry: Callable[..., object]) -> None:
    """A review found prepare of onnx.ModelProto() succeeding silently, and
    InferenceSession letting onnxruntime's own error escape."""
    with pytest.raises(tg.TcError, match="is not an ONNX model: it has no graph outputs"):
        entry(onnx.ModelProto())
