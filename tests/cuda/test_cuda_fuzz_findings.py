"""CUDA text of the fuzzer's OpenCL and CUDA findings (tests/opencl/test_opencl_fuzz_findings.py
and tests/cuda/test_cuda_run.py run them against the reference): each compiles to PTX on its own (its own prelude), and
nested private elements keep one register."""

from __future__ import annotations

import numpy as np

import tc_graph as tg
from tests.cuda.test_cuda import _cuda_text, _nvcc, needs_nvcc

NESTED = "def main(float(M) C) -> (S1) {\n  S1(i0) = C(i0)\n  S1(i0) +=! C(r0) }"
CASES = {
    "float_condition": (
        "def main(float(N,M) A) -> (T4) { T4(i0, i1) = sqrt((A(i0, i1) ? A(i0, i1) : A(i1, i0))) }",
        [np.ones((7, 7), np.float32)],
    ),
    "abs_int": (
        "def main(int32(N,N) C) -> (T3) { T3(i0, i1) = abs(C(i0, i1)) / 2 }",
        [np.ones((2, 2), np.int32)],
    ),
    "nested_private": (NESTED, [np.ones(1, np.float32)]),
    "half_cast": (
        "def main(float(M) C) -> (T1) { T1 *=! (abs(half(C(r0))) - C(r0)) }",
        [np.ones(2, np.float32)],
    ),
    # Found on an H200 (tests/cuda/test_cuda_run.py's fuzzer): `__half != 0` matches both
    # the built-in and cuda_fp16's operator, so nvcc rejected bool() of a half.
    "bool_of_half": (
        "def main(float16(N) A) -> (T1) { T1(i0) = bool(-A(i0)) }",
        [np.ones(3, np.float16)],
    ),
}


def test_nested_private_elements_declare_one_register() -> None:
    text = _cuda_text(NESTED, "main", [np.ones(1, np.float32)], tg.MappingOptions())
    assert text.count("float tc_v;") == 1, text
    assert "tc_v = tc_v;" not in text, text


@needs_nvcc
def test_fuzz_findings_compile_to_ptx() -> None:
    texts = {
        name: _cuda_text(src, "main", args, tg.MappingOptions())
        for name, (src, args) in CASES.items()
    }
    assert "cuda_fp16.h" in texts["half_cast"]
    _nvcc(texts, ["-ptx"])
