"""GPU kernels (CUDA and OpenCL text) for a TC specialized to its arguments' shapes.

Both targets print the same mapped schedule tree (poly/gpu.py) through the GPU dialects
of the C-family printer (tc_graph/compiler.py drives the stages); what differs is only how
the text is run, behind one hook (`GpuKernel._run`): OpenCL through pyopencl
(runtime/opencl.py), CUDA through nvcc and the CUDA driver of cuda-python
(runtime/cuda.py). Binding, output buffers and the index check are shared here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import binding, ir
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from ..poly.gpu import Launch
from ..poly.scop import checked_accesses


@dataclass(frozen=True)
class GpuSource:
    """The kernels of one specialized program: text, launches (in order), and what the
    runtime needs to bind buffers."""

    text: str
    launches: tuple[Launch, ...]
    program: ir.Program
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class GpuBuffers:
    """A call's host arrays in the kernels' argument order (inputs, outputs, temporaries,
    then the index check's code and value); outputs and the check's two come back."""

    arguments: tuple[np.ndarray, ...]
    inputs: int
    outputs: int

    @property
    def copied_back(self) -> tuple[int, ...]:
        n = len(self.arguments)
        return (*range(self.inputs, self.inputs + self.outputs), n - 2, n - 1)


class GpuKernel(ABC):
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

    @abstractmethod
    def _run(self, buffers: GpuBuffers, check: int) -> None:
        """Run every launch in order over the buffers, then copy back the ones listed."""

    def __call__(
        self,
        *args: Any,
        out: Sequence[np.ndarray] | np.ndarray | None = None,
        unchecked: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        program = self.program
        arrays = binding.bind_compiled(self.checked, program, args, self.gpu.sizes, self.gpu.shapes)
        shapes = {n: self.gpu.shapes[n] for n in (*program.outputs, *program.temporaries)}
        host = binding.allocate(program, shapes, out, arrays)
        for n in program.outputs:
            if out is None and not program.tensors[n].zero_fill:
                host[n][...] = 0
        code, value = np.zeros(1, np.int32), np.zeros(1, np.int64)
        buffers = GpuBuffers(
            (
                *(np.ascontiguousarray(arrays[n]) for n in program.inputs),
                *(host[n] for n in program.outputs),
                *(np.zeros(shapes[n], program.tensors[n].dtype) for n in program.temporaries),
                code,
                value,
            ),
            len(program.inputs),
            len(program.outputs),
        )
        self._run(buffers, int(not unchecked))
        if code[0] > 0:
            r, k = self.checks[code[0] - 1]
            raise binding.index_error(program, r, k, int(value[0]), self.gpu.shapes[r.tensor][k])
        outputs = [host[n] for n in program.outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
