"""The GPU mapping executed on OpenCL (PoCL in CI) against independent oracles: the
hand-written NumPy of the reference tests and the reference evaluator on every accepted
program of the conformance table, under default and varied GPU options."""

from __future__ import annotations

import re
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import tc_graph as tg
from tests.cpu import test_indirect as indirect
from tests.oracles import check_numpy_call, check_numpy_case, check_reference_case
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
    check_numpy_call(c, "opencl")


@pytest.mark.parametrize("case", conf.SHAPE_CASES, ids=[c["name"] for c in conf.SHAPE_CASES])
def test_opencl_matches_reference(case: dict[str, Any]) -> None:
    _skip_half(case["source"])
    check_reference_case(case, "opencl")


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
    check_numpy_case(c, "opencl", options)


def test_subset_names_exist() -> None:
    assert set(SUBSET) <= {c.name for c in ref.CASES}


def check_indirect_out_of_bounds(target: str) -> None:
    """An index read from a tensor outside its extent is an error, not a read; in range,
    the gather is right (also run by tests/cuda)."""
    fn = tg.define("def g(float(N) X, int(M) I) -> (Z) { Z(i) = X(I(i)) }").g
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(tg.TcError, match="out of bounds"):
        fn(x, np.array([0, 4], np.int32), target=target)
    got = fn(x, np.array([3, 1], np.int32), target=target)
    np.testing.assert_array_equal(got, np.array([3, 1], np.float32))


def test_indirect_index_out_of_bounds_is_an_error_not_a_read() -> None:
    check_indirect_out_of_bounds("opencl")


@pytest.mark.parametrize(("src", "cases"), indirect._cases(), ids=["twice", "thrice", "rows"])
def test_nested_indirect_subscripts_are_checked_at_every_depth(
    src: str, cases: list[list[np.ndarray]]
) -> None:
    """Each nested index is checked before the index that reads through it, so the
    error quotes the bad value itself (clamped reads kept the buffers safe already)."""
    fn = tg.define(src).t
    for args in cases:
        assert indirect._outcome(fn, args, "opencl") == indirect._outcome(fn, args, "reference")


def test_matmul_kernel_is_mapped_to_blocks_and_threads() -> None:
    a = np.ones((40, 5), np.float32)
    b = np.ones((5, 60), np.float32)
    k = tg.define(MATMUL).mm.compile(a, b, target="opencl")
    assert "__kernel void tc_kernel_0" in k.source
    assert "get_group_id(0)" in k.source and "get_local_id(1)" in k.source
    (launch,) = k.launches
    assert launch.block == (32, 8) and launch.grid == (2, 5)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)


# Shared-memory promotion (on by default) under blocks that do not divide the problems,
# grids smaller than the tiles (blocks loop over tiles: the trailing barrier), unrolled
# copies, and a budget so small that promotion is partial or off.
SHARED_SETS = [
    tg.MappingOptions(block=(3, 5), grid=(2, 1), use_shared_memory=True),
    tg.MappingOptions(block=(4, 4), tile=(8, 8, 4), unroll_copy_shared=True, shared_depth=1),
    tg.MappingOptions(block=(5, 3), use_shared_memory=True, max_shared_memory=64),
    # Without private memory, reused outputs get written tiles (copy-in where read).
    tg.MappingOptions(block=(3, 5), tile=(7, 6), grid=(2, 1), use_private_memory=False),
]

# private_depth: the accumulator held across the whole reduction nest, private tiles split
# by a deeper depth, and a depth below every loop (the default code).
PRIVATE_DEPTH_SETS = [
    tg.MappingOptions(block=(3, 5), private_depth=1),
    tg.MappingOptions(block=(4, 4), tile=(8, 8), grid=(2, 1), private_depth=1),
    tg.MappingOptions(block=(4, 2), tile=(8, 8), private_depth=5, use_shared_memory=False),
]
PROMOTION_SETS = SHARED_SETS + PRIVATE_DEPTH_SETS
PROMOTION_IDS = ["tails", "unrolled", "small", "written", "acc-depth", "tile-depth", "deep"]


