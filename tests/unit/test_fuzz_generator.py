"""The program generator of the differential fuzzer (tests/fuzz_programs.py): programs
are reproducible from (seed, index), mostly valid, and cover the language features the
fuzzer is meant to exercise."""

from __future__ import annotations

import collections
import warnings

import numpy as np

import tc_graph as tg
from tests import fuzz_programs as fp
from tests.fuzz_oracle import run_reference

SLICE = range(200)


def test_a_program_is_determined_by_seed_and_index() -> None:
    for index in (0, 7, 123):
        a, b = fp.generate(5, index), fp.generate(5, index)
        assert a.source == b.source and a.options == b.options
        assert len(a.args) == len(b.args)
        for x, y in zip(a.args, b.args, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert fp.generate(5, 0).source != fp.generate(5, 1).source
    assert fp.generate(5, 0).source != fp.generate(6, 0).source


def test_most_programs_are_valid_and_run_on_the_reference() -> None:
    kinds: collections.Counter[str] = collections.Counter()
    for index in SLICE:
        case = fp.generate(0, index)
        kind, detail = run_reference(case.source, case.entry, case.args)
        assert kind != "exception", f"{fp.generate.__name__}(0, {index}):\n{detail}"
        kinds[kind] += 1
    assert kinds["invalid"] < 0.1 * len(SLICE), kinds
    assert kinds["ok"] > 0.8 * len(SLICE), kinds


def test_the_slice_covers_the_features() -> None:
    seen: set[str] = set()
    for index in SLICE:
        seen |= fp.generate(0, index).features
    wanted = {
        "stmt:map", "stmt:reduce", "stmt:accumulate", "stmt:reinit", "stmt:inplace",
        "stmt:call", "stmt:shape", "stmt:fill", "where_range", "let", "exists", "cast",
        "cast:float->int", "indirect", "nested2", "nested3", "self_nested", "index:in",
        "index:clamp", "index:hostile", "sub:clamp", "sub:const", "sub:reverse", "sub:wrap",
        "sub:computed_index", "typed_output", "scalar_param", "int_size_param", "size0",
        "size1", "special_floats", "int_extremes", "update:+=", "update:max=", "update:*=",
        "expr:select", "expr:intdiv", "expr:builtin",
        *(f"input:{t}" for t in fp.DTYPES),
    }  # fmt: skip
    assert wanted <= seen, sorted(wanted - seen)


def test_generated_sources_define_without_other_exceptions() -> None:
    """define raises TcError or nothing, also on the programs' helper defs alone."""
    for index in SLICE:
        case = fp.generate(1, index)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                tg.define(case.source)
            except tg.TcError:
                pass
