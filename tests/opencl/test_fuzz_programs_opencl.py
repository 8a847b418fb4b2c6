"""Differential fuzzing on OpenCL (PoCL in CI): a smaller fixed slice of the generated
programs of tests/cpu/test_fuzz_programs.py, on the OpenCL target under random GPU
options and the defaults, judged against the NumPy reference (tests/fuzz_oracle.py).
Programs that compute in float16 or float64 run only where the device has the extension."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.fuzz_oracle import Fuzzer, judge_slice

CHUNKS = 2
PER_CHUNK = 30


def _extensions() -> str:
    from tc_graph.runtime import opencl

    ctx, _ = opencl.context()
    return str(ctx.devices[0].extensions)


def _runs_here(source: str, extensions: str) -> bool:
    half = re.search(r"\b(half|float16)\b", source) is not None
    double = re.search(r"\b(double|float64)\b", source) is not None
    return (not half or "cl_khr_fp16" in extensions) and (not double or "cl_khr_fp64" in extensions)


@pytest.fixture(scope="module")
def fuzzer() -> Iterator[Fuzzer]:
    f = Fuzzer("opencl", timeout=120.0)
    yield f
    f.close()


@pytest.mark.parametrize(
    "chunk", [0, *(pytest.param(c, marks=pytest.mark.slow) for c in range(1, CHUNKS))]
)
def test_generated_programs_match_the_reference_on_opencl(fuzzer: Fuzzer, chunk: int) -> None:
    extensions = _extensions()
    indices = range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK)
    findings, ran = judge_slice(
        fuzzer, indices, budget=10, runs=lambda case: _runs_here(case.source, extensions)
    )
    assert ran > 0
    assert not findings, "\n\n".join(findings)
