"""The group driver: a group of ONNX nodes as one multi-statement TC.

Each node is translated by its op type's translator (see registry.py; the operator family
modules register them). The group becomes one entry def that calls the instantiated defs
in topological order, `y = gemm_1(x, w, b)`; the compiler inlines the calls, so the whole
group is one TC program it can fuse.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import TcError
from ...lang.builtins import resolve as _builtin
from ...lang.lexer import KEYWORDS
from ...lang.types import BY_NUMPY, TYPE_NAMES
from ...onnx_domain import ONNX_DOMAINS

# The operator families: importing them registers their translators.
from . import conv, elementwise, linear, movement, normalize, pool, reduce  # noqa: F401
from .context import Call, Context, Untranslatable, ValueType
from .library import table
from .registry import TRANSLATORS
from .text import decl

__all__ = [
    "ROWS",
    "TRANSLATABLE",
    "Translation",
    "opset_version",
    "row_names",
    "translatable",
    "translate",
]


@dataclass(frozen=True)
class Translation:
    """One group as a TC program: the source, its entry def and how it binds to ONNX values."""

    source: str
    entry: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: tuple[onnx.TensorProto, ...]


TRANSLATABLE: frozenset[str] = frozenset(TRANSLATORS)
# The size name of the leading dimension of a rows group's inputs and outputs.
ROWS = "rows"


def row_names(count: int) -> tuple[str, ...]:
    """The TC size names of a rows group's `count` leading dimensions: ROWS, ROWS_1, ..."""
    return (ROWS, *(f"{ROWS}_{d}" for d in range(1, count)))


def _translate_node(node: onnx.NodeProto, ctx: Context) -> Call:
    if node.domain not in ONNX_DOMAINS:
        raise Untranslatable(f"op {node.domain}::{node.op_type} is not a standard ONNX op")
    translator = TRANSLATORS.get(node.op_type)
    if translator is None:
        raise Untranslatable(f"no TC translation for op type {node.op_type}")
    return translator(node, ctx)


def opset_version(model: onnx.ModelProto) -> int | None:
    """The version of the default ONNX domain the model imports (None if it imports none)."""
    for o in model.opset_import:
        if o.domain in ONNX_DOMAINS:
            return int(o.version)
    return None


def translatable(
    node: onnx.NodeProto,
    types: Mapping[str, ValueType],
    constants: Mapping[str, np.ndarray],
    *,
    opset: int | None = None,
) -> str | None:
    """None if this single node translates with these static types; else the reason.
    `opset` (the default domain's version) is needed by ops whose semantics changed
    between opsets (Softmax); without it they are refused."""
    try:
        _translate_node(node, Context(types, constants, opset=opset))
    except Untranslatable as exc:
        return exc.message
    return None


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _reserved(name: str) -> bool:
    return name in KEYWORDS or name in TYPE_NAMES or name == "in" or _builtin(name) is not None


class _Names:
    """TC identifiers for ONNX value names: sanitized, distinct, clear of reserved words."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.of: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self.of:
            base = re.sub(r"[^A-Za-z0-9_]", "_", value) or "v"
            if base[0].isdigit() or _reserved(base):
                base = f"v_{base}"
            name, k = base, 2
            while name in self.taken:
                name, k = f"{base}_{k}", k + 1
            self.taken.add(name)
            self.of[value] = name
        return self.of[value]


def _targets(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"({', '.join(names)})"


def _calls(nodes: Sequence[onnx.NodeProto], ctx: Context, produced: set[str]) -> list[Call]:
    """Each node's call, in order; a value read before the group makes it is refused."""
    calls: list[Call] = []
    done: set[str] = set()
    for node in nodes:
        try:
            call = _translate_node(node, ctx)
        except Untranslatable as exc:
            label = f" '{node.name}'" if node.name else ""
            raise Untranslatable(f"{node.op_type} node{label}: {exc.message}") from None
        for arg in call.args:
            if arg in produced and arg not in done:
                raise Untranslatable(f"'{arg}' is read before the group produces it")
        for o in call.outputs:
            if o in done:
                raise Untranslatable(f"'{o}' is produced twice")
            done.add(o)
        calls.append(call)
    return calls


def _def_names(calls: Sequence[Call], entry: str) -> dict[str, str]:
    """One def per distinct instantiation text, named <prefix>_<k> in order of first use
    (never the entry's name)."""
    def_names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for call in calls:
        if call.text not in def_names:
            prefix = table()[call.op]["prefix"]
            counts[prefix] = counts.get(prefix, 0) + 1
            def_name = f"{prefix}_{counts[prefix]}"
            while def_name == entry:
                counts[prefix] += 1
                def_name = f"{prefix}_{counts[prefix]}"
            def_names[call.text] = def_name
    return def_names


