"""Indirect subscripts nested in indirect subscripts (issue 12, item 2).

Every index value read from a tensor is checked before it is used, at every depth: a bad
inner index is an error quoting that index, never a read through it. The oracle is the
reference evaluator, which checks each read as it evaluates it. Bad values that crashed
the seeds' kernels run in a child process, so that a crash fails the test, not the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tc_graph as tg

ROOT = Path(__file__).resolve().parents[2]
TWICE = "def t(float(J) B, int32(I) C) -> (A) { A(i) = B(C(C(i))) }"
THRICE = "def t(float(J) B, int64(I) C) -> (A) { A(i) = B(C(C(C(i))) + 1) }"
ROWS = "def t(float(N, M) B, int32(K, M) C, int32(L) D) -> (A) { A(i, j) = B(C(D(i), j), j) }"


def _outcome(fn: tg.TcFunction, args: list[np.ndarray], target: str) -> str:
    """The result as a list, or the TcError's message."""
    try:
        out = fn(*args, target=target)
    except tg.TcError as e:
        return str(e)
    return json.dumps(np.asarray(out).tolist())


CHILD = """
import json, sys
import numpy as np
import tc_graph as tg
from tests.cpu.test_indirect import _outcome
src, target, cases = json.loads(sys.argv[1])
fn = tg.define(src).t
args = [[np.array(a, dtype=d) for a, d in case] for case in cases]
print(json.dumps([_outcome(fn, a, target) for a in args]))
"""


def _in_child(src: str, target: str, cases: list[list[np.ndarray]]) -> list[str]:
    """The outcomes of the calls in a fresh interpreter; a crash fails the test."""
    payload = [[(a.tolist(), str(a.dtype)) for a in case] for case in cases]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([src, target, payload])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    return list(json.loads(proc.stdout.splitlines()[-1]))


def _cases() -> list[tuple[str, list[list[np.ndarray]]]]:
    """Calls with at most one bad index value each, reached by one chain of reads only
    (so that the error is unique whatever order the checks run in), and one good call."""
    b = np.arange(4, dtype=np.float32)
    twice = [
        [b, np.array([bad, 1, 2, 3], np.int32)] for bad in (2**31 - 1, -(2**31), 100, 6, 4, -1, 3)
    ]
    thrice = [
        [np.arange(3, dtype=np.float32), np.array(c, np.int64)]
        for c in ([0, 0, 0, 9], [0, 0, 0, 2**40], [0, 0, 0, 3], [0, 1, 1, 0])
    ]
    rows = [
        [np.arange(6, dtype=np.float32).reshape(3, 2), np.array(c, np.int32), np.array(d, np.int32)]
        for c, d in (
            ([[0, 1], [2, 2]], [1, 0]),
            ([[0, 1], [2, 2]], [1, 2**31 - 1]),
            ([[0, 1], [2, 7]], [1, 0]),
        )
    ]
    return [(TWICE, twice), (THRICE, thrice), (ROWS, rows)]


@pytest.mark.parametrize(("src", "cases"), _cases(), ids=["twice", "thrice", "rows"])
def test_nested_indirect_subscripts_are_checked_at_every_depth(
    src: str, cases: list[list[np.ndarray]]
) -> None:
    fn = tg.define(src).t
    want = [_outcome(fn, args, "reference") for args in cases]
    assert any("out of bounds" in w for w in want) and not all("out of bounds" in w for w in want)
    assert _in_child(src, "cpu", cases) == want


BAGS = "def bags(float(E, D) T, int32(B, L) I) -> (O) { O(b, d) +=! T(I(b, k), d) }"


@pytest.mark.parametrize("bag", [1, 3, 8, 13])
@pytest.mark.parametrize("distance", [0, 8, 32])
def test_embedding_bags_prefetch_their_first_rows_before_the_loop(bag: int, distance: int) -> None:
    """Rows of 64 floats (vector tiles): the rows `distance` steps ahead are prefetched
    inside the loop, and the first ones before it, for bags shorter and longer than the
    distance; the sums are NumPy's."""
    rng = np.random.default_rng(bag)
    table = rng.standard_normal((97, 64)).astype(np.float32)
    index = rng.integers(0, 97, (5, bag)).astype(np.int32)
    kernel = tg.define(BAGS).bags.compile(
        table, index, options=tg.MappingOptions(prefetch_distance=distance)
    )
    np.testing.assert_allclose(kernel(table, index), table[index].sum(axis=1), rtol=1e-5, atol=1e-5)
    # A bag of one row has no reduction loop to fetch ahead of.
    assert ("for (int _p = 0; _p < 0 + " in kernel.source) == (distance > 0 and bag > 1)