@pytest.mark.parametrize("c", ref.CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("options", PROMOTION_SETS, ids=PROMOTION_IDS)
def test_opencl_promotion_matches_numpy(c: ref.Case, options: tg.MappingOptions) -> None:
    _skip_half(c.source)
    check_numpy_case(c, "opencl", options)


@pytest.mark.parametrize("case", conf.SHAPE_CASES, ids=[c["name"] for c in conf.SHAPE_CASES])
@pytest.mark.parametrize(
    "options", [*SHARED_SETS[::2], PRIVATE_DEPTH_SETS[0]], ids=["tails", "small", "acc-depth"]
)
def test_opencl_promotion_matches_reference(
    case: dict[str, Any], options: tg.MappingOptions
) -> None:
    _skip_half(case["source"])
    check_reference_case(case, "opencl", options)


def _paper(name: str) -> tuple[Any, list[np.ndarray], tg.MappingOptions]:
    from tests.cuda.test_cuda import _paper_cases

    for n, source, entry, args, options in _paper_cases():
        if n == name:
            return tg.define(source)[entry], args, options
    raise KeyError(name)


@pytest.mark.parametrize(
    ("name", "tensors", "written"),
    [("MLP3", ["I", "W2", "W3", "W4"], ["O4"]), ("C3", ["I", "W"], []), ("tbmm", ["X", "Y"], []),
     ("2LUT", ["LUT1 rows through I1", "LUT2 rows through I2"], ["O1", "O2"]),
     ("gconv", ["I", "W1"], []), ("tmm", ["A", "B"], [])],
)  # fmt: skip
def test_shared_promotion_fires_on_paper_kernels(
    name: str, tensors: list[str], written: list[str]
) -> None:
    fn, args, options = _paper(name)
    k = fn.compile(*args, target="opencl", options=options)
    for t in tensors:
        assert re.search(rf"// shared tile tc_sh\d+_\d+: {t}\[", k.source), (t, k.source)
    # Outputs written with thread x on another subscript (not coalesced) get a tile that
    # their private element is stored to, copied out after a barrier; MLP3's O2 and O3
    # are read by the next site of the fused kernel, so they stay in global memory.
    got = re.findall(r"// shared tile tc_sh\d+_\d+: (\w+)\[.*written: copied out", k.source)
    assert sorted(got) == written, k.source
    assert re.search(r"__local \w+ tc_sh", k.source)
    # One barrier after each site's copies, one before each copy-out; the blocks run one
    # tile each here, so no trailing barrier (nothing overwrites a tile another thread
    # still reads).
    assert k.source.count("barrier(") == k.source.count("const int tc_tid") + len(written)
    if name == "2LUT":
        # Section 5.5: the reached rows are copied (index clamped); the body reads the tile.
        assert "t_LUT1[((int64_t)(tc_clamp((int64_t)(t_I1[" in k.source
        assert "acc + (float)(tc_sh" in k.source
    want = _as_tuple(fn(*args, target="reference"))
    for g, e in zip(_as_tuple(k(*args)), want, strict=True):
        assert_matches(g, e, name)
    off = fn.compile(*args, target="opencl", options=replace(options, use_shared_memory=False))
    assert "__local" not in off.source and "barrier(" not in off.source


def test_no_promotion_without_reuse() -> None:
    fn = tg.define("def add(float(M,N) A, float(M,N) B) -> (C) { C(m,n) = A(m,n) + B(m,n) }").add
    a = np.ones((40, 70), np.float32)
    k = fn.compile(a, a, target="opencl")
    assert "__local" not in k.source and "barrier(" not in k.source
    # A transposed read is not coalesced: promoted although no element is reused.
    t = tg.define("def tr(float(N,M) A) -> (C) { C(m,n) = A(n,m) }").tr
    k = t.compile(np.ones((70, 40), np.float32), target="opencl")
    assert "// shared tile tc_sh0_0: A[" in k.source and "(not coalesced)" in k.source
    np.testing.assert_array_equal(
        k(np.arange(2800, dtype=np.float32).reshape(70, 40)),
        np.arange(2800, dtype=np.float32).reshape(70, 40).T,
    )


def test_trailing_barrier_when_blocks_loop_over_tiles() -> None:
    a = np.random.default_rng(0).random((40, 5), dtype=np.float32)
    b = np.random.default_rng(1).random((5, 60), dtype=np.float32)
    k = tg.define(MATMUL).mm.compile(a, b, target="opencl", options=tg.MappingOptions(grid=(1, 1)))
    assert k.source.count("barrier(") == 2
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    small = tg.MappingOptions(max_shared_memory=200)
    k = tg.define(MATMUL).mm.compile(a, b, target="opencl", options=small)
    assert k.source.count("// shared tile") == 1  # A's 8x5 tile fits, B's 5x32 does not
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)


