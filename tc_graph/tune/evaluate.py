"""Evaluation of the autotuner's candidates: compile, run, compare and time.

A generation of candidates is compiled in parallel through a `concurrent.futures`
Executor (a local process pool by default), then each compiled candidate is checked and
timed on this machine, one at a time, so compiles never disturb a timing. Each candidate's
outputs are compared with those of the default options' kernel, which is itself checked
against the reference interpreter first: a candidate that fails to compile, raises or
computes something else is discarded with the reason, so the search can only return
options that computed the right values. With a `dask.distributed` executor each worker
compiles *and* times its candidates on its own machine instead, and the results are
recorded under that machine's fingerprint.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import multiprocessing
import os
import pickle
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import compiler, timing
from ..compare import mismatch
from ..errors import TcError
from ..options import MappingOptions
from ..runtime import sandbox
from . import db

if TYPE_CHECKING:
    from ..api import TcFunction
    from ..runtime.kernel import Kernel

log = logging.getLogger(__name__)

COMPILE_TIMEOUT_S = 60.0
"""A generation's compiles that make no progress for this long are killed and discarded."""
RUN_TIMEOUT_S = 60.0
"""A candidate's first run, in the sandbox process, that takes longer is discarded."""
SLOW_FACTOR = 10.0
"""A candidate whose warm-up call takes this many times the best time is not timed further."""
CONFIRM_ROUNDS = 9
"""The winner and the default are timed again in this many interleaved rounds at the end;
the default stays unless the winner is faster there too (noise must not pick a loser)."""
CONFIRM_FINALISTS = 3
"""The search's fastest candidates that are timed again against the default."""
CONFIRM_MARGIN = 1.03
"""...by this factor (median of the per-round ratios), and faster in three rounds of four:
a near tie, or a win in a few noisy rounds, keeps the default."""


def _as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return result if isinstance(result, tuple) else (result,)


def _slow(best_s: float | None) -> float | None:
    """A candidate whose warm-up call lasts longer is not timed further (its first time
    is its runtime)."""
    return None if best_s is None else SLOW_FACTOR * best_s


def _load_kernel(
    fn: TcFunction, args: Sequence[Any], target: str, options: MappingOptions
) -> Kernel:
    """A candidate's kernel in this process (a cache hit after the compile phase). Tests
    replace it to inject broken candidates."""
    return fn.compile(*args, target=target, options=options)


def _specs(fn: TcFunction, args: Sequence[Any]) -> list[Any]:
    """What a compile worker needs of the arguments: dtypes and shapes, scalar values."""
    out: list[Any] = []
    for name, a in zip(fn.checked.inputs, args, strict=True):
        if fn.checked.tensors[name].rank == 0:
            out.append(("scalar", a))
        else:
            arr = np.asarray(a)
            out.append(("array", arr.dtype.str, arr.shape))
    return out


def _placeholders(specs: Sequence[Any]) -> list[Any]:
    """Arguments of the right shapes for compiling (zeros: pages are never touched)."""
    return [s[1] if s[0] == "scalar" else np.zeros(s[2], np.dtype(s[1])) for s in specs]


@functools.lru_cache(maxsize=8)
def _module(source: str) -> Any:
    from ..api import define

    return define(source)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def compile_job(
    source: str, entry: str, specs: Sequence[Any], options_json: str, target: str
) -> str | None:
    """Compile one candidate into the cache (in a worker); None, or why it failed."""
    try:
        fn = _module(source)[entry]
        fn.compile(
            *_placeholders(specs), target=target, options=MappingOptions.from_json(options_json)
        )
    except Exception as e:  # a candidate must never take the tuner down
        return f"compile failed: {_first_line(e)}"
    return None


def run_check(kernel: Any, args: Sequence[Any], want: Sequence[np.ndarray]) -> str | None:
    """Run one candidate's kernel, in the sandbox process: None, or why its output is
    wrong."""
    why = mismatch(_as_tuple(kernel(*args)), want)
    return None if why is None else f"wrong output: {why}"


# A dask worker runs tasks in threads; isl's context is shared, so one compile at a time
# per process (run workers with one thread each to compile in parallel), and one timing.
_compile_lock = threading.Lock()
_timing_lock = threading.Lock()


def remote_job(
    payload: tuple[str, str, tuple[Any, ...], tuple[np.ndarray, ...]],
    options_json: str,
    target: str,
    best_s: float | None,
) -> tuple[str, float | None, str | None]:
    """Compile, check and time one candidate on a dask worker: (machine fingerprint,
    seconds or None, why it was discarded). One timing at a time per worker process."""
    source, entry, args, want = payload
    fingerprint = db.machine_fingerprint()
    try:
        with _compile_lock:
            fn = _module(source)[entry]
            options = MappingOptions.from_json(options_json)
            kernel = fn.compile(*args, target=target, options=options)
    except Exception as e:
        return fingerprint, None, f"compile failed: {_first_line(e)}"
    with _timing_lock:
        try:
            why = mismatch(_as_tuple(kernel(*args)), want)
            if why is not None:
                return fingerprint, None, f"wrong output: {why}"
            return fingerprint, timing.median_runs(lambda: kernel(*args), _slow(best_s)), None
        except Exception as e:
            return fingerprint, None, f"failed to run: {_first_line(e)}"


