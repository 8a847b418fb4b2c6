"""Binding a call's arguments to a program: what every target checks before it runs.

Arguments become NumPy arrays of the declared dtypes, size names get their
values (repeated names must agree), the preconditions range inference could
not prove are checked on those values, and outputs and temporaries get their
concrete shapes and buffers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import ir
from .errors import TcError
from .lang.sema import CheckedDef


def _as_array(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__array__"):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def _scalar(d: CheckedDef, name: str, x: Any) -> np.ndarray:
    want = np.dtype(d.tensors[name].dtype)
    value = np.asarray(x)
    if value.ndim != 0:
        raise TcError(f"'{name}' of '{d.name}' is a scalar, but the argument has rank {value.ndim}")
    kind = value.dtype.kind
    if kind not in "biuf":
        raise TcError(f"'{name}' of '{d.name}' expects a number ({want}), got dtype {value.dtype}")
    if kind == "f" and want.kind != "f":
        raise TcError(
            f"'{name}' of '{d.name}' has dtype {want}, but the argument is a float ({value.dtype})"
        )
    if want.kind in "iu" and kind in "iu":
        info = np.iinfo(want)
        if not info.min <= int(value) <= info.max:
            raise TcError(f"{int(value)} does not fit '{name}' of '{d.name}' ({want})")
    return np.asarray(value, dtype=want)


def bind_inputs(d: CheckedDef, args: Sequence[Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Input arrays by name and the values of the size names and integer scalars."""
    if len(args) != len(d.inputs):
        raise TcError(
            f"'{d.name}' takes {len(d.inputs)} arguments ({', '.join(d.inputs)}), got {len(args)}"
        )
    arrays: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}
    source: dict[str, str] = {}
    for name, x in zip(d.inputs, args, strict=True):
        t = d.tensors[name]
        if t.rank == 0:
            arrays[name] = _scalar(d, name, x)
            if name in d.index_scalars:
                sizes[name] = int(arrays[name])
                if not -(2**31) <= sizes[name] < 2**31:
                    raise TcError(
                        f"'{name}' of '{d.name}' is used as a size and must fit in 32 bits, "
                        f"got {sizes[name]}"
                    )
            continue
        a = _as_array(x)
        if a.dtype != np.dtype(t.dtype):
            raise TcError(
                f"'{name}' of '{d.name}' has dtype {t.dtype}, but the argument has dtype {a.dtype}",
                hint=f"convert it first, e.g. a.astype(np.{t.dtype})",
            )
        if a.ndim != t.rank:
            raise TcError(
                f"'{name}' of '{d.name}' has rank {t.rank}, but the argument has rank {a.ndim} "
                f"(shape {a.shape})"
            )
        for k, dim in enumerate(t.dims or ()):
            n = a.shape[k]
            if isinstance(dim, ir.Const):
                if n != dim.value:
                    raise TcError(
                        f"dimension {k} of '{name}' must be {dim.value}, got {n} (shape {a.shape})"
                    )
                continue
            assert isinstance(dim, ir.Size)
            if dim.name in sizes and sizes[dim.name] != n:
                raise TcError(
                    f"{dim.name} is {sizes[dim.name]} for {source[dim.name]} but {n} for {name}"
                )
            if n >= 2**31:
                raise TcError(
                    f"dimension {k} of '{name}' has {n} elements; tc_graph supports sizes up to "
                    "2^31 - 1"
                )
            sizes.setdefault(dim.name, n)
            source.setdefault(dim.name, name)
        arrays[name] = np.ascontiguousarray(a)
    return arrays, sizes


def bind_compiled(
    d: CheckedDef,
    program: ir.Program,
    args: Sequence[Any],
    sizes: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
) -> dict[str, np.ndarray]:
    """The input arrays of a call to a kernel compiled for these integer scalars and
    shapes; a TcError names the first argument that differs."""
    arrays, given = bind_inputs(d, args)
    for name in d.index_scalars:
        if given.get(name) != sizes.get(name):
            raise TcError(
                f"this kernel was compiled for {name}={sizes.get(name)}, "
                f"got {given.get(name)}; compile it again for the new value"
            )
    for n in program.inputs:
        if arrays[n].shape != shapes[n]:
            raise TcError(
                f"this kernel was compiled for '{n}' of shape {shapes[n]}, got {arrays[n].shape}"
            )
    return arrays


