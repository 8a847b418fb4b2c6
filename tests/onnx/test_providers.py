"""Sessions with a GPU execution provider are told that TcKernels run on the CPU.

tc_graph's native library registers TcKernel for the CPU only, so in a session with
CUDAExecutionProvider (say) onnxruntime copies each TcKernel's inputs to the host and
its outputs back. On this machine there is no GPU: onnxruntime 1.32 warns about the
unavailable provider itself and falls back to the next one in the list, so the session
still runs and its outputs are checked against onnxruntime on the original model."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tc_graph as tg
from tc_graph import cli
from tc_graph.graph import bench_models

CUDA = "CUDAExecutionProvider"


@pytest.fixture(scope="module")
def optimized() -> tuple[onnx.ModelProto, onnx.ModelProto, dict[str, np.ndarray]]:
    model = bench_models.build("mlp3_gemm", small=True)
    return model, tg.optimize(model, force=True), bench_models.sample_inputs(model, seed=2)


@pytest.mark.filterwarnings("ignore:Specified provider:UserWarning")  # onnxruntime's own
@pytest.mark.parametrize(
    "providers",
    [[CUDA, "CPUExecutionProvider"], [(CUDA, {"device_id": "0"}), "CPUExecutionProvider"]],
)
def test_gpu_provider_warns_that_tc_kernels_run_on_the_cpu(
    providers: list, optimized: tuple
) -> None:
    model, fused, feeds = optimized
    with pytest.warns(tg.TcWarning, match=f"run on the CPU, not on {CUDA}") as caught:
        session = tg.InferenceSession(fused, providers=providers)
    (ours,) = [w for w in caught if issubclass(w.category, tg.TcWarning)]
    assert "copies its inputs from the device to the host and its outputs back" in str(ours.message)
    assert ours.filename == __file__  # the warning points at the caller's line
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, ref in zip(session.run(None, feeds), want.run(None, feeds), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("providers", [None, ["CPUExecutionProvider"]])
def test_cpu_sessions_do_not_warn(providers: list | None, optimized: tuple) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.TcWarning)
        tg.InferenceSession(optimized[1], providers=providers)


@pytest.mark.parametrize("available", [[CUDA, "CPUExecutionProvider"], ["CPUExecutionProvider"]])
def test_optimize_command_warns_where_onnxruntime_has_a_gpu_provider(
    available: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    onnx.save(bench_models.build("mlp3_gemm", small=True), tmp_path / "in.onnx")
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(available))
    assert (
        cli.main(["optimize", str(tmp_path / "in.onnx"), str(tmp_path / "o.onnx"), "--force"]) == 0
    )
    err = capsys.readouterr().err
    note = f"warning: TcKernel nodes run on the CPU, not on {CUDA}"
    assert (note in err) == (CUDA in available), err
