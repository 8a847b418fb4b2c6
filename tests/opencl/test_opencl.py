"""The GPU mapping executed on OpenCL (PoCL in CI) against independent oracles: the
hand-written NumPy of the reference tests and the reference evaluator on every accepted
program of the conformance table, under default and varied GPU options."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import tc_graph as tg
from tests.tolerances import assert_matches
from tests.unit import test_conformance as conf
from tests.unit import test_reference as ref

HALF = ("float16", "half")
MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


def _as_tuple(x: Any) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)


def _needs_half(source: str) -> bool:
    return any(t in source for t in HALF)


def _half_ok() -> bool:
    from tc_graph.runtime import opencl

    ctx, _ = opencl.context()
    return "cl_khr_fp16" in ctx.devices[0].extensions


def _skip_half(source: str) -> None:
    if _needs_half(source) and not _half_ok():
        pytest.skip("float16 needs cl_khr_fp16, which this OpenCL device lacks")


@pytest.mark.parametrize("c", ref.CASES, ids=lambda c: c.name)
def test_opencl_matches_numpy(c: ref.Case) -> None:
    _skip_half(c.source)
    args = c.args()
    expected = c.oracle(*args)
    call_args, out = ref._split(c, args, len(expected))
    got = _as_tuple(ref.call_case(c, call_args, out, target="opencl"))
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert_matches(g, e, f"{c.name} output {k}")


@pytest.mark.parametrize("case", conf.SHAPE_CASES, ids=[c["name"] for c in conf.SHAPE_CASES])
def test_opencl_matches_reference(case: dict[str, Any]) -> None:
    _skip_half(case["source"])
    fn = conf.define(case)[conf.entry_of(case)]
    args = conf.build_args(case)
    want = _as_tuple(fn(*args, target="reference"))
    got = _as_tuple(fn(*args, target="opencl"))
    for k, (g, e) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, e, f"{case['name']} output {k}")


# A fixed subset under GPU options (pairwise over the knobs, not the product): blocks that
# divide the problem and blocks that do not (tails), tiles apart from blocks, grids
# smaller than the tiles, private and shared promotion on and off, every fusion.
SUBSET = (
    "matmul", "conv2d", "grouped_conv2d", "max_pool_2x2", "2LUT", "MLP1_in_place",
    "MLP3_temporaries", "softmax", "layer_norm", "batched_matmul", "transposed_matmul",
    "concat_with_where_ranges",
)  # fmt: skip
OPTION_SETS = [
    tg.MappingOptions(block=(4, 2), use_private_memory=False, use_shared_memory=False),
    tg.MappingOptions(block=(3, 5), tile=(7, 5), grid=(2, 1), fusion="min"),
    tg.MappingOptions(block=(8, 4, 2), tile=(2, 3, 4), fusion="preserve3coincident"),
    tg.MappingOptions(block=(2,), grid=(1,), use_shared_memory=False),
    tg.MappingOptions(block=(16, 16), tile=(16, 16, 4), use_private_memory=False),
    tg.MappingOptions.naive(),
    tg.MappingOptions.mlp(),
    tg.MappingOptions.convolution(),
]


@pytest.mark.parametrize(
    ("c", "options"),
    [
        (c, OPTION_SETS[(i + j) % len(OPTION_SETS)])
        for i, c in enumerate(c for c in ref.CASES if c.name in SUBSET)
        for j in range(3)
    ],
    ids=lambda x: x.name if isinstance(x, ref.Case) else f"{x.block}-{x.tile}-{x.grid}",
)
def test_opencl_options_match_numpy(c: ref.Case, options: tg.MappingOptions) -> None:
    args = c.args()
    expected = c.oracle(*args)
    call_args, out = ref._split(c, args, len(expected))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(c.source)[c.entry]
    got = _as_tuple(fn(*ref._copy_args(call_args), target="opencl", options=options, out=out))
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert_matches(g, e, f"{c.name} output {k} under {options}")


def test_subset_names_exist() -> None:
    assert set(SUBSET) <= {c.name for c in ref.CASES}


def test_indirect_index_out_of_bounds_is_an_error_not_a_read() -> None:
    fn = tg.define("def g(float(N) X, int(M) I) -> (Z) { Z(i) = X(I(i)) }").g
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(tg.TcError, match="out of bounds"):
        fn(x, np.array([0, 4], np.int32), target="opencl")
    got = fn(x, np.array([3, 1], np.int32), target="opencl")
    np.testing.assert_array_equal(got, np.array([3, 1], np.float32))


def test_matmul_kernel_is_mapped_to_blocks_and_threads() -> None:
    a = np.ones((40, 5), np.float32)
    b = np.ones((5, 60), np.float32)
    k = tg.define(MATMUL).mm.compile(a, b, target="opencl")
    assert "__kernel void tc_kernel_0" in k.source
    assert "get_group_id(0)" in k.source and "get_local_id(1)" in k.source
    (launch,) = k.launches
    assert launch.block == (32, 8) and launch.grid == (2, 5)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
