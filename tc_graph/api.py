"""`define`, `TcModule` and `TcFunction`: TC functions called on NumPy arrays."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import binding, compiler, ir, ranges, reference
from .errors import TcError, not_too_deep
from .lang.parser import parse
from .lang.sema import CheckedDef, check
from .options import MappingOptions
from .runtime.kernel import Kernel
from .runtime.parametric import ParametricKernel

TARGETS = ("reference", "cpu", "opencl", "cuda")
DEFAULT_TARGET = "cpu"


class TcFunction:
    """One def of a module, callable on arrays."""

    def __init__(self, checked: CheckedDef, program: ir.Program | None) -> None:
        self.checked = checked
        self.name = checked.name
        # The symbolic program; None when the def is specialized on integer scalars.
        self.program = program
        self._specialized: dict[tuple[tuple[str, int], ...], ir.Program] = {}
        self._kernels: dict[tuple[Any, ...], Kernel | ParametricKernel] = {}

    def __repr__(self) -> str:
        return f"<TcFunction {self.name}({', '.join(self.checked.inputs)})>"

    def program_for(self, sizes: dict[str, int]) -> ir.Program:
        """The program for these integer scalars' values: the symbolic one when the def
        has none."""
        if self.program is not None:
            return self.program
        key = tuple((n, sizes[n]) for n in self.checked.index_scalars)
        prog = self._specialized.get(key)
        if prog is None:
            prog = ranges.infer(self.checked, dict(key))
            self._specialized[key] = prog
        return prog

    def output_shapes(self, *args: Any) -> tuple[tuple[int, ...], ...]:
        """The shape of each output for these arguments; nothing is computed."""
        return compiler.bind(self, args).output_shapes

    def output_dtypes(self, *args: Any) -> tuple[np.dtype, ...]:
        binding.bind_inputs(self.checked, args)
        return tuple(np.dtype(self.checked.tensors[o].dtype) for o in self.checked.outputs)

    def compile(
        self,
        *args: Any,
        target: str | None = None,
        options: MappingOptions | None = None,
        parametric: bool = False,
    ) -> Kernel | ParametricKernel:
        """A kernel specialized on these arguments' shapes, dtypes and integer scalars;
        with `parametric`, one for every shape (dtypes and integer scalars fixed) whose
        size-dependent choices are made at these arguments' sizes (docs/cpu.md)."""
        target = checked_target(target)
        if target == "reference":
            raise TcError(
                "the reference target interprets; it has nothing to compile",
                hint="call the function with target='reference' instead",
            )
        if parametric and target != "cpu":
            raise TcError(
                f"kernels for every size are compiled for the cpu target, not '{target}' yet",
                hint="use target='cpu', or parametric=False",
            )
        if options is not None and not isinstance(options, MappingOptions):
            raise TcError(f"options must be a tg.MappingOptions, got {type(options).__name__}")
        bound = compiler.bind(self, args)
        key = (
            target,
            options,
            tuple(
                (np.asarray(a).dtype.str, np.ndim(a) if parametric else np.shape(a)) for a in args
            ),
            tuple((n, bound.sizes[n]) for n in self.checked.index_scalars),
            parametric,
        )
        kernel = self._kernels.get(key)
        if kernel is None:
            with not_too_deep():
                if parametric:
                    kernel = compiler.parametric_kernel(bound, options)
                else:
                    kernel = compiler.kernel(bound, target, options)
            self._kernels[key] = kernel
        return kernel

    def __call__(
        self,
        *args: Any,
        target: str | None = None,
        options: MappingOptions | None = None,
        out: Sequence[np.ndarray] | np.ndarray | None = None,
        unchecked: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        target = checked_target(target)
        if target != "reference":
            return self.compile(*args, target=target, options=options)(
                *args, out=out, unchecked=unchecked
            )
        if options is not None:
            raise TcError("mapping options apply to compiled targets, not to 'reference'")
        bound = compiler.bind(self, args)
        program = bound.program
        buffers = binding.allocate(program, bound.shapes, out, bound.arrays)
        tensors = {**bound.arrays, **buffers}
        # The reference reads through NumPy's safe indexing, so it checks every
        # subscript whatever `unchecked` says: an oracle must never read garbage.
        with not_too_deep():
            reference.evaluate(program, tensors, {**bound.sizes, **program.constants})
        results = tuple(buffers[o] for o in program.outputs)
        return results[0] if len(results) == 1 else results


def checked_target(target: str | None) -> str:
    """The target a call names (None: the default), refused unless it is one of TARGETS:
    the API and the tuner check it the same way."""
    target = target or DEFAULT_TARGET
    if target not in TARGETS:
        raise TcError(f"unknown target '{target}'", hint=f"use one of {', '.join(TARGETS)}")
    return target


class UnknownDef(TcError, KeyError):
    """A def looked up by a name the source does not define: a TcError (the public API
    raises no other type) that is also the KeyError a mapping lookup gives."""

    def __str__(self) -> str:  # KeyError's would quote the whole message
        return TcError.__str__(self)


class TcModule:
    """The defs of one TC source, by name."""

    def __init__(self, source: str) -> None:
        self.source = source
        checked = check(parse(source))
        self.warnings = checked.warnings
        self._functions: dict[str, TcFunction] = {}
        for name, d in checked.defs.items():
            self._functions[name] = TcFunction(d, _symbolic_program(d))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._functions)

    def __getitem__(self, name: str) -> TcFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise UnknownDef(
                f"no def named {name!r}; this module defines {', '.join(self.names)}",
                hint="name one of the source's defs (a TcKernel node's 'entry' must)",
            ) from None

    def __getattr__(self, name: str) -> TcFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(
                f"no def named {name!r}; this module defines {', '.join(self.names)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __repr__(self) -> str:
        return f"<TcModule {', '.join(self.names)}>"


def _symbolic_program(d: CheckedDef) -> ir.Program | None:
    """Range inference on symbolic sizes. Defs that use integer scalars as sizes
    are inferred per call instead (their strides may not be affine symbolically),
    so their static errors surface at the call."""
    try:
        return ranges.infer(d)
    except TcError:
        if d.index_scalars:
            return None
        raise


def define_entry(source: str, entry: str) -> TcFunction | None:
    """The def named `entry` of a TC source (None where there is none), as define() gives
    it, but only that def gets range inference: the defs it calls are inlined into it
    when checked. A TcKernel runs one entry, and each group optimize translates carries
    the defs of its operators (densenet121's: 4.7 a group, most of a warm optimize's
    range inference)."""
    if not isinstance(source, str):
        raise TcError(f"define_entry() takes TC source text, got {type(source).__name__}")
    with not_too_deep():
        d = check(parse(source)).defs.get(entry)
        return None if d is None else TcFunction(d, _symbolic_program(d))


def define(source: str) -> TcModule:
    """Parse and check every def of a TC source; raises TcError on the first error."""
    if not isinstance(source, str):
        raise TcError(f"define() takes TC source text, got {type(source).__name__}")
    with not_too_deep():
        return TcModule(source)
