"""Benchmark tc_graph against onnxruntime and NumPy.

    python scripts/bench.py kernels [--json FILE] [--rounds N] [--threads N]
                                    [--target cpu|reference|...] [--only NAME[,NAME]] [--small]
                                    [--parametric]
    python scripts/bench.py models  [--json FILE] [--rounds N] [--threads N]
                                    [--only NAME[,NAME]] [--small] [--force]
    python scripts/bench.py layers  [--json FILE] [--rounds N] [--threads N]
                                    [--only NAME[,NAME]] [--small] [--force]
    python scripts/bench.py zoo     [--json FILE] [--threads N] [--only NAME[,NAME]]
                                    [--timeout S] [--full DIR]
    python scripts/bench.py dynamic [--json FILE] [--rounds N] [--threads N]
                                    [--only NAME[,NAME]] [--full DIR] [--size NAME=N,N ...]
                                    [--shape NAME=N,N ...]

`kernels` runs the TC paper kernels (MLP3, MLP1, C3, 2LUT, tbmm, gconv, tmm) at the paper's
sizes. Per kernel it compiles the TC in a fresh empty TC_GRAPH_CACHE (cold, seconds), then
compiles a new `define` of it again (warm, milliseconds), checks tc_graph and onnxruntime
against NumPy, and then times the three in interleaved rounds: in each round every contender
warms up and runs calls for about 50 ms, and its round time is the median call. Reported:
medians over rounds, p10/p90 over rounds, and `ratio_vs_ort`, the median of the per-round
ratios onnxruntime time / tc_graph time (above 1: tc_graph is faster). With --parametric, a
fourth contender races too: the kernel compiled once for every size (`fn.compile(...,
parametric=True)`, checked against NumPy); a last table gives its median and the median of
the per-round ratios parametric / specialised (issue 17's goal: at most 1.1).

`models` runs the benchmark ONNX models of tc_graph.graph.bench_models (what models/build.py
writes: mlp3_gemm ... prodmodel). Per model it builds the model, `tg.optimize`s it (cost-aware)
and opens the optimized model with `tg.InferenceSession`, and the original in a plain
onnxruntime session (ORT_ENABLE_ALL, the same threads); it checks that both give the same
outputs on seeded inputs and times the two sessions' `run` like `kernels` does (`numpy_us` is
null). `compile_cold_s` is `tg.optimize` plus `tg.InferenceSession` in a fresh empty
TC_GRAPH_CACHE (seconds: measuring candidate groups and compiling kernels); `compile_warm_ms`
is the same two steps again with that cache warm (milliseconds). Each row also has
`tc_kernels`, the number of TcKernel nodes in the optimized model.

With --force, `models` and `layers` time `tg.optimize(model, force=True)`: every group
fused whatever its measurement (a machine too noisy for optimize's race still shows what
the kernels do).

`layers` runs single layers of real models the same way as `models`: ResNet-50's stem
(7x7/2), 3x3 64->64 at 56x56, 1x1 256->64 at 56x56, 3x3/2 128->128 and 1x1 1024->256 at
14x14, and a MobileNet depthwise 3x3 (32 channels at 112x112), batch 1, each alone (with
its bias) and with BatchNormalization + Relu after it (`_bn_relu`, against onnxruntime's
own fused Conv); BERT-base's feed-forward MatMul + Add (128x768 by 768x3072) alone and with
its Gelu; attention (8 sequences, 12 heads, 128 tokens, head size 64: MatMul, scale,
Softmax, MatMul), without and with an additive padding mask; attention's Softmax over
8x12x128x128, a residual Add with the LayerNormalization after it (1024x384), and Gelu as
torch exports it (x * 0.5 * (1 + erf(x / sqrt 2)), 1024x1536). It first measures the FMA
peak of --threads threads (scripts/_bench_peak.py) and prints each layer's GFLOP/s for
both contenders (FLOPs as the cost model counts them: a multiply-add is two) and
tc_graph's share of that peak.

`zoo` runs models nobody here wrote: onnx's nine light_* models (shipped in the onnx wheel,
with reference outputs) and the committed models/torch_*.onnx (small sizes), and with
--full DIR the full-size torch_*_full.onnx that `python models/export_torch.py --full DIR`
writes there (ResNet-18 at 224x224, BERT at hidden 256, DLRM with 100,000-row tables),
each in its own process
(scripts/_bench_zoo.py) with a fresh empty TC_GRAPH_CACHE, killed after --timeout seconds.
Per model: nodes, TcKernels, `tg.optimize` seconds cold and warm, the optimized model's
ratio against onnxruntime on the original (tc_graph's own interleaved race, the one
optimize decides by; --rounds does not apply), whether the outputs match onnxruntime's
(tests/tolerances.py), and the groups left to onnxruntime, counted by reason.

`dynamic` runs the exports with symbolic dimensions (models/torch_*_dyn.onnx, and with
--full DIR the torch_*_dyn_full.onnx there) at each point of the --size grid (default
batch=1,3,8,64 and seq=16): the model optimized once for every size (`tg.optimize` with
--shape's samples, else its defaults) against onnxruntime on the original, and beside it
the static export's speedup, the model optimized with its symbolic dimensions pinned at
that point (`fix_shapes`); the three contenders race in interleaved rounds, and each
row checks the outputs (--budget sets both optimizes' budget_s: 90 s by default, as
for users; deciding for every size races each group at every round of samples, so a
cold optimize of the encoder runs past it). The issue-17 goal is a dynamic speedup at
least the static one minus 5% at every point.

OMP_NUM_THREADS (and OpenBLAS's thread count) are set to --threads before NumPy,
onnxruntime or tc_graph are loaded; onnxruntime's intra-op pool gets the same count. Both
pools spin briefly between calls (onnxruntime's default; GOMP_SPINCOUNT bounds libgomp's),
so neither pays a thread wake-up per call.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

IDLE_S = 0.25
BUDGET_S = 0.05
MISSING_API = "bench.py models: tc_graph has no {}: needs the ONNX integration"


def _set_thread_env(threads: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("GOMP_SPINCOUNT", "100000")
    # OpenBLAS's workers spin about 2^28 cycles after a call by default (NumPy's turn).
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


def _rounds(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Per contender, its time per call in each round (tc_graph.timing's race: each round
    starts with the next contender, each turn the median of calls over about BUDGET_S),
    with the garbage collector off, and IDLE_S before each turn: two thread pools spinning
    on two cores steal each other's time slices (milliseconds per stolen slice)."""
    from tc_graph import timing  # after the thread environment is set (see main)

    gc.collect()
    gc.disable()
    try:
        return timing.rounds(calls, rounds, BUDGET_S, pause=lambda: time.sleep(IDLE_S))
    finally:
        gc.enable()


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy.percentile's default)."""
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def _result(
    name: str,
    times: dict[str, list[float]],
    threads: int,
    compile_cold_s: float | None,
    compile_warm_ms: float | None,
) -> tuple[dict[str, object], tuple[float, float]]:
    """The JSON object of one kernel, and the range of its per-round ratios."""
    us = {k: [t * 1e6 for t in v] for k, v in times.items()}
    ratios = [o / t for o, t in zip(us["ort"], us["tc_graph"], strict=True)]
    row: dict[str, object] = {
        "name": name,
        "tc_graph_us": round(statistics.median(us["tc_graph"]), 2),
        "ort_us": round(statistics.median(us["ort"]), 2),
        "numpy_us": round(statistics.median(us["numpy"]), 2) if "numpy" in us else None,
        "tc_graph_p10_us": round(_percentile(us["tc_graph"], 10), 2),
        "tc_graph_p90_us": round(_percentile(us["tc_graph"], 90), 2),
        "ort_p10_us": round(_percentile(us["ort"], 10), 2),
        "ort_p90_us": round(_percentile(us["ort"], 90), 2),
        "ratio_vs_ort": round(statistics.median(ratios), 4),
        "threads": threads,
        "compile_cold_s": _round(compile_cold_s, 4),
        "compile_warm_ms": _round(compile_warm_ms, 3),
    }
    return row, (min(ratios), max(ratios))


