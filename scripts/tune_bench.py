"""Tuned versus default mapping options on the TC paper kernels (CPU target).

    python scripts/tune_bench.py [--only 2LUT,MLP3,tbmm,C3] [--population 12]
                                 [--generations 4] [--seed 0] [--rounds 7] [--threads N]
                                 [--small] [--json FILE]

Per kernel (paper sizes, scripts/_bench_models.py), in a fresh empty TC_GRAPH_CACHE:
`tg.autotune` searches with the given budget (the default options are in its first
population), then the default kernel and the tuned one are timed again in interleaved
rounds (bench.py's timing: warm-up, then the median call of about 50 ms per contender per
round, the contender going first alternating), both checked against NumPy. Reported:
median over rounds of each, the median per-round speedup default/tuned, search time, and
the options found. bench.py's thread environment (OMP_NUM_THREADS=--threads) is set before
anything is imported.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from typing import Any

from bench import _rounds, _select, _set_thread_env, _write_json

DEFAULT_KERNELS = ("2LUT", "MLP3", "tbmm", "C3")


def _tuned_row(name: str, args: argparse.Namespace, bm: Any) -> tuple[dict[str, Any], dict]:
    """One kernel tuned in a fresh cache, both kernels checked against NumPy and raced:
    its JSON row, and the options the tuning changed."""
    import tc_graph as tg
    from tc_graph.tune.tuner import tune

    case = bm.BUILDERS[name](args.small)
    with bm._fresh_cache():
        fn = tg.define(case.source)[case.name]
        start = time.perf_counter()
        result = tune(
            fn,
            *case.args,
            generations=args.generations,
            population=args.population,
            seed=args.seed,
            progress=sys.stderr.isatty(),
        )
        search_s = time.perf_counter() - start
        default = fn.compile(*case.args, options=result.default)
        tuned = fn.compile(*case.args)  # options=None: the database's best
        assert tuned.options == result.best
        want = case.numpy_fn(*case.args)
        for who, kernel in (("default", default), ("tuned", tuned)):
            got = kernel(*case.args)
            bm._check(name, f"tc_graph ({who})", got if isinstance(got, tuple) else (got,), want)
        times = _rounds(
            {
                "default": functools.partial(default, *case.args),
                "tuned": functools.partial(tuned, *case.args),
            },
            args.rounds,
        )
    d, t = statistics.median(times["default"]), statistics.median(times["tuned"])
    ratio = statistics.median(a / b for a, b in zip(times["default"], times["tuned"], strict=True))
    if result.best == result.default:
        t, ratio = d, 1.0  # one kernel twice: any difference measured is noise
    best, base = json.loads(result.best.to_json()), json.loads(result.default.to_json())
    changed = {k: v for k, v in best.items() if v != base[k]}
    row = {
        "name": name,
        "default_us": round(d * 1e6, 2),
        "tuned_us": round(t * 1e6, 2),
        "speedup": round(ratio, 4),
        "search_s": round(search_s, 1),
        "evaluated": result.evaluated,
        "discarded": len(result.failures),
        "default_options": base,
        "tuned_options": best,
        "threads": args.threads,
    }
    return row, changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated kernels (default: 2LUT,MLP3,tbmm,C3)")
    parser.add_argument("--population", type=int, default=12)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--small", action="store_true", help="the small sizes (smoke test)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    _set_thread_env(args.threads)
    import _bench_models as bm  # only now: OpenMP reads the thread env when loaded

    names = _select(list(bm.BUILDERS), args.only or ",".join(DEFAULT_KERNELS), "kernel", parser)
    print(
        f"tuned vs default options, CPU target; threads={args.threads}, population "
        f"{args.population}, generations {args.generations}, seed {args.seed}; "
        f"{'small sizes' if args.small else 'paper sizes'}; medians of {args.rounds} "
        "interleaved rounds"
    )
    header = (
        f"{'kernel':<7} {'default µs':>11} {'tuned µs':>10} {'speedup':>8} {'tune s':>7}  options"
    )
    print(header)
    rows = []
    for name in names:
        row, changed = _tuned_row(name, args, bm)
        print(
            f"{name:<7} {row['default_us']:>11.1f} {row['tuned_us']:>10.1f} "
            f"{row['speedup']:>7.2f}x {row['search_s']:>7.1f}  {changed or 'the defaults'}"
        )
        rows.append(row)
    _write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
