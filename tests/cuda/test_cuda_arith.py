"""CUDA text of the arithmetic edge cases (tests/unit/test_reference.py: MIN / -1, saturating
casts, erfcx for large x, remainder, NaN-ignoring min/max, inverse erf domains): every one
compiles to PTX.
Running them needs a CUDA runtime this version does not have; the CPU and OpenCL tests run
the same cases against their NumPy oracles."""

from __future__ import annotations

import tc_graph as tg
from tests.cuda.test_cuda import _cuda_text, _nvcc, _one_file, needs_nvcc
from tests.unit import test_reference as ref

ARITH = (
    "int_min_div_mod_minus_one_wraps_int32", "int_min_div_mod_minus_one_wraps_int64",
    "erfcx_large_float32", "erfcx_large_float64", "float_to_int_casts_saturate",
    "remainder_is_exact_float", "remainder_is_exact_double",
    "mixed_width_min_max_reductions", "nan_is_ignored_by_min_max_reductions_and_builtins",
    "inverse_erf_domain_float32", "inverse_erf_domain_float64",
)  # fmt: skip


@needs_nvcc
def test_arithmetic_edge_cases_compile_to_ptx() -> None:
    by_name = {c.name: c for c in ref.CASES}
    texts = [
        _cuda_text(c.source, c.entry, list(c.args()), tg.MappingOptions())
        for c in (by_name[name] for name in ARITH)
    ]
    bodies = [t.partition("// launch")[2] for t in texts]
    assert "tc_to_uint64f(" in bodies[4] and "tc_to_int32(" in bodies[4]
    assert "tc_erfcxf(" in bodies[2] and "tc_erfcx(" in bodies[3]
    assert "tc_fmaxf(" in bodies[8]
    _nvcc({"arith": _one_file(texts)}, ["-ptx"])
