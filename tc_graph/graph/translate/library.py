"""The TC operator library: `operators/operators.toml` and the templates beside it.

Every supported op type has an entry there (def prefix, accepted dtypes, template files by
variant, and for the table-driven families their expressions). A template is a def with
`${fields}` that the op's translator fills from the node's attributes and static shapes.
"""

from __future__ import annotations

import importlib.resources
import string
import tomllib
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ...errors import TcError

__all__ = ["instantiate", "table", "template_file"]


def _operators_dir() -> Traversable:
    """The `operators/` library: package data in a wheel, the top-level folder in a checkout."""
    installed = importlib.resources.files("tc_graph") / "operators"
    if installed.is_dir():
        return installed
    checkout = Path(__file__).resolve().parents[3] / "operators"
    if checkout.is_dir():
        return checkout
    raise TcError(
        "the TC operator library (operators/*.tc) is missing",
        hint="reinstall tc_graph (pip install --force-reinstall . in its checkout), which "
        "installs it as tc_graph/operators",
    )


@cache
def table() -> dict[str, dict[str, Any]]:
    """operators/operators.toml: op type -> def prefix, accepted dtypes, template files."""
    return tomllib.loads((_operators_dir() / "operators.toml").read_text(encoding="utf-8"))


@cache
def template_file(file: str) -> string.Template:
    return string.Template((_operators_dir() / file).read_text(encoding="utf-8"))


def instantiate(op: str, variant: str, /, **fields: object) -> str:
    """The template of `op`'s `variant` with its fields filled; `${name}` is left for later."""
    file = table()[op]["templates"][variant]
    try:
        return template_file(file).substitute(name="${name}", **fields)
    except (KeyError, ValueError) as exc:  # a template and its translator disagree
        raise TcError(
            f"operator template '{file}' has a field its translator does not fill: {exc}"
        ) from exc
