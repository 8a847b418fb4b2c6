"""tc_graph/timing.py, the one timing race: how many calls a round makes, and when the
rounds stop. A fake clock stands in for time.perf_counter: each call advances it by the
call's own cost, so what is checked is the counting, not the machine."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tc_graph import timing


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    return now


def _costing(clock: list[float], seconds: float, log: list[float]) -> Callable[[], None]:
    def call() -> None:
        log.append(seconds)
        clock[0] += seconds

    return call


def test_a_call_longer_than_the_round_is_timed_once(clock: list[float]) -> None:
    calls: list[float] = []
    assert timing.median_call(_costing(clock, 2.0, calls), 0.5) == 2.0
    assert len(calls) == 1  # the warm-up is the sample
    calls.clear()
    assert timing.median_call(_costing(clock, 2.0, calls), 0.5, min_samples=3) == 2.0
    assert len(calls) == 4  # asked for three samples: the warm-up does not count


def test_a_short_call_is_repeated_for_the_round(clock: list[float]) -> None:
    calls: list[float] = []
    assert timing.median_call(_costing(clock, 0.1, calls), 0.5) == pytest.approx(0.1)
    assert len(calls) == 1 + 5  # the warm-up, then 0.5 s of calls


def test_the_tuners_timer_answers_a_slow_call_by_its_first_time(clock: list[float]) -> None:
    calls: list[float] = []
    assert timing.median_runs(_costing(clock, 2.0, calls), slow_s=1.0) == 2.0
    assert len(calls) == 1


def test_the_tuners_timer_sizes_its_samples_from_the_warm_up(clock: list[float]) -> None:
    """A call of 1 ms: the warm-up (WARMUP_S = 5 ms) counts 5 calls, then the 40 ms
    budget is 40 samples; a call of 1 µs would make far more, capped at MAX_RUNS, and
    one of 30 ms at least MIN_RUNS."""
    for seconds, samples in ((1e-3, 40), (1e-6, timing.MAX_RUNS), (0.03, timing.MIN_RUNS)):
        calls: list[float] = []
        warm_up = 1 + -(-timing.WARMUP_S // seconds)
        assert timing.median_runs(_costing(clock, seconds, calls)) == pytest.approx(seconds)
        assert len(calls) == pytest.approx(warm_up + samples, abs=1)


def test_rounds_stop_when_settled(clock: list[float]) -> None:
    a: list[float] = []
    b: list[float] = []
    calls = {"a": _costing(clock, 1.0, a), "b": _costing(clock, 3.0, b)}
    seen: list[int] = []

    def settled(times: timing.Times) -> bool:
        seen.append(len(times["a"]))
        return len(times["a"]) == 3 and all(
            x < y for x, y in zip(times["a"], times["b"], strict=True)
        )

    times = timing.rounds(calls, 7, 0.5, settled=settled)
    assert times == {"a": [1.0] * 3, "b": [3.0] * 3} and seen == [1, 2, 3]
    assert len(a) == len(b) == 3
    assert timing.rounds(calls, 4, 0.5) == {"a": [1.0] * 4, "b": [3.0] * 4}


def test_each_round_starts_with_the_next_side_after_a_pause(clock: list[float]) -> None:
    """Three contenders (the bench's tc_graph, onnxruntime, NumPy): each goes first once
    in three rounds, and `pause` runs before every turn."""
    turns: list[str] = []

    def side(name: str) -> Callable[[], None]:
        def call() -> None:
            if not turns or turns[-1] != name:
                turns.append(name)
            clock[0] += 1.0

        return call

    pauses: list[int] = []
    timing.rounds({n: side(n) for n in "abc"}, 3, 0.5, pause=lambda: pauses.append(1))
    assert turns == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert len(pauses) == 9


def test_a_timer_of_its_own_times_each_turn() -> None:
    """The autotuner's confirmation race: each turn is its timer's answer, one per turn."""
    asked: list[str] = []

    def timer(call: Callable[[], object]) -> float:
        call()
        return {"a": 1.0, "b": 2.0}[asked[-1]]

    calls = {"a": lambda: asked.append("a"), "b": lambda: asked.append("b")}
    times = timing.rounds(calls, 4, 0.0, timer=timer)
    assert times == {"a": [1.0] * 4, "b": [2.0] * 4}
    assert asked == ["a", "b", "b", "a", "a", "b", "b", "a"]
