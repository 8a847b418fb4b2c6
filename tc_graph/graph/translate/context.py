"""What every translator works with: the refusal, a node's call, and the group's context
(static types, constants, weights packed ahead of time)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ...errors import TcError
from .library import table

__all__ = ["FLOAT32", "Call", "Context", "Untranslatable", "ValueType", "attrs", "inputs"]

ValueType = tuple[np.dtype, tuple[int, ...]]

FLOAT32 = np.dtype(np.float32)


class Untranslatable(TcError):
    """A node (or group) that has no TC translation with these types and attributes.

    The partitioner leaves such nodes to onnxruntime; the message says why.
    """


@dataclass(frozen=True)
class Call:
    """One node as a call of an instantiated def."""

    op: str  # the op type (its table entry gives the def name prefix)
    text: str  # the def's text, with `${name}` still to fill
    args: tuple[str, ...]  # ONNX values passed to it, in parameter order
    outputs: tuple[str, ...]  # the ONNX values it produces, in the def's output order


@dataclass
class Context:
    """What the translations of one group share: static types, constants, packed weights."""

    types: Mapping[str, ValueType]
    constants: Mapping[str, np.ndarray]
    pack_weights: bool = True
    opset: int | None = None  # the default domain's version, where semantics depend on it
    # "<weight>/<packing>" -> (new initializer name, array)
    packed: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    # Columns of the panels a constant matrix weight is packed into (0: none; optimize
    # passes the CPU's default outer-product panel, poly/contraction.panel_width).
    panel: int = 0

    def type(self, value: str) -> tuple[np.dtype, tuple[int, ...]]:
        if not value:
            raise Untranslatable("a required input is missing")
        if value not in self.types:
            raise Untranslatable(f"value '{value}' has no static type")
        dtype, shape = self.types[value]
        shape = tuple(shape)
        if not all(isinstance(d, int | np.integer) and d >= 0 for d in shape):
            raise Untranslatable(f"value '{value}' has no static shape ({shape})")
        return np.dtype(dtype), tuple(int(d) for d in shape)

    def shape(self, value: str, op: str) -> tuple[int, ...]:
        """The shape of a data operand of `op`, which must have one of the op's dtypes."""
        dtype, shape = self.type(value)
        allowed = table()[op]["dtypes"]
        if dtype.name not in allowed:
            raise Untranslatable(
                f"'{value}' has dtype {dtype.name}; the {op} translation takes {', '.join(allowed)}"
            )
        return shape

    def common_dtype(self, values: Sequence[str], op: str) -> np.dtype:
        """The one dtype of an arithmetic op's data operands (ONNX's `T` is shared by
        them), which must be one of the op's dtypes in the table."""
        for v in values:
            self.shape(v, op)
        dtypes = {self.type(v)[0] for v in values}
        if len(dtypes) != 1:
            names = ", ".join(sorted(d.name for d in dtypes))
            raise Untranslatable(f"{op} of operands of different dtypes ({names})")
        return dtypes.pop()

    def check_output(
        self, node: onnx.NodeProto, shape: tuple[int, ...], dtype: np.dtype = FLOAT32
    ) -> str:
        """The node's (single) output, after checking ONNX's type for it against ours."""
        outs = [o for o in node.output if o]
        if len(outs) != 1 or node.output[0] != outs[0]:
            raise Untranslatable(f"{node.op_type} must have exactly one output")
        self.check_type(outs[0], shape, dtype)
        return outs[0]

    def check_type(self, value: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """ONNX's type for a value the translation computes must be the one it computes."""
        onnx_dtype, onnx_shape = self.type(value)
        if onnx_dtype != dtype or onnx_shape != shape:
            raise Untranslatable(
                f"output '{value}' is typed {onnx_dtype.name}{list(onnx_shape)}, but the "
                f"translation computes {dtype.name}{list(shape)}"
            )

    def constant(self, value: str, what: str) -> np.ndarray:
        """An input that the translation reads as an attribute: it must be a constant."""
        if value not in self.constants:
            raise Untranslatable(f"the {what} '{value}' are not a constant")
        return np.asarray(self.constants[value])

    def pack_transposed(self, weight: str) -> str | None:
        """A constant 2-D weight transposed once, ahead of time, under a new name (or None)."""
        if not self.pack_weights or weight not in self.constants:
            return None
        return self._packed(weight, "t", lambda w: np.ascontiguousarray(w.T))

    def pack_panels(self, weight: str, *, transposed: bool) -> str | None:
        """A constant (K, N) weight ((N, K) if `transposed`) packed once, ahead of time, as
        (ceil(N / w), K, w) panels of w columns, zeros past the last: the order the
        outer-product kernel reads it in (poly/contraction.panels). None without one."""
        if not self.pack_weights or not self.panel or weight not in self.constants:
            return None
        w = self.panel

        def pack(array: np.ndarray) -> np.ndarray:
            b = array.T if transposed else array
            k, n = b.shape
            out = np.zeros((-(-n // w) * w, k), b.dtype)
            out[:n] = b.T
            return np.ascontiguousarray(out.reshape(-1, w, k).transpose(0, 2, 1))

        return self._packed(weight, f"p{w}", pack)

    def pad_channels(self, weight: str, channels: int) -> str | None:
        """A constant (F, C, KH, KW) weight with zeros appended to its channels, up to
        `channels`, once, ahead of time (or None): its rows then lie apart in L1
        (contraction.apart_in_l1)."""
        if not self.pack_weights or not self.panel or weight not in self.constants:
            return None

        def pad(array: np.ndarray) -> np.ndarray:
            grown = np.zeros((array.shape[0], channels, *array.shape[2:]), array.dtype)
            grown[:, : array.shape[1]] = array
            return grown

        return self._packed(weight, f"c{channels}", pad)

    def _packed(self, weight: str, tag: str, pack: Callable[[np.ndarray], np.ndarray]) -> str:
        """The name of `weight` packed by `pack`, made once per group under a fresh name."""
        key = f"{weight}/{tag}"
        if key not in self.packed:
            array = pack(np.asarray(self.constants[weight]))
            taken = {*self.types, *self.constants, *(n for n, _ in self.packed.values())}
            name = f"{weight}__tc_{tag}"
            k = 2
            while name in taken:
                name, k = f"{weight}__tc_{tag}{k}", k + 1
            self.packed[key] = (name, array)
        return self.packed[key][0]


def inputs(node: onnx.NodeProto, low: int, high: int) -> list[str]:
    """The node's inputs, checking there are between `low` and `high` of them."""
    if not low <= len(node.input) <= high:
        raise Untranslatable(f"{node.op_type} with {len(node.input)} inputs")
    return list(node.input)


def attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes by name, strings decoded."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out
