"""Real tuning of tiny kernels: safety, the tuning database, executors, the command line.

Searches are tiny (a few candidates) so the file runs in seconds; the search logic itself
is tested with a fake timer in tests/unit/test_autotune.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import importlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler, timing
from tc_graph.options import MappingOptions
from tc_graph.tune import db as tuning_db
from tc_graph.tune import evaluate as EV
from tc_graph.tune import space as SP
from tc_graph.tune import tuner as AT

ROOT = Path(__file__).resolve().parents[2]

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
# The same TC with other names: the database is keyed by canonical text.
MM_RENAMED = "def prod(float(P,Q) X, float(Q,R) Y) -> (Z) { Z(p,r) +=! X(p,q) * Y(q,r) }"


def data(seed: int = 0, m: int = 12, k: int = 20, n: int = 24) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((m, k)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )


def want(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache, so this test's tuning database starts empty."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def threads() -> cf.Executor:
    """Compiles in a thread (fast to start; the process pool has its own test)."""
    with cf.ThreadPoolExecutor(1) as ex:
        yield ex


def test_tuning_finds_correct_options_and_stores_them(cache: Path) -> None:
    a, b = data()
    fn = tg.define(MM).mm
    result = AT.tune(fn, a, b, generations=2, population=4, seed=0, progress=False)
    assert len(result.history) == 2 and result.evaluated >= 4
    assert result.best_s <= result.default_s
    np.testing.assert_allclose(fn(a, b, options=result.best), want(a, b), rtol=1e-4, atol=1e-4)
    [entry] = tuning_db.entries()
    assert MappingOptions.from_json(entry["best"]["options"]) == result.best
    assert entry["key"]["machine"] == tuning_db.machine_fingerprint()
    assert entry["key"]["args"] == [["<f4", [12, 20]], ["<f4", [20, 24]]]
    # options=None now compiles the tuned options, also for a renamed copy of the TC...
    other = tg.define(MM_RENAMED).prod
    assert other.compile(a, b).options == result.best
    assert fn.compile(a, b).options == result.best
    # ...but not for other shapes, nor on another machine.
    assert other.compile(*data(m=8)).options == compiler.default_options_for(other, data(m=8))


def test_a_broken_candidate_never_wins(
    cache: Path, threads: cf.Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidates whose kernels compute garbage or raise are discarded, even when the
    timer would call them the fastest."""
    a, b = data(1)
    fn = tg.define(MM).mm
    real_load = EV._load_kernel
    default = compiler.default_options_for(fn, (a, b))

    class Broken:
        def __init__(self, kernel: tg.Kernel, mode: str) -> None:
            self.kernel, self.mode = kernel, mode

        def __call__(self, *args: object) -> np.ndarray:
            if self.mode == "raise":
                raise tg.TcError("index out of range (injected)")
            return self.kernel(*args) + np.float32(0.5)

    def load(fn, args, target, options):  # type: ignore[no-untyped-def]
        kernel = real_load(fn, args, target, options)
        if options == default:
            return kernel
        return Broken(kernel, "raise" if options.parallel_depth == 0 else "wrong")

    monkeypatch.setattr(EV, "_load_kernel", load)
    monkeypatch.setattr(timing, "median_runs", lambda call, slow_s=None: 1e-9)  # never reached
    result = AT.tune(
        fn, a, b, generations=2, population=5, seed=2, executor=threads, progress=False
    )
    assert result.best == default
    reasons = [why for _, why in result.failures]
    assert any(w.startswith("wrong output: output 0 differs") for w in reasons)
    assert any(w.startswith("failed to run: TcError") for w in reasons)
    assert len(result.failures) == result.evaluated - 1
    np.testing.assert_allclose(fn(a, b, options=result.best), want(a, b), rtol=1e-4, atol=1e-4)


def test_same_seed_same_candidates(
    tmp_path: Path, threads: cf.Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = data(2)
    histories = []
    for run in range(2):
        monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / f"cache{run}"))  # no stored best
        fn = tg.define(MM).mm
        r = AT.tune(fn, a, b, generations=2, population=4, seed=5, executor=threads, progress=False)
        histories.append([h.candidates for h in r.history])
    # Later generations are bred by roulette on measured times, which vary from run to
    # run; with a fake timer the whole search repeats (tests/unit/test_autotune.py).
    assert histories[0][0] == histories[1][0]
    assert len(histories[0]) == len(histories[1]) == 2


def test_timeout_stops_with_the_best_so_far(cache: Path, threads: cf.Executor) -> None:
    a, b = data(3)
    fn = tg.define(MM).mm
    result = AT.tune(
        fn, a, b, generations=50, population=4, seed=1, executor=threads, timeout_s=0.0,
        progress=False,
    )  # fmt: skip
    assert result.interrupted and len(result.history) == 1
    np.testing.assert_allclose(fn(a, b, options=result.best), want(a, b), rtol=1e-4, atol=1e-4)


