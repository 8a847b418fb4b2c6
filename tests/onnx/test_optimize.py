"""`tg.optimize`, `tg.InferenceSession` and `tg.prepare` end to end.

The oracle is onnxruntime running the unfused model on the same feeds. Outputs must agree
within RTOL/ATOL below: the fused kernels compute the same float32 sums as onnxruntime
but may associate them differently (tiling, a different reduction order), which moves
results of order 1 by a few ulps times the reduction length — far inside 1e-4 relative —
while a wrong index, a dropped bias or a missing Relu moves them by far more.

Most tests use `force=True` (fuse every group without measuring): measurement is not
their point, and it keeps the file fast. The cost-aware path runs on three models only.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import tc_graph as tg
from tc_graph.graph import bench_models
from tc_graph.graph.rewrite import kernel_key
from tc_graph.graph.translate import TRANSLATABLE
from tc_graph.onnx_domain import IR_VERSION, OPSET

ROOT = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-4, 1e-5
TC_DOMAIN = "ai.tc_graph"

# ----------------------------------------------------------------------------- helpers


def plain_session(model: onnx.ModelProto | str | Path) -> ort.InferenceSession:
    """onnxruntime without tc_graph: the oracle."""
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"])


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return plain_session(model).run(None, feeds)


def assert_same(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"output {k}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"output {k}")


def op_types(model: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for n in model.graph.node)


def tc_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain == TC_DOMAIN and n.op_type == "TcKernel"]


def decisions(model: onnx.ModelProto) -> list[dict[str, object]]:
    (entry,) = [p for p in model.metadata_props if p.key == "tc_graph.decisions"]
    return json.loads(entry.value)


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (the repository importable), as a user script runs."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=300,
    )


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: dict[str, np.ndarray],
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "test",
        list(inputs),
        list(outputs),
        [numpy_helper.from_array(a, n) for n, a in initializers.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    return model


def mlp_with(middle: str | None, batch: int | str) -> onnx.ModelProto:
    """Gemm+Relu, an optional `middle` op, Gemm+Relu; `batch` may be a dim_param."""
    rng = np.random.default_rng(7)
    inits = {
        "w0": rng.standard_normal((6, 5)).astype(np.float32),
        "b0": rng.standard_normal(6).astype(np.float32),
        "w1": rng.standard_normal((3, 6)).astype(np.float32),
        "b1": rng.standard_normal(3).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["X", "w0", "b0"], ["g0"], transB=1),
        helper.make_node("Relu", ["g0"], ["h0"]),
    ]
    hidden = "h0"
    if middle is not None:
        nodes.append(helper.make_node(middle, ["h0"], ["m"]))
        hidden = "m"
    nodes += [
        helper.make_node("Gemm", [hidden, "w1", "b1"], ["g1"], transB=1),
        helper.make_node("Relu", ["g1"], ["Y"]),
    ]
    f32 = onnx.TensorProto.FLOAT
    return make_model(
        nodes,
        [helper.make_tensor_value_info("X", f32, [batch, 5])],
        [helper.make_tensor_value_info("Y", f32, [batch, 3])],
        inits,
    )


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def small() -> dict[str, tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]]:
    """Each small model, seeded feeds, and plain onnxruntime's outputs for them."""
    out = {}
    for name in bench_models.NAMES:
        model = bench_models.build(name, small=True)
        feeds = bench_models.sample_inputs(model, seed=1)
        out[name] = (model, feeds, reference(model, feeds))
    return out


@pytest.fixture(scope="module")
def forced(small: dict) -> dict[str, onnx.ModelProto]:
    """2lut and prodmodel optimized with force=True, once for the module."""
    return {name: tg.optimize(small[name][0], force=True) for name in ("2lut", "prodmodel")}


# ----------------------------------------------------------------------------- every model


@pytest.mark.parametrize("name", bench_models.NAMES)
def test_forced_optimize_matches_onnxruntime(name: str, small: dict) -> None:
    model, feeds, want = small[name]
    optimized = tg.optimize(model, force=True)
    # Every op of the sample models has a translation, so forcing must fuse something.
    assert set(op_types(model)) <= TRANSLATABLE
    assert tc_nodes(optimized), f"{name}: nothing fused under force=True"
    made = decisions(optimized)
    assert all(d["fused"] and d["why"] == "forced" for d in made)
    assert len(made) == len(tc_nodes(optimized))
    assert_same(tg.InferenceSession(optimized).run(None, feeds), want)
    # The input model is not modified.
    assert model.SerializeToString() == small[name][0].SerializeToString()
    assert not tc_nodes(model)


