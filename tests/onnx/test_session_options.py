"""One onnxruntime.SessionOptions serves several tc_graph sessions, as it serves several
onnxruntime ones: a user who tunes one set of options (threads, logging) passes it to
every session they open. Registering tc_graph's library on it a second time made
onnxruntime refuse the second session ("Domain already set in registry")."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

import tc_graph as tg
from tc_graph.graph import bench_models


def test_one_session_options_opens_several_sessions() -> None:
    model = bench_models.build("mlp3_gemm", small=True)
    fused = tg.optimize(model, force=True)
    feeds = bench_models.sample_inputs(model, seed=3)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    first = tg.InferenceSession(fused, so)
    second = tg.InferenceSession(fused, so)
    want = ort.InferenceSession(model.SerializeToString(), so).run(None, feeds)
    for session in (first, second):
        for got, ref in zip(session.run(None, feeds), want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
