"""Differential fuzzing on OpenCL (PoCL in CI): a smaller fixed slice of the generated
programs of tests/cpu/test_fuzz_programs.py, on the OpenCL target under random GPU
options and the defaults, judged against the NumPy reference (tests/fuzz_oracle.py).
Programs that compute in float16 or float64 run only where the device has the extension."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests import fuzz_programs as fp
from tests.fuzz_oracle import Fuzzer, summary

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


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_generated_programs_match_the_reference_on_opencl(fuzzer: Fuzzer, chunk: int) -> None:
    extensions = _extensions()
    findings, ran = [], 0
    for index in range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK):
        case = fp.generate(0, index, options="random" if index % 2 == 0 else "default")
        if not _runs_here(case.source, extensions):
            continue
        ran += 1
        outcome = fuzzer.judge(case)
        if outcome.finding:
            small = fuzzer.reduce(case, outcome, budget=10)
            findings.append(f"{outcome.kind}: {outcome.detail.strip()}\n{summary(small)}")
    assert ran > 0
    assert not findings, "\n\n".join(findings)