ROW = "{:<11} {:>28} {:>28} {:>11} {:>24} {:>9} {:>9}"


def _table_line(row: dict[str, object], ratio_range: tuple[float, float]) -> str:
    def spread(key: str) -> str:
        return f"{row[f'{key}_us']:.1f} [{row[f'{key}_p10_us']:.1f}-{row[f'{key}_p90_us']:.1f}]"

    cold, warm = row["compile_cold_s"], row["compile_warm_ms"]
    return ROW.format(
        row["name"],
        spread("tc_graph"),
        spread("ort"),
        "-" if row["numpy_us"] is None else f"{row['numpy_us']:.1f}",
        f"{row['ratio_vs_ort']:.3g}x [{ratio_range[0]:.3g}-{ratio_range[1]:.3g}]",
        "-" if cold is None else f"{cold:.2f}",
        "-" if warm is None else f"{warm:.1f}",
    )


def _select(
    names: Sequence[str], only: str | None, what: str, parser: argparse.ArgumentParser
) -> list[str]:
    """The names --only asks for (any case), in its order; all of them without --only."""
    if not only:
        return list(names)
    by_lower = {n.lower(): n for n in names}
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if w.lower() not in by_lower]
    if unknown:
        parser.error(f"unknown {what}(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    return [by_lower[w.lower()] for w in wanted]


def _write_json(path: str | None, rows: list[dict[str, object]]) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=2)
            f.write("\n")
        print(f"wrote {path}")


