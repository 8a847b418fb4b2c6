"""Models with external data, and models over 2 GB (which can only be stored that way).

An input whose tensors live in a separate file gives an output that can be saved the
same way (onnx's own layouts), its big tensors are never copied into serialized models
for measuring, and a model over protobuf's 2 GB limit is loaded, measured, saved and run.
The oracle is onnxruntime on the original model file."""

from __future__ import annotations

import importlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph import cli
from tc_graph.graph import external
from tc_graph.onnx_domain import IR_VERSION, OPSET

OPT = importlib.import_module("tc_graph.graph.optimize")

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _small_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Gather rows of a 320x64 table (80 KiB: kept external), sum them, then a 64x64
    MatMul (16 KiB: external, but read in at load), a bias and a Relu."""
    rng = np.random.default_rng(11)
    inits = {
        "table": rng.standard_normal((320, 64)).astype(np.float32),
        "w": rng.standard_normal((64, 64)).astype(np.float32),
        "b": rng.standard_normal(64).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gather", ["table", "I"], ["rows"], name="gather"),
        helper.make_node("ReduceSum", ["rows", "axes"], ["s"], name="sum", keepdims=0),
        helper.make_node("MatMul", ["s", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["Y"], name="relu"),
    ]
    tensors = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    tensors.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"))
    graph = helper.make_graph(
        nodes,
        "ext",
        [helper.make_tensor_value_info("I", I64, [8, 5])],
        [helper.make_tensor_value_info("Y", F32, [8, 64])],
        tensors,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )
    feeds = {"I": rng.integers(0, 320, (8, 5)).astype(np.int64)}
    return model, feeds


def _save_external(model: onnx.ModelProto, path: Path, location: str) -> None:
    onnx.save_model(
        model, str(path), save_as_external_data=True, location=location, size_threshold=1024
    )


def _oracle(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _external_names(path: Path) -> set[str]:
    proto = onnx.load_model(str(path), load_external_data=False)
    return {t.name for t in proto.graph.initializer if external.is_external(t)}


@pytest.fixture
def small_file(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    model, feeds = _small_model()
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "model.onnx"
    _save_external(model, path, "model.weights")
    assert _external_names(path) == {"table", "w"}
    return path, feeds


def test_external_data_round_trip(small_file: tuple, tmp_path: Path) -> None:
    path, feeds = small_file
    result = tg.optimize(path, force=True)
    assert [n.op_type for n in result.graph.node].count("TcKernel") >= 1
    assert "table" in {t.name for t in result.graph.initializer if external.is_external(t)}
    want = _oracle(path, feeds)
    out = tmp_path / "out.onnx"
    tg.save_model(
        result,
        out,
        base_dir=path.parent,
        save_as_external_data=True,
        location="out.bin",
        size_threshold=1024,
    )
    big = {t.name for t in result.graph.initializer if external.nbytes(t) >= 1024}
    assert _external_names(out) == big and "table" in big and (tmp_path / "out.bin").is_file()
    _same(tg.InferenceSession(str(out)).run(None, feeds), want)
    # Each tensor in a file of its own, every tensor external: onnx's other layout.
    (tmp_path / "each").mkdir()
    tg.save_model(
        result,
        tmp_path / "each" / "m.onnx",
        base_dir=path.parent,
        all_tensors_to_one_file=False,
        size_threshold=0,
    )
    assert len(list((tmp_path / "each").iterdir())) == 1 + len(
        _external_names(tmp_path / "each" / "m.onnx")
    )
    _same(tg.InferenceSession(str(tmp_path / "each" / "m.onnx")).run(None, feeds), want)
    # onnx's own helpers read the data in, and onnx.save_model writes any layout.
    onnx.load_external_data_for_model(result, str(path.parent))
    onnx.save_model(
        result, str(tmp_path / "o2.onnx"), save_as_external_data=True, location="o2.bin"
    )
    _same(tg.InferenceSession(str(tmp_path / "o2.onnx")).run(None, feeds), want)


def test_saving_over_the_data_being_read_is_refused(small_file: tuple) -> None:
    path, feeds = small_file
    result = tg.optimize(path, force=True)
    with pytest.raises(tg.TcError, match="holds the model's own tensors"):
        tg.save_model(result, path, base_dir=path.parent, location="model.weights")
    original = ort.InferenceSession(
        _small_model()[0].SerializeToString(), providers=["CPUExecutionProvider"]
    )
    _same(_oracle(path, feeds), original.run(None, feeds))  # the input's data is intact


def test_a_model_naming_external_data_needs_a_path(small_file: tuple) -> None:
    with pytest.raises(tg.TcError, match="external data files"):
        tg.InferenceSession(tg.optimize(small_file[0], force=True))


def test_optimize_command_writes_external_data_for_external_input(
    small_file: tuple, tmp_path: Path
) -> None:
    path, feeds = small_file
    out = tmp_path / "out.onnx"
    (tmp_path / "out.onnx.data").write_bytes(b"stale" * 1000)  # replaced, not appended to
    assert cli.main(["optimize", str(path), str(out), "--force"]) == 0
    names = _external_names(out)
    assert names and (tmp_path / "out.onnx.data").stat().st_size < 200_000
    _same(tg.InferenceSession(str(out)).run(None, feeds), _oracle(path, feeds))


def test_measuring_reads_external_data_in_place(
    small_file: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cost-aware optimize: every race runs (no 'did not run'), on models that name the
    external tensors instead of copying them; with the serialization limit lowered, on
    models written to a temporary folder instead."""
    path, feeds = small_file
    sessions: list[tuple[int, bool]] = []
    written: list[Path] = []
    # Every race must time both sides, even on a loaded machine (steadiness is not the point).
    monkeypatch.setattr(OPT, "MAX_SPREAD", math.inf)
    monkeypatch.setattr(OPT, "_calibration", lambda: None)  # no group is predicted away
    session, save = external.session, external.save_model

    def spy_session(model: onnx.ModelProto, *args: object, **kw: object) -> object:
        sessions.append((external.inline_bytes(model), external.uses_external(model)))
        return session(model, *args, **kw)

    def spy_save(model: onnx.ModelProto, where: Path, **kw: object) -> None:
        written.append(where)
        save(model, where, **kw)

    monkeypatch.setattr(external, "session", spy_session)
    monkeypatch.setattr(external, "save_model", spy_save)
    for limit in (external.INLINE_MAX_BYTES, 1000):
        sessions.clear()
        monkeypatch.setattr(external, "INLINE_MAX_BYTES", limit)
        monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / f"cache{limit}"))
        result = tg.optimize(path)
        (entry,) = [p.value for p in result.metadata_props if p.key == "tc_graph.decisions"]
        rows = json.loads(entry)
        assert rows and all(r["fused_us"] and r["ort_us"] for r in rows), rows
        # The races (a group's, the whole model's) named the 80 KiB table, never copied it.
        assert any(uses for _, uses in sessions)
        assert all(inline < 80 * 1024 for inline, _ in sessions)
        assert bool(written) == (limit == 1000)
        out = tmp_path / f"out{limit}.onnx"
        tg.save_model(result, out, base_dir=path.parent)
        _same(tg.InferenceSession(str(out)).run(None, feeds), _oracle(path, feeds))


