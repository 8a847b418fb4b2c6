"""Index checks run over the whole domain of the statement that reads the index values,
no more and no less (issue 12, items 11 and 12), as SEMANTICS.md's "Checks on concrete
values" says. The oracle is the reference evaluator, which evaluates every statement
over its whole domain and reads nothing over an empty one.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

import tc_graph as tg

POINT_READ = """
def main(float(N) C, int32(N) I) -> (O) {{
  T(i) = {gather}
  O(i) = C(i) * T(N - 1)
}}
"""


def _outcome(fn: tg.TcFunction, args: tuple[np.ndarray, ...], target: str) -> str:
    """The result as a list, or the TcError's first line."""
    try:
        out = fn(*args, target=target)
    except tg.TcError as e:
        return str(e).splitlines()[0]
    return json.dumps(np.asarray(out).tolist())


@pytest.mark.parametrize("gather", ["C(I(i))", "float64(C(I(i)))", "C(I(i)) * 2"])
def test_temporary_read_at_one_point_checks_every_index(gather: str) -> None:
    """Item 11: T is read only at N - 1, but its statement runs over 0:N, so I(0) = 3 is
    out of range for C. The gather was inlined into O and checked at N - 1 only."""
    fn = tg.define(POINT_READ.format(gather=gather)).main
    args = (np.ones(3, np.float32), np.array([3, 1, 0], np.int32))
    want = _outcome(fn, args, "reference")
    assert "index out of bounds" in want
    assert _outcome(fn, args, "cpu") == want


def test_gather_read_everywhere_still_matches() -> None:
    """Good index values: the same result as the reference through the inlined gather."""
    src = POINT_READ.format(gather="C(I(i))").replace("T(N - 1)", "T(i)")
    fn = tg.define(src).main
    args = (np.arange(3, dtype=np.float32), np.array([2, 1, 0], np.int32))
    np.testing.assert_array_equal(fn(*args, target="cpu"), fn(*args, target="reference"))


EMPTY_OTHER_RANGE = """
def f(float(M) B, int32(M) I, float(N) H) -> (O) {{
  T(i) = I(i) + 1
  O(i) max=! B(i) < H({index}) ? 1.0 : 0.0 where r in 0:N
}}
"""


@pytest.mark.filterwarnings("ignore::tc_graph.TcWarning")
@pytest.mark.parametrize("index", ["T(i)", "I(i)"])
def test_no_check_when_another_range_is_empty(index: str) -> None:
    """Item 12: with N = 0 the reduction over r runs nowhere, so no H(...) is read and
    nothing is checked, though i ranges over 0:M (the reference gives the identity)."""
    fn = tg.define(EMPTY_OTHER_RANGE.format(index=index)).f
    args = (np.ones(2, np.float32), np.zeros(2, np.int32), np.zeros(0, np.float32))
    want = fn(*args, target="reference")
    np.testing.assert_array_equal(want, np.full(2, -np.inf, np.float32))
    np.testing.assert_array_equal(fn(*args, target="cpu"), want)


INDIRECT_READ_OF_A_COPY = """
def main(float(N) A, int32(N) I) -> (O) {
  T(i, j) = A(i) where j in 0:N
  O(i) = T(i, I(i))
}
"""


@pytest.mark.parametrize("bad", [3, -1, 2**31 - 1])
def test_an_indirect_read_of_a_copy_is_checked(bad: int) -> None:
    """A copy read through an index (the fuzzer, seed 2026 #1320): inlined, T(i, I(i))
    became A(i), and the subscript I(i) of T, with its check, was gone."""
    fn = tg.define(INDIRECT_READ_OF_A_COPY).main
    args = (np.arange(3, dtype=np.float32), np.array([0, bad, 1], np.int32))
    want = _outcome(fn, args, "reference")
    assert "index out of bounds" in want
    assert _outcome(fn, args, "cpu") == want
    good = (args[0], np.array([0, 2, 1], np.int32))
    assert _outcome(fn, good, "cpu") == _outcome(fn, good, "reference")


@pytest.mark.parametrize(
    "sub", ["i * i", "i % -3", "i * i * 100000000", "abs(i - 7)", "(i * i) / 2", "N * i"]
)
@pytest.mark.parametrize("parametric", [False, True])
def test_a_non_affine_subscript_is_checked_on_its_values(sub: str, parametric: bool) -> None:
    """Found by fuzzing: a subscript that is not quasi-affine but reads no tensor (i * i,
    i % -3) was neither proven in bounds nor checked, and the kernel read outside A (a
    segfault at i * i * 10^8). It is checked as an indirect one is, and its error is the
    reference's."""
    fn = tg.define(f"def f(float(N) A) -> (B) {{\n  B(i) = A(i) + A({sub})\n}}").f
    a = np.arange(5, dtype=np.float32)
    want = _outcome(fn, (a,), "reference")
    assert "index out of bounds" in want
    run = fn.compile(a, parametric=True) if parametric else functools.partial(fn, target="cpu")
    with pytest.raises(tg.TcError, match=r"index out of bounds: A\(.*\) reads 'A' at"):
        run(a)
    ok = np.arange(1, dtype=np.float32)  # i = 0 only: A(0) but for abs(i - 7)
    assert _outcome(fn, (ok,), "cpu") == _outcome(fn, (ok,), "reference")
