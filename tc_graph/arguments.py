"""Numbers the public API takes: Python's or NumPy's, never a bool.

One place for the test every entry point makes (sizes, counts, seconds), so that
`shapes={"batch": [np.int64(4)]}` and `budget_s=np.float32(10)` mean what they say
everywhere; each caller words its own TcError."""

from __future__ import annotations

import math
import numbers
import operator


def whole(value: object) -> int | None:
    """value as an int where it is an integer (int, NumPy's integers, a 0-d integer
    array), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def number(value: object) -> float | None:
    """value as a float where it is a finite real number (NumPy's too), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def seconds(value: object) -> float | None:
    """value as a float where it is a number of seconds >= 0 (infinity: no bound), else
    None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    x = float(value)
    return x if x >= 0 else None  # NaN too is refused
