"""The translator registry against its source of truth, operators/operators.toml (read
here on its own): every op in the table has exactly one translator, no translator serves
an op the table lacks, and an op without one is refused with the reason."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from tc_graph.errors import TcError
from tc_graph.graph import translate as tr
from tc_graph.graph.translate.context import Call, Context
from tc_graph.graph.translate.registry import TRANSLATORS, translator

TABLE = Path(__file__).resolve().parents[2] / "operators" / "operators.toml"
F32 = np.dtype(np.float32)
TYPES = {"x": (F32, (2, 3)), "y": (F32, (2, 3))}


def test_registry_covers_exactly_the_table() -> None:
    ops = set(tomllib.loads(TABLE.read_text(encoding="utf-8")))
    assert len(ops) > 60
    assert set(TRANSLATORS) == ops
    assert tr.TRANSLATABLE == ops


def test_every_translator_lives_in_a_family_module() -> None:
    modules = {fn.__module__ for fn in TRANSLATORS.values()}
    assert all(m.startswith("tc_graph.graph.translate.") for m in modules), modules
    assert "tc_graph.graph.translate.driver" not in modules


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        (helper.make_node("Hardmax", ["x"], ["y"]), "no TC translation for op type Hardmax"),
        (
            helper.make_node("Relu", ["x"], ["y"], domain="com.example"),
            "op com.example::Relu is not a standard ONNX op",
        ),
    ],
)
def test_an_op_without_a_translator_is_refused_with_its_reason(
    node: onnx.NodeProto, reason: str
) -> None:
    assert tr.translatable(node, TYPES, {}, opset=17) == reason
    with pytest.raises(tr.Untranslatable, match=re.escape(reason)):
        tr.translate([node], types=TYPES, constants={}, outputs=["y"], opset=17)


def test_a_known_op_translates() -> None:
    assert tr.translatable(helper.make_node("Relu", ["x"], ["y"]), TYPES, {}, opset=17) is None


def _never_called(node: onnx.NodeProto, ctx: Context) -> Call:
    raise AssertionError("a refused registration's function is never called")


def test_registration_is_checked_and_leaves_the_registry_unchanged() -> None:
    before = dict(TRANSLATORS)
    with pytest.raises(TcError, match="two translators"):
        translator("Relu")(_never_called)
    with pytest.raises(TcError, match=r"no entry in operators/operators\.toml"):
        translator("Hardmax")(_never_called)
    assert dict(TRANSLATORS) == before