def _kernels(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _set_thread_env(args.threads)
    import _bench_models as bm  # only now: BLAS and OpenMP read the thread env when loaded

    names = _select(list(bm.BUILDERS), args.only, "kernel", parser)

    sizes = "small (paper sizes / ~8)" if args.small else "paper sizes"
    print(
        f"tc_graph (target {args.target}) vs {bm.VERSIONS}; threads={args.threads}, "
        f"rounds={args.rounds}, {sizes}; times in µs: median [p10-p90] over rounds"
    )
    print(
        ROW.format(
            "kernel",
            "tc_graph",
            "onnxruntime",
            "numpy",
            "ORT/tc_graph [range]",
            "cold s",
            "warm ms",
        )
    )
    rows = []
    notes: dict[str, list[str]] = {}
    for name in names:
        print(f"[{name}] building, compiling, checking against NumPy ...", file=sys.stderr)
        with bm.prepared(name, args.small, args.target, args.threads, args.parametric) as prep:
            print(f"[{name}] timing {args.rounds} rounds ...", file=sys.stderr)
            times = _rounds(prep.calls, args.rounds)
        row, ratio_range = _result(
            name, times, args.threads, prep.compile_cold_s, prep.compile_warm_ms
        )
        if args.parametric:
            row.update(_every_size(times))
        rows.append(row)
        if prep.note:
            notes.setdefault(prep.note, []).append(name)
        print(_table_line(row, ratio_range), flush=True)
    for note, kernels in notes.items():
        print(f"note ({', '.join(kernels)}): {note}")
    if args.parametric:
        _every_size_table(rows)
    _write_json(args.json, rows)
    return 0


def _every_size(times: dict[str, list[float]]) -> dict[str, object]:
    """The kernel for every size against the specialised one: its median, and the median
    of the per-round ratios parametric time / specialised time (at most 1.1: within 10%)."""
    ratios = [p / t for p, t in zip(times["parametric"], times["tc_graph"], strict=True)]
    return {
        "parametric_us": round(statistics.median(times["parametric"]) * 1e6, 2),
        "parametric_vs_specialised": round(statistics.median(ratios), 4),
    }


def _every_size_table(rows: list[dict[str, object]]) -> None:
    print("\nkernels for every size (--parametric): median µs, parametric/specialised")
    for row in rows:
        print(
            f"{row['name']:<11} specialised {row['tc_graph_us']:>12.1f}  parametric "
            f"{row['parametric_us']:>12.1f}  {row['parametric_vs_specialised']:.3g}x"
        )


def _models(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.target != "cpu":
        parser.error("--target applies to `kernels` only: optimized models run on the CPU")
    _set_thread_env(args.threads)
    import _bench_models as bm  # only now: BLAS and OpenMP read the thread env when loaded

    import tc_graph as tg

    missing = [f"tg.{n}" for n in ("optimize", "InferenceSession") if not hasattr(tg, n)]
    if missing:
        print(MISSING_API.format(" or ".join(missing)), file=sys.stderr)
        return 2
    import _bench_onnx as bo

    names = _select(bo.LAYERS if args.command == "layers" else bo.NAMES, args.only, "model", parser)
    sizes = "small (paper sizes / ~8)" if args.small else "paper sizes"
    print(
        f"tc_graph.optimize{'(force=True)' if args.force else ''} + tc_graph.InferenceSession "
        f"vs {bm.VERSIONS}; "
        f"threads={args.threads}, rounds={args.rounds}, {sizes}; "
        "times in µs per session.run: median [p10-p90] over rounds"
    )
    peak = _peak_line(args.threads) if args.command == "layers" else None
    print(
        ROW.format(
            "model", "tc_graph", "onnxruntime", "numpy", "ORT/tc_graph [range]", "cold s", "warm ms"
        )
        + "  kernels"
        + ("  GFLOP/s: tc_graph, ORT" if peak is not None else "")
    )
    rows = []
    for name in names:
        print(f"[{name}] building, optimizing, checking against onnxruntime ...", file=sys.stderr)
        with bo.prepared(name, args.small, args.threads, args.force) as prep:
            print(f"[{name}] timing {args.rounds} rounds ...", file=sys.stderr)
            times = _rounds(prep.calls, args.rounds)
        row, ratio_range = _result(
            name, times, args.threads, prep.compile_cold_s, prep.compile_warm_ms
        )
        row["tc_kernels"] = prep.tc_kernels
        rows.append(row)
        line = f"{_table_line(row, ratio_range)}  {prep.tc_kernels:>7}"
        if peak is not None:
            line += _rates(row, prep.flops, peak)
        print(line, flush=True)
        if prep.note:
            print(f"note ({name}): {prep.note}")
    _write_json(args.json, rows)
    return 0


def _peak_line(threads: int) -> float:
    """The FMA peak (FLOP/s) that the layers' rates are read against, printed."""
    from _bench_peak import fma_peak

    peak = fma_peak(threads)
    print(f"FMA peak: {peak / 1e9:.1f} GFLOP/s ({threads} threads, a loop of vector FMAs)")
    return peak


def _rates(row: dict[str, object], flops: float, peak: float) -> str:
    """GFLOP/s of both contenders (medians) and tc_graph's share of the peak; recorded in
    the row too."""
    tc, ort = (flops / (float(row[k]) * 1e-6) for k in ("tc_graph_us", "ort_us"))  # type: ignore[arg-type]
    row.update(gflops_tc_graph=round(tc / 1e9, 2), gflops_ort=round(ort / 1e9, 2),
               peak_gflops=round(peak / 1e9, 2))  # fmt: skip
    return f"  {tc / 1e9:7.1f} {ort / 1e9:7.1f} GFLOP/s ({tc / peak:.0%} of peak)"


def _zoo_models(full: Path | None) -> dict[str, str]:
    """Model name -> path: onnx's light_* models, the committed torch exports, then the
    full-size torch exports in `full`."""
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    paths = sorted(p for p in light.glob("light_*.onnx"))
    paths += sorted((Path(__file__).resolve().parents[1] / "models").glob("torch_*.onnx"))
    if full is not None:
        paths += sorted(full.glob("torch_*_full.onnx"))
    return {p.stem: str(p) for p in paths}


ZOO_ROW = "{:<20} {:>6} {:>9} {:>8} {:>8} {:>7} {:>6}  {}"


def _zoo_one(path: str, timeout: float) -> dict[str, object]:
    """One model in a fresh process and a fresh cache; an error row if it fails or
    runs out of time."""
    name = Path(path).stem
    with tempfile.TemporaryDirectory(prefix="tc-zoo-") as cache:
        env = {**os.environ, "TC_GRAPH_CACHE": cache}
        worker = Path(__file__).with_name("_bench_zoo.py")
        # Its own session, so that a timeout ends the compilers it started too.
        proc = subprocess.Popen(
            [sys.executable, str(worker), path],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"model": name, "error": f"did not finish in {timeout:g} s"}
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return {"model": name, "error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def _zoo_line(row: dict[str, object]) -> str:
    if "error" in row:
        return f"{row['model']:<20} {row['error']}"
    ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
    match = "yes" if row["match"] else "no"
    if row.get("match_reference") is False:
        match += "*"
    rejected = "; ".join(f"{n}x {why}" for why, n in row["rejected"].items()) or "-"
    if row.get("race"):
        rejected = f"{rejected} (ratio: {row['race']})"
    return ZOO_ROW.format(
        row["model"],
        row["nodes"],
        row["tc_kernels"],
        f"{row['cold_s']:.1f}",
        f"{row['warm_s']:.1f}",
        ratio,
        match,
        rejected,
    )


def _zoo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _set_thread_env(args.threads)
    if args.full is not None and not any(args.full.glob("torch_*_full.onnx")):
        parser.error(
            f"--full {args.full}: no torch_*_full.onnx there; write them with "
            f"`python models/export_torch.py --full {args.full}` (needs torch)"
        )
    models = _zoo_models(args.full)
    names = _select(list(models), args.only, "model", parser)
    print(
        f"tc_graph.optimize on the zoo; threads={args.threads}, a fresh cache and process "
        f"per model, timeout {args.timeout:g} s; ratio: ORT time / optimized time"
    )
    print(ZOO_ROW.format("model", "nodes", "TcKernels", "cold s", "warm s", "ratio", "match",
                         "groups left to onnxruntime, by reason"))  # fmt: skip
    rows = []
    for name in names:
        print(f"[{name}] optimizing cold and warm, racing ...", file=sys.stderr)
        row = _zoo_one(models[name], args.timeout)
        rows.append(row)
        print(_zoo_line(row), flush=True)
    if any(r.get("match_reference") is False for r in rows):
        print("*: differs from onnx's reference outputs")
    _write_json(args.json, rows)
    return 0


DYN_ROW = "{:<26} {:<22} {:>11} {:>11} {:>11} {:>9} {:>9} {:>6}"


def _grid(sizes: dict[str, list[int]], names: Sequence[str]) -> list[dict[str, int]]:
    """Every point of the --size grid over the model's symbolic input dimensions."""
    points: list[dict[str, int]] = [{}]
    for name in names:
        points = [{**p, name: n} for p in points for n in sizes.get(name, [1])]
    return points


def _dynamic_row(
    path: str, fused: object, point: dict[str, int], rounds: int, budget: float | None
) -> dict:
    """One point: onnxruntime, the model fused for every size and the one fused at this
    point race on the same seeded inputs."""
    import onnx
    import onnxruntime as ort

    import tc_graph as tg
    from tc_graph.graph.bench_models import sample_inputs
    from tc_graph.graph.model import fix_dims

    pinned = onnx.load(path)
    fix_dims(pinned, point)
    feeds = sample_inputs(pinned)
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(os.environ["OMP_NUM_THREADS"])
    static = tg.optimize(path, fix_shapes=point, budget_s=budget)
    sessions = {"ort": ort.InferenceSession(path, so), "tc_graph": tg.InferenceSession(fused, so),
                "static": tg.InferenceSession(static, so)}  # fmt: skip
    import numpy as np

    want = sessions["ort"].run(None, feeds)
    match = all(
        np.allclose(g, w, rtol=1e-3, atol=1e-4)
        for k in ("tc_graph", "static")
        for g, w in zip(sessions[k].run(None, feeds), want, strict=True)
    )
    times = _rounds({k: (lambda s=s: s.run(None, feeds)) for k, s in sessions.items()}, rounds)
    us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    per = {k: statistics.median(o / t for o, t in zip(times["ort"], times[k], strict=True))
           for k in ("tc_graph", "static")}  # fmt: skip
    return {"point": point, "ort_us": round(us["ort"], 1), "tc_graph_us": round(us["tc_graph"], 1),
            "static_us": round(us["static"], 1), "ratio": round(per["tc_graph"], 3),
            "static_ratio": round(per["static"], 3), "match": match}  # fmt: skip


def _dynamic(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _set_thread_env(args.threads)
    import onnx

    import tc_graph as tg
    from tc_graph.graph.model import input_symbols

    models = {n: p for n, p in _zoo_models(args.full).items() if "_dyn" in n}
    sizes = {"batch": [1, 3, 8, 64], "seq": [16], **dict(args.size or [])}
    print(f"models with symbolic dimensions, fused for every size; threads={args.threads}; "
          "ratio: ORT time / tc_graph time (static: the model pinned at that size)")  # fmt: skip
    print(DYN_ROW.format("model", "size", "ORT us", "tc us", "static us", "ratio", "static",
                         "match"))  # fmt: skip
    rows = []
    for name in _select(list(models), args.only, "model", parser):
        path = models[name]
        fused = tg.optimize(path, shapes=dict(args.shape or []) or None, budget_s=args.budget)
        summary = [p.value for p in fused.metadata_props if p.key == "tc_graph.summary"]
        print(f"{name}: {''.join(summary)}", flush=True)
        for point in _grid(sizes, input_symbols(onnx.load(path, load_external_data=False).graph)):
            row = {"model": name, **_dynamic_row(path, fused, point, args.rounds, args.budget)}
            rows.append(row)
            size = ",".join(f"{k}={v}" for k, v in point.items())
            print(DYN_ROW.format(name, size, row["ort_us"], row["tc_graph_us"], row["static_us"],
                                 f"{row['ratio']:.2f}x", f"{row['static_ratio']:.2f}x",
                                 "yes" if row["match"] else "no"), flush=True)  # fmt: skip
    _write_json(args.json, rows)
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", metavar="FILE", help="also write the results as a JSON list")
    common.add_argument("--rounds", type=_positive, default=5, help="interleaved rounds (5)")
    common.add_argument(
        "--threads",
        type=_positive,
        default=os.cpu_count() or 1,
        help="threads for tc_graph (OpenMP), onnxruntime and NumPy (default: os.cpu_count())",
    )
    common.add_argument(
        "--target",
        default="cpu",
        help="kernels: tc_graph target (cpu; 'reference' is the NumPy oracle)",
    )
    common.add_argument("--only", metavar="NAME[,NAME]", help="run only these kernels or models")
    common.add_argument("--small", action="store_true", help="sizes divided by about 8")
    common.add_argument(
        "--force",
        action="store_true",
        help="models, layers: fuse every translatable group (tg.optimize's force=True) and "
        "time the TcKernels themselves, whatever optimize would decide",
    )
    parser = argparse.ArgumentParser(
        description="Benchmark tc_graph against onnxruntime and NumPy."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    kernels = sub.add_parser(
        "kernels", parents=[common], help="the TC paper kernels against onnxruntime and NumPy"
    )
    kernels.add_argument(
        "--parametric",
        action="store_true",
        help="also time each kernel compiled for every size (fn.compile(parametric=True))",
    )
    sub.add_parser(
        "models",
        parents=[common],
        help="whole ONNX models: tc_graph.optimize + InferenceSession against onnxruntime",
    )
    sub.add_parser(
        "layers",
        parents=[common],
        help="single layers of real models (Softmax, LayerNorm+Add, Gelu), as `models` runs them",
    )
    zoo = sub.add_parser(
        "zoo",
        parents=[common],
        help="onnx's light_* models and models/torch_*.onnx: optimize time, ratio, matches",
    )
    zoo.add_argument("--timeout", type=float, default=600.0, help="seconds per model (600)")
    zoo.add_argument(
        "--full",
        metavar="DIR",
        type=Path,
        help="also the full-size torch models that models/export_torch.py --full DIR wrote",
    )
    dyn = sub.add_parser(
        "dynamic",
        parents=[common],
        help="exports with symbolic dimensions: fused for every size against onnxruntime "
        "and against the export pinned at each size",
    )
    dyn.add_argument("--full", metavar="DIR", type=Path, help="also the full-size exports")
    for flag, what in (("--size", "the sizes to run at"), ("--shape", "optimize's samples")):
        dyn.add_argument(flag, action="append", type=_sizes, metavar="NAME=N,N", help=what)
    dyn.add_argument(
        "--budget",
        type=_budget,
        default=90.0,
        metavar="SECONDS|none",
        help="optimize's budget_s for both the dynamic and the pinned model (90; none: no "
        "bound): deciding for every size races each group at every round of samples",
    )
    return parser


def _budget(text: str) -> float | None:
    if text == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or 'none': {text!r}")
    return value


def _sizes(text: str) -> tuple[str, list[int]]:
    name, _, values = text.partition("=")
    try:
        sizes = [int(v) for v in values.split(",")]
    except ValueError:
        sizes = []
    if not name or not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=N[,N...]: {text!r}")
    return name, sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.force and args.command not in ("models", "layers"):
        parser.error("--force applies to `models` and `layers`")
    if args.command in ("models", "layers"):
        return _models(args, parser)
    if args.command == "zoo":
        return _zoo(args, parser)
    if args.command == "dynamic":
        return _dynamic(args, parser)
    return _kernels(args, parser)


if __name__ == "__main__":
    sys.exit(main())
