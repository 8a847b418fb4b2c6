"""Models as PyTorch's exporter writes them (models/torch_*.onnx, written once by
models/export_torch.py, so no torch is needed here): optimize fuses every computing node
under force=True, and the optimized models, forced or measured, match onnxruntime on
the original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tc_graph as tg
from tc_graph.graph.model import TC_OP

MODELS = Path(__file__).resolve().parents[2] / "models"
INPUTS = {"torch_mlp": (8, 32), "torch_cnn": (2, 3, 16, 16)}


@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_exported_model(name: str, force: bool) -> None:
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    feeds = {"x": np.random.default_rng(0).standard_normal(INPUTS[name]).astype(np.float32)}
    optimized = tg.optimize(model, force=force)
    if force:
        left = [n.op_type for n in optimized.graph.node if n.op_type not in (TC_OP, "Constant")]
        assert not left, f"not fused: {left}"
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = plain.run(None, feeds)
    got = tg.InferenceSession(optimized).run(None, feeds)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
