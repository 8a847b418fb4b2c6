"""The register block and cache chunks of outer-product contractions, as data: they follow
from the vector unit (registers, lanes) and the cache sizes, and options override them."""

from __future__ import annotations

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler
from tc_graph.options import MappingOptions, VectorUnit
from tc_graph.poly.contraction import (
    L1_BYTES,
    L2_BYTES,
    Blocking,
    Contraction,
    apart_in_l1,
    blocking,
    lane_offsets,
    rows_in_order,
)
from tc_graph.runtime.machine import fewest_chains

AVX2 = VectorUnit(floats=8, registers=16)
AVX512 = VectorUnit(floats=16, registers=32)


@pytest.mark.parametrize(("unit", "tile"), [(AVX2, (2, 4)), (AVX512, (4, 4))])
def test_the_default_dot_tile_fits_the_register_file(
    unit: VectorUnit, tile: tuple[int, int]
) -> None:
    """A dot-product tile's sums (rows x columns) and the operand vectors each step loads
    (rows + columns) fit in the registers: AVX2's 16 took 2 x 4, where 4 x 4 spilled."""
    fn = tg.define("def f(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }").f
    bound = compiler.bind(fn, [np.zeros((4, 9), np.float32), np.zeros((5, 9), np.float32)])
    got = compiler.default_options(bound.program, "cpu", unit).dot_tile
    assert got == tile
    assert got[0] * got[1] + got[0] + got[1] <= unit.registers