@pytest.mark.parametrize("name", ["mlp3_gemm", "2lut", "tbmm"])
def test_cost_aware_optimize_matches_onnxruntime(name: str, small: dict) -> None:
    """Whatever the measurements decide, the result computes the same values, keeps
    exactly the fused groups as TcKernels and leaves the rest to onnxruntime."""
    model, feeds, want = small[name]
    optimized = tg.optimize(model)
    made = decisions(optimized)
    assert made, "no decision recorded"
    assert sum(bool(d["fused"]) for d in made) == len(tc_nodes(optimized))
    for d in made:
        if d["fused"]:
            assert d["fused_us"] is not None and d["ort_us"] is not None, d
    kept = op_types(optimized) - Counter({"TcKernel": len(tc_nodes(optimized))})
    assert kept <= op_types(model)
    if not tc_nodes(optimized):
        assert op_types(optimized) == op_types(model)
    assert_same(tg.InferenceSession(optimized).run(None, feeds), want)


@pytest.mark.parametrize("name", ["mlp3_gemm", "mlp3_matmul", "2lut"])
def test_forced_chains_become_one_kernel(name: str, small: dict) -> None:
    optimized = tg.optimize(small[name][0], force=True)
    assert len(tc_nodes(optimized)) == 1
    if name.startswith("mlp3"):
        assert op_types(optimized) == Counter({"TcKernel": 1})
    # The kernel reads graph inputs and writes the graph outputs directly.
    (node,) = tc_nodes(optimized)
    assert set(node.output) <= {o.name for o in optimized.graph.output}


# ----------------------------------------------------------------------------- saved models


def test_saved_model_runs_in_a_fresh_process(tmp_path: Path, small: dict, forced: dict) -> None:
    _, feeds, want = small["prodmodel"]
    path = tmp_path / "prod.onnx"
    onnx.save(forced["prodmodel"], path)
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = (
        "import sys, numpy as np, tc_graph as tg\n"
        "path, feeds, out = sys.argv[1:]\n"
        "s = tg.InferenceSession(path)\n"
        "np.savez(out, *s.run(None, dict(np.load(feeds))))\n"
    )
    r = run_python(code, str(path), str(tmp_path / "feeds.npz"), str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out.npz")
    assert_same([got[f"arr_{k}"] for k in range(len(want))], want)


def test_plain_onnxruntime_needs_prepare(tmp_path: Path, small: dict, forced: dict) -> None:
    """With an empty cache the kernel is missing: registering the library alone fails
    with a message that says what to do; after tg.prepare the same session setup runs."""
    _, feeds, want = small["2lut"]
    path = tmp_path / "lut.onnx"
    onnx.save(forced["2lut"], path)
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = (
        "import sys, numpy as np, onnxruntime as ort, tc_graph as tg\n"
        "path, feeds, out = sys.argv[1:]\n"
        "feeds = dict(np.load(feeds))\n"
        "def session():\n"
        "    so = ort.SessionOptions()\n"
        "    so.register_custom_ops_library(tg.ort_library_path())\n"
        "    return ort.InferenceSession(path, so, providers=['CPUExecutionProvider'])\n"
        "try:\n"
        "    session().run(None, feeds)\n"
        "    print('RAN BEFORE PREPARE')\n"
        "except Exception as e:\n"
        "    print('FAILED:', e)\n"
        "tg.prepare(path)\n"
        "np.savez(out, *session().run(None, feeds))\n"
    )
    cache = tmp_path / "empty-cache"
    r = run_python(
        code,
        str(path),
        str(tmp_path / "feeds.npz"),
        str(tmp_path / "out.npz"),
        env={"TC_GRAPH_CACHE": str(cache)},
    )
    assert r.returncode == 0, r.stderr
    assert "RAN BEFORE PREPARE" not in r.stdout
    assert "FAILED:" in r.stdout and "tc-graph prepare" in r.stdout, r.stdout
    got = np.load(tmp_path / "out.npz")
    assert_same([got[f"arr_{k}"] for k in range(len(want))], want)
    assert any(cache.iterdir()), "prepare compiled nothing into the given cache"


# ----------------------------------------------------------------------------- bad input


def test_a_dynamic_dimension_fuses_for_every_size() -> None:
    """Decided at its sample sizes, the group serves every batch (tests/onnx/test_dynamic.py)."""
    model = mlp_with(None, "batch")
    optimized = tg.optimize(model, force=True)
    assert tc_nodes(optimized)
    assert all(any(a.name == "row_sizes" for a in n.attribute) for n in tc_nodes(optimized))
    session = tg.InferenceSession(optimized)
    rng = np.random.default_rng(3)
    for batch in (1, 4, 9):
        feeds = {"X": rng.standard_normal((batch, 5)).astype(np.float32)}
        assert_same(session.run(None, feeds), reference(model, feeds))


@pytest.mark.parametrize("op", ["Hardmax", "Sign"])
def test_untranslatable_op_is_kept(op: str) -> None:
    assert op not in TRANSLATABLE
    model = mlp_with(op, 4)
    optimized = tg.optimize(model, force=True)
    assert op_types(optimized)[op] == 1
    assert len(tc_nodes(optimized)) >= 1, "the Gemm+Relu around it were not fused"
    feeds = {"X": np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)}
    assert_same(tg.InferenceSession(optimized).run(None, feeds), reference(model, feeds))


