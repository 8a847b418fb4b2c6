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

# Longest first: the lexer takes the first that matches. `min=`, `max=` (and `=!`) are
# read after the bare word (_TOKEN's `minmax`): a longer word is a name.
OPERATORS = (
    "+=!", "*=!", "->", "+=", "*=", "==", "!=", "<=", ">=", "&&", "||",
    "+", "-", "*", "/", "%", "<", ">", "!", "?", ":", "=",
    "(", ")", "{", "}", ",", ".", "[", "]",
)  # fmt: skip

_NUMBER = r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?"
# The tokens in the order they are tried: a number only where no name character follows
# it (`2LUT` is a word), `min=`/`max=` (`min=!`) after the bare word, a word, an operator.
# One pattern scanned in C: optimize tokenizes hundreds of generated TC sources a model
# (densenet121: 788 kB, 0.9 s with a Python step per character class and operator).
_TOKEN = re.compile(
    r"(?P<space>(?:[ \t\r\n]+|#[^\n]*)+)"
    rf"|(?P<num>{_NUMBER})(?![A-Za-z0-9_])"
    r"|(?P<minmax>(?:min|max)(?:=!|=(?!=)))"
    r"|(?P<word>[A-Za-z0-9_]+)"
    rf"|(?P<op>{'|'.join(map(re.escape, OPERATORS))})"
    r"|(?P<bad>.)",
    re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    kind: str  # "id", "num", "kw", "op", "eof"
    text: str
    span: Span


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    pos, n = 0, len(source)
    while pos < n:
        m = _TOKEN.match(source, pos)
        assert m is not None  # `bad` takes any character
        kind, text, pos = m.lastgroup, m.group(), m.end()
        if kind == "space":
            continue
        start = m.start()
        if kind == "bad":
            raise TcError(
                f"syntax error: unexpected character {text!r}",
                source=source,
                span=Span(start, pos),
            )
        if kind == "word":
            kind = "num" if text.isdigit() else "kw" if text in KEYWORDS else "id"
        elif kind == "minmax":
            kind = "op"
        elif kind == "num" and text[0] == "." and tokens and tokens[-1].kind == "id":
            if tokens[-1].span.end == start:  # `A.5`: an operator, then what follows
                kind, text, pos = "op", ".", start + 1
        tokens.append(Token(str(kind), text, Span(start, pos)))
    tokens.append(Token("eof", "", Span(n, n)))
    return tokens