@pytest.mark.parametrize(
    ("tile", "block", "shape"),
    [((16, 16), (4, 4), (37, 29)), ((7, 5), (3, 5), (40, 60)), ((8, 32), (32, 2), (16, 64))],
)
def test_private_tile_of_several_outputs_per_thread(
    tile: tuple[int, ...], block: tuple[int, ...], shape: tuple[int, int]
) -> None:
    """Tiles larger than the block: each thread's outputs stay in a private array across
    the reduction loop (tails: the guarded last iterations), written back once."""
    rng = np.random.default_rng(0)
    a = rng.random((shape[0], 11), dtype=np.float32)
    b = rng.random((11, shape[1]), dtype=np.float32)
    fn = tg.define(MATMUL).mm
    opts = tg.MappingOptions(tile=tile, block=block)
    k = fn.compile(a, b, target="opencl", options=opts)
    assert "// private tile:" in k.source and "float tc_pv[" in k.source
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    off = fn.compile(a, b, target="opencl", options=replace(opts, use_private_memory=False))
    assert "tc_pv" not in off.source
    np.testing.assert_allclose(off(a, b), a @ b, rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "marker"),
    [("MLP3", "// private: O2 element over 3 statements"), ("C3", "// private tile: 4x1"),
     ("tmm", "// private tile: 4x1"), ("2LUT", "// private: O1 element over 2 statements")],
)  # fmt: skip
def test_private_promotion_fires_on_paper_kernels(name: str, marker: str) -> None:
    fn, args, options = _paper(name)
    k = fn.compile(*args, target="opencl", options=options)
    assert marker in k.source, k.source
    want = _as_tuple(fn(*args, target="reference"))
    for g, e in zip(_as_tuple(k(*args)), want, strict=True):
        assert_matches(g, e, name)
    off = fn.compile(*args, target="opencl", options=replace(options, use_private_memory=False))
    assert "// private" not in off.source


def test_indirect_rows_promoted_with_bad_index_still_an_error() -> None:
    """A gather whose rows are copied to shared memory (thread x runs over b, so reads of a
    row are not coalesced): tails, and an out-of-bounds index
    still reported (the copy clamps it) rather than read."""
    src = "def g(float(E,D) L, int(B,K) I) -> (O) { O(d,b) +=! L(I(b,k), d) }"
    fn = tg.define(src).g
    rng = np.random.default_rng(0)
    lut = rng.random((50, 7), dtype=np.float32)
    idx = rng.integers(0, 50, (37, 5)).astype(np.int32)
    opts = tg.MappingOptions(block=(16,), grid=(2,))
    k = fn.compile(lut, idx, target="opencl", options=opts)
    assert "rows through I" in k.source
    np.testing.assert_allclose(k(lut, idx), lut[idx].sum(1).T, rtol=1e-5)
    idx[3, 2] = 50
    with pytest.raises(tg.TcError, match="out of bounds"):
        fn(lut, idx, target="opencl", options=opts)


# Written tiles (paper 5.5: copy-in before, copy-out after, with barriers).
TRANSPOSE = "def tr(float(N,M) A, float(N,M) B) -> (C) { C(m,n) = A(n,m) + B(n,m) }"
ACCUMULATE = "def acc(float(M,K) A, float(K,N) B) -> (C) { C(m,n) += A(m,k) * B(k,n) }"
WRITTEN = r"// shared tile tc_sh\d+_\d+: C\[[^\n]*written: copied out"


def _written_tiles(source: str) -> list[str]:
    """Per kernel, the tensors promoted to written shared tiles."""
    kernels = source.split("__kernel void ")[1:]
    return [
        ",".join(re.findall(r"// shared tile tc_sh\d+_\d+: (\w+)\[[^\n]*written", k))
        for k in kernels
    ]


