"""Differential fuzzing in CI: a fixed slice of generated programs (tests/fuzz_programs.py,
seed 0) on the CPU target, under random MappingOptions and the defaults, each judged
against the NumPy reference by tests/fuzz_oracle.py (kernels run in a child process, so a
crash fails the test instead of killing it). scripts/fuzz.py runs the same fuzzer for as
long as asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fuzz_oracle import Fuzzer, judge_slice

CHUNKS = 8
PER_CHUNK = 30
"""240 programs in chunks (xdist spreads them); about 0.3 s a program on one core."""


@pytest.fixture(scope="module")
def fuzzer() -> Iterator[Fuzzer]:
    f = Fuzzer("cpu", timeout=60.0)
    yield f
    f.close()


FAST_CHUNKS = 3
"""Chunks the default suite runs (90 programs); --slow adds the others."""


@pytest.mark.parametrize(
    "chunk",
    [c if c < FAST_CHUNKS else pytest.param(c, marks=pytest.mark.slow) for c in range(CHUNKS)],
)
def test_generated_programs_match_the_reference(fuzzer: Fuzzer, chunk: int) -> None:
    indices = range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK)
    findings, _ = judge_slice(fuzzer, indices, budget=20, runs=lambda _case: True)
    assert not findings, "\n\n".join(findings)
