"""The tuning database: the best mapping options found for a kernel on a machine.

It lives next to the kernel cache, in ``<cache>/tuning/``, one small JSON file per key so
writers of different kernels never contend. A key is (canonical TC text, entry, input
dtypes and shapes with the integer scalars, target, machine fingerprint), as in the TC
paper's cache (TC, input shapes, target, architecture). Files are replaced atomically
(temp file + rename) under a per-file lock, so concurrent tuners never leave half an
entry; an unreadable file is a miss. An entry also records tc_graph's code version and is
only used by the same version: options verified by one compiler are not trusted blindly
by another.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import TcError, TcWarning
from .lang.canonical import canonical
from .options import MappingOptions
from .runtime import cc
from .runtime.kernel import code_version

if TYPE_CHECKING:
    from .api import TcFunction

DIRECTORY = "tuning"

# Set by `tune_on_compile`: compiles with options=None of these (canonical text, entry)
# pairs autotune first when the database has nothing for them (tg.optimize(tune=True)).
_TUNE_ON_COMPILE: ContextVar[tuple[frozenset[tuple[str, str]], Callable[..., Any]] | None] = (
    ContextVar("tc_graph_tune_on_compile", default=None)
)


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


def describe_args(fn: TcFunction, args: Sequence[Any]) -> list[Any]:
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
    fn: TcFunction, args: Sequence[Any], target: str, fingerprint: str | None = None
) -> dict[str, Any]:
    """The key of a tuning entry, readable (stored in the entry too)."""
    text, names = canonical(fn.checked.source)
    return {
        "tc": text,
        "entry": names.get(fn.name, fn.name),
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


def known_options(fn: TcFunction, args: Sequence[Any], target: str) -> MappingOptions | None:
    """What `TcFunction.compile(options=None)` uses before the defaults: the best options
    tuned on this machine, after tuning them first inside `tune_on_compile`."""
    parts = key_parts(fn, args, target)
    found = best_options(parts)
    active = _TUNE_ON_COMPILE.get()
    if found is None and active is not None and (parts["tc"], parts["entry"]) in active[0]:
        return active[1](fn, args, target)
    return found


@contextlib.contextmanager
def tune_on_compile(
    functions: Sequence[tuple[str, str]], tune: Callable[..., MappingOptions]
) -> Any:
    """Within the block, compiling one of `functions` ((TC source, entry) pairs) with
    options=None first runs `tune(fn, args, target)` when the database has no entry."""
    keys = set()
    for source, entry in functions:
        text, names = canonical(source)
        keys.add((text, names.get(entry, entry)))
    token = _TUNE_ON_COMPILE.set((frozenset(keys), tune))
    try:
        yield
    finally:
        _TUNE_ON_COMPILE.reset(token)
