"""The benchmark ONNX models for `scripts/bench.py models`: build one (tc_graph.graph.bench_models),
optimize it in a fresh kernel cache (timing cold and warm), check the optimized model's
outputs against onnxruntime on the original, and hand back the two session calls to time.

Imported by bench.py only after it has set the thread environment, like _bench_models.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import _bench_models as bm
import onnx

import tc_graph as tg
from tc_graph.graph import cost
from tc_graph.graph.bench_models import LAYERS, NAMES, build, sample_inputs
from tc_graph.graph.model import Graph
from tc_graph.onnx_domain import TC_OP

__all__ = ["LAYERS", "NAMES", "PreparedModel", "prepared"]


@dataclass
class PreparedModel:
    """The session calls of both contenders, checked, the optimize latency and what fused."""

    calls: dict[str, Callable[[], object]]
    compile_cold_s: float
    compile_warm_ms: float
    tc_kernels: int
    note: str | None
    flops: float  # the model's FLOPs, as the cost model counts them (multiply-adds two)


def _flops(model: onnx.ModelProto) -> float:
    g = Graph.from_model(model)
    return sum(cost.node_work(g, n).flops for n in g.dag.nodes)


def _optimized_session(model: onnx.ModelProto, threads: int, force: bool) -> tuple[object, int]:
    """tg.optimize (cost-aware, measured under the session settings the bench runs with;
    with `force`, every translatable group fused unmeasured) and a tg.InferenceSession on
    the result; its TcKernel count."""
    optimized = tg.optimize(model, sess_options=bm._session_options(threads), force=force)
    kernels = sum(n.op_type == TC_OP for n in optimized.graph.node)
    return tg.InferenceSession(optimized, bm._session_options(threads)), kernels


@contextmanager
def prepared(name: str, small: bool, threads: int, force: bool = False) -> Iterator[PreparedModel]:
    """Build model `name`, optimize it in a fresh cache (cold, then warm), check the optimized
    session against onnxruntime's on the original, and yield the two `run` calls. The cache
    lives until the context exits."""
    model = build(name, small=small)
    feeds = sample_inputs(model, seed=0)
    with bm._fresh_cache() as cache:
        start = time.perf_counter()
        session, kernels = _optimized_session(model, threads, force)
        cold_s = time.perf_counter() - start
        note = None
        if kernels and not os.listdir(cache):
            note = "the cold optimize left TC_GRAPH_CACHE empty: the warm one may not have used it"
        elif not kernels:
            note = "optimize fused nothing: tc_graph runs the original graph"
        start = time.perf_counter()
        _optimized_session(model, threads, force)
        warm_ms = (time.perf_counter() - start) * 1e3
        ort_session = bm._ort_session(model, threads)
        want = tuple(ort_session.run(None, feeds))
        got = tuple(session.run(None, feeds))
        bm._check(name, "tc_graph", got, want, reference="onnxruntime")
        calls = {
            "tc_graph": partial(session.run, None, feeds),
            "ort": partial(ort_session.run, None, feeds),
        }
        flops = _flops(model)
        del model, want, got  # 2LUT's tables are 512 MB: not needed while timing
        yield PreparedModel(calls, cold_s, warm_ms, kernels, note, flops)