@pytest.mark.parametrize(
    "options",
    [
        tg.MappingOptions(block=(8, 4)),
        tg.MappingOptions(block=(8, 4), grid=(2, 1), unroll_copy_shared=True),
        tg.MappingOptions(block=(5, 3), tile=(7, 6), use_private_memory=False),
    ],
    ids=["tails", "blocks-loop", "tile-apart"],
)
def test_written_tile_of_a_non_coalesced_output(options: tg.MappingOptions) -> None:
    """Thread x runs over m (two coalesced reads), so C(m, n) is stored with a stride:
    the block writes a shared tile and copies it out along n. Sizes that no block or tile
    divides (tails: the copy-out keeps within bounds)."""
    fn = tg.define(TRANSPOSE).tr
    rng = np.random.default_rng(0)
    a, b = rng.random((37, 29), dtype=np.float32), rng.random((37, 29), dtype=np.float32)
    k = fn.compile(a, b, target="opencl", options=options)
    assert re.search(WRITTEN + r", not copied in\)", k.source), k.source
    if options.grid == (2, 1):
        # Blocks loop over tiles: the next copy must not start before this copy-out.
        assert "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);" in k.source
    np.testing.assert_array_equal(k(a, b), fn(a, b, target="reference"))
    off = fn.compile(a, b, target="opencl", options=replace(options, use_shared_memory=False))
    assert "__local" not in off.source


