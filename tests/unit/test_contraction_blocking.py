"""The register block and cache chunks of outer-product contractions, as data: they follow
from the vector unit (registers, lanes) and the cache sizes, and options override them."""

from __future__ import annotations

import pytest

from tc_graph.options import MappingOptions, VectorUnit
from tc_graph.poly.contraction import L1_BYTES, L2_BYTES, Blocking, blocking

AVX2 = VectorUnit(floats=8, registers=16)
AVX512 = VectorUnit(floats=16, registers=32)


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


def test_the_panel_fills_half_of_l1_and_the_band_half_of_l2() -> None:
    b = blocking(MappingOptions(vector_width=8), AVX2, 10_000)
    assert b.panel == 16 and b.chunk * b.panel * 4 == L1_BYTES // 2
    assert b.band % b.rows == 0 and b.band * b.chunk * 4 <= L2_BYTES // 2
    assert (b.band + b.rows) * b.chunk * 4 > L2_BYTES // 2


def test_options_override_and_short_reductions_take_one_chunk() -> None:
    options = MappingOptions(vector_width=8, micro_tile=(4, 3), reduction_chunk=48)
    band = (L2_BYTES // 2) // (4 * 48) // 4 * 4  # rows of X, 48 floats each, in half of L2
    assert blocking(options, AVX2, 1000) == Blocking(4, 3, 8, 48, band)
    assert blocking(MappingOptions(vector_width=8), AVX2, 70).chunk == 70
