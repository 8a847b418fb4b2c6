"""JSON files of measurements in the kernel cache (optimize's decisions, the cost model's
calibration): one object of entries by key, valid only for the tc_graph code that wrote
it, merged atomically (two processes that race lose an entry, never the file), removed
by `tc-graph cache clear`. A damaged or hand-edited file reads as empty: measured again,
never trusted nor a crash."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ..errors import TcError
from ..runtime import cc
from ..runtime.kernel import code_version


def _path(name: str) -> Path:
    return cc.cache_dir() / name


def load(name: str) -> dict[str, Any]:
    """The file's entries, or none where it is absent, damaged or from other code."""
    try:
        data = json.loads(_path(name).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) and data.get("code") == code_version() else {}


def store(name: str, key: str, value: object) -> None:
    """Merge one entry into the file, atomically (a write that fails only loses it)."""
    data = load(name)
    data["code"] = code_version()
    data[key] = value
    path = _path(name)
    tmp = path.with_name(f".{name}.{os.getpid()}.{time.monotonic_ns()}")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)


def clear(name: str, what: str) -> bool:
    """Remove the file (`what` names it in the error); True if there was one."""
    path = _path(name)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as e:
        raise TcError(
            f"cannot remove {what} {path}: {e}",
            hint="check the permissions of the kernel cache directory (TC_GRAPH_CACHE)",
        ) from None
    return True