def _record_many(path: str, worker: int) -> None:
    os.environ["TC_GRAPH_CACHE"] = path
    fn = tg.define(MM).mm
    parts = tuning_db.key_parts(fn, data(), "cpu")
    for k in range(30):
        tuning_db.record(parts, MappingOptions(unroll=1 + worker, tile=(k + 1,)), float(k))


def test_database_writers_in_parallel_leave_a_valid_entry(cache: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record_many, args=(str(cache), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    [entry] = tuning_db.entries()
    best = MappingOptions.from_json(entry["best"]["options"])
    assert best.unroll in (1, 2, 3, 4) and best.tile == (30,)


def test_unusable_entries_are_misses(cache: Path) -> None:
    fn = tg.define(MM).mm
    args = data()
    parts = tuning_db.key_parts(fn, args, "cpu")
    tuned = MappingOptions(unroll=4, vector_width=8)
    tuning_db.record(parts, tuned, 1.0)
    assert tuning_db.best_options(parts) == tuned
    assert tuning_db.best_options({**parts, "machine": "another machine"}) is None
    path = next((cache / tuning_db.DIRECTORY).glob("*.json"))
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "code": "another tc_graph"}))
    assert tuning_db.best_options(parts) is None
    path.write_text('{"key": ')  # a torn or corrupt file
    assert tuning_db.best_options(parts) is None
    assert fn.compile(*args).options == compiler.default_options_for(fn, args)


@pytest.mark.parametrize(
    "best",
    [
        {"options": {"threads": 100000}},  # crashed OpenMP when the kernel ran
        {"options": {"unroll": 10**9}},  # compiled for minutes
        {"options": "not json"},
        {"options": [["tile", 8]]},
        {"options": {"tile": 8}},
        {"us": 1.0},
        "options",
    ],
    ids=["threads", "unroll", "not-json", "pairs", "tile-int", "no-options", "not-an-object"],
)
def test_a_corrupt_entry_is_skipped_with_a_warning(cache: Path, best: object) -> None:
    """Issue 12: an entry's options are validated like a caller's; a bad one is a miss
    (with a TcWarning naming the file), never an exception nor a kernel built from it."""
    fn = tg.define(MM).mm
    args = data()
    parts = tuning_db.key_parts(fn, args, "cpu")
    tuning_db.record(parts, MappingOptions(unroll=4), 1.0)
    path = next((cache / tuning_db.DIRECTORY).glob("*.json"))
    path.write_text(json.dumps({**json.loads(path.read_text()), "best": best}))
    with pytest.warns(tg.TcWarning, match=str(path.name)):
        assert tuning_db.best_options(parts) is None
    with pytest.warns(tg.TcWarning):
        kernel = fn.compile(*args)
    assert kernel.options == compiler.default_options_for(fn, args)
    np.testing.assert_allclose(kernel(*args), args[0] @ args[1], rtol=1e-5)


def test_default_process_pool(cache: Path) -> None:
    a, b = data(4)
    fn = tg.define(MM).mm
    result = AT.tune(fn, a, b, generations=1, population=4, seed=3, progress=False)
    assert result.evaluated == 4
    # Nothing in this small space fails to compile, so every candidate was compiled and
    # then timed (a pool that failed would show up here as discarded candidates).
    assert [why for _, why in result.failures] == []


_REAL_COMPILE_JOB = EV.compile_job


def _misbehaving_compile_job(hang, crash, source, entry, specs, options_json, target):  # type: ignore[no-untyped-def]
    """compile_job, except that one vector width hangs and another kills the worker."""
    width = MappingOptions.from_json(options_json).vector_width
    if width == hang:
        import time

        time.sleep(3600)
    if width == crash:
        os._exit(1)
    return _REAL_COMPILE_JOB(source, entry, specs, options_json, target)