def _inputs(
    calls: Sequence[Call], produced: set[str], declare: Mapping[str, ValueType] | None
) -> list[str]:
    """The entry's parameters: what the calls read that the group does not make, in order
    of first use, or `declare`'s, which must include them."""
    inputs: list[str] = []
    for call in calls:
        for arg in call.args:
            if arg not in produced and arg not in inputs:
                inputs.append(arg)
    if declare is None:
        return inputs
    if not set(inputs) <= set(declare):
        raise TcError(f"translate: declare lacks inputs {sorted(set(inputs) - set(declare))}")
    return list(declare)


def _check_outputs(outputs: Sequence[str], produced: set[str]) -> None:
    if len(set(outputs)) != len(outputs):
        raise TcError(f"outputs {list(outputs)} repeat a value")
    for o in outputs:
        if o not in produced:
            raise Untranslatable(f"output '{o}' is not produced by the group")
    if not outputs:
        raise Untranslatable("the group has no outputs")


def translate(
    nodes: Sequence[onnx.NodeProto],
    *,
    types: Mapping[str, ValueType],
    constants: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    name: str = "fused",
    pack_weights: bool = True,
    opset: int | None = None,
    panel: int = 0,
    rows: Collection[str] = (),
    declare: Mapping[str, ValueType] | None = None,
    row_dims: int = 1,
    named: Mapping[str, tuple[int | str, ...]] | None = None,
) -> Translation:
    """One TC program for a group of nodes (in topological order).

    `outputs` are the values needed outside the group; the other values the group
    produces become temporaries. With `pack_weights`, a constant Gemm weight read
    transposed (transB=1, shape (out, in)) by at least contraction.MIN_TILE rows is
    passed pre-transposed as a new initializer `<weight>__tc_t`: the output dimension is
    then contiguous in memory, which the CPU code generator's register tiles need (fewer
    rows read it as it is, a dot product per output). With `panel` too, a constant
    float32 weight of a Gemm or MatMul whose contraction gets a kernel of its own is
    passed as panels of that many columns instead, `<weight>__tc_p<panel>`, which the
    CPU's outer-product kernel reads in place (docs/cpu.md; optimize passes the CPU's
    panel width). The inputs and outputs named in `rows` are declared with the sizes
    row_names(row_dims) as their leading dimensions, so the program holds for any number
    of rows (graph/rows.py). `declare` lists the entry's parameters in order, with the types of
    those the group does not read (another translation's packed weights: every kernel of
    a rows node takes the node's inputs). `named` declares inputs and outputs with these
    shapes, sizes named where the model's dimensions are symbolic (a node for every size:
    graph/symbols.py).
    """
    if not _IDENT.fullmatch(name) or _reserved(name):
        raise TcError(f"the entry name {name!r} is not a TC identifier")
    if not nodes:
        raise Untranslatable("an empty group")
    ctx = Context(types, constants, pack_weights, opset, panel=panel)
    produced = {o for node in nodes for o in node.output if o}
    calls = _calls(nodes, ctx, produced)
    _check_outputs(outputs, produced)

    inputs = _inputs(calls, produced, declare)
    def_names = _def_names(calls, name)
    leading = row_names(row_dims)
    sizes = {d for shape in (named or {}).values() for d in shape if isinstance(d, str)}
    ident = _Names({name, *def_names.values(), *(leading if rows else []), *sizes})

    packed_arrays = {new: array for new, array in ctx.packed.values()}

    def value_type(value: str) -> tuple[str, tuple[int | str, ...]]:
        if value in packed_arrays:
            return BY_NUMPY[packed_arrays[value].dtype], packed_arrays[value].shape
        other = declare is not None and value in declare and value not in types
        dtype, shape = declare[value] if other else ctx.type(value)  # type: ignore[index]
        if named is not None and value in named:
            return BY_NUMPY[dtype], named[value]
        return BY_NUMPY[dtype], (*leading, *shape[row_dims:]) if value in rows else shape

    params = [f"{decl(*value_type(v))} {ident(v)}" for v in inputs]
    outs = [f"{t}({', '.join(map(str, shape))}) {ident(v)}" for v in outputs
            for t, shape in [value_type(v)]]  # fmt: skip
    body = [
        f"  {_targets([ident(o) for o in call.outputs])} = "
        f"{def_names[call.text]}({', '.join(map(ident, call.args))})"
        for call in calls
    ]
    defs = [text.replace("${name}", def_name) for text, def_name in def_names.items()]
    entry = (
        f"def {name}({', '.join(params)}) -> ({', '.join(outs)}) {{\n" + "\n".join(body) + "\n}\n"
    )
    source = "\n".join([*defs, entry])
    initializers = tuple(
        numpy_helper.from_array(packed_arrays[v], v) for v in inputs if v in packed_arrays
    )
    return Translation(source, name, tuple(inputs), tuple(outputs), initializers)
