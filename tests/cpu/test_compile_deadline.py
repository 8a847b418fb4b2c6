"""A kernel compiled under a compile_timeout (optimize's budget): built away from the
caller, killed at the deadline, and safe in a caller that runs other threads.

The oracle is NumPy on the kernel's result, and the cache's own lock on the kernel's entry.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler
from tc_graph.runtime import cc
from tc_graph.runtime.kernel import CompileTimeout, compile_timeout

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))
    return tmp_path


def _entry_lock(a: np.ndarray, b: np.ndarray) -> Path:
    """The lock file of the cache entry that compiling mm(a, b) for the CPU builds."""
    bound = compiler.bind(tg.define(MM).mm, (a, b))
    key = compiler._library_key(
        bound, compiler.prepare(bound), compiler.options_for(bound, "cpu", None)
    )
    entry = cc._entry(key)
    entry.mkdir()
    return entry / cc._LOCK_NAME


def test_a_compile_in_time_while_another_thread_holds_its_entry(cache: Path) -> None:
    """Another thread of the caller holds the entry's lock and lets it go a moment later:
    the compile waits for it and finishes. (A child forked from this process kept a copy of
    that thread's lock, so it waited on itself until the deadline killed it.)"""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((24, 16)).astype(np.float32)
    b = rng.standard_normal((16, 20)).astype(np.float32)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with cc._locked(_entry_lock(a, b)):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    threading.Timer(0.5, release.set).start()
    try:
        with compile_timeout(60):
            kernel = tg.define(MM).mm.compile(a, b)
    finally:
        release.set()
        thread.join()
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_a_compile_past_its_deadline_is_killed(cache: Path) -> None:
    """The builder holds the lock for longer than the deadline: CompileTimeout, and the
    entry has no kernel; with the lock free the same compile then succeeds."""
    a = np.ones((8, 4), np.float32)
    b = np.ones((4, 8), np.float32)
    lock = _entry_lock(a, b)
    with cc._locked(lock), compile_timeout(1), pytest.raises(CompileTimeout):
        tg.define(MM).mm.compile(a, b)
    assert not any(p.name == cc.SO_NAME for p in cache.rglob("*"))
    with compile_timeout(60):
        kernel = tg.define(MM).mm.compile(a, b)
    np.testing.assert_array_equal(kernel(a, b), a @ b)
