"""GPU kernels (CUDA and OpenCL text) for a TC specialized to its arguments' shapes.

Both targets print the same mapped schedule tree (poly/gpu.py) through the GPU dialects
of the C-family printer (tc_graph/compiler.py drives the stages); what differs is only how
the text is run: OpenCL through pyopencl (runtime/opencl.py), CUDA not yet (no CUDA
runtime in this version: the text, with its launch geometry, is what `compile` returns).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import ir
from ..errors import TcError
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from ..poly.gpu import Launch
from ..poly.scop import checked_accesses


@dataclass(frozen=True)
class GpuSource:
    """The kernels of one specialized program: text, launches (in order), and what the
    runtime needs to bind buffers."""

    target: str
    text: str
    launches: tuple[Launch, ...]
    program: ir.Program
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]

    @property
    def geometry(self) -> str:
        """The launches as JSON (kept with the kernel so a runtime can launch it)."""
        return json.dumps([lc.to_json() for lc in self.launches])


class GpuKernel:
    """A TC mapped for a GPU target: its text, launch geometry and index checks (the
    i-th check reports code i + 1)."""

    def __init__(self, checked: CheckedDef, gpu: GpuSource, options: MappingOptions) -> None:
        self.checked = checked
        self.program = gpu.program
        self.options = options
        self.source = gpu.text
        self.launches = gpu.launches
        self.gpu = gpu
        self.checks = checked_accesses(gpu.program)


class CudaKernel(GpuKernel):
    """CUDA text and launch geometry of a TC; running it needs a CUDA runtime, which
    this version of tc_graph does not have."""

    target = "cuda"

    def __repr__(self) -> str:
        return f"<CudaKernel {self.checked.name} {len(self.launches)} launches>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TcError(
            "running CUDA kernels is not supported in this version of tc_graph",
            hint="use kernel.source (CUDA text) and kernel.launches, or target='opencl'",
        )
