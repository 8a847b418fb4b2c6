"""The one timing race of tc_graph: sides timed in interleaved rounds, each round a median
of repeated calls. optimize races a group or a model against onnxruntime with it, the cost
model times its calibration probes, and `tc-graph demo` its table: the same rules for
all (drift and warm caches favour neither side; load that comes and goes shows as rounds
that disagree, which `spread` measures)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

Call = Callable[[], object]


def median_call(
    call: Call, round_s: float, *, min_samples: int = 1, check: Callable[[], None] | None = None
) -> float:
    """Seconds per call: one warm-up call, then the median of calls repeated for about
    `round_s` (at least `min_samples`). A warm-up that alone lasts `round_s` is the
    sample when one is enough: a second call would double the race of a model that runs
    for a second (vgg19) and teach nothing a cache could change. `check` runs before
    each call (optimize's budget raises from it: a slow kernel's calls take seconds)."""
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    if first >= round_s and min_samples <= 1:
        return first
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_samples or time.perf_counter() - start < round_s:
        if check is not None:
            check()
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


Times = dict[str, list[float]]


def rounds(
    calls: Mapping[str, Call],
    count: int,
    round_s: float,
    *,
    min_samples: int = 1,
    check: Callable[[], None] | None = None,
    settled: Callable[[Times], bool] | None = None,
) -> Times:
    """Seconds per call of each side in up to `count` interleaved rounds, the order
    reversed every other round; fewer where `settled` says, after a round, that the
    rounds so far already decide (optimize stops racing a clear loss)."""
    order = list(calls)
    times: Times = {who: [] for who in order}
    for r in range(count):
        if check is not None:
            check()
        for who in order if r % 2 == 0 else reversed(order):
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
