"""Golden files of generated code: the TC paper's kernels of tests/data/golden/kernels.toml
printed as C (for an AVX-512 CPU), CUDA and OpenCL with the default options of the API.

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
from tc_graph import binding
from tc_graph.api import TcFunction
from tc_graph.options import AVX512, default_options
from tc_graph.poly.inline import inline_copies, snapshot_in_place, widen_reductions
from tc_graph.runtime.gpu import generate_gpu
from tc_graph.runtime.kernel import generate_c

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


def _c(fn: TcFunction, args: list[np.ndarray]) -> str:
    """The C that `fn.compile(*args)` builds (runtime/kernel.compile_kernel's steps), for an
    AVX-512 CPU whatever this machine is."""
    program, arrays, sizes, _ = fn._bind(args)
    options = default_options(program, AVX512)
    program = widen_reductions(snapshot_in_place(program))
    shapes = {**{n: a.shape for n, a in arrays.items()}, **binding.tensor_shapes(program, sizes)}
    program = inline_copies(program, {**sizes, **program.constants})
    return generate_c(program, {**sizes, **program.constants}, shapes, options, AVX512)


@functools.cache
def emitted(kernel: GoldenKernel, target: str) -> str:
    """The text printed for one kernel and target, as the golden file holds it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(kernel.source)[kernel.name]
    shapes = dict(kernel.shapes)
    args = [np.zeros(shapes[n], dtype=fn.checked.tensors[n].dtype) for n in fn.checked.inputs]
    if target == "c":
        return _c(fn, args)
    program = fn._bind(args)[0]
    options = default_options(program)
    return generate_gpu(fn.checked, program, args, options=options, target=target).text


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