@pytest.mark.parametrize(
    ("unit", "width", "rows", "vectors"),
    [(AVX2, 8, 6, 2), (AVX512, 16, 12, 2), (AVX2, 16, 6, 1), (AVX2, 4, 6, 2), (AVX2, 64, 1, 1)],
)
def test_the_block_fills_the_register_file(
    unit: VectorUnit, width: int, rows: int, vectors: int
) -> None:
    """rows x vectors accumulators, a register per column vector and one for the broadcast
    fit in the registers (a vector wider than a register takes several)."""
    b = blocking(MappingOptions(vector_width=width), unit, 10_000)
    assert (b.rows, b.vectors, b.width) == (rows, vectors, width)
    per = max(1, width // unit.floats)
    assert per * (rows * vectors + vectors + 1) <= unit.registers or rows == 1


@pytest.mark.parametrize(
    ("unit", "width", "rows", "vectors"),
    [
        (VectorUnit(16, 32, fma_chains=4), 16, 4, 2),  # Zen 4's one 512-bit FMA per cycle
        (VectorUnit(16, 32, fma_chains=4), 32, 8, 1),
        (VectorUnit(8, 16, fma_chains=4), 8, 4, 2),
        (VectorUnit(16, 32, fma_chains=8), 16, 12, 2),  # two FMA pipes: the register file
    ],
)
def test_a_core_busy_with_four_fma_chains_takes_a_block_of_twice_that(
    unit: VectorUnit, width: int, rows: int, vectors: int
) -> None:
    """Fewer rows of X read at once where twice the chains the FMA pipes need are enough."""
    b = blocking(MappingOptions(vector_width=width), unit, 10_000)
    assert (b.rows, b.vectors) == (rows, vectors)
    assert b.rows * b.vectors >= 2 * unit.fma_chains


@pytest.mark.parametrize(
    ("rates", "chains"),
    [
        ({4: 3.69, 8: 4.22, 12: 4.03, 16: 3.94}, 4),  # Zen 4, measured: one FMA per cycle
        ({4: 2.0, 8: 3.9, 12: 4.0, 16: 4.0}, 8),  # two pipes: 4 chains at half the best
        ({4: 1.0, 8: 2.0, 12: 2.9, 16: 3.0}, 12),
    ],
)
def test_the_chains_a_core_needs_are_the_fewest_near_the_best_rate(
    rates: dict[int, float], chains: int
) -> None:
    assert fewest_chains(rates) == chains


@pytest.mark.parametrize(
    ("columns", "vectors"), [(144, 1), (16, 1), (1024, 2), (26, 2), (48, 1), (64, 2), (None, 2)]
)
def test_one_vector_of_columns_where_it_pads_them_less(columns: int | None, vectors: int) -> None:
    """gconv's 12 x 12 outputs in 9 panels of 16, not 5 of 32 (the last one staged), on
    a core that needs 4 FMA chains. With 8, one vector only where two pad the columns 1.5
    times as much (16 columns); else two, with half the rows (196 columns in 13 panels
    of 16, not 25 of 8)."""
    zen4 = VectorUnit(floats=16, registers=32, fma_chains=4)
    b = blocking(MappingOptions(vector_width=16), zen4, 10_000, columns=columns)
    assert b.vectors == vectors
    two = blocking(MappingOptions(vector_width=16), AVX512, 10_000, columns=columns).vectors
    assert two == (1 if columns == 16 else 2)
    for width, columns in ((8, 196), (8, 49), (8, 8)):
        b = blocking(MappingOptions(vector_width=width), AVX2, 10_000, columns=columns)
        assert b.vectors == (1 if columns == 8 else 2)
    assert blocking(MappingOptions(vector_width=16, micro_tile=(4, 2)), AVX512, 99, 1, 144) == (
        blocking(MappingOptions(vector_width=16, micro_tile=(4, 2)), AVX512, 99)
    )


def test_the_panel_fills_half_of_l1_and_the_band_half_of_l2() -> None:
    b = blocking(MappingOptions(vector_width=8), AVX2, 10_000)
    assert b.panel == 16 and b.chunk * b.panel * 4 == L1_BYTES // 2
    assert b.band % b.rows == 0 and b.band * b.chunk * 4 <= L2_BYTES // 2
    assert (b.band + b.rows) * b.chunk * 4 > L2_BYTES // 2


def test_rows_4_kib_apart_crowd_one_l1_set() -> None:
    """Rows 4 KiB apart share one L1 set (64 sets of 64-byte lines) and 1 KiB apart, 4
    sets for 12 rows, each set holding 3 of their lines; 2304 bytes apart (36 lines) they
    take 16 sets, and 4128 bytes apart (64.5 lines) two rows a set."""
    assert not apart_in_l1(1024) and not apart_in_l1(256)
    assert apart_in_l1(576) and apart_in_l1(1032) and apart_in_l1(3 * 49)
    assert apart_in_l1(256, rows=8), "two rows a set"
    assert all(map(apart_in_l1, range(1, 8))), "rows sharing a line share no more"


def test_options_override_and_short_reductions_take_one_chunk() -> None:
    options = MappingOptions(vector_width=8, micro_tile=(4, 3), reduction_chunk=48)
    band = (L2_BYTES // 2) // (4 * 48) // 4 * 4  # rows of X, 48 floats each, in half of L2
    assert blocking(options, AVX2, 1000) == Blocking(4, 3, 8, 48, band)
    assert blocking(MappingOptions(vector_width=8), AVX2, 70).chunk == 70


def _conv_plan(
    window: int, pad: bool, read: str | None = None, where: str = ""
) -> tuple[Contraction, tuple[int, ...], int]:
    """The outer-product plan of a convolution (its input read directly, or through a
    copy padded by one column on each side), the shape of the tensor its panels come
    from, and the output's row length."""
    read = read or ("Xp(n, c, oh + kh, ow + kw)" if pad else "X(n, c, oh + kh, ow + kw)")
    pad_stmt = (
        "  Xp(n, c, h, w) = w >= 1 && w < W + 1 ? X(n, c, h, min(max(w - 1, 0), W - 1)) : 0.0"
        " where w in 0:W + 2\n"
        if pad
        else ""
    )
    source = (
        "def conv(float(N, C, H, W) X, float(F, C, KH, KW) Wt) -> (Y) {\n"
        f"{pad_stmt}  Y(n, f, oh, ow) +=! {read} * Wt(f, c, kh, kw){where}\n}}"
    )
    args = [np.zeros((1, 64, 9, 9), np.float32), np.zeros((40, 64, window, window), np.float32)]
    prepared = compiler.prepare(compiler.bind(tg.define(source).conv, args))
    scop = compiler.scop(prepared, "cpu", MappingOptions())
    (st,) = [s for s in scop.statements if s.kind == "contract"]
    assert st.contraction is not None and st.contraction.packed is not None
    return st.contraction, scop.shapes[st.contraction.packed.tensor], scop.shapes["Y"][-1]


@pytest.mark.parametrize(("window", "pad", "ordered"), [(1, False, True), (3, False, False),
                                                        (1, True, True), (3, True, False)])  # fmt: skip
def test_a_panel_is_a_copy_where_input_rows_are_as_long_as_output_rows(
    window: int, pad: bool, ordered: bool
) -> None:
    """Output rows flattened into panels (span oh); the input along them is contiguous only
    when its rows are as long as the output's (a 1x1 window), else gathered lane by lane."""
    plan, shape, width = _conv_plan(window, pad)
    assert plan.span == "oh" and plan.cols == "ow"
    assert rows_in_order(plan, shape, width) is ordered
    assert lane_offsets(plan), "oh + kh, ow + kw: a lane's offset plus a step's address"


def test_a_window_not_linear_in_the_indices_is_gathered_lane_by_lane() -> None:
    """kh * kw is not a sum of indices times constants: no offsets are taken."""
    plan, _, _ = _conv_plan(3, False, "X(n, c, oh + kh * kw, ow + kw)", " where oh in 0:5")
    assert plan.span == "oh" and not lane_offsets(plan)


@pytest.mark.parametrize(("shape", "rows"), [((200, 1, 256), "b"), ((4, 50, 256), "m"),
                                             ((1, 200, 256), "m"), ((1, 1, 256), None)])  # fmt: skip
def test_the_rows_of_a_matmul_are_its_last_index_the_weight_does_not_read_that_runs(
    shape: tuple[int, ...], rows: str | None
) -> None:
    """...more than once. A rows node's kernel sees a (batch, seq, hidden) input as (rows,
    1, hidden): its rows are the batch index, not m (one row: a 1 x 1024 product per row, no kernel of
    its own, at 0.4x onnxruntime in a BERT export with a dynamic batch)."""
    source = (
        "def mm(float(B, M, K) A, float(K, N) W) -> (Y) { Y(b, m, n) +=! A(b, m, k) * W(k, n) }"
    )
    args = [np.zeros(shape, np.float32), np.zeros((256, 64), np.float32)]
    prepared = compiler.prepare(compiler.bind(tg.define(source).mm, args))
    scop = compiler.scop(prepared, "cpu", MappingOptions())
    plans = [s.contraction for s in scop.statements if s.kind == "contract"]
    assert [p.rows for p in plans if p is not None and p.packed is not None] == (
        [rows] if rows else []
    )


@pytest.mark.parametrize(
    ("unit", "pinned"), [(VectorUnit(16, 32, fma_chains=4), True), (AVX2, False)]
)
def test_a_staged_block_pins_its_panel_vectors_where_registers_are_left(
    unit: VectorUnit, pinned: bool
) -> None:
    """tbmm's 26 columns fill no whole panel of 32: every block is staged. Zen 4's 4 x 32
    block holds 11 of 32 registers, and unpinned, gcc 12 folded the panel's loads into
    each FMA (8 vector loads a step instead of 2: tbmm 1.25x slower). AVX2's 6 x 16 holds
    15 of 16, and there the pins had put an accumulator on the stack."""
    fn = tg.define(
        "def f(float(B,N,K) X, float(B,M,K) Y) -> (Z) { Z(b,n,m) +=! X(b,n,k) * Y(b,m,k) }"
    ).f
    args = [np.zeros((5, 26, 72), np.float32), np.zeros((5, 26, 72), np.float32)]
    bound = compiler.bind(fn, args)
    options = compiler.default_options(bound.program, "cpu", unit)
    text = compiler.source(compiler.prepare(bound), "cpu", options, unit).text
    staged = text.partition("const int _nl =")[2]
    assert staged, "tbmm's last panel is staged"
    assert ('__asm__("" : "+v"(_v0))' in staged) == pinned
