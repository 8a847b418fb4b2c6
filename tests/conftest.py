"""Suite-wide settings: one kernel cache per test run (shared by the xdist workers),
and one OpenMP thread per worker so parallel workers do not oversubscribe the cores."""

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


def pytest_configure(config: pytest.Config) -> None:
    if "TC_GRAPH_CACHE" in os.environ:
        return
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"solo-{os.getpid()}"
    path = Path(tempfile.gettempdir()) / f"tc_graph-test-cache-{run}"
    os.environ["TC_GRAPH_CACHE"] = str(path)
