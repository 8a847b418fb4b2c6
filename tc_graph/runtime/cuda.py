"""target="cuda": GPU-mapped kernels run through the CUDA driver of cuda-python.

The text is compiled by nvcc for the device's own architecture (a cubin, kept in the
kernel cache keyed by the text and the architecture), loaded into the device's primary
context and launched with the geometry of the mapping. nvcc rather than NVRTC: the
text includes the C headers, which NVRTC does not ship. Buffers are made per call, as
on OpenCL: inputs copied in, outputs copied in and back, temporaries zero-filled.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TcError
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from .cc import _write_atomic, cache_dir, cache_key
from .gpu import GpuBuffers, GpuKernel, GpuSource

_HINT = (
    'pip install "tc_graph[cuda]" (cuda-python) on a machine with an NVIDIA GPU, its '
    "driver and nvcc; kernel.source and kernel.launches hold the text and geometry"
)
_MODULES: dict[str, Any] = {}


@functools.cache
def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        raise TcError("target 'cuda' needs cuda-python to run kernels", hint=_HINT) from None
    return driver


def _checked(result: tuple[Any, ...], what: str) -> Any:
    """The value of a driver call, whose first result is its status."""
    cu = _driver()
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        raise TcError(f"CUDA {what} failed: {name.decode() if name else err}", hint=_HINT)
    return values[0] if len(values) == 1 else values


@functools.cache
def device() -> tuple[Any, str]:
    """The primary context of device 0, made current, and its architecture (sm_XY)."""
    cu = _driver()
    try:
        started = cu.cuInit(0)
    except Exception as e:  # cuda-python raises its own types where libcuda is missing
        raise TcError(f"no CUDA driver ({e})", hint=_HINT) from None
    _checked(started, "initialization")
    dev = _checked(cu.cuDeviceGet(0), "device lookup")
    attribute = cu.CUdevice_attribute
    major = _checked(
        cu.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "attribute query",
    )
    minor = _checked(
        cu.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "attribute query",
    )
    ctx = _checked(cu.cuDevicePrimaryCtxRetain(dev), "context")
    _checked(cu.cuCtxSetCurrent(ctx), "context")
    return ctx, f"sm_{major}{minor}"


def _cubin(text: str, arch: str) -> bytes:
    """The text compiled by nvcc for `arch`, from the cache when it was compiled before."""
    path = cache_dir() / f"cuda-{cache_key(text, arch)}.cubin"
    if path.is_file():
        return path.read_bytes()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise TcError("target 'cuda' needs nvcc on PATH to compile kernels", hint=_HINT)
    with tempfile.TemporaryDirectory() as tmp:
        source, made = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        source.write_text(text, encoding="utf-8")
        done = subprocess.run(
            [nvcc, "-cubin", f"-arch={arch}", "-w", "-o", str(made), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise TcError(f"nvcc rejected a generated kernel:\n{done.stderr[-4000:]}")
        data = made.read_bytes()
    _write_atomic(path, data)
    return data


class CudaKernel(GpuKernel):
    """A TC compiled for fixed input shapes, run on the first CUDA device."""

    target = "cuda"

    def __init__(self, checked: CheckedDef, gpu: GpuSource, options: MappingOptions) -> None:
        super().__init__(checked, gpu, options)
        self._functions: list[Any] | None = None

    def __repr__(self) -> str:
        return f"<CudaKernel {self.checked.name} {len(self.launches)} launches>"

    def _loaded(self) -> list[Any]:
        """The launches' functions, compiled and loaded at the first call (compiling the
        text needs no device, so `compile` works where none is)."""
        if self._functions is None:
            cu = _driver()
            _, arch = device()
            key = f"{arch}\n{self.source}"
            if key not in _MODULES:
                _MODULES[key] = _checked(cu.cuModuleLoadData(_cubin(self.source, arch)), "load")
            module = _MODULES[key]
            self._functions = [
                _checked(cu.cuModuleGetFunction(module, lc.name.encode()), "function lookup")
                for lc in self.launches
            ]
        return self._functions

    def _run(self, buffers: GpuBuffers, check: int) -> None:
        cu = _driver()
        # A context is current per thread: a kernel called from another thread makes it so.
        _checked(cu.cuCtxSetCurrent(device()[0]), "context")
        functions = self._loaded()
        pointers = [
            _checked(cu.cuMemAlloc(max(a.nbytes, 8)), "allocation") for a in buffers.arguments
        ]
        try:
            for a, p in zip(buffers.arguments, pointers, strict=True):
                if a.nbytes:
                    _checked(cu.cuMemcpyHtoD(p, a.ctypes.data, a.nbytes), "copy in")
            values = [np.array([int(p)], np.uint64) for p in pointers]
            values.append(np.array([check], np.int32))
            params = np.array([v.ctypes.data for v in values], np.uint64)
            for function, lc in zip(functions, self.launches, strict=True):
                grid = (*lc.grid, 1, 1, 1)[:3]
                block = (*lc.block, 1, 1, 1)[:3]
                _checked(
                    cu.cuLaunchKernel(
                        function, *grid, *block, 0, cu.CUstream(0), params.ctypes.data, 0
                    ),
                    f"launch of {lc.name}",
                )
            _checked(cu.cuCtxSynchronize(), "kernel run")
            for k in buffers.copied_back:
                a = buffers.arguments[k]
                if a.nbytes:
                    _checked(cu.cuMemcpyDtoH(a.ctypes.data, pointers[k], a.nbytes), "copy out")
        finally:
            for p in pointers:
                cu.cuMemFree(p)
