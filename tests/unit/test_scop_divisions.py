"""The scop computes a division unsigned only where its value cannot be negative."""

from __future__ import annotations

import numpy as np

import tc_graph as tg
from tc_graph import compiler, ir
from tc_graph.poly.scop import build_scop


def _divisions(source: str, *args: np.ndarray) -> list[str]:
    fn = tg.define(source).f
    prepared = compiler.prepare(compiler.bind(fn, args))
    s = build_scop(prepared.program, prepared.sizes, prepared.shapes, contractions=False)
    return [
        f"{n.op} {n.compute}"
        for st in s.statements
        for n in ir.walk(st.source.rhs)
        if isinstance(n, ir.Binary) and n.op in ("/", "%")
    ]


def test_a_panel_subscript_divides_unsigned() -> None:
    source = "def f(float(2, 5, 16) B) -> (float(5, 32) O) { O(k, n) = B(n / 16, k, n % 16) }"
    assert _divisions(source, np.zeros((2, 5, 16), np.float32)) == ["/ uint32", "% uint32"]


def test_a_value_that_may_be_negative_keeps_its_floor_division() -> None:
    source = "def f(float(8) A) -> (float(8) O) { O(i) = A(i) + float((i - 4) / 3) }"
    assert _divisions(source, np.zeros(8, np.float32)) == ["/ int32"]
