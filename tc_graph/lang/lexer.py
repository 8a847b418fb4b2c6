"""Tokens of TC source.

A word is `[A-Za-z0-9_]+`; one that starts with a digit is a number only when
the whole word is one (`12`, `1e5`, `3E-1`), so `2LUT` is an identifier.
Operators are read greedily (`+=!x` is `+=!` then `x`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import Span, TcError

# `in` is contextual (the paper names a tensor `in`); the parser reads it after `where v`.
KEYWORDS = frozenset({"def", "where", "exists"})

# Longest first: the lexer takes the first that matches.
OPERATORS = (
    "min=!", "max=!", "+=!", "*=!", "min=", "max=",
    "->", "+=", "*=", "==", "!=", "<=", ">=", "&&", "||",
    "+", "-", "*", "/", "%", "<", ">", "!", "?", ":", "=",
    "(", ")", "{", "}", ",", ".", "[", "]",
)  # fmt: skip

_NUMBER = re.compile(r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_SPACE = re.compile(r"(?:[ \t\r\n]+|#[^\n]*)+")


@dataclass(frozen=True)
class Token:
    kind: str  # "id", "num", "kw", "op", "eof"
    text: str
    span: Span


def _number_at(source: str, pos: int) -> re.Match[str] | None:
    """A number at pos, unless it runs on into an identifier (`2LUT`)."""
    m = _NUMBER.match(source, pos)
    if m is None:
        return None
    end = m.end()
    if end < len(source) and (source[end].isalnum() or source[end] == "_"):
        return None
    return m


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    n = len(source)
    while True:
        m = _SPACE.match(source, pos)
        if m:
            pos = m.end()
        if pos >= n:
            tokens.append(Token("eof", "", Span(n, n)))
            return tokens
        ch = source[pos]
        after_name = bool(tokens) and tokens[-1].kind == "id" and tokens[-1].span.end == pos
        if ch.isdigit() or (ch == "." and not after_name and source[pos + 1 : pos + 2].isdigit()):
            num = _number_at(source, pos)
            if num is not None:
                tokens.append(Token("num", num.group(), Span(pos, num.end())))
                pos = num.end()
                continue
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            word = _WORD.match(source, pos)
            assert word is not None
            text = word.group()
            end = word.end()
            if (
                text in ("min", "max")
                and source.startswith("=", end)
                and not source.startswith("==", end)
            ):
                op = text + ("=!" if source.startswith("=!", end) else "=")
                tokens.append(Token("op", op, Span(pos, pos + len(op))))
                pos += len(op)
                continue
            kind = "num" if text.isdigit() else "kw" if text in KEYWORDS else "id"
            tokens.append(Token(kind, text, Span(pos, end)))
            pos = end
            continue
        for op in OPERATORS:
            if source.startswith(op, pos):
                tokens.append(Token("op", op, Span(pos, pos + len(op))))
                pos += len(op)
                break
        else:
            raise TcError(
                f"syntax error: unexpected character {ch!r}",
                source=source,
                span=Span(pos, pos + 1),
            )
