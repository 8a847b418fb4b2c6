"""Scalar types of TC, the one table of their names elsewhere, and C's promotion rules over them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scalar:
    """One TC scalar type and what it is called wherever a value of it travels: in C (and
    CUDA), in OpenCL, in NumPy and in ONNX. Every dtype lookup of tc_graph derives from
    SCALARS, so a new type is one row here."""

    name: str  # TC's canonical name (NumPy's too)
    c: str  # the C storage type, which CUDA shares
    opencl: str  # OpenCL's builtin the C name is typedef'd to (half, for _Float16)
    cuda: str  # CUDA's name for the storage type (__half, for _Float16)
    numpy: np.dtype
    onnx: int  # the ONNX TensorProto element type (kept numeric: lang/ does not import onnx)
    bytes: int


def _row(name: str, c: str, opencl: str, onnx: int, cuda: str = "") -> Scalar:
    dtype = np.dtype(name)
    return Scalar(name, c, opencl, cuda or c, dtype, onnx, dtype.itemsize)


SCALARS: dict[str, Scalar] = {
    s.name: s
    for s in (
        _row("bool", "uint8_t", "uchar", 9),
        _row("int8", "int8_t", "char", 3),
        _row("int16", "int16_t", "short", 5),
        _row("int32", "int32_t", "int", 6),
        _row("int64", "int64_t", "long", 7),
        _row("uint8", "uint8_t", "uchar", 2),
        _row("uint16", "uint16_t", "ushort", 4),
        _row("uint32", "uint32_t", "uint", 12),
        _row("uint64", "uint64_t", "ulong", 13),
        _row("float16", "_Float16", "half", 10, cuda="__half"),
        _row("float32", "float", "float", 1),
        _row("float64", "double", "double", 11),
    )
}

CANONICAL = tuple(SCALARS)
INT_TYPES = tuple(t for t in CANONICAL if t.startswith(("int", "uint")))
FLOAT_TYPES = tuple(t for t in CANONICAL if t.startswith("float"))
C_TYPES = {t: s.c for t, s in SCALARS.items()}
ONNX_TYPES = {t: s.onnx for t, s in SCALARS.items()}
BY_NUMPY = {s.numpy: t for t, s in SCALARS.items()}

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
    return 1 if t == "bool" else SCALARS[t].bytes * 8


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
