"""Kernels for every size: one library that serves every shape its program allows.

The library's entry point reads the sizes as an argument (`tc_kernel_in(args, sizes,
scratch, check, err)`, ABI version 2, docs/onnx.md), its temporaries in a block kept per
thread (kernel.Scratch). A call binds its arguments, and the first call at
new sizes checks the program's preconditions and computes the output shapes once; later
calls at those sizes look them up. Nothing is compiled again.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import binding, ir
from ..codegen.sizes import SIZES_ABI_VERSION
from ..errors import TcError
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from .kernel import ENTRY, Native, output_makers


class _At:
    """What a kernel needs at one point of sizes: the sizes argument, and every shape."""

    def __init__(
        self,
        program: ir.Program,
        sizes: Mapping[str, int],
        params: Sequence[str],
        scratch: Callable[[Any], int],
    ):
        binding.check_preconditions(program, sizes)
        self.values = (ctypes.c_int64 * max(1, len(params)))(*(sizes[n] for n in params))
        self.scratch_bytes = scratch(self.values)
        self.shapes = binding.tensor_shapes(program, sizes)
        self.outputs = {n: self.shapes[n] for n in program.outputs}
        self.fresh = output_makers(program, self.shapes)


class ParametricKernel(Native):
    """A TC function compiled once for every size (`fn.compile(..., parametric=True)`):
    the dtypes and the integer scalars are fixed, the shapes are not."""

    def __init__(
        self,
        *,
        checked: CheckedDef,
        program: ir.Program,
        params: tuple[str, ...],
        scalars: Mapping[str, int],
        options: MappingOptions,
        library: Path,
    ) -> None:
        self.checked = checked
        self.options = options
        self.target = "cpu"
        self.library = library
        self._params = params
        self._scalars = dict(scalars)
        self._made_with = dict(checked=checked, program=program, params=params,
                               scalars=self._scalars, options=options, library=library)  # fmt: skip
        self._at: dict[tuple[int, ...], _At] = {}
        functions = self._load(program)
        version = ctypes.c_int32.in_dll(functions, "tc_abi_version").value
        if version != SIZES_ABI_VERSION:
            raise TcError(
                f"internal: {library} has kernel ABI {version}, not {SIZES_ABI_VERSION}",
                hint="clear the kernel cache: tc-graph cache clear",
            )
        self._enter(functions, ctypes.POINTER(ctypes.c_int64))
        self._scratch_bytes = functions[f"{ENTRY}_scratch"]
        self._scratch_bytes.restype = ctypes.c_int64
        self._scratch_bytes.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        self._dtypes = [np.dtype(checked.tensors[n].dtype) for n in program.inputs]
        # Points of sizes by the shapes of arguments that need no binding (`_as_given`).
        self._by_shapes: dict[tuple[tuple[int, ...], ...], _At] = {}

    def at(self, sizes: Mapping[str, int]) -> _At:
        """The sizes argument and shapes at these sizes, found once per point."""
        for name, value in self._scalars.items():
            if sizes.get(name) != value:
                raise TcError(
                    f"this kernel was compiled for {name}={value}, got {sizes.get(name)}; "
                    "an integer scalar is a constant of the kernel: compile it again"
                )
        key = tuple(sizes[n] for n in self._params)
        found = self._at.get(key)
        if found is None:
            found = self._at[key] = _At(self.program, sizes, self._params, self._scratch_bytes)
        return found

    def _as_given(self, args: Sequence[Any]) -> bool:
        """The arguments are the inputs as the kernel reads them: C-contiguous arrays of
        their dtypes (a plain loop: the per-call checks count in a small kernel), and the
        def has no integer scalar (whose value, not its shape, must be checked)."""
        if self._scalars or len(args) != len(self._dtypes):
            return False
        for a, dt in zip(args, self._dtypes, strict=True):
            if not (type(a) is np.ndarray and a.dtype == dt and a.flags.c_contiguous):
                return False
        return True

    def __call__(
        self,
        *args: Any,
        out: Sequence[np.ndarray] | np.ndarray | None = None,
        unchecked: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        plain = self._as_given(args)
        at = self._by_shapes.get(tuple(a.shape for a in args)) if plain else None
        if at is None:
            arrays, sizes = binding.bind_inputs(self.checked, args)
            at = self.at(sizes)
            inputs: Sequence[np.ndarray] = [arrays[n] for n in self.program.inputs]
            if plain:
                self._by_shapes[tuple(a.shape for a in args)] = at
        else:
            inputs = args
        outputs = self._outputs(inputs, at.fresh, at.outputs, out)
        block = self._block(inputs, outputs)
        ptrs = block.buffer_info()[0]
        scratch = self._scratch.address(at.scratch_bytes)
        code = self._fn(ptrs, at.values, scratch, 0 if unchecked else 1, ptrs + self._err_at)
        if code > 0:
            r, k = self._checks[code - 1]
            given = dict(zip(self.program.inputs, inputs, strict=True))
            shape = given[r.tensor].shape if r.tensor in given else at.shapes[r.tensor]
            raise binding.index_error(self.program, r, k, block[-1], shape[k])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
