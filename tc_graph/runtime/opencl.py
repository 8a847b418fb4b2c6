"""target="opencl": GPU-mapped kernels run through pyopencl (PoCL, or Intel's CPU runtime).

PoCL compiles each program with clang and LLVM, which takes a noticeable fraction of a
second, so built programs are kept per process, keyed by their text. Buffers are made
per call: inputs copied in, outputs (and `out=` arrays, which reductions without `!`
accumulate into) copied in and back, temporaries zero-filled on the device.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..codegen.gpu import program_dtypes
from ..errors import TcError
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from .cc import cache_dir, cache_key
from .gpu import GpuBuffers, GpuKernel, GpuSource

_PROGRAMS: dict[str, Any] = {}
# The context and queue, made once under _LOCK: concurrent first calls made a context
# each, and programs built in one were enqueued on another's queue.
_CONTEXT: tuple[Any, Any] | None = None
_LOCK = threading.Lock()
os.register_at_fork(after_in_child=lambda: globals().update(_LOCK=threading.Lock()))
_HINT = (
    "pip install pyopencl pocl-binary-distribution (or, in a tc_graph checkout, "
    'pip install ".[opencl]", which adds Intel\'s CPU runtime); '
    "TC_GRAPH_OPENCL_DEVICE picks a device"
)


@functools.cache
def _cl() -> Any:
    try:
        import pyopencl
    except ImportError:
        raise TcError("target 'opencl' needs pyopencl and an OpenCL platform", hint=_HINT) from None
    return pyopencl


def _register_intel_cpu() -> None:
    """Make the Intel CPU runtime of the intel-opencl-rt wheel visible to pyopencl's ICD
    loader, beside the platforms it finds by itself.

    The wheel's own vendors file names a placeholder path, and its library needs the Intel
    math libraries of intel-cmplr-lib-rt, which lie beside it but not on the loader's
    path. So the math libraries are loaded first (the dynamic linker then matches them by
    name) and the loader reads a vendors directory of ours: the system's vendors files plus
    one naming the library. Nothing happens where $OCL_ICD_VENDORS is set or the wheel is
    absent. Must run before pyopencl first lists platforms.
    """
    lib = os.path.join(sys.prefix, "lib")
    intel = os.path.join(lib, "libintelocl.so")
    if "OCL_ICD_VENDORS" in os.environ or not os.path.exists(intel):
        return
    try:
        for name in ("libintlc.so.5", "libimf.so", "libsvml.so", "libirng.so"):
            ctypes.CDLL(os.path.join(lib, name))
    except OSError:
        return
    files = {
        os.path.basename(f): Path(f).read_text() for f in glob.glob("/etc/OpenCL/vendors/*.icd")
    }
    files["tc-graph-intel-cpu.icd"] = intel + "\n"
    vendors = (
        cache_dir() / f"opencl-vendors-{cache_key(*sorted(f'{k}={v}' for k, v in files.items()))}"
    )
    if not vendors.is_dir():
        # Written aside and renamed, so that concurrent processes never see half of it.
        tmp = Path(tempfile.mkdtemp(dir=cache_dir()))
        for name, text in files.items():
            (tmp / name).write_text(text)
        try:
            tmp.rename(vendors)
        except OSError:
            shutil.rmtree(tmp)
    os.environ["OCL_ICD_VENDORS"] = str(vendors)


def _preference(platform: str) -> int:
    """PoCL first (its work-group loops are what CI checks), then the others as listed."""
    return 0 if "portable computing language" in platform.lower() else 1


def context() -> tuple[Any, Any]:
    """The OpenCL context and in-order queue kernels run on: the first device that builds
    a probe kernel, PoCL preferred; $TC_GRAPH_OPENCL_DEVICE (a substring of "platform:
    device") restricts the choice. One per process, whichever thread asks first."""
    global _CONTEXT
    made = _CONTEXT
    if made is None:
        with _LOCK:
            if _CONTEXT is None:
                _CONTEXT = _context()
            made = _CONTEXT
    return made


def _context() -> tuple[Any, Any]:
    _register_intel_cpu()
    cl = _cl()
    try:
        platforms = sorted(cl.get_platforms(), key=lambda p: _preference(p.name))
    except cl.Error as e:
        raise TcError(f"no OpenCL platform found ({e})", hint=_HINT) from None
    want = os.environ.get("TC_GRAPH_OPENCL_DEVICE", "")
    failures = []
    for platform in platforms:
        for device in platform.get_devices():
            label = f"{platform.name}: {device.name}"
            if want.lower() not in label.lower():
                continue
            ctx = cl.Context([device])
            try:
                # A device may be listed yet unable to compile: the PoCL of
                # pocl-binary-distribution (LLVM 14) fails on CPUs its LLVM does not know.
                _built(ctx, "__kernel void tc_probe(__global int *a) { a[0] = 1; }")
            except cl.Error as e:
                failures.append(f"{label}: {str(e).strip().splitlines()[-1]}")
                continue
            return ctx, cl.CommandQueue(ctx)
    raise TcError(
        f"no usable OpenCL device{f' matching {want!r}' if want else ''}"
        + (f" ({'; '.join(failures)})" if failures else ""),
        hint=_HINT,
    )


def _built(ctx: Any, text: str) -> Any:
    """The program of `text`, built; pyopencl's compiler-log warnings silenced (Intel's
    compiler lists the kernels it vectorized: not a warning)."""
    cl = _cl()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        return cl.Program(ctx, text).build()


def build(texts: Sequence[str]) -> None:
    """Build programs not built yet in this process. Each program is one kernel's text."""
    cl = _cl()
    ctx, _ = context()
    for text in texts:
        if text in _PROGRAMS:
            continue
        try:
            # Not under a lock (a build takes long): two threads may build one program,
            # in the one context, and keep the first.
            _PROGRAMS.setdefault(text, _built(ctx, text))
        except cl.Error as e:
            raise TcError(f"the OpenCL compiler rejected a generated kernel:\n{e}") from None


class OpenclKernel(GpuKernel):
    """A TC compiled for fixed input shapes, run on an OpenCL device."""

    target = "opencl"

    def __init__(self, checked: CheckedDef, gpu: GpuSource, options: MappingOptions) -> None:
        super().__init__(checked, gpu, options)
        ctx, _ = context()
        device = ctx.devices[0]
        if "float16" in program_dtypes(gpu.program) and "cl_khr_fp16" not in device.extensions:
            raise TcError(
                f"float16 tensors and half(...) casts need the cl_khr_fp16 extension, "
                f"which {device.name} lacks",
                hint="use target='cpu'",
            )
        build([gpu.text])
        self._cl_program = _PROGRAMS[gpu.text]
        cl = _cl()
        self._kernels = [cl.Kernel(self._cl_program, lc.name) for lc in gpu.launches]
        # A launch sets its Kernel objects' arguments, then enqueues them: calls from
        # several threads must not set them under each other (wrong outputs, segfaults).
        self._launching = threading.Lock()

    def __repr__(self) -> str:
        return f"<OpenclKernel {self.checked.name} {self.options}>"

    def _run(self, buffers: GpuBuffers, check: int) -> None:
        cl = _cl()
        ctx, queue = context()
        mf = cl.mem_flags

        def buffer(a: np.ndarray) -> Any:
            if a.nbytes == 0:
                return cl.Buffer(ctx, mf.READ_WRITE, 8)
            return cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a)

        bufs = [buffer(a) for a in buffers.arguments]
        with self._launching:
            for kernel, lc in zip(self._kernels, self.launches, strict=True):
                dims = max(len(lc.grid), len(lc.block))
                local = (*lc.block, *(1,) * (dims - len(lc.block)))
                groups = (*lc.grid, *(1,) * (dims - len(lc.grid)))
                glob = tuple(g * b for g, b in zip(groups, local, strict=True))
                kernel(queue, glob, local, *bufs, np.int32(check))
        for k in buffers.copied_back:
            if buffers.arguments[k].nbytes:
                cl.enqueue_copy(queue, buffers.arguments[k], bufs[k])
        queue.finish()
