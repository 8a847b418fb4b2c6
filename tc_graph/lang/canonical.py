"""Canonical TC text: what a cache key is made of, so renaming identifiers or
reformatting a source still hits the same compiled kernel (TC paper, 'summarily
templatized' cache keys)."""

from __future__ import annotations

import functools
from types import MappingProxyType

from . import builtins
from .lexer import tokenize
from .types import TYPE_NAMES


def canonical(source: str) -> tuple[str, dict[str, str]]:
    """The token text with every user identifier renamed in order of first use, and
    the renaming (so an entry name can be mapped too)."""
    text, names = _canonical(source)
    return text, dict(names)


@functools.lru_cache(maxsize=1024)
def _canonical(source: str) -> tuple[str, MappingProxyType[str, str]]:
    """canonical, remembered: optimize keys each group by it before compiling and the
    compiler its kernel after, and optimizing a model again keys them all again
    (densenet121: 236 sources, a fifth of a warm optimize)."""
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
    return " ".join(out), MappingProxyType(names)