@pytest.mark.parametrize(
    ("options", "promoted"),
    [
        (tg.MappingOptions(block=(8, 4), use_private_memory=False), True),
        (tg.MappingOptions(block=(8, 4), grid=(2, 2), use_private_memory=False), True),
        (tg.MappingOptions(block=(8, 4), tile=(16, 16, 4), shared_depth=2, use_private_memory=False), True),
        # The reduction tile loop is below the site: each iteration writes the same C box,
        # so distinct tile values overlap and C is left in global memory.
        (tg.MappingOptions(block=(8, 4), tile=(16, 16, 4), use_private_memory=False), False),
        # Registers keep the accumulators when private promotion is on.
        (tg.MappingOptions(block=(8, 4)), False),
    ],
    ids=["tails", "blocks-loop", "reduction-tiled-below", "overlapping-tiles", "registers"],
)  # fmt: skip
def test_written_tile_of_an_accumulation_into_out(
    options: tg.MappingOptions, promoted: bool
) -> None:
    """`+=` without `!` reads its output: the tile is copied in from `out=`, accumulated in
    shared memory and copied out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(ACCUMULATE).acc
    rng = np.random.default_rng(1)
    a, b = rng.random((37, 11), dtype=np.float32), rng.random((11, 29), dtype=np.float32)
    c = rng.random((37, 29), dtype=np.float32)
    k = fn.compile(a, b, target="opencl", options=options)
    assert bool(re.search(WRITTEN + r"\)", k.source)) == promoted, k.source
    want = fn(a, b, target="reference", out=c.copy())
    got = fn(a, b, target="opencl", options=options, out=c.copy())
    assert_matches(got, want, f"accumulate under {options}")


def test_written_tile_of_an_initialized_reduction_is_not_copied_in() -> None:
    """`+=!`: every element is initialized in the tile before it is read."""
    fn = tg.define(MATMUL).mm
    rng = np.random.default_rng(2)
    a, b = rng.random((37, 11), dtype=np.float32), rng.random((11, 29), dtype=np.float32)
    opts = tg.MappingOptions(block=(8, 4), use_private_memory=False)
    k = fn.compile(a, b, target="opencl", options=opts)
    assert re.search(WRITTEN + r", not copied in\)", k.source), k.source
    assert_matches(k(a, b), fn(a, b, target="reference"), "mm")


def test_written_tile_not_promoted_where_copy_out_would_clobber() -> None:
    """Two kernels write the rows of Z: the second's last tile (rows 8..15) holds rows
    8..12 it writes and rows 13..15 the first wrote, so a box copy-out would overwrite
    those; it is not promoted there, while the first kernel's tiles (offset at its least
    row) are exactly what it writes."""
    src = """def cat(float(B,M) X, float(B,M) X2, float(B,N) Y, float(B,N) Y2) -> (Z) {
      Z(j,b) = Y(b,j-M) + Y2(b,j-M) where j in M:M+N
      Z(j,b) = X(b,j) + X2(b,j) where j in 0:M
    }"""
    fn = tg.define(src).cat
    rng = np.random.default_rng(3)
    x, x2 = rng.random((9, 13), dtype=np.float32), rng.random((9, 13), dtype=np.float32)
    y, y2 = rng.random((9, 6), dtype=np.float32), rng.random((9, 6), dtype=np.float32)
    opts = tg.MappingOptions(block=(8, 4), fusion="min")
    k = fn.compile(x, x2, y, y2, target="opencl", options=opts)
    assert _written_tiles(k.source) == ["Z", ""], k.source
    np.testing.assert_array_equal(k(x, x2, y, y2), fn(x, x2, y, y2, target="reference"))


def test_written_tile_read_by_a_later_statement() -> None:
    """A temporary written and read in one fused kernel: every read follows the write of
    its element in the same tile, so its tile needs no copy-in."""
    src = """def f(float(N,M) A) -> (C, T) {
      T(m,n) = A(n,m) * 2 + A(n,m)
      C(m,n) = T(m,n) + A(n,m)
    }"""
    fn = tg.define(src).f
    a = np.random.default_rng(4).random((37, 29), dtype=np.float32)
    opts = tg.MappingOptions(block=(8, 4), fusion="max", use_private_memory=False)
    k = fn.compile(a, target="opencl", options=opts)
    # Without private promotion, T (written, then read by C) is reused; C is not.
    assert _written_tiles(k.source) == ["T"], k.source
    assert re.search(r": T\[\d+\]\[\d+\] \(reused; written: copied out, not copied in\)", k.source)
    for g, e in zip(k(a), fn(a, target="reference"), strict=True):
        np.testing.assert_array_equal(g, e)


def test_private_tile_written_back_to_a_written_tile() -> None:
    """Thread x runs over m (three reads follow it), so C(m, n) is not coalesced: each
    thread keeps its 4x4 outputs in registers, stores them to the shared tile, and the
    block copies the tile out along n. Sizes that the 16x16 tiles do not divide."""
    src = """def f(float(K,M) A, float(K,M) B, float(K,M) E, float(K,N) D) -> (C) {
      C(m,n) +=! A(k,m) * B(k,m) * E(k,m) * D(k,n)
    }"""
    fn = tg.define(src).f
    rng = np.random.default_rng(5)
    a, b, e = (rng.random((11, 37), dtype=np.float32) for _ in range(3))
    d = rng.random((11, 29), dtype=np.float32)
    opts = tg.MappingOptions(block=(4, 4), tile=(16, 16), grid=(1, 1))
    k = fn.compile(a, b, e, d, target="opencl", options=opts)
    assert "// private tile: 4x4 outputs of C per thread" in k.source, k.source
    assert re.search(WRITTEN + r"\)", k.source), k.source  # the init is another kernel
    assert "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);" in k.source
    assert_matches(k(a, b, e, d), fn(a, b, e, d, target="reference"), "private tile")


_C_BYTES = {"float": 4, "double": 8, "_Float16": 2}


def _shared_bytes(source: str, qualifier: str = "__local") -> list[int]:
    """Per kernel, the bytes of the shared arrays it declares (read from the text)."""
    out = []
    for k in re.split(r"__kernel void |__global__ void ", source)[1:]:
        total = 0
        for ctype, n in re.findall(rf"{qualifier} (\w+) tc_sh\w+\[(\d+)\];", k):
            bits = re.fullmatch(r"u?int(\d+)_t", ctype)
            total += int(n) * (int(bits.group(1)) // 8 if bits else _C_BYTES[ctype])
        out.append(total)
    return out


@pytest.mark.parametrize("budget", [1100, 600, 300])
def test_shared_budget_holds_per_kernel_of_several_sites(budget: int) -> None:
    """MLP3 fused is one kernel whose `shared` place isl prints once per layer: the tiles
    of all its copies together stay within max_shared_memory (declared bytes in the text,
    OpenCL and CUDA), some copy still promotes, and the results match the reference."""
    fn, args, options = _paper("MLP3")
    opts = replace(options, max_shared_memory=budget)
    k = fn.compile(*args, target="opencl", options=opts)
    assert k.source.count("const int tc_tid") >= 2, k.source  # several printed copies
    (used,) = _shared_bytes(k.source)
    assert 0 < used <= budget, k.source
    (full,) = _shared_bytes(fn.compile(*args, target="opencl", options=options).source)
    assert full > budget  # the budget binds
    cuda = fn.compile(*args, target="cuda", options=opts)
    assert all(0 < b <= budget for b in _shared_bytes(cuda.source, "__shared__")), cuda.source
    want = _as_tuple(fn(*args, target="reference"))
    for g, e in zip(_as_tuple(k(*args)), want, strict=True):
        assert_matches(g, e, f"MLP3 within {budget} bytes of shared memory")


@pytest.mark.parametrize("case", conf.SHAPE_CASES, ids=[c["name"] for c in conf.SHAPE_CASES])
def test_shared_budget_holds_per_kernel(case: dict[str, Any]) -> None:
    """Every conformance program under a budget smaller than most tiles: no kernel
    declares more shared bytes than allowed, and the results still match."""
    _skip_half(case["source"])
    fn = conf.define(case)[conf.entry_of(case)]
    args = conf.build_args(case)
    opts = tg.MappingOptions(block=(4, 4), max_shared_memory=96)
    k = fn.compile(*args, target="opencl", options=opts)
    assert all(b <= 96 for b in _shared_bytes(k.source)), k.source
    want = _as_tuple(fn(*args, target="reference"))
    for g, e in zip(_as_tuple(k(*args)), want, strict=True):
        assert_matches(g, e, case["name"])


# private_depth: the schedule depth from which a thread's output registers are held
# across the reduction loops (0: the accumulator over the innermost loop, a private tile
# over all of them).
TWO_REDUCTIONS = "def f(float(M,K,L) A, float(K,L,N) B) -> (C) { C(m,n) +=! A(m,k,l) * B(k,l,n) }"


def _two_reductions() -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(6)
    a = rng.random((37, 5, 3), dtype=np.float32)
    b = rng.random((5, 3, 29), dtype=np.float32)
    return tg.define(TWO_REDUCTIONS).f, a, b, np.einsum("mkl,kln->mn", a, b)


def _line(source: str, pattern: str) -> int:
    """The index of the first line of the kernel text matching a pattern."""
    lines = source.splitlines()
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


def test_private_depth_raises_the_accumulator_over_the_reduction_nest() -> None:
    """Blocks 8x4 over 37x29 (tails), reduction loops k then l below the thread loops:
    by default `acc` sits inside k's loop (around l's only); private_depth at or above
    k's depth holds it across both, deeper ones keep the default place."""
    fn, a, b, want = _two_reductions()
    base = tg.MappingOptions(block=(8, 4))
    default = fn.compile(a, b, target="opencl", options=base).source
    k_loop = r"for \(int (c\d+) = 0; \1 <= 4;"  # k runs 0..4, l 0..2
    assert _line(default, k_loop) < _line(default, r"float acc = ")
    depth_k = int(re.search(k_loop, default).group(1)[1:])  # type: ignore[union-attr]
    for d, across in [(1, True), (depth_k, True), (depth_k + 1, False), (depth_k + 9, False)]:
        opts = replace(base, private_depth=d)
        k = fn.compile(a, b, target="opencl", options=opts)
        assert (_line(k.source, r"float acc = ") < _line(k.source, k_loop)) == across, k.source
        assert ("in a register over 2 loops" in k.source) == across
        if not across:
            assert k.source == default
        np.testing.assert_allclose(k(a, b), want, rtol=1e-5)
    off = replace(base, private_depth=1, use_private_memory=False)
    assert "acc" not in fn.compile(a, b, target="opencl", options=off).source


