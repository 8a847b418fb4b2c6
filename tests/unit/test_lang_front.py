"""Front-end findings of issue 12 (items 9 and 10): typing and parsing, checked against the
reference evaluator and NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tc_graph as tg

LITERAL_ARG = """
def f(float(N) A) -> (O) { F(i) = 1e-3 where exists A(i)
  O = g(F) }
def g(float(N) X) -> (Y) { Y(i) = X(i) * 2 }
"""


def test_literal_only_tensor_passed_to_a_call_is_float32() -> None:
    """Item 9: `F(i) = 1e-3` makes F float32 (the first literal's type) also when the
    next use of F is a call's argument."""
    fn = tg.define(LITERAL_ARG).f
    a = np.ones(3, np.float32)
    out = fn(a, target="reference")
    np.testing.assert_array_equal(out, np.full(3, np.float32(2e-3)))
    assert out.dtype == np.float32


def test_literal_only_tensor_keeps_its_literal_type_at_a_call() -> None:
    """An int32 literal-only tensor is int32 at the call, so a float parameter rejects it."""
    src = LITERAL_ARG.replace("1e-3", "1")
    with pytest.raises(tg.TcError, match="'g' expects float32 for 'X', but 'F' has dtype int32"):
        tg.define(src)
