"""Optimize an ONNX model with tc_graph: `python scripts/convert_model.py IN.onnx -o OUT.onnx
[--force] [--tune] [--report] [--graph-png FILE]`.

The same as `tc-graph optimize` (this forwards to it), for checkouts where the `tc-graph`
command is not installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

try:
    from tc_graph import cli
except ImportError:  # run from a checkout without installing: the repository root has it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tc_graph import cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Fuse an ONNX model's fusible subgraphs into TcKernel nodes "
        "(tc-graph optimize)."
    )
    parser.add_argument("model", metavar="IN.onnx", help="the model to optimize")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="where to write")
    parser.add_argument(
        "--force", action="store_true", help="fuse every candidate group without measuring"
    )
    parser.add_argument("--tune", action="store_true", help="autotune each chosen group first")
    parser.add_argument("--report", action="store_true", help="print the per-group table")
    parser.add_argument("--graph-png", metavar="FILE", help="draw the partitioned graph")
    return parser


def to_cli_args(args: argparse.Namespace) -> list[str]:
    """The `tc-graph` arguments that do the same."""
    argv = ["optimize", args.model, "-o", args.output]
    argv += [f"--{flag}" for flag in ("force", "tune", "report") if getattr(args, flag)]
    if args.graph_png:
        argv += ["--graph-png", args.graph_png]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(to_cli_args(_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