def _is_dask(executor: cf.Executor | None) -> bool:
    return executor is not None and type(executor).__module__.split(".")[0] == "distributed"


class _Stop(Exception):
    """Ctrl-C or the time budget: stop after the current candidate."""


class Evaluator:
    """Runtimes of candidates for GeneticSearch, with the safety checks."""

    def __init__(
        self,
        fn: TcFunction,
        args: Sequence[Any],
        target: str,
        executor: cf.Executor | None,
        deadline: float | None,
        tick: Callable[[bool], None],
    ) -> None:
        self.fn, self.args, self.target = fn, tuple(args), target
        self.executor = executor
        self.own_pool = executor is None
        self.deadline = deadline
        self.tick = tick
        self.dask = _is_dask(executor)
        self.failures: list[tuple[MappingOptions, str]] = []
        self.fingerprints: dict[MappingOptions, str] = {}
        self.best_s: float | None = None
        self.default = compiler.default_options_for(fn, args, target)
        # The oracle chain: reference -> default kernel -> every candidate.
        default_kernel = fn.compile(*args, target=target, options=self.default)
        self.want = _as_tuple(default_kernel(*args))
        why = mismatch(self.want, _as_tuple(fn(*args, target="reference")))
        if why is not None:
            raise TcError(
                f"cannot tune '{fn.name}': the default kernel disagrees with the reference ({why})",
                hint="this is a tc_graph bug; please report it with the TC and shapes",
            )
        self.default_kernel = default_kernel
        self.default_s = timing.median_runs(functools.partial(default_kernel, *self.args))
        self._payload: Any = None
        self._stashed = False

    def _pool(self) -> cf.Executor:
        if self.executor is None:
            self.executor = cf.ProcessPoolExecutor(
                max_workers=os.cpu_count() or 1,
                # fork: no re-import of the caller's script (which may lack a main guard)
                # and no start-up cost; the workers only compile, never run OpenMP code.
                mp_context=multiprocessing.get_context("fork"),
            )
        return self.executor

    def close(self, *, kill: bool = False) -> None:
        """Shut our pool down; `kill` first ends its workers (a hung compile never ends)."""
        if self.own_pool and self.executor is not None:
            if kill:
                # ProcessPoolExecutor has no public way to end a running task (3.14 adds
                # terminate_workers); its process table is stable across versions.
                for process in getattr(self.executor, "_processes", {}).values():
                    process.terminate()
            self.executor.shutdown(wait=not kill, cancel_futures=True)
            self.executor = None

    def _check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Stop

    def _fail(self, c: MappingOptions, why: str) -> None:
        log.debug("discarded %s: %s", c, why)
        self.failures.append((c, why))

    def __call__(self, candidates: list[MappingOptions]) -> list[float | None]:
        out: list[float | None] = []
        try:
            if self.dask:
                self._remote(candidates, out)
            else:
                self._local(candidates, out)
        except (KeyboardInterrupt, _Stop):
            log.info("tuning stopped after %d candidates of this generation", len(out))
        return out

    def _record(self, out: list[float | None], c: MappingOptions, t: float | None) -> None:
        out.append(t)
        if t is not None and (self.best_s is None or t < self.best_s):
            self.best_s = t
        self.tick(t is None)

    def _local(self, candidates: list[MappingOptions], out: list[float | None]) -> None:
        self._check_time()
        errors: dict[MappingOptions, str | None] = {self.default: None}
        todo = [c for c in candidates if c != self.default]
        while todo:
            done, victims = self._compile(todo)
            errors |= done
            # A crash or a hang takes the pool down with every compile in flight: each of
            # them is compiled again alone, so only the one that crashes or hangs is lost.
            for c in victims:
                alone, lost = self._compile([c])
                errors |= alone | lost
            # After a hang, what had not started yet goes to a new pool.
            todo = [c for c in todo if c not in errors]
        for c in candidates:
            self._check_time()
            self._record(out, c, self._time_one(c, errors[c]))

    def _compile(
        self, todo: list[MappingOptions]
    ) -> tuple[dict[MappingOptions, str | None], dict[MappingOptions, str]]:
        """Compile candidates through the executor: why each failed (None: it compiled),
        and why the ones in flight when a worker crashed or hung were lost (the culprit
        is among them). Candidates in neither never started; the pool is replaced."""
        source, entry = self.fn.checked.source, self.fn.name
        specs = _specs(self.fn, self.args)
        pool = self._pool()
        victims: dict[MappingOptions, str] = {}
        jobs = {pool.submit(compile_job, source, entry, specs, c.to_json(), self.target): c
                for c in todo}  # fmt: skip
        errors: dict[MappingOptions, str | None] = {}
        pending = set(jobs)
        try:
            while pending:
                done, pending = cf.wait(
                    pending, timeout=COMPILE_TIMEOUT_S, return_when=cf.FIRST_COMPLETED
                )
                for job in done:
                    try:
                        errors[jobs[job]] = job.result()
                    except cf.process.BrokenProcessPool as e:  # a worker died: a crash
                        victims[jobs[job]] = f"compile failed: {_first_line(e)}"
                    except Exception as e:
                        errors[jobs[job]] = f"compile failed: {_first_line(e)}"
                if not done:
                    # Nothing finished for that long: a running compile hangs.
                    why = f"compile timed out after {COMPILE_TIMEOUT_S:g} s"
                    victims |= {jobs[j]: why for j in pending if j.running()}
                    break
        except BaseException:  # Ctrl-C: a compile still running must not hold us up
            for job in jobs:
                job.cancel()
            self.close(kill=True)
            raise
        if pending or victims:
            if not self.own_pool:  # not ours to restart: what it lost is lost
                errors |= {jobs[j]: "compile lost with the executor" for j in pending}
                errors |= victims
                victims = {}
            self.close(kill=True)
        return errors, victims

    def _time_one(self, c: MappingOptions, error: str | None) -> float | None:
        if c == self.default:
            return self.default_s
        if error is not None:
            self._fail(c, error)
            return None
        try:
            kernel = _load_kernel(self.fn, self.args, self.target, c)
        except Exception as e:
            self._fail(c, f"failed to load: {_first_line(e)}")
            return None
        why = self._run_isolated(kernel)
        if why is not None:
            self._fail(c, why)
            return None
        try:
            why = mismatch(_as_tuple(kernel(*self.args)), self.want)
            if why is not None:
                self._fail(c, f"wrong output: {why}")
                return None
            return timing.median_runs(lambda: kernel(*self.args), _slow(self.best_s))
        except Exception as e:
            self._fail(c, f"failed to run: {_first_line(e)}")
            return None

    def _run_isolated(self, kernel: Any) -> str | None:
        """The candidate's first run, in the sandbox process: a kernel that crashes or
        hangs takes that process down, not the tuner. None, or why it is discarded.
        A kernel that cannot be pickled (OpenCL's: its programs live in this process's
        context) is run only here."""
        box = sandbox.shared()
        if not self._stashed:
            box.put("args", self.args)
            box.put("want", self.want)
            self._stashed = True
        try:
            return box.call(
                run_check, kernel, sandbox.Stored("args"), sandbox.Stored("want"),
                timeout=RUN_TIMEOUT_S,
            )  # fmt: skip
        except sandbox.SandboxError as e:
            return f"failed to run (in a separate process): {e}"
        except (pickle.PicklingError, TypeError, AttributeError):
            return None

    def _remote(self, candidates: list[MappingOptions], out: list[float | None]) -> None:
        self._check_time()
        assert self.executor is not None
        if self._payload is None:
            payload = (self.fn.checked.source, self.fn.name, self.args, self.want)
            client = getattr(self.executor, "_client", None)
            try:
                self._payload = client.scatter(payload, broadcast=True) if client else payload
            except Exception:  # an executor without a usable client: ship it with each job
                self._payload = payload
        jobs = [
            self.executor.submit(remote_job, self._payload, c.to_json(), self.target, self.best_s)
            for c in candidates
        ]
        try:
            for c, job in zip(candidates, jobs, strict=True):
                try:
                    fingerprint, t, why = job.result()
                except Exception as e:  # a lost worker
                    fingerprint, t, why = "", None, f"worker failed: {_first_line(e)}"
                if why is not None:
                    self._fail(c, why)
                self.fingerprints[c] = fingerprint
                self._record(out, c, t)
                self._check_time()
        except BaseException:
            for job in jobs:
                job.cancel()
            raise

    def confirm(self, finalists: Sequence[MappingOptions]) -> tuple[MappingOptions, float, float]:
        """The search's fastest candidates, each timed again against the default in
        interleaved rounds: (chosen options, their seconds, the default's seconds). The
        one that beats the default by the most wins; the default stays if none does. A
        single noisy timing can make a candidate the search's best, so several go on.
        The default's seconds are the chosen ones times the median per-round ratio that
        chose them: the median of each side's rounds alone can disagree with it."""
        default_call = functools.partial(self.default_kernel, *self.args)
        chosen: tuple[MappingOptions, float, float] | None = None
        score = 0.0
        for c in finalists:
            if c == self.default:
                continue
            kernel = _load_kernel(self.fn, self.args, self.target, c)
            call = functools.partial(kernel, *self.args)
            calls = {"c": call, "default": default_call}
            times = timing.rounds(calls, CONFIRM_ROUNDS, 0.0, timer=timing.median_runs)
            ratios = sorted(d / t for d, t in zip(times["default"], times["c"], strict=True))
            # Faster by the margin in the median round, and faster in three rounds of four.
            ratio = statistics.median(ratios)
            if ratio >= CONFIRM_MARGIN and ratios[len(ratios) // 4] > 1.0 and ratio > score:
                score = ratio
                best_s = statistics.median(times["c"])
                chosen = (c, best_s, best_s * ratio)
        if chosen is not None:
            return chosen
        t = statistics.median(timing.median_runs(default_call) for _ in range(CONFIRM_ROUNDS))
        return self.default, t, t
