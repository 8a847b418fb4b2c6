"""Compiled CPU kernels: the library stage of the compiler driver, and the callable `Kernel`.

A kernel's key is looked up in the cache first (a hit costs a hash and a dlopen); only a
miss generates the C (tc_graph/compiler.py's stages) and runs the C compiler.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import hashlib
import logging
import math
import multiprocessing
import operator
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import binding, ir
from ..errors import TcError
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from ..poly.scop import checked_accesses
from . import cc

log = logging.getLogger(__name__)

ENTRY = "tc_kernel"

# The time.monotonic() past which a kernel cache miss is killed (see compile_timeout).
_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar(
    "tc_graph_compile_deadline", default=math.inf
)


class CompileTimeout(Exception):
    """A compile killed at the end of its compile_timeout."""


@contextlib.contextmanager
def compile_timeout(seconds: float) -> Iterator[None]:
    """Within, a CPU kernel that is not in the cache is generated and built in a child
    process, killed (CompileTimeout) if it runs past `seconds` from now: optimize's budget
    bounds a compile of any size. A cache hit is unaffected."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _in_time(build: Callable[[], Path], key: str) -> Path:
    """build() (which puts the library in the cache under key), in a forked child when a
    compile_timeout is set. A child that fails is run again here, for its error."""
    deadline = _DEADLINE.get()
    if math.isinf(deadline):
        return build()

    def child() -> None:
        os.setpgid(0, 0)  # killed with the C compiler it runs
        try:
            build()
        except BaseException:
            os._exit(1)

    process = multiprocessing.get_context("fork").Process(target=child, daemon=True)
    process.start()
    process.join(max(0.0, deadline - time.monotonic()))
    if process.is_alive():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.kill()
        process.join()
        raise CompileTimeout(f"compile killed after its {deadline:.0f} s deadline")
    library = cc.lookup(key) if process.exitcode == 0 else None
    return library if library is not None else build()


def address(a: np.ndarray) -> int:
    """The data pointer of a contiguous array: through the buffer protocol where it is
    writable (0.2 µs), else numpy's ctypes view (1 µs)."""
    if a.flags.writeable and a.size:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return int(a.ctypes.data)


@functools.cache
def code_version() -> str:
    """A hash of tc_graph's own sources: a changed compiler never reuses old kernels."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


class InputPointers:
    """The data pointers of a call's inputs. The last call's inputs and pointers are kept:
    an ndarray's buffer never moves, so passing the same arrays again skips the lookups
    (the references keep the objects, hence their pointers, alive)."""

    def __init__(self) -> None:
        self._last: tuple[tuple[Any, ...], list[int]] = ((), [])

    def of(self, inputs: Sequence[np.ndarray]) -> list[int]:
        last, pointers = self._last
        if len(last) == len(inputs) and all(map(operator.is_, inputs, last)):
            return pointers
        pointers = [address(a) for a in inputs]
        self._last = (tuple(inputs), pointers)
        return pointers


class Kernel:
    """A TC function compiled for fixed input shapes, dtypes and integer scalars.

    Calling it re-checks shapes and dtypes (cheap), allocates the outputs, and
    runs the native code; no Python runs inside the kernel.
    """

    def __init__(
        self,
        *,
        checked: CheckedDef,
        program: ir.Program,
        sizes: Mapping[str, int],
        shapes: Mapping[str, tuple[int, ...]],
        options: MappingOptions,
        target: str,
        library: Path,
    ) -> None:
        self.checked = checked
        self.program = program
        self.options = options
        self.target = target
        self.library = library
        self._checks = checked_accesses(program)
        self._sizes = dict(sizes)
        self._shapes = dict(shapes)
        # The function pointer holds its library: the kernel is unloaded with this object.
        self._fn = cc.load(library)[ENTRY]
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int64),
        ]
        self._expected = [(np.dtype(checked.tensors[n].dtype), shapes[n]) for n in program.inputs]
        self._out_shapes = {n: shapes[n] for n in program.outputs}
        self._fresh = [
            (
                np.zeros if program.tensors[n].zero_fill else np.empty,
                shapes[n],
                np.dtype(program.tensors[n].dtype),
            )
            for n in program.outputs
        ]
        self._pointers = InputPointers()
        self._ptr_array = ctypes.c_void_p * (len(program.inputs) + len(program.outputs))

    @property
    def source(self) -> str:
        """The generated C text (kept beside the object in the cache)."""
        return (self.library.parent / "kernel.c").read_text(encoding="utf-8")

    def __repr__(self) -> str:
        return f"<Kernel {self.checked.name} target={self.target} {self.options}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what loads it again from its library (the autotuner's sandbox
        process runs candidates this way, without compiling them again)."""
        return (
            functools.partial(
                Kernel, checked=self.checked, program=self.program, sizes=self._sizes,
                shapes=self._shapes, options=self.options, target=self.target,
                library=self.library,
            ),
            (),
        )  # fmt: skip

    def _inputs(self, args: Sequence[Any]) -> Sequence[np.ndarray]:
        if len(args) == len(self._expected):
            # A plain loop: the per-call checks are a measurable part of a small kernel.
            for a, (dt, shape) in zip(args, self._expected, strict=True):
                if not (
                    type(a) is np.ndarray
                    and a.dtype == dt
                    and a.shape == shape
                    and a.flags.c_contiguous
                ):
                    break
            else:
                return args
        arrays = binding.bind_compiled(self.checked, self.program, args, self._sizes, self._shapes)
        return [arrays[n] for n in self.program.inputs]

    def __call__(
        self,
        *args: Any,
        out: Sequence[np.ndarray] | np.ndarray | None = None,
        unchecked: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        in_ptrs = self._pointers.of(self._inputs(args))
        if out is None:
            outputs = [make(shape, dtype) for make, shape, dtype in self._fresh]
        else:
            buffers = binding.allocate(self.program, self._out_shapes, out)
            outputs = [buffers[n] for n in self.program.outputs]
        out_ptrs = [address(o) for o in outputs]
        # Fresh per call: ctypes drops the GIL, so threads may run one kernel at once.
        ptrs = self._ptr_array(*in_ptrs, *out_ptrs)
        err = ctypes.c_int64(0)
        code = self._fn(ptrs, 0 if unchecked else 1, ctypes.byref(err))
        if code > 0:
            r, k = self._checks[code - 1]
            raise binding.index_error(self.program, r, k, err.value, self._shapes[r.tensor][k])
        if code < 0:
            raise TcError("out of memory allocating the kernel's temporaries")
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def library_for(key: str, name: str, generate: Callable[[], str]) -> Path:
    """The library cached under key, or generate()'s C built into the cache now (within
    the compile_timeout, if one is set)."""
    library = cc.lookup(key)
    if library is not None:
        log.debug("%s: kernel cache hit %s", name, library.parent)
        return library
    log.debug("%s: kernel cache miss, generating C", name)

    def build() -> Path:
        start = time.perf_counter()
        source = generate()
        log.debug("%s: C generated in %.2f s", name, time.perf_counter() - start)
        return cc.build(source, key)

    return _in_time(build, key)
