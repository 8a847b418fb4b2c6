"""One check per oracle, shared by the target test files: a NumPy-checked case of
tests/unit/test_reference.py, or a conformance program against the reference evaluator,
run on a target under given mapping options."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import tc_graph as tg
from tests.tolerances import assert_matches
from tests.unit import test_conformance as conf
from tests.unit import test_reference as ref


def as_tuple(x: Any) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)


def check_numpy_call(c: ref.Case, target: str) -> None:
    """The case called as a user would (default options, its inputs left unmodified)
    matches its hand-written NumPy."""
    args = c.args()
    expected = c.oracle(*args)
    call_args, out = ref._split(c, args, len(expected))
    got = as_tuple(ref.call_case(c, call_args, out, target=target))
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert_matches(g, e, f"{c.name} output {k}")


def check_numpy_case(c: ref.Case, target: str, options: tg.MappingOptions) -> None:
    """The case's outputs under `options` match its hand-written NumPy (`out=` cases
    accumulate into copies of their outputs)."""
    args = c.args()
    expected = c.oracle(*args)
    call_args, out = ref._split(c, args, len(expected))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(c.source)[c.entry]
    got = as_tuple(fn(*ref._copy_args(call_args), target=target, options=options, out=out))
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert_matches(g, e, f"{c.name} output {k} under {options}")


def check_reference_case(
    case: dict[str, Any], target: str, options: tg.MappingOptions | None = None
) -> None:
    """The conformance program's outputs on `target` match the reference evaluator's."""
    fn = conf.define(case)[conf.entry_of(case)]
    args = conf.build_args(case)
    want = as_tuple(fn(*args, target="reference"))
    got = as_tuple(fn(*args, target=target, options=options))
    for k, (g, e) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, e, f"{case['name']} output {k}")
