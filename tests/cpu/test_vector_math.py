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


TANH = "def e(float32(N) X) -> (Y) { Y(i) = tanh(X(i)) }"


def test_tanh_is_within_two_ulp() -> None:
    """The prelude's tc_tanhf (a polynomial below 0.625, 1 - 2 / (e^2x + 1) above):
    against NumPy's float64 tanh, in units of the float spacing at the result, across
    both pieces, their seam and where tanh rounds to 1."""
    rng = np.random.default_rng(6)
    x = np.concatenate([
        np.linspace(-12, 12, 400_001, dtype=np.float32),
        rng.uniform(-1, 1, 100_000).astype(np.float32),
        np.float32([0.625, -0.625, 1e-30, -1e-30, 1e-6, 9.01, 44.0, 89.0]),
        np.nextafter(np.float32([0.625, -0.625]), np.float32(0)),
    ])  # fmt: skip
    got = tg.define(TANH).e(x)
    want = np.tanh(x.astype(np.float64))
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - want) / spacing) < 2


def test_tanh_at_the_edges() -> None:
    x = np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-40, 1e4])
    got = tg.define(TANH).e(x)
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2]) and got[7] == 1.0
    assert got[3] == 0.0 and not np.signbit(got[3]) and np.signbit(got[4])
    assert got[5] == np.float32(1e-40) and got[6] == np.float32(-1e-40)  # tanh(x) = x there


@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        ("def e(float(M) A, float(N) B) -> (Y) { Y(i,j) = exp(A(i)) where j in 0:N }",
         [(5,), (37,)]),
        ("def e(float(M,N) X) -> (Y) { Y(i,j) = exp(X(i,0)) where j in 0:N }", [(5, 37)]),
        ("def e(float(M,N) X) -> (Y) { Y(i,j) = exp(1.5) where i in 0:M, j in 0:N }", [(5, 37)]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("parametric", [False, True])
def test_an_exp_the_same_along_the_row_is_no_vector_store(
    source: str, shapes: list[tuple[int, ...]], parametric: bool
) -> None:
    """An exp that does not depend on the row's index is one value, not a vector: the
    row loop keeps gcc's own form (a float was stored through a vector pointer, a C
    compile error)."""
    fn = tg.define(source).e
    args = [np.linspace(-3, 3, int(np.prod(s)), dtype=np.float32).reshape(s) for s in shapes]
    got = fn.compile(*args, parametric=parametric)(*args)
    np.testing.assert_allclose(got, fn(*args, target="reference"), rtol=1e-6)


@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        ("def e(float(M,N) X) -> (S) { S(i) +=! exp(X(i,j)) }", [(4, 1000)]),
        ("def e(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * exp(B(k,n)) }",
         [(24, 37), (37, 83)]),
        ("def e(float(M,K) A, float(N,K) B) -> (C) { C(i,j) +=! exp(A(i,k) * B(j,k)) }",
         [(64, 300), (48, 300)]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("parametric", [False, True])
def test_exp_in_vector_reductions_tiles_and_contractions(
    source: str, shapes: list[tuple[int, ...]], parametric: bool
) -> None:
    """exp has a vector form wherever vectors are printed: a row sum of exp (a vector
    reduction), a register tile over exp(B), a dot-product contraction of exp(A B)."""
    fn = tg.define(source).e
    rng = np.random.default_rng(len(source))
    args = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    kernel = fn.compile(*args, parametric=parametric)
    assert "tc_vexpf(" in kernel.source[kernel.source.index("int tc_kernel_in(") :]
    np.testing.assert_allclose(kernel(*args), fn(*args, target="reference"), rtol=1e-5, atol=1e-5)
