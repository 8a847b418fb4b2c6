"""`tc-graph package`: a packaged model runs in a fresh virtual environment that has only
onnxruntime and NumPy (no tc_graph, no C compiler, an empty kernel cache), with a plain
onnxruntime.InferenceSession, and computes what onnxruntime computes on the original model;
kernels built for a CPU level this machine lacks are refused with a message that says the fix.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.cli import main
from tc_graph.graph.package import KERNELS, LIBRARY, MANIFEST, MODEL, isa_flags, package
from tc_graph.runtime import cc

ROOT = Path(__file__).resolve().parents[2]
X86 = platform.machine() in ("x86_64", "AMD64")
# What x86-64-v4 adds to v3: a CPU with all of these runs kernels of every level.
V4_FLAGS = ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return set(value.split())
    return set()


def _small_model() -> onnx.ModelProto:
    """MatMul, Add, Relu, then a Softmax: two kinds of kernel (a reduction among them)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "B")
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["m"]),
        helper.make_node("Add", ["m", "B"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Softmax", ["r"], ["Y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, 32])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, 16])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The original model and its fused version (every group fused, not measured)."""
    root = tmp_path_factory.mktemp("models")
    original = _small_model()
    fused = tg.optimize(original, force=True)
    assert any(n.op_type == "TcKernel" for n in fused.graph.node)
    onnx.save(original, root / "small.onnx")
    onnx.save(fused, root / "small.tc.onnx")
    return root / "small.onnx", root / "small.tc.onnx"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A fresh virtual environment with only onnxruntime and NumPy installed (by pip, with
    the project's pins); its python."""
    if request.config.getoption("--sanitize"):
        pytest.skip("--sanitize: sanitized kernels need ASan preloaded, a fresh Python lacks it")
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root], check=True)
    python = root / "bin" / "python"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile",
         "-c", ROOT / "constraints.txt", "onnxruntime", "numpy"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"pip cannot install onnxruntime into a fresh venv: {proc.stderr[-500:]}")
    return python


# The deployment: plain onnxruntime, the package's library, its kernels named by the session
# config entry, then by the environment variable alone.
_RUN = textwrap.dedent(
    """
    import importlib.util, os, shutil, sys
    import numpy as np
    import onnxruntime as ort

    assert importlib.util.find_spec("tc_graph") is None, "tc_graph is importable"
    assert not any(shutil.which(c) for c in ("cc", "gcc", "clang")), "a C compiler is on PATH"
    package, feeds, out = sys.argv[1:]
    x = dict(np.load(feeds))

    def run(config):
        so = ort.SessionOptions()
        so.register_custom_ops_library(os.path.join(package, "libtc_graph_ort.so"))
        if config:
            so.add_session_config_entry("tc_graph.kernel_dir", os.path.join(package, "kernels"))
        model = os.path.join(package, "model.onnx")
        session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        return session.run(None, x)[0]

    by_config = run(True)
    os.environ["TC_GRAPH_KERNEL_DIR"] = os.path.join(package, "kernels")
    np.savez(out, config=by_config, env=run(False))
    """
)


