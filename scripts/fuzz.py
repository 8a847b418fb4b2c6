"""Differential fuzzing of tc_graph: random well-typed TC programs (tests/fuzz_programs.py)
on a compiled target against the NumPy reference (tests/fuzz_oracle.py).

    python scripts/fuzz.py --minutes N [--seed S] [--start I] [--target cpu|opencl]
                           [--options default|random|both] [--out DIR] [--include-known]

Programs (seed, start), (seed, start + 1), ... run until the time is up; each compiled
kernel runs in a child process, so a crash is counted, not fatal. Prints the counts
(programs, valid, compared, both raising, refused options, unsupported on the target,
mismatches, crashes, timeouts, non-TcError exceptions) and writes each finding, shrunk, as
a standalone script (and an .npz of its larger inputs) to DIR (default fuzz-findings/).
--include-known also generates the features of the known bugs (tests.fuzz_programs.KNOWN).
Kernels go to a fresh temporary TC_GRAPH_CACHE unless one is set.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="the first program index")
    ap.add_argument("--target", choices=("cpu", "opencl"), default="cpu")
    ap.add_argument(
        "--options",
        choices=("default", "random", "both"),
        default="random",
        help="MappingOptions: the defaults, random ones, or both in turn (even indices default)",
    )
    ap.add_argument("--out", default="fuzz-findings")
    ap.add_argument("--include-known", action="store_true")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    a = ap.parse_args()
    from tests import fuzz_programs as fp

    known = frozenset() if a.include_known else frozenset(fp.KNOWN)
    # Two OpenMP threads, so that a parallel loop that races shows it.
    os.environ["OMP_NUM_THREADS"] = "2"
    os.environ.setdefault("TC_GRAPH_CACHE", tempfile.mkdtemp(prefix="tc_graph-fuzz-"))
    import numpy as np

    from tests.fuzz_oracle import Fuzzer, large_inputs, reproducer

    out = Path(a.out)
    counts: collections.Counter[str] = collections.Counter()
    fuzzer = Fuzzer(a.target, timeout=a.timeout)
    end = time.monotonic() + 60 * a.minutes
    index = a.start
    try:
        while time.monotonic() < end:
            options = a.options
            if options == "both":
                options = "default" if index % 2 == 0 else "random"
            case = fp.generate(a.seed, index, known=known, options=options)
            outcome = fuzzer.judge(case)
            counts["programs"] += 1
            counts[outcome.kind] += 1
            if outcome.finding:
                small = fuzzer.reduce(case, outcome)
                again = fuzzer.judge(small)
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"{outcome.kind}-{a.target}-{a.seed}-{index}.py"
                npz = path.with_suffix(".npz")
                if large_inputs(small):
                    np.savez(npz, **large_inputs(small))
                path.write_text(reproducer(small, again, a.target, str(npz.resolve())))
                print(
                    f"[{index}] {outcome.kind}: {outcome.detail.strip().splitlines()[-1]}"
                    f"\n    -> {path}",
                    flush=True,
                )
            index += 1
    finally:
        fuzzer.close()
    valid = counts["programs"] - counts["invalid"]
    print(
        f"target {a.target}, options {a.options}, seed {a.seed}, programs {a.start}.."
        f"{index - 1}: programs {counts['programs']}, valid {valid}, "
        f"compared {counts['ok']}, both raise TcError {counts['raises']}, "
        f"refused options {counts['refused']}, unsupported {counts['unsupported']}, "
        f"mismatches {counts['mismatch']}, "
        f"crashes {counts['crash']}, timeouts {counts['timeout']}, "
        f"non-TcError exceptions {counts['exception']}"
    )
    findings = sum(counts[k] for k in ("mismatch", "crash", "timeout", "exception"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
