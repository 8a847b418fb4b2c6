"""The registry of translators: each operator family's module registers its functions
for the op types they translate with `@translator(...)`, and the driver looks a node's
op type up here (as onnx's reference evaluator finds its `op_*.py` classes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType

import onnx

from ...errors import TcError
from .context import Call, Context
from .library import table

__all__ = ["TRANSLATORS", "Translator", "table_ops", "translator"]

Translator = Callable[[onnx.NodeProto, Context], Call]

_REGISTRY: dict[str, Translator] = {}

TRANSLATORS: Mapping[str, Translator] = MappingProxyType(_REGISTRY)


def translator(*ops: str) -> Callable[[Translator], Translator]:
    """Registers the decorated function as the translator of `ops`; an op has one, and
    every op must have its entry in operators.toml (its prefix, dtypes, templates)."""

    def register(fn: Translator) -> Translator:
        for op in ops:
            if op in _REGISTRY:
                raise TcError(f"op type {op} has two translators ({_REGISTRY[op].__name__})")
            if op not in table():
                raise TcError(f"op type {op} has no entry in operators/operators.toml")
        _REGISTRY.update(dict.fromkeys(ops, fn))
        return fn

    return register


def table_ops(*keys: str) -> Iterator[str]:
    """The op types whose table entry has all of `keys`: the families whose translation
    the table spells out (an elementwise `expr`, a reduction's `reducer`)."""
    return (op for op, entry in table().items() if all(k in entry for k in keys))
