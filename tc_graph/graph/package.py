"""`package`: an optimized model, its compiled kernels and the custom-op library in one
directory that runs with onnxruntime alone, on another machine (docs/onnx.md "Deploying").

The kernels are compiled for the ``--isa`` asked (``-march``), without OpenMP (the library
runs their phases on onnxruntime's thread pool, so they need no libgomp), and each one's
meta.json names the CPU features it needs: the library checks them before loading it. The
library itself is built for any x86-64 CPU, so that it can refuse with a message.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
import shutil
from pathlib import Path
from typing import Any

import onnx

from .. import __version__
from ..errors import TcError
from ..runtime import cc, ort
from ..runtime.kernel import code_version
from .optimize import _compile_node, _stamp, _tc_nodes, checked_nodes, optimize, read_model

__all__ = ["ISAS", "KERNELS", "LIBRARY", "MANIFEST", "MODEL", "isa_flags", "package"]

ISAS = ("x86-64-v2", "x86-64-v3", "x86-64-v4", "native")
MODEL = "model.onnx"
LIBRARY = "libtc_graph_ort.so"
KERNELS = "kernels"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
# Kernels of a package run only through the library (tc_phase on onnxruntime's pool), so
# OpenMP is left out: no libgomp on the target. `omp simd` hints still vectorize.
_NO_OPENMP = ("-fno-openmp", "-fopenmp-simd")


def isa_flags(isa: str) -> tuple[str, ...]:
    """The flags that compile a package's kernels for ``isa`` (TcError for another)."""
    if isa not in ISAS:
        raise TcError(f"unknown --isa {isa!r}", hint=f"choose one of {', '.join(ISAS)}")
    if isa == "native":
        return _NO_OPENMP
    if platform.machine() not in ("x86_64", "AMD64"):
        raise TcError(
            f"--isa {isa} targets x86-64 CPUs and this machine is {platform.machine()}",
            hint="use --isa native",
        )
    return (f"-march={isa}", *_NO_OPENMP)


def package(
    model: str | os.PathLike[str] | onnx.ModelProto,
    directory: str | os.PathLike[str],
    *,
    isa: str = "native",
) -> dict[str, Any]:
    """Write ``directory`` (new, or empty) with the optimized model, its kernels compiled
    for ``isa``, the library and manifest.json; return the manifest.

    A model without TcKernel nodes is optimized first (measured on this machine); one with
    them is packaged as it is, every node checked as `prepare` checks it."""
    flags = isa_flags(isa)
    target = Path(directory)
    _check_target(target)
    proto = read_model(model)
    if not _tc_nodes(proto):
        proto = optimize(proto)
    nodes = checked_nodes(proto)
    library = Path(ort.library_path(portable=True))
    _, library_bytes, _ = cc.verified_bytes(library)
    kernels: dict[str, dict[str, Any]] = {}
    files: dict[str, bytes] = {MODEL: proto.SerializeToString(), LIBRARY: library_bytes}
    with cc.target_flags(flags):
        stamp = _stamp()
        for node, spec in ((n, one) for n, s in nodes for one in s.variants()):
            if spec.key in kernels:
                kernels[spec.key]["nodes"].append(node.name)
                continue
            meta, so_bytes, _ = cc.verified_bytes(_compile_node(node, spec))
            features = str(meta.get("cpu_features", ""))
            files[f"{KERNELS}/{spec.key}/{cc.SO_NAME}"] = so_bytes
            files[f"{KERNELS}/{spec.key}/{cc.META_NAME}"] = cc.meta_json(
                spec.key, so_bytes, str(meta["source_sha256"]), stamp=stamp, features=features
            )
            kernels[spec.key] = {
                "key": spec.key,
                "entry": spec.entry,
                "nodes": [node.name],
                "sha256": hashlib.sha256(so_bytes).hexdigest(),
                "cpu_features": features.split(),
            }
        manifest = _manifest(isa, flags, library_bytes, list(kernels.values()))
    files[MANIFEST] = (json.dumps(manifest, indent=1) + "\n").encode()
    _write_directory(target, files)
    return manifest


def _manifest(
    isa: str, flags: tuple[str, ...], library: bytes, kernels: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the package holds and what it needs, in manifest.json (docs/onnx.md)."""
    import onnxruntime

    api, api_min = ort.api_versions()
    needed = sorted({f for k in kernels for f in k["cpu_features"]})
    return {
        "format": MANIFEST_FORMAT,
        "tc_graph": {"version": __version__, "code": code_version()},
        "model": MODEL,
        "library": {"file": LIBRARY, "sha256": hashlib.sha256(library).hexdigest()},
        "onnxruntime": {
            "built_with": onnxruntime.__version__,
            "api_version": api,
            "min_api_version": api_min,
        },
        "kernel_dir": KERNELS,
        "kernel_dir_config": ort.KERNEL_DIR_CONFIG,
        "kernel_dir_env": ort.KERNEL_DIR_ENV,
        "compiler": cc.compiler_identity(),
        "isa": isa,
        "flags": list(flags),
        "machine": platform.machine(),
        "cpu_features": needed,
        "kernels": kernels,
    }


def _check_target(target: Path) -> None:
    """The package directory must be new or empty: never mix two packages' files."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise TcError(
            f"{target} exists and is not an empty directory",
            hint="name a new directory, or remove the old package first",
        )


def _write_directory(target: Path, files: dict[str, bytes]) -> None:
    """Write every file into a hidden sibling directory, then rename it into place: a
    failed package leaves nothing behind, and readers never see half of one."""
    staging = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    try:
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        staging.rename(target)  # onto nothing, or onto an empty directory (checked)
    except OSError as exc:
        raise TcError(
            f"cannot write the package {target}: {exc}",
            hint="name a writable directory that does not exist yet",
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
