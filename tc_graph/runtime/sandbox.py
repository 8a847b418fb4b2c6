"""A child Python process that runs functions for us, so that a crash or a hang in
generated code costs the child, not the caller (the autotuner runs each candidate kernel
here once before timing it in its own process; a compile under optimize's deadline is
built in one, runtime/kernel.py).

The child is a new interpreter that calls `main()` (not multiprocessing: its spawn would
re-run the caller's script, and a fork cannot run OpenMP code once the parent has).
Messages are pickles over the child's stdin and a duplicate of its stdout; its own stdout
goes to stderr, so nothing a kernel prints can corrupt a reply. Values `put` once (large
arrays) are kept in the child and named by `Stored` in later calls; after a crash a new
child gets them again.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

START_TIMEOUT_S = 300.0
"""How long the child may take to start and load the stored values: generous, since a busy
machine is slow to start an interpreter, and a call's own timeout starts after it."""


class SandboxError(Exception):
    """The child died, raised or ran out of time; the message says which."""


class SandboxTimeout(SandboxError):
    """The call ran past its timeout: the child and whatever it started were killed."""


@dataclass(frozen=True)
class Stored:
    """In the arguments of a call: the value put under `key`."""

    key: str


class Sandbox:
    """One child process, started on first use and again after it died."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._stored: dict[str, Any] = {}

    def put(self, key: str, value: Any) -> None:
        self._stored[key] = value
        if self._proc is not None:
            self._send(("put", key, value))

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """fn(*args) in the child, `Stored` arguments replaced; its exception is raised
        here as a SandboxError with the child's message, like a crash or a timeout.
        Arguments that cannot be pickled raise pickle's error here, before anything is
        sent."""
        message = pickle.dumps(("call", fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        proc = self._start()
        self._write(message)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            self.close()
            raise SandboxTimeout(f"timed out after {timeout:g} s")
        try:
            status, value = pickle.load(proc.stdout)
        except (EOFError, pickle.UnpicklingError):
            code = proc.wait()
            self._proc = None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            raise SandboxError(f"the process died ({how})") from None
        if status == "raised":
            raise SandboxError(value)
        return value

    def close(self) -> None:
        """Kill the child with everything it started (a C compiler): its process group."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            # Its OpenMP threads sleep when idle: spinning, they would take the cores from
            # the caller's timings right after each check.
            env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
            path = [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
            env["PYTHONPATH"] = os.pathsep.join(path).rstrip(os.pathsep)
            self._proc = subprocess.Popen(
                [sys.executable, "-c", "from tc_graph.runtime import sandbox; sandbox.main()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                start_new_session=True,  # a group that close() kills whole
            )
            # The caller's import path, so functions of its modules (tests) unpickle.
            self._send(("path", list(sys.path)))
            for key, value in self._stored.items():
                self._send(("put", key, value))
            self._await_ready(self._proc)
        return self._proc

    def _await_ready(self, proc: subprocess.Popen[bytes]) -> None:
        """Wait until the child has started and loaded the stored values, so that a call's
        timeout covers only the call (a slow start on a busy machine is not a hang)."""
        self._send(("call", _ready, ()))
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        if ready:
            with contextlib.suppress(EOFError, pickle.UnpicklingError):
                pickle.load(proc.stdout)
                return
        self.close()
        raise SandboxError(f"the process did not start within {START_TIMEOUT_S:g} s")

    def _send(self, message: tuple[Any, ...]) -> None:
        self._write(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def _write(self, data: bytes) -> None:
        proc = self._start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: the reply's read says how


_SHARED: Sandbox | None = None


def _ready() -> None:
    """The handshake call: it returns once the child is up."""


def shared() -> Sandbox:
    """This process's sandbox, killed at exit."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Sandbox()
        atexit.register(_SHARED.close)
    return _SHARED


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    stored: dict[str, Any] = {}
    while True:
        try:
            message = pickle.load(requests)
        except EOFError:
            return
        match message:
            case ("path", path):
                sys.path[:] = path
            case ("put", key, value):
                stored[key] = value
            case ("call", fn, args):
                try:
                    given = [stored[a.key] if isinstance(a, Stored) else a for a in args]
                    reply = ("ok", fn(*given))
                except Exception as e:
                    reply = ("raised", f"{type(e).__name__}: {e}")
                pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
                replies.flush()


def main() -> None:
    """The child's entry point: replies go to a duplicate of stdout, which is then
    pointed at stderr for whatever the functions print."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(sys.stdin.buffer, replies)
