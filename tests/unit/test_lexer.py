"""The lexer's rules (lang/lexer.py's docstring): words, numbers, greedy operators,
`min=`/`max=` after the bare word, `A.5` as a field access, comments, and the error for a
character that starts no token."""

from __future__ import annotations

import pytest

from tc_graph.errors import TcError
from tc_graph.lang.lexer import tokenize


def _kinds(source: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokenize(source)][:-1]


@pytest.mark.parametrize(
    ("source", "tokens"),
    [
        ("2LUT", [("id", "2LUT")]),
        (
            "12 3E-1 .5 1. 1.e5",
            [("num", "12"), ("num", "3E-1"), ("num", ".5"), ("num", "1."), ("num", "1.e5")],
        ),
        ("A.5.5", [("id", "A"), ("op", "."), ("num", "5.5")]),
        ("A .5", [("id", "A"), ("num", ".5")]),
        ("where.5", [("kw", "where"), ("num", ".5")]),
        ("+=!x", [("op", "+=!"), ("id", "x")]),
        ("a->b", [("id", "a"), ("op", "->"), ("id", "b")]),
        (
            "T(i) min=! A(i)",
            [
                ("id", "T"),
                ("op", "("),
                ("id", "i"),
                ("op", ")"),
                ("op", "min=!"),
                ("id", "A"),
                ("op", "("),
                ("id", "i"),
                ("op", ")"),
            ],
        ),
        ("min==3", [("id", "min"), ("op", "=="), ("num", "3")]),
        ("max= y", [("op", "max="), ("id", "y")]),
        ("min_=1", [("id", "min_"), ("op", "="), ("num", "1")]),
        ("a # c\n\tb", [("id", "a"), ("id", "b")]),
        ("in", [("id", "in")]),
    ],
)
def test_tokens(source: str, tokens: list[tuple[str, str]]) -> None:
    assert _kinds(source) == tokens


def test_spans_and_end() -> None:
    toks = tokenize("  ab+=!1.5 ")
    assert [(t.span.start, t.span.end) for t in toks] == [(2, 4), (4, 7), (7, 10), (11, 11)]
    assert toks[-1].kind == "eof"
    assert [t.kind for t in tokenize("# only a comment")] == ["eof"]


@pytest.mark.parametrize(("source", "column"), [("x $", 2), ("a\n²", 2), ("é", 0)])
def test_an_unexpected_character_is_a_tc_error(source: str, column: int) -> None:
    with pytest.raises(TcError, match="unexpected character") as e:
        tokenize(source)
    assert e.value.span is not None and e.value.span.start == column
