"""The autotuner: a genetic search over MappingOptions (TC paper, section 6.2).

A generation of candidates is compiled in parallel through a `concurrent.futures`
Executor (a local process pool by default), then each compiled candidate is checked and
timed on this machine, one at a time, so compiles never disturb a timing. Each candidate's
outputs are compared with those of the default options' kernel, which is itself checked
against the reference interpreter first: a candidate that fails to compile, raises or
computes something else is discarded with the reason, so the search can only return
options that computed the right values. With a `dask.distributed` executor each worker
compiles *and* times its candidates on its own machine instead, and the results are
recorded under that machine's fingerprint.

The search itself (`GeneticSearch`) knows nothing about kernels: it maps candidates to
runtimes through a callable, so it can be tested with a fake timer.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import math
import multiprocessing
import os
import pickle
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import compiler, tuning_db
from .compare import mismatch
from .errors import TcError
from .options import FUSION_STRATEGIES, MappingOptions
from .runtime import sandbox

if TYPE_CHECKING:
    from .api import TcFunction
    from .runtime.kernel import Kernel

log = logging.getLogger(__name__)

MUTATION_RATE = 0.1
"""Probability that a gene of a new candidate gets a random value (the paper's "low")."""
ELITE_FRACTION = 0.1
"""The best tenth of a generation goes to the next one unmutated."""
RESTART_MUTATION_RATE = 0.5
"""When fewer than three candidates survive, the next generation is the best so far and
heavy mutations of it."""
MAX_TILE_DEPTH = 3
MAX_UNROLL = 128
"""Full unrolling of longer loops only bloats the code on a CPU (and its compile time)."""
VECTOR_WIDTHS = (4, 8, 16)
"""Wider vectors than AVX-512's 16 floats buy nothing on a CPU."""
REGISTER_TILES = (0, 1, 2, 4, 8)
DOT_TILES = ((1, 8), (2, 4), (2, 8), (3, 4), (3, 8), (4, 2), (4, 4), (4, 5), (4, 6), (5, 4),
             (6, 4), (8, 2), (8, 3))  # fmt: skip
"""Rows x columns of a contraction tile: up to 24 vector accumulators of AVX-512's 32."""
PREFETCH_DISTANCES = (0, 2, 4, 8, 16, 32)
MAX_GRID = 1024
COMPILE_TIMEOUT_S = 60.0
"""A generation's compiles that make no progress for this long are killed and discarded."""
RUN_TIMEOUT_S = 60.0
"""A candidate's first run, in the sandbox process, that takes longer is discarded."""
CEIL_DIVISORS = range(2, 9)

WARMUP_S = 0.005
BUDGET_S = 0.04
MIN_RUNS, MAX_RUNS = 3, 200
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


# --------------------------------------------------------------------------- search space


@dataclass(frozen=True)
class SearchSpace:
    """Genes (one per tuning knob, named after its MappingOptions field, the tile sizes
    as tile_len, tile0, tile1, ...) and the values each may take. Knobs that are not
    searched (threads, and the other target's) keep their value in `base`."""

    genes: tuple[tuple[str, tuple[Any, ...]], ...]
    base: MappingOptions
    tile_depth: int

    def encode(self, options: MappingOptions) -> tuple[Any, ...]:
        """The genome of options (the tile sizes past its length are padding)."""
        tile = list(options.tile[: self.tile_depth])
        pad = dict(self.genes)["tile0"][0]
        tile += [pad] * (self.tile_depth - len(tile))
        tiles = {"tile_len": len(options.tile), **{f"tile{k}": t for k, t in enumerate(tile)}}
        return tuple(
            tiles[name] if name in tiles else getattr(options, name) for name, _ in self.genes
        )

    def decode(self, genome: Sequence[Any]) -> MappingOptions:
        g = dict(zip((name for name, _ in self.genes), genome, strict=True))
        tile = tuple(g.pop(f"tile{k}") for k in range(self.tile_depth))[: g.pop("tile_len")]
        return replace(self.base, tile=tile, **g)

    def random_genome(self, rng: random.Random) -> tuple[Any, ...]:
        return tuple(rng.choice(choices) for _, choices in self.genes)

    def mutate(self, genome: Sequence[Any], rng: random.Random, rate: float) -> tuple[Any, ...]:
        return tuple(
            rng.choice(choices) if rng.random() < rate else v
            for v, (_, choices) in zip(genome, self.genes, strict=True)
        )


def _powers_of_two(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def _blocks(top: int) -> set[tuple[int, ...]]:
    """Thread blocks of 1 to 3 power-of-two dimensions, x up to the largest size (and 256),
    at least a few threads and at most 1024 of them."""
    xs = _powers_of_two(min(256, max(32, top)))
    ys = _powers_of_two(32)
    out: set[tuple[int, ...]] = {(x,) for x in xs if x >= 8}
    out |= {(x, y) for x in xs for y in ys if y > 1 and 8 <= x * y <= 1024}
    out |= {(x, y, 2) for x in xs for y in ys if y > 1 and 8 <= x * y * 2 <= 1024 and x >= 8}
    return out


def search_space(
    sizes: Sequence[int],
    loop_depth: int,
    seeds: Sequence[MappingOptions],
    *,
    target: str = "cpu",
) -> SearchSpace:
    """The search space of a target for these problem sizes (TC paper 6.2): tile sizes
    are powers of two and ceil-divisors of the sizes (tiles that avoid a short tail),
    unroll factors powers of two up to the largest size, and every fusion strategy. The
    CPU adds both schedulers (with and without skewing), the parallel depth, vector width,
    register tile, dot-product tile, reduction chunk (powers of two up to the largest
    size) and prefetch distance; GPU targets the blocks, grids, shared and private promotion switches, the
    shared depth and the private depth (0 or 1). Every seed is a point of the space."""
    sizes = [s for s in sizes if s > 0] or [1]
    top = max(sizes)
    tiles = set(_powers_of_two(top)) | {s for s in sizes}
    tiles |= {-(-s // k) for s in sizes for k in CEIL_DIVISORS if -(-s // k) > 1}
    depth = max(1, min(MAX_TILE_DEPTH, loop_depth), *(len(s.tile) for s in seeds))
    for s in seeds:
        tiles |= set(s.tile)
    choices: dict[str, set[Any]] = {
        "fusion": set(FUSION_STRATEGIES),
        "unroll": set(_powers_of_two(min(MAX_UNROLL, 1 << max(0, (top - 1).bit_length())))),
    }
    if target == "cpu":
        choices |= {
            "allow_skewing": {False, True},
            "parallel_depth": {0, 1},
            "vector_width": set(VECTOR_WIDTHS),
            "register_tile": set(REGISTER_TILES),
            "dot_tile": set(DOT_TILES),
            "reduction_chunk": {0, *(p for p in _powers_of_two(top) if p >= 64)},
            "prefetch_distance": set(PREFETCH_DISTANCES),
        }
    else:
        blocks = _blocks(top)
        choices |= {
            "block": blocks,
            "grid": {(), *((g,) for g in _powers_of_two(MAX_GRID) if g >= 8)},
            "use_shared_memory": {False, True},
            "use_private_memory": {False, True},
            "unroll_copy_shared": {False, True},
            "shared_depth": set(range(depth + 1)),
            # 1 holds a thread's accumulator across its whole reduction nest; deeper values
            # depend on the program and mostly repeat the default (docs/gpu.md).
            "private_depth": {0, 1},
        }
    for s in seeds:
        for name, values in choices.items():
            values.add(getattr(s, name))
    fusions = choices.pop("fusion")
    genes: list[tuple[str, tuple[Any, ...]]] = [
        ("fusion", tuple(f for f in FUSION_STRATEGIES if f in fusions)),
        ("tile_len", tuple(range(depth + 1))),
        *((f"tile{k}", tuple(sorted(tiles))) for k in range(depth)),
        *((name, tuple(sorted(values))) for name, values in choices.items()),
    ]
    base = seeds[0] if seeds else MappingOptions()
    return SearchSpace(tuple(genes), base, depth)


# --------------------------------------------------------------------------------- search


@dataclass(frozen=True)
class GenerationStats:
    """One generation of a search, in seconds."""

    index: int
    candidates: tuple[MappingOptions, ...]
    runtimes: tuple[float | None, ...]  # None: discarded
    best_so_far_s: float | None
    median_s: float | None  # of this generation's surviving candidates
    restarted: bool  # this generation was bred from the best alone


Evaluate = Callable[[list[MappingOptions]], list[float | None]]
"""Runtimes in seconds (None: discarded) of the candidates, in order. A shorter list means
the evaluation was stopped (Ctrl-C, time budget): the search ends after it."""


class GeneticSearch:
    """Genetic search as in the TC paper: each new candidate has three parents drawn by
    roulette (fitness 1/runtime), takes each gene from one of them at random and
    mutates each gene with probability `mutation_rate`; the elites go on unmutated. When
    fewer than three candidates of a generation survive, the next one restarts from the
    best so far. Runtimes are memoized, so a candidate is evaluated once."""

    def __init__(
        self,
        space: SearchSpace,
        *,
        population: int,
        generations: int,
        seed: int | None = None,
        seeds: Sequence[MappingOptions] = (),
        mutation_rate: float = MUTATION_RATE,
        elites: int | None = None,
    ) -> None:
        if population < 1 or generations < 1:
            raise TcError("population and generations must be at least 1")
        self.space = space
        self.population = population
        self.generations = generations
        self.rng = random.Random(seed)
        self.seeds = list(dict.fromkeys(seeds))
        self.mutation_rate = mutation_rate
        self.elites = max(1, round(ELITE_FRACTION * population)) if elites is None else elites
        self.results: dict[MappingOptions, float | None] = {}
        self.history: list[GenerationStats] = []
        self.stopped = False

    # The best candidate so far and its runtime; ties go to the earliest (the default).
    @property
    def best(self) -> tuple[MappingOptions, float] | None:
        scored = [(t, k, c) for k, (c, t) in enumerate(self.results.items()) if t is not None]
        if not scored:
            return None
        t, _, c = min(scored, key=lambda x: (x[0], x[1]))
        return c, t

    def fastest(self, n: int) -> list[MappingOptions]:
        """The n candidates with the shortest runtimes, fastest first."""
        scored = [(t, k, c) for k, (c, t) in enumerate(self.results.items()) if t is not None]
        return [c for _, _, c in sorted(scored, key=lambda x: (x[0], x[1]))[:n]]

    def first_generation(self) -> list[MappingOptions]:
        pop = list(self.seeds[: self.population])
        for _ in range(50 * self.population):
            if len(pop) >= self.population:
                break
            c = self.space.decode(self.space.random_genome(self.rng))
            if c not in pop:
                pop.append(c)
        while len(pop) < self.population:  # a space smaller than the population
            pop.append(self.space.decode(self.space.random_genome(self.rng)))
        return pop

    def _roulette(self, scored: list[tuple[MappingOptions, float]]) -> MappingOptions:
        weights = [1.0 / max(t, 1e-12) for _, t in scored]
        return self.rng.choices([c for c, _ in scored], weights=weights)[0]

    def _fresh(self, make: Callable[[], MappingOptions], taken: list[MappingOptions]) -> None:
        """Append a candidate not evaluated or taken yet, if a few tries find one."""
        c = make()
        for _ in range(20):
            if c not in self.results and c not in taken:
                break
            c = make()
        taken.append(c)

    def next_generation(self, current: list[MappingOptions]) -> tuple[list[MappingOptions], bool]:
        """The next population, and whether it restarted from the best."""
        space, rng = self.space, self.rng
        survivors: dict[MappingOptions, float] = {}
        for c in current:
            t = self.results.get(c)
            if t is not None:
                survivors[c] = t
        scored = sorted(survivors.items(), key=lambda x: x[1])
        nxt: list[MappingOptions] = []
        if len(scored) < 3:
            best = self.best
            if best is None:
                return [
                    space.decode(space.random_genome(rng)) for _ in range(self.population)
                ], True
            nxt.append(best[0])
            genome = space.encode(best[0])
            while len(nxt) < self.population:
                self._fresh(
                    lambda: space.decode(space.mutate(genome, rng, RESTART_MUTATION_RATE)), nxt
                )
            return nxt, True
        nxt.extend(c for c, _ in scored[: self.elites])

        def child() -> MappingOptions:
            parents = [space.encode(self._roulette(scored)) for _ in range(3)]
            genome = tuple(rng.choice(parents)[k] for k in range(len(space.genes)))
            return space.decode(space.mutate(genome, rng, self.mutation_rate))

        while len(nxt) < self.population:
            self._fresh(child, nxt)
        return nxt, False

    def run(
        self,
        evaluate: Evaluate,
        on_generation: Callable[[GenerationStats], None] | None = None,
    ) -> GeneticSearch:
        population, restarted = self.first_generation(), False
        for g in range(self.generations):
            new = list(dict.fromkeys(c for c in population if c not in self.results))
            got = evaluate(new)
            for c, t in zip(new, got, strict=False):
                self.results[c] = t
            if len(got) < len(new):
                self.stopped = True
            runtimes = tuple(self.results.get(c) for c in population)
            alive = [t for t in runtimes if t is not None]
            best = self.best
            stats = GenerationStats(
                g,
                tuple(population),
                runtimes,
                best[1] if best else None,
                statistics.median(alive) if alive else None,
                restarted,
            )
            self.history.append(stats)
            if on_generation is not None:
                on_generation(stats)
            if self.stopped or g == self.generations - 1:
                break
            population, restarted = self.next_generation(population)
        return self


# ---------------------------------------------------------------------------- evaluation


def _as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return result if isinstance(result, tuple) else (result,)


def measure(call: Callable[[], object], best_s: float | None = None) -> float:
    """Seconds per call: warm up, then the median of repeated calls (about BUDGET_S). A
    call far slower than `best_s` is not repeated: its first time is the answer."""
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    if best_s is not None and first > SLOW_FACTOR * best_s:
        return first
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < WARMUP_S:
        call()
        calls += 1
    estimate = (time.perf_counter() - start) / calls if calls else first
    samples = []
    for _ in range(min(MAX_RUNS, max(MIN_RUNS, round(BUDGET_S / max(estimate, 1e-9))))):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


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
    from .api import define

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
    fingerprint = tuning_db.machine_fingerprint()
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
            return fingerprint, measure(lambda: kernel(*args), best_s), None
        except Exception as e:
            return fingerprint, None, f"failed to run: {_first_line(e)}"


def _is_dask(executor: cf.Executor | None) -> bool:
    return executor is not None and type(executor).__module__.split(".")[0] == "distributed"


class _Stop(Exception):
    """Ctrl-C or the time budget: stop after the current candidate."""


class _Evaluator:
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
        self.default_s = measure(functools.partial(default_kernel, *self.args))
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
            return measure(lambda: kernel(*self.args), self.best_s)
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
        single noisy timing can make a candidate the search's best, so several go on."""
        default_call = functools.partial(self.default_kernel, *self.args)
        chosen: tuple[MappingOptions, float, float] | None = None
        score = 0.0
        for c in finalists:
            if c == self.default:
                continue
            kernel = _load_kernel(self.fn, self.args, self.target, c)
            call = functools.partial(kernel, *self.args)
            times: dict[str, list[float]] = {"c": [], "default": []}
            for r in range(CONFIRM_ROUNDS):
                for who in ("c", "default") if r % 2 == 0 else ("default", "c"):
                    times[who].append(measure(call if who == "c" else default_call))
            ratios = sorted(d / t for d, t in zip(times["default"], times["c"], strict=True))
            # Faster by the margin in the median round, and faster in three rounds of four.
            ratio = statistics.median(ratios)
            if ratio >= CONFIRM_MARGIN and ratios[len(ratios) // 4] > 1.0 and ratio > score:
                score = ratio
                chosen = (c, statistics.median(times["c"]), statistics.median(times["default"]))
        if chosen is not None:
            return chosen
        t = statistics.median(measure(default_call) for _ in range(CONFIRM_ROUNDS))
        return self.default, t, t


# ------------------------------------------------------------------------------ the API


@dataclass
class TuneResult:
    """What a tuning run found; runtimes in seconds."""

    best: MappingOptions
    best_s: float
    default: MappingOptions
    default_s: float
    history: list[GenerationStats] = field(default_factory=list)
    failures: list[tuple[MappingOptions, str]] = field(default_factory=list)
    evaluated: int = 0
    interrupted: bool = False


@contextmanager
def _progress_bar(show: bool, total: int, name: str) -> Iterator[Any]:
    if not show:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=f"tuning {name}", unit="cand", leave=True) as bar:
        yield bar


def _loop_depth(fn: TcFunction, args: Sequence[Any]) -> tuple[list[int], int]:
    """The problem sizes and the deepest loop nest of the program for these arguments."""
    bound = compiler.bind(fn, args)
    program = bound.program
    values = [int(v) for v in {**bound.sizes, **program.constants}.values()]
    depth = max((len(s.iterators) for s in program.statements), default=1)
    return values, depth


def tune(
    fn: TcFunction,
    *args: Any,
    target: str | None = None,
    generations: int = 10,
    population: int = 50,
    seed: int | None = None,
    executor: cf.Executor | None = None,
    timeout_s: float | None = None,
    progress: bool = True,
) -> TuneResult:
    """Like `autotune`, with the whole story: runtimes, history per generation, failures."""
    from .api import TcFunction, _target

    if not isinstance(fn, TcFunction):
        raise TcError(f"autotune takes a TcFunction (module.name), got {type(fn).__name__}")
    target = _target(target)
    if target == "reference":
        raise TcError("the reference target has no mapping options to tune", hint="use 'cpu'")
    if generations < 1 or population < 1:
        raise TcError(
            f"generations and population must be at least 1, got {generations}, {population}"
        )
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    parts = tuning_db.key_parts(fn, args, target)
    sizes, depth = _loop_depth(fn, args)
    with _progress_bar(progress, generations * population, fn.name) as bar:
        failed = [0]

        def tick(fail: bool) -> None:
            failed[0] += fail
            if bar is not None:
                bar.update(1)

        ev = _Evaluator(fn, args, target, executor, deadline, tick)
        try:
            seeds = [ev.default]
            known = tuning_db.best_options(parts)
            if known is not None and known != ev.default:
                seeds.append(known)
            space = search_space(sizes, depth, seeds, target=target)
            search = GeneticSearch(
                space, population=population, generations=generations, seed=seed, seeds=seeds
            )

            def on_generation(stats: GenerationStats) -> None:
                if bar is not None:
                    # Candidates met before count as done without a tick.
                    bar.n = min(bar.total, (stats.index + 1) * population)
                    best = stats.best_so_far_s
                    bar.set_postfix(
                        gen=stats.index + 1,
                        best=f"{best * 1e6:.1f}us" if best is not None else "-",
                        failed=failed[0],
                        refresh=True,
                    )

            try:
                search.run(ev, on_generation)
            except KeyboardInterrupt:  # between two candidates: keep what was found
                search.stopped = True
            return _finish(fn, args, target, parts, ev, search)
        finally:
            ev.close()


def _finish(
    fn: TcFunction,
    args: Sequence[Any],
    target: str,
    parts: dict[str, Any],
    ev: _Evaluator,
    search: GeneticSearch,
) -> TuneResult:
    """Pick the winner, confirm it against the default, store it, drop stale kernels."""
    found = search.best
    evaluated = sum(1 for _ in search.results)
    if ev.dask:
        best, best_s = found if found is not None else (ev.default, math.nan)
        default_s = search.results.get(ev.default) or math.nan
        by_machine: dict[str, tuple[MappingOptions, float]] = {}
        for c, t in search.results.items():
            fp = ev.fingerprints.get(c)
            if t is not None and fp and (fp not in by_machine or t < by_machine[fp][1]):
                by_machine[fp] = (c, t)
        for fp, (c, t) in by_machine.items():
            d = search.results.get(ev.default) if ev.fingerprints.get(ev.default) == fp else None
            tuning_db.record(
                {**parts, "machine": fp},
                c,
                t * 1e6,
                default_us=None if d is None else d * 1e6,
                evaluated=evaluated,
            )
    else:
        best, best_s, default_s = ev.confirm(search.fastest(CONFIRM_FINALISTS))
        tuning_db.record(parts, best, best_s * 1e6, default_us=default_s * 1e6, evaluated=evaluated)
    # Kernels compiled with options=None before the run may not be the best any more.
    fn._kernels = {k: v for k, v in fn._kernels.items() if k[1] is not None}
    return TuneResult(
        best=best,
        best_s=best_s,
        default=ev.default,
        default_s=default_s,
        history=search.history,
        failures=ev.failures,
        evaluated=evaluated,
        interrupted=search.stopped,
    )


def autotune(
    fn: TcFunction,
    *args: Any,
    target: str | None = None,
    generations: int = 10,
    population: int = 50,
    seed: int | None = None,
    executor: cf.Executor | None = None,
    timeout_s: float | None = None,
    progress: bool = True,
) -> MappingOptions:
    """The fastest mapping options found for `fn` on these arguments (genetic search,
    TC paper 6.2), checked to compute what the reference computes and stored in the tuning
    database, so later compiles with options=None use them. `timeout_s` bounds the whole
    search (it stops after the current candidate, as Ctrl-C does); `executor` compiles
    the candidates (default: a process pool over the cores), or with a dask.distributed
    client executor compiles and times them on the workers."""
    return tune(
        fn,
        *args,
        target=target,
        generations=generations,
        population=population,
        seed=seed,
        executor=executor,
        timeout_s=timeout_s,
        progress=progress,
    ).best


OPTIMIZE_GENERATIONS = 5
OPTIMIZE_POPULATION = 20
"""The search of each group in tg.optimize(tune=True): a model has several groups."""


@contextmanager
def tuning_compiles(model: Any, *, progress: bool) -> Iterator[None]:
    """Within the block, compiling a TcKernel of `model` (an optimized ModelProto) with
    options=None autotunes it first unless the database knows it: tg.optimize(tune=True)
    optimizes again inside it, so the tuned options are frozen into the nodes."""
    from onnx import helper

    pairs = []
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if "source" in attrs and "entry" in attrs:
            pairs.append((attrs["source"].decode(), attrs["entry"].decode()))

    def run(fn: TcFunction, args: Sequence[Any], target: str) -> MappingOptions:
        return tune(
            fn,
            *args,
            target=target,
            generations=OPTIMIZE_GENERATIONS,
            population=OPTIMIZE_POPULATION,
            progress=progress,
        ).best

    with tuning_db.tune_on_compile(pairs, run):
        yield


def plot_history(result: TuneResult | None, path: str) -> None:
    """Best-so-far and median runtime per generation, as a PNG; with result=None only
    checks that matplotlib (the optional `plot` extra) is there."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise TcError(
            "--plot needs matplotlib, which is not installed", hint="pip install matplotlib"
        ) from None
    if result is None:
        return
    gens = [h.index + 1 for h in result.history]
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for label, values in (
        ("best so far", [h.best_so_far_s for h in result.history]),
        ("generation median", [h.median_s for h in result.history]),
    ):
        ax.plot(gens, [math.nan if v is None else v * 1e6 for v in values], marker="o", label=label)
    ax.axhline(result.default_s * 1e6, color="grey", linestyle="--", label="default options")
    ax.set_xlabel("generation")
    ax.set_ylabel("runtime (µs)")
    ax.legend()
    try:
        fig.savefig(path, dpi=100, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise TcError(f"cannot write {path}: {e}") from None