def _oracle(model: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_package_runs_in_a_fresh_venv_without_tc_graph_or_compiler(
    models: tuple[Path, Path], venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original, fused = models
    isa = "x86-64-v2" if X86 else "native"
    pkg = tmp_path / "pkg"
    assert main(["package", str(fused), "-o", str(pkg), "--isa", isa]) == 0
    assert f"wrote {pkg}" in capsys.readouterr().out

    manifest = json.loads((pkg / MANIFEST).read_text())
    assert manifest["isa"] == isa and manifest["model"] == MODEL
    assert manifest["onnxruntime"]["built_with"] == ort.__version__
    keys = {
        helper.get_attribute_value(a).decode()
        for n in onnx.load(pkg / MODEL).graph.node
        for a in n.attribute
        if a.name == "kernel_key"
    }
    assert keys and {k["key"] for k in manifest["kernels"]} == keys
    for kernel in manifest["kernels"]:
        so = (pkg / KERNELS / kernel["key"] / "kernel.so").read_bytes()
        meta = json.loads((pkg / KERNELS / kernel["key"] / "meta.json").read_text())
        assert meta["key"] == kernel["key"] and meta["sha256"] == kernel["sha256"]
        assert b"libgomp" not in so  # no OpenMP runtime needed where it is deployed
        if X86:
            assert "avx" not in kernel["cpu_features"] and "sse4.2" in kernel["cpu_features"]

    rng = np.random.default_rng(1)
    feeds = {"X": rng.standard_normal((8, 32)).astype(np.float32)}
    np.savez(tmp_path / "feeds.npz", **feeds)
    script = tmp_path / "run.py"
    script.write_text(_RUN)
    env = {"PATH": str(venv.parent), "HOME": str(tmp_path), "TC_GRAPH_CACHE": str(tmp_path / "no")}
    proc = subprocess.run(
        [venv, script, pkg, tmp_path / "feeds.npz", tmp_path / "out.npz"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _oracle(original, feeds)
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got["config"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["env"], want, rtol=1e-4, atol=1e-5)
    assert not (tmp_path / "no").exists()  # nothing came from (or went to) a kernel cache


@pytest.mark.skipif(not X86, reason="x86-64 CPU levels")
@pytest.mark.skipif(
    set(V4_FLAGS) <= _cpu_flags() if X86 else True,
    reason="this CPU has the features of every x86-64 level",
)
def test_kernels_for_a_cpu_level_this_cpu_lacks_are_refused_with_the_fix(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    _, fused = models
    manifest = package(fused, tmp_path / "pkg", isa="x86-64-v4")
    assert set(V4_FLAGS) <= set(manifest["cpu_features"])
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(tmp_path / "pkg" / LIBRARY))
    so.add_session_config_entry("tc_graph.kernel_dir", str(tmp_path / "pkg" / KERNELS))
    lacking = sorted(set(V4_FLAGS) - _cpu_flags())
    with pytest.raises(Exception, match="needs CPU features this CPU lacks") as info:
        ort.InferenceSession(str(tmp_path / "pkg" / MODEL), so, providers=["CPUExecutionProvider"])
    message = str(info.value)
    assert " ".join(lacking) in message and "lower --isa" in message


def test_the_kernel_directory_is_the_only_place_looked_in(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    """A kernel missing from the named directory is an error naming it, even when the
    user's cache holds it: a deployed model runs exactly the kernels packaged with it."""
    _, fused = models
    tg.prepare(fused)  # the cache has every kernel
    empty = tmp_path / "kernels"
    empty.mkdir()
    so = ort.SessionOptions()
    so.register_custom_ops_library(tg.ort_library_path())
    so.add_session_config_entry("tc_graph.kernel_dir", str(empty))
    with pytest.raises(Exception, match="is not in the kernel directory named by the session"):
        ort.InferenceSession(str(fused), so, providers=["CPUExecutionProvider"])


@pytest.mark.skipif(not X86, reason="x86-64 CPU levels")
@pytest.mark.parametrize(("isa", "floats"), [("x86-64-v2", 4), ("x86-64-v3", 8), ("x86-64-v4", 16)])
def test_an_isa_sets_the_vector_unit_and_the_features(isa: str, floats: int) -> None:
    with cc.target_flags([f"-march={isa}"]):
        assert cc.vector_unit().floats == floats
        assert ("avx512f" in cc.cpu_features()) == (isa == "x86-64-v4")
        assert f"-march={isa}" in cc.compiler_identity()


def test_package_refuses_a_directory_in_use(models: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "old").write_text("x")
    with pytest.raises(tg.TcError, match="is not an empty directory"):
        package(models[1], tmp_path / "pkg")
    with pytest.raises(tg.TcError, match="unknown --isa"):
        isa_flags("arm9")


def test_a_model_without_tckernels_is_optimized_first(
    models: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Optimizing measures, so whether a group pays is up to this machine: fuse all here."""
    import tc_graph.graph.package as pkg

    monkeypatch.setattr(pkg, "optimize", lambda m: tg.optimize(m, force=True))
    manifest = package(models[0], tmp_path / "pkg")
    model = onnx.load(tmp_path / "pkg" / MODEL)
    assert manifest["kernels"] and any(n.op_type == "TcKernel" for n in model.graph.node)


def test_a_packaged_rows_model_runs_every_batch_in_plain_onnxruntime(tmp_path: Path) -> None:
    """A model with a dynamic batch packages each rows node's kernel for every size it
    has; plain onnxruntime then runs it at any batch, and only those kernels are there."""
    model = _small_model()
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    fused = tg.optimize(model, force=True, shapes={"batch": [4]})
    manifest = package(fused, tmp_path / "pkg")
    keys = sorted(k["key"] for k in manifest["kernels"])
    assert [k.rsplit("-r", 1)[1] for k in keys] == ["1", "4"]
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(tmp_path / "pkg" / LIBRARY))
    so.add_session_config_entry("tc_graph.kernel_dir", str(tmp_path / "pkg" / KERNELS))
    session = ort.InferenceSession(str(tmp_path / "pkg" / MODEL), so)
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 4, 6):
        x = np.random.default_rng(batch).standard_normal((batch, 32)).astype(np.float32)
        (got,) = session.run(None, {"X": x})
        (want,) = plain.run(None, {"X": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
