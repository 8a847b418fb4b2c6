"""tc_graph's one output comparison (tc_graph.compare), used by the autotuner, optimize's
race and `tc-graph demo`, against values built here with NumPy."""

from __future__ import annotations

import numpy as np

from tc_graph.compare import mismatch


def test_reassociated_sums_match_and_wrong_values_do_not() -> None:
    rng = np.random.default_rng(0)
    want = rng.standard_normal((8, 8)).astype(np.float32) * 100
    assert mismatch(((want * (1 + 1e-6)).astype(np.float32),), (want,)) is None
    wrong = want.copy()
    wrong[3, 4] += 5
    assert "differs" in mismatch((wrong,), (want,))
    assert "int32" in mismatch((want.astype(np.int32),), (want,))
    ints = np.arange(6)
    assert mismatch((ints,), (ints,)) is None
    assert mismatch((ints + (ints == 5),), (ints,)) == "output 0 differs"
    assert mismatch((ints, ints), (ints,)) == "2 outputs, expected 1"


def test_an_output_near_zero_among_large_terms_matches_in_its_last_bits() -> None:
    """A convolution over 2,304 terms of magnitude ~100 in another order: outputs near 0
    differ by ~1e-3, which onnxruntime's own reorderings also give (alexnet's groups were
    refused as "outputs differ" with an absolute tolerance of 1e-4)."""
    rng = np.random.default_rng(1)
    terms = rng.standard_normal((64, 2304)) * 100
    terms[:, -1] -= terms.sum(axis=1)  # every output is 0, up to rounding
    want = terms.astype(np.float32).sum(axis=1, dtype=np.float32)
    got = terms.astype(np.float32)[:, ::-1].sum(axis=1, dtype=np.float32)
    big = rng.standard_normal(64).astype(np.float32) * 1e4  # the output's other values
    want, got = np.concatenate([want, big]), np.concatenate([got, big])
    assert not np.allclose(got, want, rtol=1e-3, atol=1e-4), "the test's sums agree exactly"
    assert mismatch((got,), (want,)) is None
    got[3] += 50.0
    assert mismatch((got,), (want,)) == "output 0 differs by up to 50"