def check_preconditions(program: ir.Program, sizes: Mapping[str, int]) -> None:
    if not program.preconditions:
        return
    point = ir.param_point(program, sizes)
    for pre in program.preconditions:
        if not pre.violated.intersect(point).is_empty():
            values = ", ".join(f"{p}={sizes[p]}" for p in program.params)
            raise TcError(
                f"{pre.message} for these sizes ({values})",
                source=program.source,
                span=pre.span,
            )


def tensor_shapes(program: ir.Program, sizes: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """Concrete shapes of the outputs and temporaries. An extent range inference gives
    past 2^31 - 1 is a TcError: every target indexes with 32-bit sizes, as binding checks
    the inputs' (NumPy's MemoryError, C that did not compile, islpy's TypeError escaped)."""
    point = ir.param_point(program, sizes)
    shapes = {
        name: tuple(max(0, ir.eval_pw(pa, point)) for pa in t.shape)
        for name, t in program.tensors.items()
        if t.role != "input"
    }
    for name, shape in shapes.items():
        for k, n in enumerate(shape):
            if n >= 2**31:
                raise TcError(
                    f"the extent of '{name}' in dimension {k} is {n} for these sizes; tc_graph "
                    "supports extents up to 2^31 - 1",
                    source=program.source,
                    hint="check the index expressions that range inference bounds it by",
                )
    return shapes


def allocate(
    program: ir.Program,
    shapes: Mapping[str, tuple[int, ...]],
    out: Sequence[Any] | None,
    inputs: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Buffers for outputs (the caller's `out`, checked, or new) and temporaries. An out=
    array may share no memory with an input or another output: kernels read and write
    in place (a CPU kernel through restrict pointers), and gave garbage."""
    if out is not None:
        if isinstance(out, np.ndarray):
            out = (out,)
        if not isinstance(out, list | tuple):
            raise TcError(
                f"out= must be a NumPy array or a sequence of them, not {type(out).__name__}"
            )
        if len(out) != len(program.outputs):
            raise TcError(
                f"out= has {len(out)} arrays, but '{program.name}' has "
                f"{len(program.outputs)} outputs"
            )
    buffers: dict[str, np.ndarray] = {}
    given_outs: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        t = program.tensors[name]
        if out is not None and t.role == "output":
            given = out[program.outputs.index(name)]
            if not isinstance(given, np.ndarray):
                raise TcError(f"out= for '{name}' must be a NumPy array")
            if given.shape != shape or given.dtype != np.dtype(t.dtype):
                raise TcError(
                    f"out= for '{name}' must have shape {shape} and dtype {t.dtype}, "
                    f"got {given.shape} and {given.dtype}"
                )
            if not given.flags.c_contiguous or not given.flags.writeable:
                raise TcError(f"out= for '{name}' must be a writeable row-major array")
            _no_overlap(name, given, inputs, given_outs)
            buffers[name] = given_outs[name] = given
            continue
        make = np.zeros if t.zero_fill else np.empty
        buffers[name] = make(shape, dtype=t.dtype)
    return buffers


def _no_overlap(
    name: str, given: np.ndarray, inputs: Mapping[str, np.ndarray], outs: Mapping[str, np.ndarray]
) -> None:
    """TcError where the out= array for `name` shares memory with an input or an out=
    array before it (both row-major: their bounds overlap exactly when they do)."""
    for kind, arrays in (("input", inputs), ("out= for", outs)):
        for other, a in arrays.items():
            if np.may_share_memory(given, a):
                raise TcError(
                    f"out= for '{name}' shares memory with {kind} '{other}'",
                    hint="pass an array of its own (a kernel writes its outputs in place)",
                )


def index_error(program: ir.Program, r: ir.Read, k: int, value: int, extent: int) -> TcError:
    """The error of an index value outside its tensor, as every target reports it."""
    return TcError(
        f"index out of bounds: {ir.to_text(r)} reads '{r.tensor}' at {value} in dimension {k}, "
        f"whose extent is {extent}",
        source=program.source,
        span=r.span,
        hint="clamp the index, e.g. B(max(min(C(i), J - 1), 0)), or fix the index values",
    )
