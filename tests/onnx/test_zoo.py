"""A model nobody here wrote, through `optimize`: the optimized model must compute what
onnxruntime computes on the original. onnx ships its light_* models in its wheel;
alexnet is the quickest of the nine. force=True fuses every group (its convolutions,
which the cost-aware path leaves to onnxruntime), so the check has kernels to catch,
and takes seconds where measuring every group takes a minute on a busy CI machine
(scripts/bench.py zoo runs the cost-aware path on all nine). The committed torch
exports are checked in test_torch_models.py. No timing is
asserted: speed is the bench's job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tc_graph as tg
from tests.tolerances import assert_matches

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Each runtime input as arange(n) / n in its shape, as onnx's own runner feeds
    these models."""
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name not in inits:
            shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
            n = int(np.prod(shape))
            feeds[value.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", ["light_bvlc_alexnet"])
def test_light_model_matches_onnxruntime(name: str) -> None:
    model = onnx.load(str(LIGHT / f"{name}.onnx"))
    feeds = _feeds(model)
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = plain.run(None, feeds)
    optimized = tg.optimize(model, force=True)
    assert any(n.op_type == "TcKernel" for n in optimized.graph.node), "nothing was fused"
    got = tg.InferenceSession(optimized).run(None, feeds)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, w, f"{name} output {k}")
