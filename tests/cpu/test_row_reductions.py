"""Row-wise reductions and the temporaries fusion makes local (poly/local.py), against the
reference evaluator and NumPy: vector maxima and minima that ignore NaN as the scalar
form does, tails of every length, Softmax whose exp row lives in a local array, and
temporaries whose box per loop iteration is offset, tiled, zero-filled or spans rows."""

from __future__ import annotations

import numpy as np
import pytest

import tc_graph as tg
from tests.tolerances import assert_matches

EXTREMA = """
def extrema(float(M,K) X) -> (mx, mn) {
  mx(i) max=! X(i,k)
  mn(i) min=! X(i,k)
}
"""

SOFTMAX = """
def softmax(float(B,H,S,T) X) -> (Y) {
  mx(b,h,s) max=! X(b,h,s,k)
  E(b,h,s,t) = exp(X(b,h,s,t) - mx(b,h,s))
  ss(b,h,s) +=! E(b,h,s,k)
  Y(b,h,s,t) = E(b,h,s,t) / ss(b,h,s)
}
"""


def _check(source: str, args: list[np.ndarray], options: tg.MappingOptions | None = None) -> None:
    module = tg.define(source)
    fn = module[module.names[0]]
    want = fn(*args, target="reference")
    got = fn(*args, options=options)
    for k, (g, w) in enumerate(zip(_tuple(got), _tuple(want), strict=True)):
        assert_matches(g, w, f"output {k}")


def _tuple(x: object) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)  # type: ignore[return-value]


@pytest.mark.parametrize("k", [1, 7, 8, 31, 32, 37, 128, 133])
def test_row_extrema_ignore_nan_at_every_tail(k: int) -> None:
    rng = np.random.default_rng(k)
    x = rng.standard_normal((6, k)).astype(np.float32)
    x[1, k // 2] = np.nan
    x[2, :] = np.nan  # no number at all: the identities
    x[3, k - 1] = np.inf
    x[4, 0] = -np.inf
    x[5, :] = -0.0
    _check(EXTREMA, [x])


@pytest.mark.parametrize("shape", [(2, 3, 5, 37), (1, 1, 1, 130), (2, 1, 4, 8), (1, 2, 3, 1)])
def test_softmax_with_its_rows_in_local_arrays_is_numpys(shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 4
    e = np.exp(x - x.max(-1, keepdims=True))
    got = tg.define(SOFTMAX).softmax(x)
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "source",
    [
        # A row per iteration of a tiled parallel loop: the box is offset by the tile.
        "def f(float(N,M) A) -> (O) { T(i,j) = A(i,j) * 2.0\n O(i,j) = T(i,j) + A(i,0) }",
        # A temporary `+=` without `!`: zero-filled wherever it lives.
        "def f(float(N,M) A) -> (O) { S(i) += A(i,j)\n O(i,j) = A(i,j) - S(i) }",
        # Read a row up and down: elements cross iterations, so not local to one.
        "def f(float(N,M) A) -> (O) { T(i,j) = A(i,j) + 1.0\n"
        " O(i,j) = T(i,j) + T(min(i+1, N-1), j) + T(max(i-1, 0), j) }",
        # Two temporaries, one inside the other's row.
        "def f(float(N,M) A) -> (O) { T(i,j) = A(i,j) * A(i,j)\n U(i) +=! T(i,j)\n"
        " O(i,j) = T(i,j) / (U(i) + 1.0) }",
    ],
)
@pytest.mark.parametrize(
    "options", [None, tg.MappingOptions(tile=(4,)), tg.MappingOptions(tile=(3, 5))]
)
def test_temporaries_local_or_not_compute_what_the_reference_does(
    source: str, options: tg.MappingOptions | None
) -> None:
    a = np.random.default_rng(2).standard_normal((11, 19)).astype(np.float32)
    _check(source, [a], options)


def test_a_temporary_isl_prints_in_pieces_moves_out_to_an_enclosing_loop() -> None:
    """Fuzzing (seed 2077, program 587, shrunk): along the second loop one statement has a
    single value and the other a range, so isl prints them apart and the local array's
    mark twice within one iteration of i0, each copy with part of the row. The array moves
    out to i0's body instead (it was an internal error)."""
    source = """
def main(float32(L, N) A, int32(N, N) B, uint32(L) I2, int32(L) I3) -> (T4) {
  T1(i0, i1, i2) = (A(i0, i1) + B(i2, max(min(I2(max(min(I3(i1), L - 1), 0)), N - 1), 0)))
  T1(i0, i1, i2) = T1(i0, i1, i2) where i0 in 0:L, i1 in 0:L, i2 in 0:N
  T4(i0, i1, i2) = (B(i0, i1) + i2) where i2 in 0:N
}
"""
    rng = np.random.default_rng(587)
    args = [
        rng.standard_normal((6, 1)).astype(np.float32),
        np.array([[16]], dtype=np.int32),
        np.array([17, 27, 30, 28, 14, 2], dtype=np.uint32),
        np.array([30, -26, -1, 6, -1, -14], dtype=np.int32),
    ]
    _check(source, args)
