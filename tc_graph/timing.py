"""The timers of tc_graph, one module. The timing race: sides timed in interleaved rounds,
each round a median of repeated calls. optimize races a group or a model against
onnxruntime with it, the cost model times its calibration probes, and `tc-graph demo` its
table: the same rules for all (drift and warm caches favour neither side; load that comes
and goes shows as rounds that disagree, which `spread` measures). The autotuner's timer,
`median_runs`, follows the same rules (a warm-up call, the median of repeated calls, a
slow call answered by its first time) for the many short kernels of a search.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

Call = Callable[[], object]

WARMUP_S = 0.005
"""median_runs warms up for this long, and counts the calls, to size its samples."""
BUDGET_S = 0.04
MIN_RUNS, MAX_RUNS = 3, 200
"""median_runs times as many calls as fit in about BUDGET_S, within these bounds."""


def _seconds(call: Call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def median_call(
    call: Call, round_s: float, *, min_samples: int = 1, check: Callable[[], None] | None = None
) -> float:
    """Seconds per call: one warm-up call, then the median of calls repeated for about
    `round_s` (at least `min_samples`). A warm-up that alone lasts `round_s` is the
    sample when one is enough: a second call would double the race of a model that runs
    for a second (vgg19) and teach nothing a cache could change. `check` runs before
    each call (optimize's budget raises from it: a slow kernel's calls take seconds)."""
    first = _seconds(call)
    if first >= round_s and min_samples <= 1:
        return first
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_samples or time.perf_counter() - start < round_s:
        if check is not None:
            check()
        samples.append(_seconds(call))
    return statistics.median(samples)


def median_runs(call: Call, slow_s: float | None = None) -> float:
    """Seconds per call, the autotuner's timer: one warm-up call, more for WARMUP_S, then
    the median of as many calls as fit in about BUDGET_S (MIN_RUNS to MAX_RUNS). A
    warm-up call longer than `slow_s` is the answer: a candidate far slower than the best
    so far is not worth the repeats."""
    first = _seconds(call)
    if slow_s is not None and first > slow_s:
        return first
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < WARMUP_S:
        call()
        calls += 1
    estimate = (time.perf_counter() - start) / calls if calls else first
    count = min(MAX_RUNS, max(MIN_RUNS, round(BUDGET_S / max(estimate, 1e-9))))
    return statistics.median(_seconds(call) for _ in range(count))


Times = dict[str, list[float]]


def rounds(
    calls: Mapping[str, Call],
    count: int,
    round_s: float,
    *,
    min_samples: int = 1,
    check: Callable[[], None] | None = None,
    settled: Callable[[Times], bool] | None = None,
    pause: Callable[[], None] | None = None,
    timer: Callable[[Call], float] | None = None,
) -> Times:
    """Seconds per call of each side in up to `count` interleaved rounds, each round
    starting with the next side (two sides: the order reversed every other round); fewer
    where `settled` says, after a round, that the rounds so far already decide (optimize
    stops racing a clear loss). `pause` runs before each side's turn (the bench lets the
    previous side's thread pool stop spinning). A turn is median_call's, or `timer`'s
    (the autotuner's median_runs)."""
    order = list(calls)
    times: Times = {who: [] for who in order}
    for r in range(count):
        if check is not None:
            check()
        first = r % len(order)
        for who in order[first:] + order[:first]:
            if pause is not None:
                pause()
            if timer is not None:
                times[who].append(timer(calls[who]))
            else:
                times[who].append(
                    median_call(calls[who], round_s, min_samples=min_samples, check=check)
                )
        if settled is not None and settled(times):
            break
    return times


def spread(values: Sequence[float]) -> float:
    """The interquartile range of `values` relative to their median: how much rounds
    disagree."""
    q1, _, q3 = statistics.quantiles(values, n=4)
    return (q3 - q1) / statistics.median(values)
