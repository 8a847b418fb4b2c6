"""Canonical TC text: what a cache key is made of, so renaming identifiers or
reformatting a source still hits the same compiled kernel (TC paper, 'summarily
templatized' cache keys)."""

from __future__ import annotations

from . import builtins
from .lexer import tokenize
from .types import TYPE_NAMES


def canonical(source: str) -> tuple[str, dict[str, str]]:
    """The token text with every user identifier renamed in order of first use, and
    the renaming (so an entry name can be mapped too)."""
    names: dict[str, str] = {}
    out: list[str] = []
    for tok in tokenize(source):
        text = tok.text
        if (
            tok.kind == "id"
            and text not in TYPE_NAMES
            and text != "in"
            and (builtins.resolve(text) is None)
        ):
            text = names.setdefault(text, f"v{len(names)}")
        out.append(text)
    return " ".join(out), names
