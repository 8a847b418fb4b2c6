"""Small pieces of TC text the translators share: declarations, accesses, literals,
index names and broadcasting."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...lang.types import BY_NUMPY
from .context import Untranslatable

__all__ = [
    "FLOAT16",
    "accumulator",
    "broadcast",
    "decl",
    "indices",
    "lit",
    "normalize_axis",
    "ref",
    "scaled",
    "sizes",
    "tc_type",
    "wide",
]

FLOAT16 = np.dtype(np.float16)


def decl(dtype: str, dims: Sequence[str | int]) -> str:
    """A parameter type: `float32(M, K)`, or `float32` for a 0-d tensor."""
    return f"{dtype}({', '.join(map(str, dims))})" if dims else dtype


def ref(tensor: str, idx: Sequence[str]) -> str:
    """An access `A(i, j)`, or `A` for a 0-d tensor."""
    return f"{tensor}({', '.join(idx)})" if idx else tensor


def lit(value: float) -> str:
    """A float32 TC literal; it rounds back to the same float32."""
    v = float(np.float32(value))
    if not math.isfinite(v):
        raise Untranslatable(f"the constant {value} has no TC literal")
    text = repr(v)
    return f"({text})" if v < 0 else text


# TC has no infinity literal: float32's 1.0 / 0.0 is one, and widens to any float type.
NEG_INFINITY = "(-1.0 / 0.0)"


def largest(dtype: np.dtype) -> str:
    """TC text of a float dtype's largest finite value (float literals are float32:
    float64's is the float before infinity)."""
    if dtype == np.float64:
        return "nextafter(double(1.0 / 0.0), double(0.0))"
    return lit(float(np.finfo(dtype).max))


def scaled(factor: int, index: str) -> str:
    return index if factor == 1 else f"{factor} * {index}"


def padded_subscript(index: str, size: str, before: int, after: bool) -> tuple[list[str], str]:
    """For a copy of an input dimension of `size` padded by `before` positions in front
    (and some behind where `after`): the tests that keep position `index` of the copy
    inside the input, and the input's subscript there, clamped on each padded side (a
    read is checked whatever guards it)."""
    conds, sub = [], f"{index} - {before}" if before else index
    if before:
        conds.append(f"{index} >= {before}")
        sub = f"max({sub}, 0)"
    if after:
        conds.append(f"{index} < {before} + {size}" if before else f"{index} < {size}")
        sub = f"min({sub}, {size} - 1)"
    return conds, sub


def normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise Untranslatable(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def broadcast(
    shape: tuple[int, ...], out: tuple[int, ...], sizes: str = "D", index: str = "i"
) -> tuple[list[str], list[str]]:
    """Declared dims and subscripts of an operand broadcast (numpy rules) to `out`.

    A dimension of size 1 where the output is larger is declared as the literal 1 and read at
    index 0; the others share the output's size name and index.
    """
    dims: list[str] = []
    idx: list[str] = []
    for j, d in enumerate(shape):
        o = j + len(out) - len(shape)
        if d == 1 and out[o] != 1:
            dims.append("1")
            idx.append("0")
        else:
            dims.append(f"{sizes}{o}")
            idx.append(f"{index}{o}")
    return dims, idx


def indices(rank: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{j}" for j in range(rank)]


def sizes(rank: int) -> list[str]:
    return [f"D{j}" for j in range(rank)]


def tc_type(dtype: np.dtype) -> str:
    name = BY_NUMPY.get(np.dtype(dtype))
    if name is None:
        raise Untranslatable(f"dtype {np.dtype(dtype).name} has no TC type")
    return name


def wide(dtype: np.dtype, read: str) -> str:
    """A read that products accumulate from: float16 is cast to float32 (the language
    computes float16 in float32, but a product of two float16 values is rounded to 16 bits
    before it is added)."""
    return f"float32({read})" if dtype == FLOAT16 else read


def accumulator(dtype: np.dtype, idx: Sequence[str]) -> tuple[str, str]:
    """The tensor a contraction accumulates into (Y, or for float16 a float32 temporary
    acc) and the statement that then stores it into Y."""
    if dtype != FLOAT16:
        return "Y", ""
    return "acc", f"  {ref('Y', idx)} = {ref('acc', idx)}\n"