def test_external_data_outside_the_model_folder_is_refused(tmp_path: Path) -> None:
    model, _ = _small_model()
    onnx.save_model(
        model,
        str(tmp_path / "m0.onnx"),
        save_as_external_data=True,
        location="outside.data",
        size_threshold=20_000,  # the table only
    )
    proto = onnx.load_model(str(tmp_path / "m0.onnx"), load_external_data=False)
    (table,) = [t for t in proto.graph.initializer if external.is_external(t)]
    (location,) = [e for e in table.external_data if e.key == "location"]
    location.value = "../outside.data"
    (tmp_path / "in").mkdir()
    onnx.save_model(proto, str(tmp_path / "in" / "m.onnx"))
    with pytest.raises(tg.TcError, match="outside the model's folder"):
        tg.optimize(tmp_path / "in" / "m.onnx", force=True)


# Just over protobuf's 2 GB limit: a (rows, 64) float32 table of 2 GiB + 1 MiB.
_BIG_ROWS = (1 << 31) // 256 + 4096


def _big_model(folder: Path, rows: np.ndarray) -> Path:
    """Gather rows of a 2 GB table stored as external data, then sum them (a small
    output). The data file is sparse: only the rows the test reads hold values (written
    without ever holding the table in memory), the rest are holes that read as zeros."""
    table = TensorProto(name="table", data_type=F32, dims=[_BIG_ROWS, 64])
    table.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "big.data"), ("offset", "0"), ("length", str(_BIG_ROWS * 256))):
        entry = table.external_data.add()
        entry.key, entry.value = key, value
    with open(folder / "big.data", "wb") as f:
        f.truncate(_BIG_ROWS * 256)
        for r in np.unique(rows):
            f.seek(int(r) * 256)
            f.write((np.arange(64, dtype=np.float32) + np.float32(r % 1000)).tobytes())
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "I"], ["rows"], name="gather"),
            helper.make_node("ReduceSum", ["rows", "axes"], ["Y"], name="sum", keepdims=0),
        ],
        "big",
        [helper.make_tensor_value_info("I", I64, list(rows.shape))],
        [helper.make_tensor_value_info("Y", F32, [rows.shape[0], 64])],
        [table, numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )
    onnx.save_model(model, str(folder / "big.onnx"))
    return folder / "big.onnx"


def test_a_model_over_2_gb_is_loaded_measured_saved_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need = 2 * _BIG_ROWS * 256 + (1 << 30)  # input and output, were the files not sparse
    free = shutil.disk_usage(tmp_path).free
    if free < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB free in {tmp_path}, has {free / 2**30:.1f}")
    rng = np.random.default_rng(5)
    rows = rng.integers(0, _BIG_ROWS, (16, 8)).astype(np.int64)
    rows[0, :2] = [_BIG_ROWS - 1, (1 << 31) // 256 + 7]  # past the 2 GiB offset
    (tmp_path / "in").mkdir()
    path = _big_model(tmp_path / "in", rows)
    feeds = {"I": rows}
    monkeypatch.setattr(OPT, "MAX_SPREAD", math.inf)  # timed even on a loaded machine
    result = tg.optimize(path)
    (entry,) = [p.value for p in result.metadata_props if p.key == "tc_graph.decisions"]
    decided = json.loads(entry)
    assert decided and all(d["fused_us"] and d["ort_us"] for d in decided), decided  # measured
    out = tmp_path / "out.onnx"
    # Group decisions cached: only the whole model is raced again.
    assert cli.main(["optimize", str(path), str(out)]) == 0
    assert _external_names(out) == {"table"}
    assert (tmp_path / "out.onnx.data").stat().st_size >= _BIG_ROWS * 256 > 1 << 31
    assert out.stat().st_size < 1 << 20
    written = onnx.load_model(str(out), load_external_data=False)
    (entry,) = [p.value for p in written.metadata_props if p.key == "tc_graph.decisions"]
    kernels = [n.op_type for n in written.graph.node]
    assert kernels.count("TcKernel") == sum(d["fused"] for d in json.loads(entry))
    _same(tg.InferenceSession(str(out)).run(None, feeds), _oracle(path, feeds))
