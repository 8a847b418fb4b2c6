"""MappingOptions validation (issue 12, item 4): every option is bounded and typed, and
whatever reaches from_json (a model's `options` attribute, the tuning database) fails as
a TcError naming the option, never as another exception or at run time."""

from __future__ import annotations

import json
import random
from dataclasses import fields
from typing import Any

import pytest

from tc_graph import TcError
from tc_graph.options import MappingOptions
from tc_graph.tune.space import search_space

# (options, the option the error must name, the allowed range it must state)
OUT_OF_BOUNDS: list[tuple[dict[str, Any], str, str]] = [
    ({"threads": 100000}, "threads", "from 0 to 1024"),
    ({"threads": -1}, "threads", "from 0 to 1024"),
    ({"unroll": 10**9}, "unroll", "from 1 to 256"),
    ({"unroll": 0}, "unroll", "from 1 to 256"),
    ({"register_tile": 1000}, "register_tile", "from 0 to 16"),
    ({"prefetch_distance": 10**12}, "prefetch_distance", "from 0 to 1024"),
    ({"reduction_chunk": 2**40}, "reduction_chunk", "from 0 to 2147483647"),
    ({"shared_depth": 10**6}, "shared_depth", "from 0 to 32"),
    ({"private_depth": 10**6}, "private_depth", "from 0 to 32"),
    ({"max_shared_memory": 2**40}, "max_shared_memory", "from 0 to 16777216"),
    ({"parallel_depth": 2}, "parallel_depth", "from 0 to 1"),
    ({"tile": (2**31,)}, "tile", "from 1 to 2147483647"),
    ({"tile": (8, 0)}, "tile", "from 1 to 2147483647"),
    ({"tile": (1,) * 33}, "tile", "at most 32"),
    ({"grid": (10**6,)}, "grid", "from 1 to 65535"),
    ({"block": (4, 4, 4, 4)}, "block", "at most 3"),
    ({"block": (2048,)}, "block", "from 1 to 1024"),
    ({"dot_tile": (64, 1)}, "dot_tile", "from 1 to 32"),
]


@pytest.mark.parametrize(("kw", "name", "bounds"), OUT_OF_BOUNDS, ids=lambda x: str(x)[:30])
def test_an_option_out_of_bounds_is_an_error_naming_it(
    kw: dict[str, Any], name: str, bounds: str
) -> None:
    with pytest.raises(TcError, match=name) as info:
        MappingOptions(**kw)
    assert bounds in str(info.value)
    with pytest.raises(TcError, match=name):
        MappingOptions.from_json(json.dumps(kw))


WRONG_TYPES: list[dict[str, Any]] = [
    {"unroll": "4"},
    {"unroll": 4.0},
    {"threads": True},
    {"tile": 8},
    {"tile": [8, "8"]},
    {"block": 7},
    {"grid": {"x": 1}},
    {"dot_tile": None},
    {"allow_skewing": "yes"},
    {"use_shared_memory": 1},
    {"fusion": ["max"]},
    {"fusion": None},
]


@pytest.mark.parametrize("kw", WRONG_TYPES, ids=lambda x: str(x)[:30])
def test_an_option_of_the_wrong_type_is_an_error_naming_it(kw: dict[str, Any]) -> None:
    (name,) = kw
    with pytest.raises(TcError, match=name):
        MappingOptions.from_json(json.dumps(kw))


@pytest.mark.parametrize(
    "text",
    ["{", "", "null", "[1, 2]", '"tile"', "3", "[" * 100_000, '{"tile": [8], "speed": 1}'],
    ids=["torn", "empty", "null", "list", "string", "number", "deep", "unknown"],
)
def test_malformed_json_is_a_tc_error(text: str) -> None:
    with pytest.raises(TcError):
        MappingOptions.from_json(text)


def test_lists_are_accepted_as_tuples_and_round_trip() -> None:
    made = MappingOptions(tile=[8, 4], block=[16, 4], grid=[2], dot_tile=[2, 8])  # type: ignore[arg-type]
    assert made == MappingOptions(tile=(8, 4), block=(16, 4), grid=(2,), dot_tile=(2, 8))
    hash(made)
    presets = [MappingOptions(), made, MappingOptions.naive(), MappingOptions.convolution()]
    for o in presets:
        assert MappingOptions.from_json(o.to_json()) == o


@pytest.mark.parametrize("target", ["cpu", "opencl"])
def test_the_bounds_admit_the_whole_autotuning_space(target: str) -> None:
    """The autotuner's own choices (the oracle of what is useful) all validate, for the
    largest sizes tc_graph supports."""
    seeds = [MappingOptions(tile=(8,)), MappingOptions.convolution()]
    space = search_space([2**31 - 1, 4096, 3], 5, seeds, target=target)
    for name, choices in space.genes:
        for value in choices:
            space.decode(tuple(value if n == name else c[0] for n, c in space.genes))
    rng = random.Random(0)
    for _ in range(200):
        options = space.decode(tuple(rng.choice(c) for _, c in space.genes))
        assert MappingOptions.from_json(options.to_json()) == options


def test_every_field_is_validated() -> None:
    """A new option must get a bound: each field rejects a value of a foreign type."""
    for f in fields(MappingOptions):
        with pytest.raises(TcError, match=f.name):
            MappingOptions(**{f.name: object()})
