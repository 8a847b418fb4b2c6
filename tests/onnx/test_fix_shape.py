"""fix_shapes / --fix-shape (issue 17, deliverable 5): pinning a symbolic dimension makes the
model's values static, and the fused model computes what onnxruntime computes on the
original at that size. Nothing here is timed: groups are forced."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.cli import main as cli_main
from tc_graph.errors import TcError
from tc_graph.onnx_domain import IR_VERSION, OPSET, TC_OP


def _dynamic_mlp() -> onnx.ModelProto:
    """MatMul+Add+Relu over inputs of shape (batch, 16)."""
    rng = np.random.default_rng(8)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
        ],
        "dynamic_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [w, b],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )


def _kernels(model: onnx.ModelProto) -> int:
    return sum(n.op_type == TC_OP for n in model.graph.node)


def _check(optimized: onnx.ModelProto, original: onnx.ModelProto, batch: int) -> None:
    x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
    plain = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = plain.run(None, {"x": x})
    (got,) = tg.InferenceSession(optimized).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_pinned_batch_fuses_for_that_size() -> None:
    """Pinned, the kernel is static and the model takes that size only (unpinned, it
    serves every size: test_dynamic.py)."""
    model = _dynamic_mlp()
    pinned = tg.optimize(model, force=True, fix_shapes={"batch": 5})
    assert _kernels(pinned) == 1
    (x,) = pinned.graph.input
    assert [d.dim_value for d in x.type.tensor_type.shape.dim] == [5, 16]
    _check(pinned, model, 5)


@pytest.mark.parametrize(
    ("fixed", "message"),
    [
        ({"seq": 4}, "no symbolic dimension 'seq'(?s:.*)its symbolic dimensions: batch"),
        ({"batch": 0}, "'batch' must be pinned to a positive integer, not 0"),
        ({"batch": 2.5}, "positive integer, not 2.5"),
        # Found by fuzzing: protobuf's ValueError ('Value out of range') escaped.
        ({"batch": 10**20}, "positive integer up to 2\\^31 - 1, not 100000000000000000000"),
        ({"batch": 2**31}, "up to 2\\^31 - 1"),
        # Found by fuzzing the API: TypeError escaped (dictionary update sequence).
        ([8], "fix_shapes must be a mapping of dimension names to sizes, not list"),
    ],
)
def test_a_bad_pin_is_a_tc_error(fixed: dict, message: str) -> None:
    with pytest.raises(TcError, match=message):
        tg.optimize(_dynamic_mlp(), force=True, fix_shapes=fixed)


def test_a_pin_may_be_a_numpy_integer() -> None:
    """A review found NumPy's integers refused."""
    model = _dynamic_mlp()
    pinned = tg.optimize(model, force=True, fix_shapes={"batch": np.int64(5)})
    _check(pinned, model, 5)


def test_the_command_line_refuses_a_dimension_pinned_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by fuzzing the command line: the last of two pins was kept silently."""
    onnx.save(_dynamic_mlp(), tmp_path / "in.onnx")
    argv = ["optimize", str(tmp_path / "in.onnx"), "-o", str(tmp_path / "out.onnx"), "--force"]
    assert cli_main([*argv, "--fix-shape", "batch=3", "--fix-shape", "batch=4"]) == 1
    assert "--fix-shape names 'batch' twice" in capsys.readouterr().err
    assert cli_main([*argv, "--shape", "batch=3", "--shape", "batch=4,8"]) == 1
    assert "--shape names 'batch' twice" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_the_command_line_pins_with_fix_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _dynamic_mlp()
    onnx.save(model, tmp_path / "in.onnx")
    argv = ["optimize", str(tmp_path / "in.onnx"), "-o", str(tmp_path / "out.onnx"), "--force"]
    assert cli_main([*argv, "--fix-shape", "batch=3"]) == 0
    out = onnx.load(tmp_path / "out.onnx")
    assert _kernels(out) == 1
    _check(out, model, 3)
    with pytest.raises(SystemExit):
        cli_main([*argv, "--fix-shape", "batch"])
    assert "expected NAME=N" in capsys.readouterr().err


def test_nothing_to_pin_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without fix_shapes, onnxruntime.tools is not imported: where torch is installed,
    that package imports it (2.7 s of every optimize, a warm one included)."""
    from tc_graph.graph.model import fix_dims

    monkeypatch.setitem(sys.modules, "onnxruntime.tools.onnx_model_utils", None)
    model = _dynamic_mlp()
    fix_dims(model, {})
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