@pytest.mark.parametrize("content", [None, b"", b"not an onnx model", bytes(range(256)) * 3])
def test_invalid_model_is_a_tc_error(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "bad.onnx"
    if content is not None:
        path.write_bytes(content)
    # An empty file parses as an empty ModelProto (protobuf's default); it has no graph.
    for call in (tg.optimize, tg.prepare, tg.InferenceSession):
        with pytest.raises(tg.TcError):
            call(path)


def test_gather_index_out_of_range_is_an_error_not_a_crash(small: dict, forced: dict) -> None:
    model, feeds, want = small["2lut"]
    session = tg.InferenceSession(forced["2lut"])
    rows = next(t.dims[0] for t in model.graph.initializer if t.name == "lut1")
    bad = {k: v.copy() for k, v in feeds.items()}
    bad["I1"][2, 1] = rows
    with pytest.raises(Exception, match="out of range") as info:
        session.run(None, bad)
    assert not isinstance(info.value, AssertionError)
    # onnxruntime rejects it too: the fused model keeps the original's contract.
    with pytest.raises(Exception, match=r"out of data bounds|out of range"):
        plain_session(model).run(None, bad)
    assert_same(session.run(None, feeds), want)


def _gather_of_gather() -> onnx.ModelProto:
    """y = Relu(D[J[I]]): one fused kernel whose D subscript reads J through I."""
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    nodes = [
        helper.make_node("Gather", ["J", "I"], ["g"], axis=0),
        helper.make_node("Gather", ["D", "g"], ["h"], axis=0),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("D", f32, [6]),
        helper.make_tensor_value_info("J", i64, [6]),
        helper.make_tensor_value_info("I", i64, [4]),
    ]
    return make_model(nodes, inputs, [helper.make_tensor_value_info("y", f32, [4])], {})


GATHER_CHILD = """
import json, sys
import numpy as np, onnx
import tc_graph as tg
optimized = tg.optimize(onnx.load(sys.argv[1]), force=True)
assert [n.op_type for n in optimized.graph.node] == ["TcKernel"]
session = tg.InferenceSession(optimized)
out = []
for feeds in np.load(sys.argv[2], allow_pickle=True)["feeds"]:
    try:
        out.append(session.run(None, feeds)[0].tolist())
    except Exception as e:
        out.append(str(e))
print(json.dumps(out))
"""


def test_nested_gather_index_out_of_range_is_an_error_quoting_it(tmp_path: Path) -> None:
    """Issue 12: the fused kernel checked only D's subscript, computed through an
    unchecked J[I]: a crash for I = 2**31 - 1, a heap address quoted for I = 6."""
    model = _gather_of_gather()
    onnx.save(model, tmp_path / "m.onnx")
    d = np.array([-1, 1, 2, 3, 4, 5], np.float32)
    j = np.array([5, 4, 3, 2, 1, 0], np.int64)
    # (I, J, the bad value, the tensor it indexes); None: a good call.
    cases = [
        ([2**31 - 1, 1, 2, 3], j, 2**31 - 1, "J"),
        ([6, 1, 2, 3], j, 6, "J"),
        ([0, 1, 2, 3], [9, 4, 3, 2, 1, 0], 9, "D"),
        ([0, 1, -1, 3], j, None, None),
    ]
    feeds = [
        {"D": d, "J": np.array(jj, np.int64), "I": np.array(i, np.int64)} for i, jj, *_ in cases
    ]
    np.savez(tmp_path / "feeds.npz", feeds=np.array(feeds, dtype=object))
    proc = run_python(GATHER_CHILD, str(tmp_path / "m.onnx"), str(tmp_path / "feeds.npz"))
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    got = json.loads(proc.stdout.splitlines()[-1])
    for (_, _, bad, tensor), f, g in zip(cases, feeds, got, strict=True):
        if bad is None:
            np.testing.assert_array_equal(g, reference(model, f)[0])
            continue
        with pytest.raises(Exception, match=r"out of data bounds|out of range"):
            reference(model, f)
        assert f"index {bad} out of range: subscript 0 of '{tensor}'" in g


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"threads": 100000}, "threads must be an integer from 0 to 1024"),
        ({"unroll": 10**9}, "unroll must be an integer from 1 to 256"),  # was 123 s of compiling
        ({"tile": 8}, "tile must be a list"),
        ({"allow_skewing": "no"}, "allow_skewing must be True or False"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (b"\xff\xfe", "not UTF-8"),
    ],
    ids=["threads", "unroll", "tile", "flag", "not-json", "list", "bytes"],
)
def test_bad_options_in_a_model_are_refused_before_compiling(
    forced: dict, options: object, why: str
) -> None:
    """Issue 12: a TcKernel's `options` attribute is validated like a caller's, before
    anything compiles, and the error names the node."""
    model = onnx.ModelProto()
    model.CopyFrom(forced["2lut"])
    node = tc_nodes(model)[0]
    (attr,) = [a for a in node.attribute if a.name == "options"]
    if isinstance(options, dict):
        attr.s = json.dumps({**json.loads(attr.s), **options}).encode()
    else:
        attr.s = options.encode() if isinstance(options, str) else options  # type: ignore[assignment]
    # The key names the content (a node with a stale key is refused before its options).
    (key,) = [a for a in node.attribute if a.name == "kernel_key"]
    key.s = kernel_key({a.name: helper.get_attribute_value(a) for a in node.attribute}).encode()
    for call in (tg.prepare, tg.InferenceSession):
        with pytest.raises(tg.TcError, match=f"TcKernel node '{node.name}' has invalid options"):
            call(model)
        with pytest.raises(tg.TcError, match=re.escape(why)):
            call(model)


