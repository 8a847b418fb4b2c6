"""One model of `bench.py zoo`, run in its own process (the parent sets a fresh
TC_GRAPH_CACHE and the thread env, and kills it at its timeout).

    python scripts/_bench_zoo.py MODEL.onnx

Prints one JSON object: nodes, TcKernels, optimize seconds cold (the fresh cache) and
warm (again, same process), the optimized model's ratio against onnxruntime on the
original (tc_graph.graph.optimize's interleaved race), whether its outputs match
onnxruntime's (and the reference outputs `<model>_output_<k>.pb` where there are any),
and the groups left to onnxruntime counted by reason.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tolerances import TOLERANCES  # noqa: E402


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """onnx's convention for its light models: each runtime input is arange(n) / n in
    its shape (unknown sizes as 1). Integer inputs that index a Gather (the torch models'
    token ids and embedding-bag indices) are seeded random rows in its range instead:
    arange(n) / n would make them all 0, a lookup that reads one row over and over."""
    from tc_graph.graph.bench_models import sample_inputs

    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim)
        n = int(np.prod(shape))
        feeds[value.name] = (np.arange(n).reshape(shape) / max(n, 1)).astype(dtype)
    if any(np.issubdtype(f.dtype, np.integer) for f in feeds.values()):
        try:
            lookups = sample_inputs(model)
        except ValueError:  # an index whose range is unknown, or a size that is not fixed
            lookups = {}
        feeds.update({k: v for k, v in lookups.items() if np.issubdtype(v.dtype, np.integer)})
    return feeds


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    for g, w in zip(got, want, strict=True):
        tol = TOLERANCES.get(w.dtype, {"rtol": 0.0, "atol": 0.0})
        if g.shape != w.shape or not np.allclose(g, w, equal_nan=True, **tol):
            return False
    return True


def _references(path: Path, count: int) -> list[np.ndarray] | None:
    files = [path.with_name(f"{path.stem}_output_{k}.pb") for k in range(count)]
    if not all(f.is_file() for f in files):
        return None
    return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


def run(path: Path) -> dict[str, object]:
    import onnxruntime as ort

    import tc_graph as tg
    from tc_graph.graph import optimize as opt
    from tc_graph.onnx_domain import TC_OP

    model = onnx.load(str(path))
    row: dict[str, object] = {"model": path.stem, "nodes": len(model.graph.node)}
    start = time.perf_counter()
    optimized = tg.optimize(model)
    row["cold_s"] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    tg.optimize(model)
    row["warm_s"] = round(time.perf_counter() - start, 2)
    row["tc_kernels"] = sum(n.op_type == TC_OP for n in optimized.graph.node)
    meta = {p.key: p.value for p in optimized.metadata_props}
    decisions = json.loads(meta.get("tc_graph.decisions", "[]"))
    rejected = Counter(opt._reason_kind(d["why"]) for d in decisions if not d["fused"])
    row["rejected"] = dict(rejected.most_common())
    feeds = _feeds(model)
    # The check sessions spin as the race's do (opt._session_options): with onnxruntime's
    # default, their threads went on spinning into the race's first rounds.
    cpu = ["CPUExecutionProvider"]
    plain = ort.InferenceSession(model.SerializeToString(), opt._session_options(), cpu)
    want = plain.run(None, feeds)
    got = tg.InferenceSession(optimized, opt._session_options()).run(None, feeds)
    del plain
    row["match"] = _same(got, want)
    refs = _references(path, len(want))
    row["match_reference"] = None if refs is None else _same(got, refs)
    race = opt._race(model, optimized, feeds)
    row["ratio"] = round(race["ratio"], 3) if "ratio" in race else None
    row["race"] = race.get("why", "")
    return row


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]))))
