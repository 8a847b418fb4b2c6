"""The sandbox process: results, exceptions, crashes and hangs of what it runs."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from tc_graph.runtime.sandbox import Sandbox, SandboxError, Stored


def total(a: np.ndarray, scale: float) -> float:
    print("a kernel may print; the reply must survive it")
    return float(a.sum() * scale)


def fail(message: str) -> None:
    raise ValueError(message)


def crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def hang() -> None:
    time.sleep(3600)


def pid() -> int:
    return os.getpid()


@pytest.fixture
def box() -> Sandbox:
    b = Sandbox()
    yield b
    b.close()


def test_calls_run_in_another_process_with_stored_values(box: Sandbox) -> None:
    a = np.arange(10, dtype=np.float32)
    box.put("a", a)
    assert box.call(total, Stored("a"), 2.0, timeout=60) == 90.0
    assert box.call(total, a, 1.0, timeout=60) == 45.0  # passed directly too
    assert box.call(pid, timeout=60) != os.getpid()
    with pytest.raises(SandboxError, match="ValueError: no luck"):
        box.call(fail, "no luck", timeout=60)
    assert box.call(total, Stored("a"), 1.0, timeout=60) == 45.0  # still alive


def test_a_crash_or_a_hang_costs_the_child_only(box: Sandbox) -> None:
    box.put("a", np.ones(4, np.float32))
    first = box.call(pid, timeout=60)
    with pytest.raises(SandboxError, match=r"the process died \(signal SIGSEGV\)"):
        box.call(crash, timeout=60)
    # A new child, with the stored values again.
    assert box.call(total, Stored("a"), 1.0, timeout=60) == 4.0
    second = box.call(pid, timeout=60)
    assert second != first
    start = time.monotonic()
    with pytest.raises(SandboxError, match="timed out after 1 s"):
        box.call(hang, timeout=1.0)
    assert time.monotonic() - start < 30
    assert box.call(total, Stored("a"), 3.0, timeout=60) == 12.0
    assert box.call(pid, timeout=60) != second


class SlowToLoad:
    """A stored value whose unpickling takes `seconds`, as a large input or a slow
    interpreter start on a busy machine does."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple[object, tuple[float]]:
        return _slow_load, (self.seconds,)


def _slow_load(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_the_timeout_of_a_call_excludes_the_child_starting(box: Sandbox) -> None:
    """A call's timeout is for the call: starting the child (the interpreter, its imports,
    the stored values) is not counted, or a busy machine makes innocent candidates of the
    autotuner time out."""
    box.put("slow", SlowToLoad(2.0))
    assert box.call(total, np.ones(3), 2.0, timeout=1.0) == 6.0
    with pytest.raises(SandboxError, match="died"):
        box.call(crash, timeout=5.0)
    assert box.call(total, np.ones(3), 1.0, timeout=1.0) == 3.0  # in a new child
