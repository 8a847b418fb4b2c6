"""The autotuner's entry points: `tune` and `autotune` search the mapping options of one
call (genetic search over the search space, candidates evaluated on this machine) and store
the best in the tuning database; `ModelTuning` is what `tg.optimize(tune=True)` asks of
them for the kernels of the groups it chose.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .. import compiler
from ..api import TcFunction, checked_target
from ..arguments import seconds, whole
from ..errors import TcError
from ..lang.canonical import canonical
from ..options import MappingOptions
from . import db
from .evaluate import CONFIRM_FINALISTS, Evaluator
from .search import GenerationStats, GeneticSearch
from .space import search_space


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
    if not isinstance(fn, TcFunction):
        raise TcError(f"autotune takes a TcFunction (module.name), got {type(fn).__name__}")
    target = checked_target(target)
    if target == "reference":
        raise TcError("the reference target has no mapping options to tune", hint="use 'cpu'")
    generations, population, seed, timeout_s = _check_search(
        generations, population, seed, timeout_s
    )
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    sizes, depth = _loop_depth(fn, args)  # binds the arguments first (TcError otherwise)
    parts = db.key_parts(fn, args, target)
    with _progress_bar(progress, generations * population, fn.name) as bar:
        failed = [0]

        def tick(fail: bool) -> None:
            failed[0] += fail
            if bar is not None:
                bar.update(1)

        ev = Evaluator(fn, args, target, executor, deadline, tick)
        try:
            seeds = [ev.default]
            known = db.best_options(parts)
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


def _check_search(
    generations: object, population: object, seed: object, timeout_s: object
) -> tuple[int, int, int | None, float | None]:
    """The search's arguments as numbers, or a TcError naming the first wrong one."""
    counts = []
    for name, value in (("generations", generations), ("population", population)):
        n = whole(value)
        if n is None or n < 1:
            raise TcError(f"{name} must be a positive integer, not {value!r}")
        counts.append(n)
    start = None if seed is None else whole(seed)
    if seed is not None and start is None:
        raise TcError(f"seed must be an integer or None, not {seed!r}")
    limit = None if timeout_s is None else seconds(timeout_s)
    if timeout_s is not None and limit is None:
        raise TcError(f"timeout_s must be a number of seconds >= 0 or None, not {timeout_s!r}")
    return counts[0], counts[1], start, limit


def _finish(
    fn: TcFunction,
    args: Sequence[Any],
    target: str,
    parts: dict[str, Any],
    ev: Evaluator,
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
            db.record(
                {**parts, "machine": fp},
                c,
                t * 1e6,
                default_us=None if d is None else d * 1e6,
                evaluated=evaluated,
            )
    else:
        best, best_s, default_s = ev.confirm(search.fastest(CONFIRM_FINALISTS))
        db.record(parts, best, best_s * 1e6, default_us=default_s * 1e6, evaluated=evaluated)
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


@dataclass(frozen=True)
class ModelTuning:
    """What tg.optimize(tune=True) tunes: the kernels of the groups its first pass chose
    (each a (canonical TC text, entry) pair). Its second pass asks `options` for every
    kernel it compiles, and the tuned options land in the TcKernel nodes."""

    chosen: frozenset[tuple[str, str]]
    progress: bool

    @classmethod
    def of(cls, model: Any, *, progress: bool) -> ModelTuning:
        """The TcKernel nodes of `model`, an optimized ModelProto."""
        from onnx import helper

        chosen = set()
        for node in model.graph.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if "source" in attrs and "entry" in attrs:
                text, names = canonical(attrs["source"].decode())
                entry = attrs["entry"].decode()
                chosen.add((text, names.get(entry, entry)))
        return cls(frozenset(chosen), progress)

    def options(self, fn: TcFunction, args: Sequence[Any], target: str) -> MappingOptions | None:
        """A chosen kernel that the database does not know yet tuned now (a short search:
        OPTIMIZE_GENERATIONS of OPTIMIZE_POPULATION), and its best options; None for the
        others, which compile with what options=None gives (the database's best, else
        the defaults)."""
        parts = db.key_parts(fn, args, target)
        if (parts["tc"], parts["entry"]) not in self.chosen or db.best_options(parts) is not None:
            return None
        return tune(
            fn,
            *args,
            target=target,
            generations=OPTIMIZE_GENERATIONS,
            population=OPTIMIZE_POPULATION,
            progress=self.progress,
        ).best


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
