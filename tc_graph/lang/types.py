"""Scalar types of TC and C's promotion rules over them."""

from __future__ import annotations

import numpy as np

CANONICAL = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
)  # fmt: skip

ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "int": "int32",
    "byte": "uint8",
    "long": "int64",
}

TYPE_NAMES = frozenset(CANONICAL) | frozenset(ALIASES)


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def is_float(t: str) -> bool:
    return t.startswith("float")


def is_integral(t: str) -> bool:
    """Integers and bool: the types a subscript may have."""
    return not is_float(t)


def bits(t: str) -> int:
    return 1 if t == "bool" else np.dtype(t).itemsize * 8


def is_signed(t: str) -> bool:
    return t.startswith("int")


def _int_promote(t: str) -> str:
    """C's integer promotion: anything narrower than 32 bits becomes int32."""
    return "int32" if bits(t) < 32 else t


def value_type(t: str) -> str:
    """The type of arithmetic on a value of type t: C's integer promotion (narrower
    than 32 bits becomes int32). float16 stays float16: each operation computes
    in float32 (see `compute_type`) and rounds back. The empty type (a tensor whose
    type a later statement decides) stays empty."""
    if t == "" or is_float(t):
        return t
    return _int_promote(t)


def compute_type(t: str) -> str:
    """The type an operation whose result has type t is carried out in."""
    return "float32" if t == "float16" else t


def promote(a: str, b: str) -> str:
    """C's usual arithmetic conversions; an empty (not yet known) type takes the other's."""
    a, b = value_type(a), value_type(b)
    if not a or not b:
        return a or b
    if is_float(a) or is_float(b):
        if is_float(a) and is_float(b):
            return a if bits(a) >= bits(b) else b
        return a if is_float(a) else b
    if a == b:
        return a
    if is_signed(a) == is_signed(b):
        return a if bits(a) >= bits(b) else b
    unsigned, signed = (a, b) if not is_signed(a) else (b, a)
    if bits(unsigned) >= bits(signed):
        return unsigned
    return signed


def narrowing_store(value: str, target: str) -> bool:
    """A store that loses what the value is: float into integer, or a wider float/64-bit integer
    into a narrower tensor. Promotion-only widening (int8 + int8 is int32) stores back silently."""
    if is_float(value):
        if not is_float(target):
            return True
        return bits(value) > max(bits(target), 32)
    if is_float(target):
        return False
    return bits(value) == 64 and bits(target) < 64


def literal_int_type(value: int) -> str:
    return "int32" if -(2**31) <= value < 2**31 else "int64"
