"""The benchmark models (tc_graph.graph.bench_models, models/build.py): every small model is a valid
opset-17 model that onnxruntime runs, and its outputs match NumPy doing the same math with the
model's own weights, so the graphs compute what API.md says they do."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import tc_graph as tg
from tc_graph.graph import bench_models

REPO = Path(__file__).resolve().parents[2]
Weights = dict[str, np.ndarray]
Feeds = dict[str, np.ndarray]


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _linear_t(x: np.ndarray, w: Weights, prefix: str, layers: int) -> np.ndarray:
    """Layers of relu(x·Wᵀ + b) with (out, in) weights."""
    for k in range(layers):
        x = _relu(x @ w[f"{prefix}_w{k}"].T + w[f"{prefix}_b{k}"])
    return x


def _bags(w: Weights, f: Feeds) -> list[np.ndarray]:
    return [w[f"lut{t}"][f[f"I{t}"]].sum(axis=1) for t in (1, 2)]


def _gconv(x: np.ndarray, w: np.ndarray, groups: int) -> np.ndarray:
    """Direct loops over the kernel window, one einsum per group."""
    n, _, h, wd = x.shape
    cout, c, kh, kw = w.shape
    f = cout // groups
    oh, ow = h - kh + 1, wd - kw + 1
    out = np.zeros((n, cout, oh, ow), dtype=np.float64)
    for g in range(groups):
        xg = x[:, g * c : (g + 1) * c].astype(np.float64)
        wg = w[g * f : (g + 1) * f].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i : i + oh, j : j + ow]
                out[:, g * f : (g + 1) * f] += np.einsum("nchw,fc->nfhw", patch, wg[:, :, i, j])
    return out


def _mlp3_matmul(w: Weights, f: Feeds) -> list[np.ndarray]:
    x = f["X"]
    for k in range(3):
        x = _relu(x @ w[f"mlp3_w{k}"] + w[f"mlp3_b{k}"])
    return [x]


def _prodmodel(w: Weights, f: Feeds) -> list[np.ndarray]:
    cat = np.concatenate([*_bags(w, f), f["X"] @ w["c3_w"].T], axis=1)
    return [_linear_t(_linear_t(cat, w, "mlp1", 1), w, "mlp3", 3)]


REFERENCES: dict[str, Callable[[Weights, Feeds], list[np.ndarray]]] = {
    "mlp3_gemm": lambda w, f: [_linear_t(f["X"], w, "mlp3", 3)],
    "mlp3_matmul": _mlp3_matmul,
    "mlp1": lambda w, f: [_linear_t(f["X"], w, "mlp1", 1)],
    "c3": lambda w, f: [f["X"] @ w["c3_w"].T],
    "2lut": _bags,
    "tbmm": lambda w, f: [np.einsum("bnm,bkm->bnk", f["X"], f["Y"])],
    "gconv": lambda w, f: [_gconv(f["X"], w["gconv_w"], bench_models.SMALL.gconv[1])],
    "tmm": lambda w, f: [f["X"] @ w["tmm_w"].T],
    "prodmodel": _prodmodel,
}


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layernorm_add(w: Weights, f: Feeds) -> list[np.ndarray]:
    x = (f["X"] + f["R"]).astype(np.float64)
    norm = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    return [norm * w["ln_scale"] + w["ln_bias"]]


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return x * 0.5 * (1 + erf(x.astype(np.float64) / np.sqrt(2)))


def _conv_layer(name: str, epilogue: bool) -> Callable[[Weights, Feeds], list[np.ndarray]]:
    """The convolution (padded, strided, grouped as CONVS says) plus its bias, and with
    `epilogue` BatchNormalization and Relu."""
    _, _, _, _, stride, pad, groups = bench_models.CONVS[name]

    def reference(w: Weights, f: Feeds) -> list[np.ndarray]:
        x = np.pad(f["X"], ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        channels = f["X"].shape[1]
        y = _gconv(x, w["conv_w"], min(groups, channels))[:, :, ::stride, ::stride]
        y = y + w["conv_b"][:, None, None]
        if epilogue:
            inv = w["bn_scale"] / np.sqrt(w["bn_var"].astype(np.float64) + 1e-5)
            y = np.maximum((y - w["bn_mean"][:, None, None]) * inv[:, None, None]
                           + w["bn_bias"][:, None, None], 0)  # fmt: skip
        return [y]

    return reference


def _attention(w: Weights, f: Feeds) -> list[np.ndarray]:
    q, k, v = (f[n].astype(np.float64) for n in "QKV")
    scores = q @ k.swapaxes(-1, -2) * np.float32(q.shape[-1] ** -0.5) + f.get("M", 0.0)
    return [_softmax(scores) @ v]


LAYER_REFERENCES: dict[str, Callable[[Weights, Feeds], list[np.ndarray]]] = {
    **{name: _conv_layer(name, False) for name in bench_models.CONVS},
    **{f"{name}_bn_relu": _conv_layer(name, True) for name in bench_models.CONVS},
    "bert_gemm": lambda w, f: [f["X"].astype(np.float64) @ w["ffn_w"] + w["ffn_b"]],
    "bert_gemm_gelu": lambda w, f: [_gelu(f["X"].astype(np.float64) @ w["ffn_w"] + w["ffn_b"])],
    "attention": _attention,
    "attention_mask": _attention,
    "softmax": lambda w, f: [_softmax(f["X"].astype(np.float64))],
    "layernorm_add": _layernorm_add,
    "gelu": lambda w, f: [_gelu(f["X"])],
    "tanh": lambda w, f: [np.tanh(f["X"].astype(np.float64))],
}

# Output shapes at the paper's sizes (API.md), for the models cheap enough to build here.
FULL_SHAPES = {
    "mlp3_gemm": [(128, 2)],
    "mlp3_matmul": [(128, 2)],
    "mlp1": [(128, 128)],
    "c3": [(128, 1024)],
    "tbmm": [(500, 26, 26)],
    "gconv": [(32, 512, 12, 12)],
    "tmm": [(128, 1024)],
}


def _run(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_references_cover_every_model() -> None:
    assert set(REFERENCES) == set(bench_models.NAMES)


@pytest.mark.parametrize("name", bench_models.NAMES)
def test_small_model_matches_numpy(name: str) -> None:
    model = bench_models.build(name, small=True)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert bool(weights) == (name != "tbmm"), "weights are initializers (tbmm has none)"
    assert all(a.dtype in (np.float32, np.int64) for a in weights.values())
    feeds = bench_models.sample_inputs(model, seed=1)
    got = _run(model, feeds)
    want = REFERENCES[name](weights, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_layer_references_cover_every_layer() -> None:
    assert set(LAYER_REFERENCES) == set(bench_models.LAYERS)


@pytest.mark.parametrize("name", bench_models.LAYERS)
def test_small_layer_matches_numpy(name: str) -> None:
    model = bench_models.build(name, small=True)
    onnx.checker.check_model(model, full_check=True)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = bench_models.sample_inputs(model, seed=1)
    (got,) = _run(model, feeds)
    (want,) = LAYER_REFERENCES[name](weights, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", bench_models.NAMES)
def test_build_is_deterministic(name: str) -> None:
    a, b = bench_models.build(name, small=True), bench_models.build(name, small=True)
    assert a.SerializeToString() == b.SerializeToString()


def test_2lut_uses_axes_input_and_int64_indices() -> None:
    model = bench_models.build("2lut", small=True)
    reduces = [n for n in model.graph.node if n.op_type == "ReduceSum"]
    assert len(reduces) == 2 and all(len(n.input) == 2 for n in reduces)
    axes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}[reduces[0].input[1]]
    assert axes.dtype == np.int64 and axes.tolist() == [1]
    inputs = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    assert inputs == {"I1": onnx.TensorProto.INT64, "I2": onnx.TensorProto.INT64}


def test_sample_inputs_index_in_range_and_seeded() -> None:
    model = bench_models.build("prodmodel", small=True)
    feeds = bench_models.sample_inputs(model, seed=3)
    rows = bench_models.SMALL.lut[0]
    assert set(feeds) == {"I1", "I2", "X"}
    for t in ("I1", "I2"):
        assert feeds[t].dtype == np.int64 and 0 <= feeds[t].min() and feeds[t].max() < rows
    assert feeds["X"].dtype == np.float32
    again = bench_models.sample_inputs(model, seed=3)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)


def test_sample_inputs_rejects_unknown_integer_input() -> None:
    node = onnx.helper.make_node("Cast", ["N"], ["Y"], to=onnx.TensorProto.FLOAT)
    model = bench_models.make_model([node], {"N": (np.int64, (2,))}, {}, {"Y": (2,)})
    with pytest.raises(ValueError, match="unknown range"):
        bench_models.sample_inputs(model)


def test_unknown_name() -> None:
    with pytest.raises(tg.TcError, match="unknown model"):
        bench_models.build("resnet", small=True)


@pytest.mark.parametrize("name", sorted(FULL_SHAPES))
def test_full_size_shapes(name: str) -> None:
    model = bench_models.build(name, small=False)
    feeds = bench_models.sample_inputs(model)
    assert [o.shape for o in _run(model, feeds)] == FULL_SHAPES[name]


def test_command_line_writes_every_model(tmp_path: Path) -> None:
    out = tmp_path / "models"
    proc = subprocess.run(
        [sys.executable, str(REPO / "models" / "build.py"), "--out", str(out), "--small"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.onnx" for n in bench_models.NAMES)
    for name in bench_models.NAMES:
        loaded = onnx.load(out / f"{name}.onnx")
        onnx.checker.check_model(loaded)
        assert (
            loaded.SerializeToString() == bench_models.build(name, small=True).SerializeToString()
        )


def _script(name: str) -> ModuleType:
    """A module of scripts/, loaded from its file (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"_script_{name}", REPO / "scripts" / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_convert_model_forwards_to_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    convert = _script("convert_model.py")
    seen: list[list[str]] = []
    monkeypatch.setattr(convert.cli, "main", lambda argv: seen.append(list(argv)) or 0)
    assert convert.main(["in.onnx", "-o", "out.onnx", "--report", "--force"]) == 0
    assert convert.main(["in.onnx", "--output", "o.onnx", "--tune", "--graph-png", "g.png"]) == 0
    assert seen == [
        ["optimize", "in.onnx", "-o", "out.onnx", "--force", "--report"],
        ["optimize", "in.onnx", "-o", "o.onnx", "--tune", "--graph-png", "g.png"],
    ]


@pytest.mark.skipif(
    not all(hasattr(tg, n) for n in ("optimize", "InferenceSession")),
    reason="tg.optimize / tg.InferenceSession do not exist yet",
)
def _bench(tmp_path: Path, command: str, only: str, *extra: str) -> list[dict[str, object]]:
    """The JSON rows of `scripts/bench.py command --small` on `only`, one round."""
    out = tmp_path / f"bench_{command}.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, str(REPO / "scripts" / "bench.py"), command, "--small"]
    cmd += ["--rounds", "1", "--threads", "1", "--only", only, "--json", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_bench_models_runs(tmp_path: Path) -> None:
    rows = _bench(tmp_path, "models", "mlp3_gemm,2lut")
    assert [r["name"] for r in rows] == ["mlp3_gemm", "2lut"]
    for r in rows:
        assert r["numpy_us"] is None and r["tc_graph_us"] > 0 and r["ort_us"] > 0
        assert r["compile_cold_s"] >= 0 and r["compile_warm_ms"] >= 0


def test_bench_layers_runs(tmp_path: Path) -> None:
    (row,) = _bench(tmp_path, "layers", "softmax")
    assert row["name"] == "softmax" and row["tc_graph_us"] > 0 and row["ort_us"] > 0
    # Softmax counts one FLOP per element: its rate follows from the median time.
    flops = math.prod(bench_models.SMALL.softmax) / (row["tc_graph_us"] * 1e-6) / 1e9
    assert row["gflops_tc_graph"] == pytest.approx(flops, rel=0.01, abs=0.006)  # 2 decimals
    assert row["peak_gflops"] > row["gflops_tc_graph"]


def test_bench_layers_forced_times_the_tc_kernels(tmp_path: Path) -> None:
    """With --force every group is a TcKernel, whatever optimize's race would decide."""
    (row,) = _bench(tmp_path, "layers", "gelu", "--force")
    assert row["name"] == "gelu" and row["tc_kernels"] == 1 and row["tc_graph_us"] > 0
