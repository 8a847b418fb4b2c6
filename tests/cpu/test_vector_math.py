"""The C prelude's own tc_expf and tc_erff (codegen/prelude.py), which replace libm's so
that gcc vectorizes loops that call them: exp against NumPy's float64 exp, at every
magnitude where a float result is normal, and at the edges (overflow to inf, underflow to
0 through the subnormals, infinities, NaN); its vector form tc_vexpf bit for bit against
it; erf against SciPy's float64 erf."""

from __future__ import annotations

import numpy as np
import pytest

import tc_graph as tg

EXP = "def e(float32(N) X) -> (Y) { Y(i) = exp(X(i)) }"
ULP = float(np.finfo(np.float32).eps)


def test_exp_is_within_two_ulp_where_the_result_is_normal() -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate([
        np.linspace(-87.3, 88.7, 200_001, dtype=np.float32),
        rng.uniform(-1, 1, 50_000).astype(np.float32),
        np.float32([0.0, -0.0, 1e-30, -1e-30, 0.34657359, -0.34657359, 88.72, -87.33]),
    ])  # fmt: skip
    got = tg.define(EXP).e(x).astype(np.float64)
    want = np.exp(x.astype(np.float64))
    assert np.max(np.abs(got - want) / want) < 2 * ULP


def test_exp_at_the_edges() -> None:
    x = np.float32([np.inf, -np.inf, np.nan, 89.0, 1e4, -1e4, -103.0, -120.0, -90.0])
    got = tg.define(EXP).e(x)
    assert got[0] == np.inf and got[1] == 0.0 and np.isnan(got[2])
    assert got[3] == np.inf and got[4] == np.inf  # e^89 overflows float
    assert got[5] == 0.0 and got[7] == 0.0
    # Subnormal results: as close as the subnormal spacing allows.
    with np.errstate(under="ignore"):
        want = np.exp(np.float64([-103.0, -90.0]))
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    np.testing.assert_allclose(got[[6, 8]].astype(np.float64), want, rtol=1e-5, atol=tiny)


EXP_ROWS = "def e(float32(M, N) X) -> (Y) { Y(i, j) = exp(X(i, j)) }"


def test_exp_in_vectors_has_the_bits_of_exp_one_at_a_time() -> None:
    """A row's loop is written in vectors of tc_vexpf (forms.VectorLoop; on AVX-512 its
    2^n is one vscalefps); a flat loop calls tc_expf: the same bits for normal,
    subnormal, overflowing and special inputs and random bit patterns (NaN for NaN)."""
    rng = np.random.default_rng(8)
    bits = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([
        np.linspace(-110, 95, 400_000, dtype=np.float32),
        bits.view(np.float32),
        np.float32([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 89.0, -104.0, 88.72284,
                    -87.33655, -103.97, 1e-45, -1e-45]),
    ])  # fmt: skip
    x = np.concatenate([x, np.zeros(-len(x) % 64, np.float32)])
    rows = tg.define(EXP_ROWS).e.compile(x.reshape(2, -1))
    assert "= tc_vexpf(" in rows.source
    got, want = rows(x.reshape(2, -1)).ravel(), tg.define(EXP).e(x)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


ERF = "def e(float32(N) X) -> (Y) { Y(i) = erf(X(i)) }"


def test_erf_is_within_three_ulp_of_scipys() -> None:
    """The prelude's tc_erff, x P(x^2) / Q(x^2) up to 3.92 and +-1 beyond: relative error
    near 0, absolute error against the spacing of floats near 1."""
    from scipy.special import erf

    x = np.concatenate([
        np.linspace(-5, 5, 200_001, dtype=np.float32),
        np.float32([1e-30, -1e-30, 1e-6, 0.5, -0.5, 3.92, -3.92, 3.9199998, 30.0]),
        np.nextafter(np.float32([0.5, -0.5, 3.92]), np.float32(0)),
    ])  # fmt: skip
    got = tg.define(ERF).e(x).astype(np.float64)
    want = erf(x.astype(np.float64))
    assert np.max(np.abs(got - want)) < 3 * ULP
    small = (np.abs(x) <= 0.5) & (x != 0)
    assert np.max(np.abs(got - want)[small] / np.abs(want[small])) < 3 * ULP


def test_erf_at_the_edges() -> None:
    x = np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0])
    got = tg.define(ERF).e(x)
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2])
    assert got[3] == 0.0 and not np.signbit(got[3]) and np.signbit(got[4])


@pytest.mark.parametrize("width", [4, 8, 32])
def test_exp_in_vectors_of_other_widths(width: int) -> None:
    """Vectors other than AVX-512's 16 floats take tc_vexpf's lane-by-lane form: the same
    bits too, rows of 37 leaving a tail after the whole vectors."""
    x = np.linspace(-105, 90, 2 * 37 * 100, dtype=np.float32).reshape(200, 37)
    options = tg.MappingOptions(vector_width=width)
    rows = tg.define(EXP_ROWS).e.compile(x, options=options)
    assert "= tc_vexpf(" in rows.source
    want = tg.define(EXP).e(x.ravel()).reshape(x.shape)
    assert np.array_equal(rows(x).view(np.uint32), want.view(np.uint32))
