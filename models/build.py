"""Write the benchmark ONNX models: `python models/build.py --out DIR [--small]`.

A thin command line over tc_graph.graph.bench_models, where the builders live so that the installed
package (tests, `tc-graph demo`, scripts/bench.py) has them too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

try:
    from tc_graph.graph import bench_models
except ImportError:  # run from a checkout without installing: the repository root has it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tc_graph.graph import bench_models

import onnx


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the benchmark ONNX models.")
    parser.add_argument("--out", required=True, type=Path, help="directory for <name>.onnx")
    parser.add_argument("--small", action="store_true", help="sizes divided by about 8")
    parser.add_argument(
        "--only", metavar="NAME[,NAME]", help=f"only these of {', '.join(bench_models.NAMES)}"
    )
    args = parser.parse_args(argv)
    names = list(bench_models.NAMES)
    if args.only:
        names = [n.strip().lower() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in bench_models.NAMES]
        if unknown:
            parser.error(f"unknown model(s) {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        start = time.perf_counter()
        path = args.out / f"{name}.onnx"
        onnx.save_model(bench_models.build(name, small=args.small), path)
        elapsed = time.perf_counter() - start
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
