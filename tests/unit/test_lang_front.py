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


CALL_AFTER_NAME = """
def g(float(N) A) -> (X, Y) { X(i) = A(i) + 1
  Y(i) = A(i) * 3 }
def f(float(N) A) -> (B, X, Z) {
  B(i) = A(i) where i in 0:{hi}
  (X, Z) = g(A)
}
"""


@pytest.mark.parametrize("hi", ["N", "(N)"])
def test_call_statement_after_a_statement_ending_in_a_name(hi: str) -> None:
    """Item 10: `(X, Z) = g(A)` after `... 0:N` begins a new statement; it was read as the
    access `N(X, Z)`. Both the bare and the parenthesized bound parse the same."""
    fn = tg.define(CALL_AFTER_NAME.replace("{hi}", hi)).f
    a = np.arange(4, dtype=np.float32)
    b, x, z = fn(a, target="reference")
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(x, a + 1)
    np.testing.assert_array_equal(z, a * 3)


@pytest.mark.parametrize("sep", [" ", "\n  "])
def test_call_statement_after_a_right_side_ending_in_a_name(sep: str) -> None:
    """On the same line or the next: no expression goes on with `(names) =`."""
    src = f"""
def g(float(N) A) -> (X, Y) {{ X(i) = A(i) + 1
  Y(i) = A(i) * 3 }}
def f(float(N) A, float s) -> (B, X, Z) {{ B(i) = A(i) * s{sep}(X, Z) = g(A) }}
"""
    a = np.arange(4, dtype=np.float32)
    b, x, z = tg.define(src).f(a, np.float32(2), target="reference")
    np.testing.assert_array_equal(b, a * 2)
    np.testing.assert_array_equal(x, a + 1)
    np.testing.assert_array_equal(z, a * 3)


def test_application_across_a_line_break_still_parses() -> None:
    """Only `(names) =` starts a statement: an access may still wrap before its `(`."""
    src = "def f(float(N) A) -> (B) { B(i) = A\n  (i) + exp\n  (A(i)) }"
    a = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(tg.define(src).f(a, target="reference"), a + np.exp(a), rtol=1e-6)
