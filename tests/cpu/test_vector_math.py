"""The C prelude's own tc_expf and tc_erff (codegen/c.py), which replace libm's so that gcc
vectorizes loops that call them: exp against NumPy's float64 exp, at every magnitude
where a float result is normal, and at the edges (overflow to inf, underflow to 0
through the subnormals, infinities, NaN); erf against SciPy's float64 erf."""

from __future__ import annotations

import numpy as np

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