def test_hung_and_crashing_compiles_are_discarded_and_the_pool_replaced(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default process pool: a compile that never ends is killed after the timeout, a
    worker that dies takes only its own candidate (retried once) with it. The two widths
    that misbehave are the ones the default options (this CPU's width) do not use."""
    a, b = data(5)
    fn = tg.define(MM).mm
    default = compiler.default_options_for(fn, (a, b)).vector_width
    hang, crash = (w for w in SP.VECTOR_WIDTHS if w != default)
    monkeypatch.setattr(EV, "compile_job", functools.partial(_misbehaving_compile_job, hang, crash))
    monkeypatch.setattr(EV, "COMPILE_TIMEOUT_S", 4.0)
    # Seed 7's six candidates hold one hanging width (each costs the timeout) and one to
    # three crashing ones, whichever width this CPU's default has.
    result = AT.tune(fn, a, b, generations=1, population=6, seed=7, progress=False)
    reasons = {c: why for c, why in result.failures}
    assert {hang, crash} <= {c.vector_width for c in reasons}, "the search must meet both"
    for c, why in reasons.items():
        assert c.vector_width in (hang, crash), f"an innocent candidate was lost: {c}: {why}"
        if c.vector_width == hang:
            assert why == "compile timed out after 4 s", why
        else:
            assert why.startswith("compile failed: BrokenProcessPool"), why
    assert result.evaluated > len(reasons) + 1  # others compiled and were timed
    assert result.best.vector_width == default
    np.testing.assert_allclose(fn(a, b, options=result.best), want(a, b), rtol=1e-4, atol=1e-4)


def test_dask_local_cluster(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers on loopback compile and time the candidates; the results are stored
    under the worker's machine fingerprint, which here tells worker threads apart."""
    from distributed import Client, LocalCluster

    real = tuning_db.machine_fingerprint

    def fingerprint() -> str:
        main = threading.current_thread() is threading.main_thread()
        return real() if main else "worker machine"

    monkeypatch.setattr(tuning_db, "machine_fingerprint", fingerprint)
    a, b = data(5)
    fn = tg.define(MM).mm
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            protocol="tcp",
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        result = AT.tune(
            fn, a, b, generations=2, population=4, seed=4, executor=client.get_executor(),
            progress=False,
        )  # fmt: skip
    assert result.evaluated >= 4 and len(result.history) == 2
    np.testing.assert_allclose(fn(a, b, options=result.best), want(a, b), rtol=1e-4, atol=1e-4)
    [entry] = tuning_db.entries()
    assert entry["key"]["machine"] == "worker machine"
    # Not this machine's: options=None keeps the defaults here.
    assert fn.compile(a, b).options == compiler.default_options_for(fn, (a, b))


def test_cli_tune_and_plot(cache: Path, tmp_path: Path) -> None:
    tc = tmp_path / "mm.tc"
    tc.write_text(MM)
    png = tmp_path / "history.png"
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    proc = subprocess.run(
        [sys.executable, "-m", "tc_graph.cli", "tune", str(tc), "--entry", "mm",
         "--shapes", "A=8x16,B=16x12", "--generations", "2", "--population", "3",
         "--seed", "1", "--plot", str(png)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env=os.environ.copy(),
    )  # fmt: skip
    if not has_mpl:
        assert proc.returncode == 1 and "needs matplotlib" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    best = MappingOptions.from_json(proc.stdout.strip().splitlines()[-1])
    assert "mm: default" in proc.stdout and "tuned" in proc.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fn = tg.define(MM).mm
    a, b = data(m=8, k=16, n=12)
    assert fn.compile(a, b).options == best


def test_optimize_tune_freezes_tuned_options(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort
    from onnx import helper

    from tc_graph.graph import bench_models

    monkeypatch.setattr(AT, "OPTIMIZE_GENERATIONS", 1)
    monkeypatch.setattr(AT, "OPTIMIZE_POPULATION", 3)
    model = bench_models.build("mlp3_gemm", small=True)
    tuned = tg.optimize(model, force=True, tune=True)
    nodes = [n for n in tuned.graph.node if n.op_type == "TcKernel"]
    assert nodes
    stored = [
        MappingOptions.from_json(json.dumps(e["best"]["options"])) for e in tuning_db.entries()
    ]
    assert len(stored) == len(nodes)
    for node in nodes:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert MappingOptions.from_json(attrs["options"].decode()) in stored
    feeds = bench_models.sample_inputs(model, seed=0)
    plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for w, g in zip(
        plain.run(None, feeds), tg.InferenceSession(tuned).run(None, feeds), strict=True
    ):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


_REAL_RUN_CHECK = EV.run_check


def _misbehaving_run_check(kernel, args, want):  # type: ignore[no-untyped-def]
    """run_check (in the sandbox process), except that a kernel of unroll 2 crashes the
    process and one of unroll 4 never returns."""
    if kernel.options.unroll == 2:
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    if kernel.options.unroll == 4:
        import time

        time.sleep(3600)
    return _REAL_RUN_CHECK(kernel, args, want)


def test_kernels_that_crash_or_hang_when_run_are_discarded(
    cache: Path, threads: cf.Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each candidate runs first in the sandbox process: a segfault or an endless run
    there discards it, and the tuner goes on with the others."""
    a, b = data(6)
    fn = tg.define(MM).mm
    monkeypatch.setattr(EV, "run_check", _misbehaving_run_check)
    monkeypatch.setattr(EV, "RUN_TIMEOUT_S", 3.0)
    # Seed 5's eight candidates hold one of each (a hang costs the timeout).
    result = AT.tune(
        fn, a, b, generations=1, population=8, seed=5, executor=threads, progress=False
    )
    reasons = {c: why for c, why in result.failures}
    assert {2, 4} <= {c.unroll for c in reasons}, "the search must meet both"
    for c, why in reasons.items():
        assert c.unroll in (2, 4), f"an innocent candidate was lost: {c}: {why}"
        if c.unroll == 2:
            assert why.endswith("the process died (signal SIGSEGV)"), why
        else:
            assert why.endswith("timed out after 3 s"), why
    assert result.best.unroll not in (2, 4)
    assert result.evaluated > len(reasons) + 1
    np.testing.assert_allclose(fn(a, b, options=result.best), want(a, b), rtol=1e-4, atol=1e-4)


def test_confirmation_times_the_finalists_again_and_keeps_the_best(
    cache: Path, threads: cf.Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search's fastest candidate may owe its place to one noisy timing: each
    finalist races the default again, and the one that beats it by the most wins."""
    a, b = data(7)
    fn = tg.define(MM).mm
    ev = EV.Evaluator(fn, (a, b), "cpu", threads, None, lambda fail: None)
    lucky, best, good = (MappingOptions(unroll=u) for u in (2, 4, 8))
    seconds = {ev.default: 1.0, lucky: 1.0, best: 0.7, good: 0.9}
    monkeypatch.setattr(timing, "median_runs", lambda call, slow_s=None: seconds[call.func.options])
    assert ev.confirm([lucky, best, good]) == (best, 0.7, 1.0)
    assert ev.confirm([lucky, good]) == (good, 0.9, 1.0)
    assert ev.confirm([lucky]) == (ev.default, 1.0, 1.0)  # a tie keeps the default
    ev.close()


def test_the_confirmed_speedup_is_the_one_reported(
    cache: Path, threads: cf.Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finalist wins by the median of its per-round ratios; the seconds reported
    must say the same, though the medians of each side's rounds can disagree (a round
    where the whole machine slowed counts for both sides)."""
    a, b = data(7)
    fn = tg.define(MM).mm
    ev = EV.Evaluator(fn, (a, b), "cpu", threads, None, lambda fail: None)
    faster = MappingOptions(unroll=4)
    # Rounds as (default, finalist): seven where the finalist is 1.11x faster at two
    # machine speeds, two slow outliers of the finalist's.
    pairs = [(10.0, 9.0)] * 3 + [(1.0, 0.9)] * 4 + [(0.5, 10.0)] * 2
    turns = {ev.default: iter(d for d, _ in pairs), faster: iter(c for _, c in pairs)}
    monkeypatch.setattr(
        timing, "median_runs", lambda call, slow_s=None: next(turns[call.func.options])
    )
    chosen, best_s, default_s = ev.confirm([faster])
    assert chosen == faster
    assert default_s / best_s == pytest.approx(10.0 / 9.0)
    ev.close()


@pytest.mark.parametrize(
    ("args", "kw", "message"),
    [
        # Found by fuzzing: the arguments were described for the database before they were
        # bound (zip's ValueError), and range() took a float (TypeError).
        (1, {}, "'mm' takes 2 arguments \\(A, B\\), got 1"),
        (3, {}, "'mm' takes 2 arguments \\(A, B\\), got 3"),
        (2, {"generations": 1.5}, "generations must be a positive integer, not 1.5"),
        (2, {"population": True}, "population must be a positive integer, not True"),
        (2, {"generations": 0}, "generations must be a positive integer, not 0"),
        (2, {"seed": "x"}, "seed must be an integer or None, not 'x'"),
        (2, {"timeout_s": "5"}, "timeout_s must be a number of seconds >= 0 or None, not '5'"),
        (2, {"timeout_s": -1.0}, "timeout_s must be a number of seconds >= 0 or None, not -1.0"),
    ],
)
def test_bad_tuning_arguments_are_a_tc_error(args: int, kw: dict, message: str) -> None:
    mm = tg.define(MM).mm
    a, b = np.ones((8, 4), np.float32), np.ones((4, 3), np.float32)
    with pytest.raises(tg.TcError, match=message):
        tg.autotune(mm, *(a, b, b)[:args], progress=False, **kw)


def test_tuning_takes_numpy_numbers(cache: Path, threads: cf.Executor) -> None:
    """A review found NumPy's integers and floats refused where Python's work."""
    a, b = data()
    best = tg.autotune(tg.define(MM).mm, a, b, generations=np.int64(1), population=np.int64(2),
                       seed=np.int64(3), timeout_s=np.float32(60), executor=threads,
                       progress=False)  # fmt: skip
    np.testing.assert_allclose(tg.define(MM).mm(a, b, options=best), want(a, b), rtol=1e-4)
