"""Compiled CPU kernels: the library stage of the compiler driver, and the callable `Kernel`.

A kernel's key is looked up in the cache first (a hit costs a hash and a dlopen); only a
miss generates the C (tc_graph/compiler.py's stages) and runs the C compiler.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import contextvars
import ctypes
import functools
import hashlib
import logging
import math
import operator
import os
import threading
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
from . import cc, sandbox

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
    """Within, a CPU kernel that is not in the cache is generated and built in another
    process, killed (CompileTimeout) if it runs past `seconds` from now: optimize's budget
    bounds a compile of any size. A cache hit is unaffected."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _build(generate: Callable[[], str], key: str, name: str) -> Path:
    start = time.perf_counter()
    text = generate()
    log.debug("%s: C generated in %.2f s", name, time.perf_counter() - start)
    return cc.build(text, key)


class _Records(logging.Handler):
    """The log records of a build in the builder, as dicts that pickle."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.records.append({**record.__dict__, "msg": message, "args": None, "exc_info": None})


def _build_as(
    environ: dict[str, str], flags: tuple[str, ...], level: int, *job: Any
) -> list[dict[str, Any]]:
    """_build(*job) in the builder, with the caller's environment and target flags (the
    cache directory, CC, TC_GRAPH_CFLAGS): what it builds is what the caller would. Its
    log records at the caller's level come back for the caller's handlers."""
    os.environ.clear()
    os.environ.update(environ)
    logger, records = logging.getLogger("tc_graph"), _Records()
    logger.setLevel(level)
    logger.addHandler(records)
    try:
        with cc.target_flags(flags):
            _build(*job)
    finally:
        logger.removeHandler(records)
    return records.records


# Builds under a deadline run in a new interpreter, not in a fork: a child forked from a
# caller with other threads inherits their locks (a cache entry's flock among them) and
# can wait on them forever. One build at a time.
_BUILDER = sandbox.Sandbox()
_BUILDER_LOCK = threading.Lock()
atexit.register(_BUILDER.close)


def _in_time(generate: Callable[[], str], key: str, name: str) -> Path:
    """_build here, or in the builder when a compile_timeout is set (generate then has to
    pickle). A build that fails there is run again here, for its error."""
    deadline = _DEADLINE.get()
    if math.isinf(deadline):
        return _build(generate, key, name)
    with _BUILDER_LOCK:
        try:
            level = logging.getLogger("tc_graph").getEffectiveLevel()
            records = _BUILDER.call(
                _build_as, dict(os.environ), cc.active_target_flags(), level, generate, key,
                name, timeout=max(0.0, deadline - time.monotonic()),
            )  # fmt: skip
        except sandbox.SandboxTimeout:
            raise CompileTimeout(f"compile killed at its deadline ({name})") from None
        except sandbox.SandboxError as e:
            log.debug("%s: the build failed in the builder (%s); building here", name, e)
        else:
            for fields in records:
                record = logging.makeLogRecord(fields)
                logging.getLogger(record.name).handle(record)
    library = cc.lookup(key)
    return library if library is not None else _build(generate, key, name)


def address(a: np.ndarray) -> int:
    """The data pointer of a contiguous array: through the buffer protocol where it is
    writable (0.2 µs), else numpy's ctypes view (1 µs)."""
    if a.flags.writeable and a.size:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return int(a.ctypes.data)


# What tc_graph's sources are: its Python, the native op's C (how a TcKernel runs its
# chunks: a decision measured under another op must be measured again) and the operator
# templates with their table.
SOURCE_SUFFIXES = (".py", ".c", ".tc", ".toml")


@functools.cache
def code_version() -> str:
    """A hash of tc_graph's own sources: a changed compiler never reuses old kernels."""
    return sources_hash(Path(__file__).resolve().parents[1])


def sources_hash(root: Path) -> str:
    """The hash of every source file under root (through links: a checkout's operators/
    is one), by path and content."""
    files = [
        Path(d, name)
        for d, _, names in os.walk(root, followlinks=True)
        for name in names
        if Path(name).suffix in SOURCE_SUFFIXES
    ]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
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


class Scratch:
    """Each calling thread's block for a kernel's temporaries (its library's `tc_kernel_in`
    takes it), kept from one call to the next and grown as needed (why: the kernel method
    in codegen/c.py). Freed with the kernel object."""

    def __init__(self) -> None:
        self._local = threading.local()

    def address(self, nbytes: int) -> int:
        """The 64-byte aligned address of at least nbytes of this thread's block (0 for
        none: a kernel without temporaries does not read it)."""
        if not nbytes:
            return 0
        local = self._local
        if getattr(local, "nbytes", -1) < nbytes:
            try:
                local.block = np.empty(nbytes + 64, np.uint8)
            except MemoryError:
                raise TcError(
                    f"out of memory allocating the kernel's temporaries ({nbytes} bytes)"
                ) from None
            at = int(local.block.ctypes.data)
            local.at, local.nbytes = at + (-at % 64), nbytes
        return int(local.at)


