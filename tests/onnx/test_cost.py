"""The cost model (issue 14, items 2 and 3): FLOPs and bytes from a model's shapes, the
calibration's cache, and what optimize does with a prediction: a group predicted to lose
by more than 2x is never compiled, a mixed lookup+Gemm group is split before measuring.

FLOP and byte counts are checked against NumPy computing the same nodes; what optimize
does is checked with a stand-in calibration (the real one varies with the machine), and
its result against onnxruntime on the original model.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper, numpy_helper

import tc_graph as tg
from tc_graph.cli import main as cli_main
from tc_graph.graph import bench_models, cost
from tc_graph.graph.model import Graph
from tc_graph.graph.partition import make_group
from tc_graph.onnx_domain import IR_VERSION, OPSET

OPT = importlib.import_module("tc_graph.graph.optimize")
RTOL, ATOL = 1e-4, 1e-5
F32 = onnx.TensorProto.FLOAT


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list[int]]],
           outputs: dict[str, list[int]], inits: dict[str, np.ndarray]) -> onnx.ModelProto:  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "cost",
        [helper.make_tensor_value_info(v, t, s) for v, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(v, F32, s) for v, s in outputs.items()],
        [numpy_helper.from_array(a, v) for v, a in inits.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    return model


def _rates(**tc: float) -> cost.Rates:
    """A stand-in calibration: every rate 1e11 units/s on both sides but `tc`'s, 1 µs
    per onnxruntime node and per TcKernel, 10 µs per session call."""
    ort_rates = dict.fromkeys(cost.CLASSES, 1e11)
    return cost.Rates(ort_rates, {**ort_rates, **tc}, 1e-6, 1e-6, 1e-5)


def _decisions(model: onnx.ModelProto) -> list[dict[str, Any]]:
    (entry,) = [p.value for p in model.metadata_props if p.key == "tc_graph.decisions"]
    return json.loads(entry)


def _check_outputs(optimized: onnx.ModelProto, original: onnx.ModelProto) -> None:
    feeds = bench_models.sample_inputs(original, seed=2)
    plain = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    got = tg.InferenceSession(optimized).run(None, feeds)
    for g, w in zip(got, plain.run(None, feeds), strict=True):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- counts


def test_flops_and_bytes_of_matmul_conv_gather_and_elementwise_nodes() -> None:
    """Each node's FLOPs and bytes against NumPy computing it: multiply-adds count two,
    a Gather reads only the rows it gathers, and a fused group moves only what enters
    and leaves it."""
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4, 5), (5, 6), (6,)))
    img, k = rng.standard_normal((2, 3, 8, 8)), rng.standard_normal((4, 3, 3, 3))
    table, idx = rng.standard_normal((100, 8)).astype(np.float32), rng.integers(0, 100, (3, 5))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Conv", ["img", "k"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Gather", ["t", "i"], ["g"]),
    ]
    model = _model(
        nodes,
        {"x": (F32, [3, 4, 5]), "img": (F32, [2, 3, 8, 8]), "i": (onnx.TensorProto.INT64, [3, 5])},
        {"r": [3, 4, 6], "c": [2, 4, 4, 4], "g": [3, 5, 8]},
        {"w": w, "b": b, "k": k.astype(np.float32), "t": table},
    )
    g = Graph.from_model(model)
    m = x @ w
    a = m + b
    r = np.maximum(a, 0)
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    c = np.einsum("nchwij,ocij->nohw", windows, k).astype(np.float32)
    gathered = table[idx]
    want = {  # node: (FLOPs, bytes read and written)
        0: (2 * m.size * x.shape[-1], x.nbytes + w.nbytes + m.nbytes),
        1: (a.size, m.nbytes + b.nbytes + a.nbytes),
        2: (r.size, a.nbytes + r.nbytes),
        3: (
            2 * c.size * 3 * 3 * 3,
            img.astype(np.float32).nbytes + k.astype(np.float32).nbytes + c.nbytes,
        ),
        4: (0, gathered.nbytes + idx.nbytes + gathered.nbytes),
    }
    got = {n: (cost.node_work(g, n).flops, cost.node_work(g, n).bytes()) for n in g.order}
    assert got == want
    assert [cost.node_work(g, n).kind for n in g.order] == [
        cost.CONTRACTION, cost.ELEMENTWISE, cost.ELEMENTWISE, cost.CONVOLUTION, cost.LOOKUP
    ]  # fmt: skip
    # Bytes at 1 B/s, FLOPs for free, no overheads: the predicted seconds are the bytes.
    ones = {**dict.fromkeys(cost.CLASSES, 1.0), cost.CONTRACTION: 1e30}
    ones = cost.Rates(ones, ones, 1e-300, 1e-300, 1e-300)
    chain = make_group(g, [0, 1, 2])
    p = cost.predict(g, chain, ones, [[0, 1, 2]])
    assert math.isclose(p.ort_s, want[0][1] + want[1][1] + want[2][1])
    assert math.isclose(p.fused_s, x.nbytes + w.nbytes + b.nbytes + r.nbytes)
    assert p.mixed == ""


# ----------------------------------------------------------------------------- calibration


class Runner:
    """A stand-in probe runner, its calls timed by a stand-in `cost._time` (see _timed)."""

    def __init__(self) -> None:
        self.probes = 0

    def __call__(self, model: onnx.ModelProto, fused: bool) -> tuple[Any, Any]:
        self.probes += 1
        return (lambda: None), ((lambda: None) if fused else None)


def _timed(spread: float) -> Any:
    """A stand-in for cost._time: 1 ms for onnxruntime, 2 ms fused, rounds that spread
    by `spread`."""
    return lambda ort_call, tc_call: (1e-3, 2e-3 if tc_call else 0.0, spread)


def test_calibration_is_cached_reused_cleared_and_remeasured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cost, "_MEMO", {})
    monkeypatch.setattr(cost, "_time", _timed(0.01))
    runner = Runner()
    first = cost.rates("k", runner)
    stored = json.loads((tmp_path / "cache" / "calibration.json").read_text())
    assert cost.Rates(**stored["k"]) == first
    rates = [*first.ort.values(), *first.tc.values(), first.ort_node_s, first.tc_kernel_s]
    assert all(0 < r < math.inf for r in rates), "a rate or overhead is 0 or infinite"
    # The chain of Adds costs what one does: the per-node overhead is at its floor.
    assert first.ort_node_s == cost._MIN_SECONDS
    probes = runner.probes
    assert probes >= len(cost.CLASSES)
    assert cost.rates("k", runner) == first and runner.probes == probes  # reused
    assert cli_main(["cache", "clear"]) == 0
    assert "removed the cached cost-model calibration" in capsys.readouterr().out
    assert not (tmp_path / "cache" / "calibration.json").exists()
    cost.rates("k", runner)
    assert runner.probes == 2 * probes  # measured again
    cost.rates("k", runner, remeasure=True)
    assert runner.probes == 3 * probes
    # optimize's remeasure calibrates again too; a damaged entry is measured again.
    monkeypatch.setattr(OPT, "_probe", runner)
    monkeypatch.setattr(OPT, "_race", lambda *a: {"why": "not measured: a stand-in"})
    tg.optimize(bench_models.build("mlp1", small=True), remeasure=True)
    assert runner.probes == 4 * probes
    key = OPT._context_key()
    data = json.loads((tmp_path / "cache" / "calibration.json").read_text())
    data[key]["tc"]["lookup"] = 0
    (tmp_path / "cache" / "calibration.json").write_text(json.dumps(data))
    monkeypatch.setattr(cost, "_MEMO", {})
    cost.rates(key, runner)
    assert runner.probes == 5 * probes


def test_an_unsteady_calibration_is_used_but_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probes whose rounds never agree (a loaded machine) are timed again; if they
    still disagree, the calibration serves this process and is never cached: another
    process measures again."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cost, "_MEMO", {})
    monkeypatch.setattr(cost, "_time", _timed(0.5))
    runner = Runner()
    first = cost.rates("k", runner)
    assert not (tmp_path / "cache" / "calibration.json").exists()
    probes = runner.probes
    assert cost.rates("k", runner) == first and runner.probes == probes  # this process's
    monkeypatch.setattr(cost, "_MEMO", {})  # another process
    cost.rates("k", runner)
    assert runner.probes == 2 * probes
    assert not (tmp_path / "cache" / "calibration.json").exists()


# ----------------------------------------------------------------------------- decisions


def _conv_relu() -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    k = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    return _model(nodes, {"x": (F32, [1, 4, 16, 16])}, {"y": [1, 8, 16, 16]}, {"k": k})


def test_a_group_predicted_to_lose_is_never_compiled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A calibration where tc_graph's convolutions crawl: the Conv+Relu group is neither
    compiled nor measured, and the report says what was predicted (on a cache of its own:
    an outcome remembered for the group comes before any prediction)."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))
    model = _conv_relu()
    monkeypatch.setattr(OPT, "_calibration", lambda: _rates(convolution=1e7))

    def never(*args: Any, **kw: Any) -> None:
        pytest.fail("a group predicted to lose was compiled")

    monkeypatch.setattr(OPT, "_compile", never)
    monkeypatch.setattr(OPT, "_race", never)
    optimized = tg.optimize(model, report=True)
    (made,) = _decisions(optimized)
    assert re.fullmatch(r"predicted 0\.\d\dx, not measured", made["why"]), made
    assert not made["fused"] and made["fused_us"] is None
    err = capsys.readouterr().err
    assert f"left to onnxruntime: {made['why']}" in err
    assert "nothing fused: predicted to lose by more than 2x, not measured (1 of 1 group)" in err
    _check_outputs(optimized, model)


def test_force_does_not_consult_the_cost_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _conv_relu()

    def never() -> None:
        pytest.fail("force=True calibrated the cost model")

    monkeypatch.setattr(OPT, "_calibration", never)
    optimized = tg.optimize(model, force=True)
    assert [d["why"] for d in _decisions(optimized)] == ["forced"]
    _check_outputs(optimized, model)


def _lookup_and_gemm() -> onnx.ModelProto:
    """DLRM in small: a Gather+ReduceSum lookup and a dense Gemm, concatenated."""
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Gather", ["t", "i"], ["rows"]),
        helper.make_node("ReduceSum", ["rows", "axes"], ["bag"], keepdims=0),
        helper.make_node("Gemm", ["x", "w", "b"], ["dense"], transB=1),
        helper.make_node("Concat", ["bag", "dense"], ["y"], axis=1),
    ]
    inits = {
        "t": rng.standard_normal((1000, 8)).astype(np.float32),
        "axes": np.array([1], np.int64),
        "w": rng.standard_normal((8, 32)).astype(np.float32),
        "b": rng.standard_normal(8).astype(np.float32),
    }
    inputs = {"i": (onnx.TensorProto.INT64, [16, 6]), "x": (F32, [16, 32])}
    return _model(nodes, inputs, {"y": [16, 16]}, inits)


def _calibrated_and_raced(monkeypatch: pytest.MonkeyPatch, rates: cost.Rates) -> list[set[str]]:
    """optimize with these rates, and a race stand-in where every fused side wins 2x;
    returns the op types of each raced subgraph, in order (the whole model's last)."""
    monkeypatch.setattr(OPT, "_calibration", lambda: rates)
    raced: list[set[str]] = []

    def race(original: onnx.ModelProto, fused: onnx.ModelProto, feeds: dict) -> dict:
        raced.append({n.op_type for n in original.graph.node})
        return {"fused_us": 1.0, "ort_us": 2.0, "ratio": 2.0}

    monkeypatch.setattr(OPT, "_race", race)
    return raced


def test_a_mixed_lookup_and_gemm_group_is_split_before_measuring(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A calibration where the fused lookup+Gemm is predicted to lose a little (not 2x):
    the group is split before anything is compiled or raced, the report says why, and
    its parts are measured (here winning) on their own. The stand-in wins are remembered
    in a cache of the test's own, where no other test recalls them."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))
    model = _lookup_and_gemm()
    rates = _rates(contraction=1e9)
    g = Graph.from_model(model)
    group = make_group(g, g.order)
    p = cost.predict(g, group, rates, OPT._clusters(g, group))
    assert p.mixed and cost.MIN_PREDICTED <= p.ratio < OPT.MIN_SPEEDUP, p
    raced = _calibrated_and_raced(monkeypatch, rates)
    optimized = tg.optimize(model, report=True, remeasure=True)
    assert raced, "nothing was measured"
    assert not any({"Gather", "Gemm"} <= ops for ops in raced[:-1]), raced
    assert raced[-1] == {n.op_type for n in model.graph.node}  # the whole model
    made = _decisions(optimized)
    split = [d for d in made if d["why"].startswith("split before measuring")]
    assert split and re.match(r"split before measuring: memory-bound .*lookup", split[0]["why"])
    assert split[0]["ops"] == "Gather+ReduceSum+Gemm+Concat"
    assert "joined with a contraction" in capsys.readouterr().err
    # The split rows explain; they are not groups of the summary's count.
    fused = sum(d["fused"] for d in made)
    (summary,) = [p.value for p in optimized.metadata_props if p.key == "tc_graph.summary"]
    assert fused and summary.startswith(f"{fused} of {len(made) - len(split)} groups fused")
    _check_outputs(optimized, model)


@pytest.mark.parametrize("name", ["2lut", "mlp3_gemm"])
def test_the_real_calibration_lets_the_demos_winners_be_measured(name: str) -> None:
    """With this machine's calibration, the demo's kernels that win (2LUT's lookups and
    the MLP chain) are compiled and measured, not predicted away. (Whether the measurement
    then wins depends on the machine's load, which the test does not control.)"""
    model = bench_models.build(name, small=True)
    g = Graph.from_model(model)
    rates = OPT._calibration()
    assert rates is not None
    for group in OPT.candidate_groups(g, translatable=lambda n: None):
        p = cost.predict(g, group, rates, OPT._clusters(g, group))
        assert cost.verdict(p, OPT.MIN_SPEEDUP, splittable=True) is None, p
    optimized = tg.optimize(model)
    for d in _decisions(optimized):
        assert not d["why"].startswith(("predicted", "split")), d
    _check_outputs(optimized, model)


def test_a_mixed_group_predicted_to_win_is_still_split_when_its_parts_win_more(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """DLRM's lookups joined with its bottom MLP measured as one kernel: a calibration
    where tc_graph's lookups are fast and its Gemm slow predicts the joined group to win
    (so it used to be compiled and raced) but its parts apart, the lookups fused and the
    Gemm left to onnxruntime, to win more: it is split, by class, before measuring."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))  # the stand-in wins stay here
    model = _lookup_and_gemm()
    slow = dict.fromkeys(cost.CLASSES, 1e7)
    rates = cost.Rates(slow, {**slow, "lookup": 1e13, "elementwise": 1e13}, 1e-9, 1e-9, 1e-9)
    g = Graph.from_model(model)
    group = make_group(g, g.order)
    p = cost.predict(g, group, rates, OPT._clusters(g, group))
    assert p.mixed and p.ratio >= OPT.MIN_SPEEDUP, p
    raced = _calibrated_and_raced(monkeypatch, rates)
    optimized = tg.optimize(model, remeasure=True)
    assert {"Gather", "ReduceSum", "Concat"} in raced[:-1], raced
    assert not any({"Gather", "Gemm"} <= ops for ops in raced[:-1]), raced
    (split,) = [d for d in _decisions(optimized) if d["why"].startswith("split before")]
    assert split["ops"] == "Gather+ReduceSum+Gemm+Concat"
    assert "apart" in split["why"], split
    _check_outputs(optimized, model)
