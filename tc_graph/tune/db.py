"""The tuning database: the best mapping options found for a kernel on a machine.

It lives next to the kernel cache, in ``<cache>/tuning/``, one small JSON file per key so
writers of different kernels never contend. A key is (canonical TC text, entry, input
dtypes and shapes with the integer scalars, target, machine fingerprint), as in the TC
paper's cache (TC, input shapes, target, architecture). Files are replaced atomically
(temp file + rename) under a per-file lock, so concurrent tuners never leave half an
entry; an unreadable file is a miss. An entry also records tc_graph's code version and is
only used by the same version: options verified by one compiler are not trusted blindly
by another. The compiler reads it (`best_options`); only the tuner writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import TcError, TcWarning
from ..lang.canonical import canonical
from ..lang.sema import CheckedDef
from ..options import MappingOptions
from ..runtime import cc
from ..runtime.kernel import code_version

DIRECTORY = "tuning"


class Def(Protocol):
    """What a key needs of a TC function (a tg.TcFunction): its checked def. The database
    knows nothing else of the API, which depends on it, not the other way round."""

    @property
    def checked(self) -> CheckedDef: ...


def machine_fingerprint() -> str:
    """What a runtime was measured on: compiler, flags and CPU (cc.compiler_identity), the
    core count and OMP_NUM_THREADS, which decide what pays (e.g. a parallel loop)."""
    return " | ".join(
        [
            cc.compiler_identity(),
            f"cores={os.cpu_count()}",
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')}",
        ]
    )


def describe_args(fn: Def, args: Sequence[Any]) -> list[Any]:
    """The part of a call that a kernel is specialized on: per input its dtype and shape,
    and the values of integer scalars used as sizes (other scalars are runtime values)."""
    d = fn.checked
    out: list[Any] = []
    for name, a in zip(d.inputs, args, strict=True):
        if d.tensors[name].rank == 0:
            out.append(int(a) if name in d.index_scalars else d.tensors[name].dtype)
        else:
            arr = np.asarray(a)
            out.append([arr.dtype.str, list(arr.shape)])
    return out


def key_parts(
    fn: Def, args: Sequence[Any], target: str, fingerprint: str | None = None
) -> dict[str, Any]:
    """The key of a tuning entry, readable (stored in the entry too)."""
    text, names = canonical(fn.checked.source)
    name = fn.checked.name
    return {
        "tc": text,
        "entry": names.get(name, name),
        "args": describe_args(fn, args),
        "target": target,
        "machine": fingerprint if fingerprint is not None else machine_fingerprint(),
    }


def _path(parts: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]
    return cc.cache_dir() / DIRECTORY / f"{digest}.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def lookup(parts: dict[str, Any]) -> dict[str, Any] | None:
    """The stored entry for a key, or None (absent, unreadable, another key hashed to the
    same file, or written by another version of tc_graph)."""
    data = _read(_path(parts))
    if data is None or data.get("key") != parts or data.get("code") != code_version():
        return None
    return data


def best_options(parts: dict[str, Any]) -> MappingOptions | None:
    """The best known options for a key, or None. Options that are malformed or out of
    bounds (a corrupt or hand-edited entry) are skipped with a warning: they must never
    reach the compiler (issue 12), nor stop it."""
    entry = lookup(parts)
    if entry is None:
        return None
    best = entry.get("best")
    try:
        if not isinstance(best, dict) or "options" not in best:
            raise TcError("the entry has no best options")
        return MappingOptions.from_json(best["options"])
    except TcError as e:
        warnings.warn(
            f"tc_graph: skipping the tuning-database entry {_path(parts)}: {e.message}; "
            "tuning the kernel again replaces it",
            TcWarning,
            stacklevel=2,
        )
        return None


def record(
    parts: dict[str, Any],
    options: MappingOptions,
    runtime_us: float,
    *,
    default_us: float | None = None,
    evaluated: int = 0,
) -> None:
    """Store the result of a tuning run for a key. A run starts from the stored best (it
    is in its first population and measured again), so its result replaces the entry."""
    path = _path(parts)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = {
        "key": parts,
        "code": code_version(),
        "best": {"options": json.loads(options.to_json()), "us": runtime_us},
        "default_us": default_us,
        "evaluated": evaluated,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with cc._locked(path.with_name(f".{path.name}.lock")):
        cc._write_atomic(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def entries() -> list[dict[str, Any]]:
    """Every readable entry (for tools and tests)."""
    root = cc.cache_dir() / DIRECTORY
    out = []
    with contextlib.suppress(OSError):
        for p in sorted(root.glob("*.json")):
            data = _read(p)
            if data is not None:
                out.append(data)
    return out