Maker = tuple[Callable[..., np.ndarray], tuple[int, ...], np.dtype[Any]]


def output_makers(program: ir.Program, shapes: Mapping[str, tuple[int, ...]]) -> list[Maker]:
    """How a call allocates each output: zeroed where the kernel accumulates into it."""
    tensors = program.tensors
    return [
        (np.zeros if tensors[n].zero_fill else np.empty, shapes[n], np.dtype(tensors[n].dtype))
        for n in program.outputs
    ]


class Native:
    """What both kinds of compiled CPU kernel (Kernel, ParametricKernel) hold: the library's
    entry point, the state of its calls and the generated source."""

    checked: CheckedDef
    options: MappingOptions
    target: str
    library: Path
    _made_with: dict[str, Any]  # the keyword arguments it was made with

    def _load(self, program: ir.Program) -> cc.Library:
        """The library, loaded, with the state its calls keep."""
        self.program = program
        self._checks = checked_accesses(program)
        self._scratch = Scratch()
        self._pointers = InputPointers()
        self._err_at = 8 * (len(program.inputs) + len(program.outputs))
        return cc.load(self.library)

    def _block(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> array.array:
        """A call's data pointers, then the slot where the kernel writes the index of a
        failed check: one array per call (ctypes drops the GIL, so threads may run one
        kernel at once), an array.array for its 1 µs (a ctypes array of pointers took 2.8
        µs, a twentieth of MLP3's call)."""
        return array.array("q", [*self._pointers.of(inputs), *map(address, outputs), 0])

    def _enter(self, functions: cc.Library, *sizes: Any) -> None:
        """Type the entry point: the data pointers, `sizes`, the scratch block, whether to
        check the indices, and where the index of a failed check goes. The function pointer
        holds its library: the kernel is unloaded with this object."""
        self._fn = functions[f"{ENTRY}_in"]
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = [
            ctypes.c_void_p,
            *sizes,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
        ]

    def _outputs(
        self, inputs: Sequence[np.ndarray], fresh: list[Maker], shapes: Mapping[str, Any], out: Any
    ) -> list[np.ndarray]:
        """A call's outputs: made afresh, or the caller's `out` (binding.allocate checks it)."""
        if out is None:
            return [make(shape, dtype) for make, shape, dtype in fresh]
        named = dict(zip(self.program.inputs, inputs, strict=True))
        buffers = binding.allocate(self.program, shapes, out, named)
        return [buffers[n] for n in self.program.outputs]

    @property
    def source(self) -> str:
        """The generated C text (kept beside the object in the cache)."""
        return (self.library.parent / cc.SOURCE_NAME).read_text(encoding="utf-8")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.checked.name} target={self.target} {self.options}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what loads it again from its library (the autotuner's sandbox
        process runs candidates this way, without compiling them again)."""
        return (functools.partial(type(self), **self._made_with), ())


class Kernel(Native):
    """A TC function compiled for fixed input shapes, dtypes and integer scalars. Calling it
    re-checks shapes and dtypes (cheap), allocates the outputs, and runs the native code."""

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
        self.options = options
        self.target = target
        self.library = library
        self._sizes = dict(sizes)
        self._shapes = dict(shapes)
        self._made_with = dict(checked=checked, program=program, sizes=self._sizes,
                               shapes=self._shapes, options=options, target=target,
                               library=library)  # fmt: skip
        functions = self._load(program)
        self._enter(functions)
        self._scratch_bytes = ctypes.c_int64.in_dll(functions, f"{ENTRY}_scratch_bytes").value
        self._expected = [(np.dtype(checked.tensors[n].dtype), shapes[n]) for n in program.inputs]
        self._out_shapes = {n: shapes[n] for n in program.outputs}
        self._fresh = output_makers(program, shapes)

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
        inputs = self._inputs(args)
        outputs = self._outputs(inputs, self._fresh, self._out_shapes, out)
        block = self._block(inputs, outputs)
        at = block.buffer_info()[0]
        scratch = self._scratch.address(self._scratch_bytes)
        code = self._fn(at, scratch, 0 if unchecked else 1, at + self._err_at)
        if code > 0:
            r, k = self._checks[code - 1]
            raise binding.index_error(self.program, r, k, block[-1], self._shapes[r.tensor][k])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def library_for(key: str, name: str, generate: Callable[[], str]) -> Path:
    """The library cached under key, or generate()'s C built into the cache now (within
    the compile_timeout, if one is set)."""
    library = cc.lookup(key)
    if library is not None:
        log.debug("%s: kernel cache hit %s", name, library.parent)
        return library
    log.debug("%s: kernel cache miss, generating C", name)
    return _in_time(generate, key, name)
