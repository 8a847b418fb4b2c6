"""Suite-wide settings: one kernel cache per test run (shared by the xdist workers),
one OpenMP thread per worker so parallel workers do not oversubscribe the cores, and the
``--sanitize`` job (scripts/sanitize.sh), which builds the onnxruntime library and every
kernel with AddressSanitizer and UndefinedBehaviorSanitizer, and ``--slow``, which adds the
tests marked slow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Every parallel or simd loop of every kernel the tests generate is proved against isl's
# dependences (tc_graph/poly/proof.py): an unproved one fails the test.
os.environ.setdefault("TC_GRAPH_CHECK_MARKS", "1")

# An undefined-behaviour report aborts the process rather than scrolling past in the log.
SANITIZE_CFLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow: more of what the default suite covers, "
        "which would take CI past its 10 minutes",
    )
    parser.addoption(
        "--sanitize",
        action="store_true",
        help="build kernels and the onnxruntime library with ASan and UBSan "
        "(needs the sanitizer runtimes preloaded: run scripts/sanitize.sh)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --slow, the tests marked slow are deselected (not skipped: nothing is wrong
    with the machine)."""
    if config.getoption("--slow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def _sanitizer_loaded() -> bool:
    """Whether this process already has ASan's runtime: an instrumented kernel loaded into a
    Python that lacks it aborts with 'ASan runtime does not come first'."""
    try:
        return "libasan" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--sanitize"):
        if not _sanitizer_loaded():
            raise pytest.UsageError(
                "--sanitize needs ASan's runtime preloaded into Python; "
                "run scripts/sanitize.sh [pytest arguments] instead"
            )
        flags = os.environ.get("TC_GRAPH_CFLAGS", "")
        if SANITIZE_CFLAGS not in flags:
            os.environ["TC_GRAPH_CFLAGS"] = f"{flags} {SANITIZE_CFLAGS}".strip()
    if "TC_GRAPH_CACHE" in os.environ:
        return
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"
    path = Path(tempfile.gettempdir()) / f"tc_graph-test-cache-{run}"
    os.environ["TC_GRAPH_CACHE"] = str(path)