def test_private_depth_moves_outer_reduction_loops_around_a_private_tile() -> None:
    """A 16x16 tile over 4x4 threads (4x4 outputs per thread, tails): by default the
    private array is held across both reduction loops; a private_depth below k's loop
    puts k's loop around the array's load and store, so it is held across l only."""
    fn, a, b, want = _two_reductions()
    base = tg.MappingOptions(tile=(16, 16), block=(4, 4))
    default = fn.compile(a, b, target="opencl", options=base).source
    k_loop = r"for \(int (c\d+) = 0; \1 <= 4;"
    assert _line(default, r"float tc_pv\[16\];") < _line(default, k_loop)
    depth_k = int(re.search(k_loop, default).group(1)[1:])  # type: ignore[union-attr]
    for d, across in [(1, True), (depth_k, True), (depth_k + 1, False), (depth_k + 9, False)]:
        k = fn.compile(a, b, target="opencl", options=replace(base, private_depth=d))
        assert (_line(k.source, r"float tc_pv\[16\];") < _line(k.source, k_loop)) == across
        assert ("held across 1 of 2 loops" in k.source) != across, k.source
        np.testing.assert_allclose(k(a, b), want, rtol=1e-5)


def test_private_depth_on_gconv_holds_the_output_across_three_loops() -> None:
    fn, args, options = _paper("gconv")
    k = fn.compile(*args, target="opencl", options=replace(options, private_depth=1))
    assert "in a register over 3 loops" in k.source, k.source
    cuda = fn.compile(*args, target="cuda", options=replace(options, private_depth=1))
    assert "in a register over 3 loops" in cuda.source
    want = _as_tuple(fn(*args, target="reference"))
    for g, e in zip(_as_tuple(k(*args)), want, strict=True):
        assert_matches(g, e, "gconv")
