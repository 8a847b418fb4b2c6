"""tc_graph's native onnxruntime custom-op library (``ort_op.c``), built on first use.

The library runs ``TcKernel`` nodes (domain ``ai.tc_graph``) by calling compiled kernels
straight from onnxruntime, with no Python on the per-call path. It is compiled with the
system compiler into the kernel cache like any kernel, so it matches this machine's
compiler and onnxruntime without shipping a binary; see docs/onnx.md for the contract.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TcError
from . import cc

if TYPE_CHECKING:
    import onnxruntime

# Where a deployed library finds kernels instead of the cache (docs/onnx.md "Deploying"):
# a session config entry, else this environment variable. ort_op.c spells both too.
KERNEL_DIR_CONFIG = "tc_graph.kernel_dir"
KERNEL_DIR_ENV = "TC_GRAPH_KERNEL_DIR"

_SOURCE = Path(__file__).with_name("ort_op.c")
# Only RegisterCustomOps is exported; dlopen lives in libdl on glibc before 2.34.
_EXTRA_FLAGS: tuple[str, ...] = ("-fvisibility=hidden",)
_EXTRA_LIBS: tuple[str, ...] = ("-ldl",)
# A deployed library must load on any x86-64 CPU so that it can refuse a kernel the CPU
# cannot run with a message, not die of an illegal instruction.
_PORTABLE_FLAGS: tuple[str, ...] = ("-march=x86-64", "-mtune=generic")

# onnxruntime's execution providers that run nodes on a device other than the host CPU.
_DEVICE_PROVIDERS = frozenset({
    "CUDAExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider",
    "TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider", "DmlExecutionProvider",
    "WebGpuExecutionProvider", "CoreMLExecutionProvider", "QNNExecutionProvider",
    "CANNExecutionProvider", "OpenVINOExecutionProvider",
})  # fmt: skip

_lock = threading.Lock()
_memo: dict[tuple[str | None, ...], Path] = {}


def _memo_key(portable: bool) -> tuple[str | None, ...]:
    """What decides which library file applies: the cache location and the compiler."""
    names = ("TC_GRAPH_CACHE", "XDG_CACHE_HOME", "HOME", "CC", "TC_GRAPH_CFLAGS")
    return (*(os.environ.get(name) for name in names), cc.compiler_identity(), str(portable))


def api_versions() -> tuple[int, int]:
    """The onnxruntime API version the library asks for and the oldest it falls back to,
    as ort_op.c defines them (TC_ORT_API_VERSION, TC_ORT_API_MIN)."""
    source = _SOURCE.read_text(encoding="utf-8")
    found = dict(re.findall(r"#define (TC_ORT_API_(?:VERSION|MIN)) (\d+)u", source))
    return int(found["TC_ORT_API_VERSION"]), int(found["TC_ORT_API_MIN"])


def library_path(*, portable: bool = False) -> str:
    """The path of the built custom-op library, compiling it into the cache on a miss;
    ``portable``: built for any x86-64 CPU (what a package ships), not this one.

    The cache entry is keyed by the C source, the extra flags and the compiler identity, so
    an edited library or another compiler never reuses an old object. Memoized per process
    (re-checked on disk, since ``tc-graph cache clear`` may remove the entry).
    """
    memo_key = _memo_key(portable)
    with _lock:
        path = _memo.get(memo_key)
        if path is not None and path.is_file():
            return str(path)
        try:
            source = _SOURCE.read_text(encoding="utf-8")
        except OSError as exc:
            raise TcError(
                f"cannot read tc_graph's onnxruntime library source {_SOURCE}: {exc}",
                hint="reinstall tc_graph (pip install --force-reinstall . in its checkout)",
            ) from None
        extra = _EXTRA_FLAGS
        if portable and platform.machine() in ("x86_64", "AMD64"):
            extra = (*_EXTRA_FLAGS, *_PORTABLE_FLAGS)
        flags = shlex.join([*extra, *_EXTRA_LIBS])
        key = "ort_op-" + cc.cache_key("tc_graph onnxruntime custom-op library", source, flags)
        path = cc.build(source, key, extra_flags=extra, extra_libs=_EXTRA_LIBS)
        _memo[memo_key] = path
        return str(path)


def register(so: onnxruntime.SessionOptions) -> None:
    """Make ``TcKernel`` nodes runnable in sessions created with these options. Once per
    options object: onnxruntime refuses a session whose options registered the library
    twice ("Domain already set in registry"), and users pass one options object to
    every session they open."""
    if so in _REGISTERED:
        return
    so.register_custom_ops_library(library_path())
    _REGISTERED.add(so)


# The options objects `register` has registered the library on (gone with them).
_REGISTERED: weakref.WeakSet[onnxruntime.SessionOptions] = weakref.WeakSet()


def cpu_only_note(providers: Iterable[str | tuple[str, object]]) -> str | None:
    """What a session with device (GPU, NPU) execution providers among `providers` (names,
    or (name, options) pairs, as onnxruntime takes them) should know, None without any:
    the native library registers TcKernel for the CPU only, so onnxruntime places every
    TcKernel there."""
    names = [p if isinstance(p, str) else p[0] for p in providers]
    device = ", ".join(n for n in names if n in _DEVICE_PROVIDERS)
    if not device:
        return None
    return (
        f"TcKernel nodes run on the CPU, not on {device}: in such a session each TcKernel "
        "copies its inputs from the device to the host and its outputs back, on every run. "
        "tc_graph measured its fusions against onnxruntime on the CPU; for a GPU session, "
        "compare with the original model"
    )