def test_malformed_cached_decisions_are_measured_again(
    small: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12: a malformed entry of decisions.json (a damaged or hand-edited cache) is
    as good as absent: optimize measures again and decides as on a fresh cache, where it
    raised AttributeError or TypeError."""
    OPT = importlib.import_module("tc_graph.graph.optimize")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(OPT, "_calibration", lambda: None)  # every group is raced
    model = small["prodmodel"][0]
    races: list[str] = []

    def race(original: onnx.ModelProto, fused: onnx.ModelProto, feeds: dict) -> dict:
        races.append(fused.graph.name)
        return {"fused_us": 1.0, "ort_us": 2.0, "ratio": 2.0}

    monkeypatch.setattr(OPT, "_race", race)
    first = decisions(tg.optimize(model))
    measured = sorted(races)
    assert measured and all(d["fused"] for d in first)
    path = tmp_path / "cache" / "decisions.json"
    good = json.loads(path.read_text())
    bad_entries = [
        "2.0x", [2.0], None, {}, {"ratio": "2"}, {"why": 5}, {"why": ""},
        {"fused_us": None, "ort_us": 2.0, "ratio": 2.0},
        {"fused_us": 1.0, "ort_us": 2.0, "ratio": True},
        {"fused_us": 1.0, "ort_us": [2.0], "ratio": 2.0},
    ]  # fmt: skip
    for bad in bad_entries:
        path.write_text(json.dumps({k: v if k == "code" else bad for k, v in good.items()}))
        races.clear()
        assert decisions(tg.optimize(model)) == first, bad
        assert sorted(races) == measured, bad


def test_concurrent_runs_on_one_session(small: dict, forced: dict) -> None:
    model, _, _ = small["prodmodel"]
    session = tg.InferenceSession(forced["prodmodel"])
    cases = [bench_models.sample_inputs(model, seed=10 + k) for k in range(4)]
    wants = [reference(model, feeds) for feeds in cases]
    barrier = threading.Barrier(len(cases))
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            barrier.wait()
            for _ in range(25):
                assert_same(session.run(None, cases[k]), wants[k])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ----------------------------------------------------------------------------- whole model


def _staged_race(whole: Callable[[int], dict], winners: list[int]) -> Callable[..., dict]:
    """A stand-in for optimize's race. A group subgraph of more than four operators loses
    (so optimize splits it), a smaller one wins: the first by 1.5x, the others by 2x. The
    whole model gets the verdict `whole(number of TcKernels)`."""

    def race(original: onnx.ModelProto, fused: onnx.ModelProto, feeds: dict) -> dict:
        if fused.graph.name != "fused":  # the whole model, not a group's subgraph
            return whole(sum(n.op_type == "TcKernel" for n in fused.graph.node))
        if len(original.graph.node) > 4:
            return {"fused_us": 2.0, "ort_us": 1.0, "ratio": 0.5}
        winners.append(len(winners))
        ratio = 1.5 if len(winners) == 1 else 2.0
        return {"fused_us": 1.0, "ort_us": ratio, "ratio": ratio}

    return race


@pytest.mark.parametrize("whole_wins_with", [0, 1, 3])
def test_groups_are_dropped_until_the_whole_model_is_not_slower(
    whole_wins_with: int, small: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups that each won alone stay only while the whole rewritten model is not slower
    than the original; the narrowest winner goes first, and the report says why."""
    OPT = importlib.import_module("tc_graph.graph.optimize")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    # No cost model: the stand-in race decides every group (tests/onnx/test_cost.py
    # checks what the model decides).
    monkeypatch.setattr(OPT, "_calibration", lambda: None)
    model, feeds, want = small["prodmodel"]
    seen: list[int] = []

    def whole(kernels: int) -> dict:
        ratio = 1.2 if kernels <= whole_wins_with else 0.8
        return {"fused_us": 1.0, "ort_us": ratio, "ratio": ratio}

    monkeypatch.setattr(OPT, "_race", _staged_race(whole, seen))
    optimized = tg.optimize(model)
    made = decisions(optimized)
    won = [d for d in made if d["fused"] or d["why"].startswith("dropped")]
    assert len(won) == len(seen) >= 2, made
    kept = min(whole_wins_with, len(won))
    assert len(tc_nodes(optimized)) == kept
    dropped = [d for d in made if d["why"].startswith("dropped")]
    assert len(dropped) == len(won) - kept
    assert all(d["why"] == "dropped: the whole model with it ran 0.80x" for d in dropped)
    (summary,) = [p.value for p in optimized.metadata_props if p.key == "tc_graph.summary"]
    if kept:
        assert (
            summary == f"{kept} of {len(made)} groups fused, 1.20 times faster on the sample inputs"
        )
    else:
        assert summary.startswith("nothing fused: ")
    if dropped:  # the group that won by the least (1.5x, the first winner) goes first
        first = next(d for d in made if d["ort_us"] and d["ort_us"] > 1.0)
        assert first["ort_us"] == 1.5 and first["why"].startswith("dropped")
    assert_same(tg.InferenceSession(optimized).run(None, feeds), want)


def test_a_warm_optimize_races_only_the_set_it_kept(
    small: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Optimizing again drops what the last optimize dropped, as it said why, and races
    only the set it kept (warm resnet50 raced 8 times: 14 of its 25 s). The model and its
    report are those of the cold run; a kept set that now loses is dropped from as
    before; keeping nothing races no group, until remeasure (only the prodmodel with
    its C3 Gemm composed into MLP1's, alone: 0 kernels)."""
    OPT = importlib.import_module("tc_graph.graph.optimize")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(OPT, "_calibration", lambda: None)
    model, feeds, want = small["prodmodel"]
    raced: list[int] = []
    wins_with = [1]

    def whole(kernels: int) -> dict:
        raced.append(kernels)
        ratio = 1.2 if kernels <= wins_with[0] else 0.8
        return {"fused_us": 1.0, "ort_us": ratio, "ratio": ratio}

    monkeypatch.setattr(OPT, "_race", _staged_race(whole, []))
    cold = tg.optimize(model)
    winners = raced[0]
    assert winners >= 3 and raced == list(range(winners, 0, -1))
    raced.clear()
    warm = tg.optimize(model)
    assert raced == [1]
    assert decisions(warm) == decisions(cold) and len(tc_nodes(warm)) == 1
    assert_same(tg.InferenceSession(warm).run(None, feeds), want)
    raced.clear()
    wins_with[0] = 0  # the kept set now loses: it is dropped from
    assert len(tc_nodes(tg.optimize(model))) == 0 and raced == [1, 0]
    raced.clear()
    wins_with[0] = winners
    assert len(tc_nodes(tg.optimize(model))) == 0 and raced == [0]
    raced.clear()
    assert len(tc_nodes(tg.optimize(model, remeasure=True))) == winners and raced == [winners]


def test_the_model_the_whole_race_confirmed_is_returned_not_rewritten_again(
    small: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite copies every initializer (2LUT's big tables: 2 of a 4.3 s warm optimize
    went to two rewrites): the set the whole-model race confirmed is returned as raced."""
    OPT = importlib.import_module("tc_graph.graph.optimize")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(OPT, "_calibration", lambda: None)
    model, feeds, want = small["prodmodel"]
    wins = {"fused_us": 1.0, "ort_us": 1.2, "ratio": 1.2}
    monkeypatch.setattr(OPT, "_race", _staged_race(lambda kernels: wins, []))
    rewrites: list[int] = []
    real = OPT.rewrite

    def counted(*args: Any, **kwargs: Any) -> onnx.ModelProto:
        rewrites.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(OPT, "rewrite", counted)
    result = tg.optimize(model)
    assert len(tc_nodes(result)) >= 3 and len(rewrites) == 1
    assert_same(tg.InferenceSession(result).run(None, feeds), want)


def test_the_whole_model_check_runs_both_models_for_real(
    small: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without stand-ins: the whole-model race compares outputs and times both models (on
    a loaded machine its rounds may disagree: then it says so and decides nothing)."""
    OPT = importlib.import_module("tc_graph.graph.optimize")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    model, feeds, _ = small["tbmm"]
    g = OPT.Graph.from_model(model)
    sample = OPT._model_feeds(g)
    assert sample is not None and set(sample) == set(feeds)
    forced = tg.optimize(model, force=True)
    original, rewritten = OPT._fed_models(g, forced, sample)
    verdict = OPT._race(original, rewritten, sample)
    timed = "why" not in verdict and verdict["ratio"] > 0
    assert timed or verdict.get("unsteady") is True, verdict
    # A rewritten model that computes something else is caught by the same race.
    broken = onnx.ModelProto()
    broken.CopyFrom(rewritten)
    out = broken.graph.output[0].name
    broken.graph.value_info.append(broken.graph.output[0])  # TcKernel outputs need a type
    broken.graph.node.append(helper.make_node("Neg", [out], [f"{out}_negated"]))
    broken.graph.output[0].name = f"{out}_negated"
    assert OPT._race(original, broken, sample)["why"] == "outputs differ from onnxruntime's"


def test_the_summary_counts_like_reasons_whatever_their_ratios() -> None:
    """Each decision reads "fused (...)" or "left to onnxruntime: ..."; with nothing fused,
    the summary names the most common reason, measured ratios aside."""
    OPT = importlib.import_module("tc_graph.graph.optimize")

    def measured(ratio: float) -> object:
        why = OPT._ratio_why(ratio)
        return OPT.Decision("Gemm", "2x2", 1.0, ratio, ratio >= OPT.MIN_SPEEDUP, why)

    slow, near, fast = measured(0.76), measured(1.02), measured(1.93)
    assert OPT.verdict(slow) == "left to onnxruntime: 0.76x, slower than onnxruntime"
    assert OPT.verdict(near) == "left to onnxruntime: 1.02x, less than the 1.05x needed"
    assert OPT.verdict(fast) == "fused (1.93x faster)"
    lost = [slow, near, measured(0.9)]
    line = "nothing fused: slower than onnxruntime (2 of 3 groups)"
    assert OPT.summary(lost, [], whole=None) == line
    won = [*lost, fast]
    assert OPT.summary(won, [], whole=1.31) == (
        "1 of 4 groups fused, 1.31 times faster on the sample inputs"
    )
