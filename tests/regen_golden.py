"""Golden files of generated code: the TC paper's kernels of tests/data/golden/kernels.toml
printed as C (for an AVX-512 CPU), CUDA and OpenCL with the default options of the API,
through the compiler driver's stages (tc_graph/compiler.py).

They pin the intended output, so that a refactoring of the back end that changes a single
character shows up (tests/unit/test_golden.py). Printing needs no C compiler and no GPU.
After an intended change, `python -m tests.regen_golden` rewrites them; commit them with
the change.
"""

from __future__ import annotations

import functools
import sys
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tc_graph as tg
from tc_graph import compiler
from tc_graph.options import AVX512

GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
TABLE = GOLDEN / "kernels.toml"
SUFFIXES = {"c": ".c", "cuda": ".cu", "opencl": ".cl"}


@dataclass(frozen=True)
class GoldenKernel:
    """One kernel of the table: its TC source and the shape of each input."""

    name: str
    source: str
    shapes: tuple[tuple[str, tuple[int, ...]], ...]


def kernels() -> list[GoldenKernel]:
    with TABLE.open("rb") as f:
        table = tomllib.load(f)["kernel"]
    return [
        GoldenKernel(k["name"], k["source"], tuple((n, tuple(s)) for n, s in k["shapes"].items()))
        for k in table
    ]


def path(kernel: str, target: str) -> Path:
    return GOLDEN / f"{kernel}{SUFFIXES[target]}"


@functools.cache
def emitted(kernel: GoldenKernel, target: str) -> str:
    """The text printed for one kernel and target, as the golden file holds it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(kernel.source)[kernel.name]
    shapes = dict(kernel.shapes)
    args = [np.zeros(shapes[n], dtype=fn.checked.tensors[n].dtype) for n in fn.checked.inputs]
    # The stages `fn.compile(*args, target=...)` runs, for an AVX-512 CPU whatever this
    # machine is, and without building.
    bound = compiler.bind(fn, args)
    driver_target = "cpu" if target == "c" else target
    options = compiler.default_options(bound.program, driver_target, AVX512)
    return compiler.source(compiler.prepare(bound), driver_target, options, AVX512).text


def main() -> int:
    """Rewrite every golden file; print the ones that changed."""
    for kernel in kernels():
        for target in SUFFIXES:
            file = path(kernel.name, target)
            text = emitted(kernel, target)
            if not file.exists() or file.read_text(encoding="utf-8") != text:
                file.write_text(text, encoding="utf-8")
                print(f"updated {file.relative_to(GOLDEN.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
