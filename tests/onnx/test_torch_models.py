"""Models as PyTorch's exporters write them (models/torch_*.onnx, written once by
models/export_torch.py, so no torch is needed here: an MLP, a CNN, ResNet-18, a 2-layer
BERT-style encoder and a DLRM-style model, at small sizes): optimize fuses every computing
node under force=True, and the optimized models, forced or measured, match onnxruntime on
the original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tc_graph as tg
from tc_graph.graph.bench_models import sample_inputs
from tc_graph.onnx_domain import TC_OP

MODELS = Path(__file__).resolve().parents[2] / "models"
NAMES = ["torch_mlp", "torch_cnn", "torch_resnet18", "torch_bert", "torch_dlrm"]
# The cost-aware path compiles and times every candidate group: seconds for these, but
# about 50 s (ResNet-18's 14 groups) and 20 s (BERT) cold on 2 cores, which the zoo bench
# (scripts/bench.py zoo) covers instead.
MEASURED = ["torch_mlp", "torch_cnn", "torch_dlrm"]
CASES = [(name, True) for name in NAMES] + [(name, False) for name in MEASURED]


# The exports with symbolic dimensions, which tests/onnx/test_dynamic.py runs at several sizes.
DYNAMIC = ["torch_bert_dyn", "torch_dlrm_dyn"]


def test_every_committed_export_is_tested() -> None:
    assert sorted(p.stem for p in MODELS.glob("torch_*.onnx")) == sorted(NAMES + DYNAMIC)


@pytest.mark.parametrize(("name", "force"), CASES)
def test_exported_model(name: str, force: bool) -> None:
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    feeds = sample_inputs(model)  # standard normal floats, indices in range of their Gather
    optimized = tg.optimize(model, force=force)
    if force:
        left = [n.op_type for n in optimized.graph.node if n.op_type not in (TC_OP, "Constant")]
        assert not left, f"not fused: {left}"
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = plain.run(None, feeds)
    got = tg.InferenceSession(optimized).run(None, feeds)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
