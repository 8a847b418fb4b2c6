"""The float tolerances of every comparison in the suite, per dtype, in one place."""

from __future__ import annotations

from typing import Any

import numpy as np

TOLERANCES: dict[np.dtype, dict[str, float]] = {
    np.dtype(np.float16): {"rtol": 1e-2, "atol": 1e-3},
    np.dtype(np.float32): {"rtol": 1e-4, "atol": 1e-5},
    np.dtype(np.float64): {"rtol": 1e-10, "atol": 1e-12},
}


def assert_matches(got: Any, expected: np.ndarray, what: str) -> None:
    """Same dtype and shape; integers and bools exactly, floats within TOLERANCES."""
    assert isinstance(got, np.ndarray), f"{what}: expected an ndarray, got {type(got).__name__}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, expected {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    tol = TOLERANCES.get(expected.dtype)
    if tol is None:
        np.testing.assert_array_equal(got, expected, err_msg=what)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64), expected.astype(np.float64), err_msg=what, **tol
        )
