"""A Gemm composed into the Gemm that reads its output, before the model is partitioned.

When a Gemm's output y = x W1 + b1 is read only by a second Gemm, as its whole input or
as columns c0 .. c0 + N1 of a Concat along columns that only that Gemm reads, nothing
nonlinear lies between them: (x W1 + b1) W2 = x (W1 W2) + b1 W2. The first Gemm goes,
x takes y's place, and the second Gemm's weight rows for y become W1 times those rows
(its bias gains b1 times them), computed in float64 and rounded once to the weights'
type. A row then costs K x N2 multiply-adds where it cost K x N1 + N1 x N2, so the two
compose only where that is fewer.

A DLRM-style export concatenates a 1000 -> 1024 Gemm with its lookups into a 1216 -> 512
Gemm: composed, 1000 x 512 multiply-adds a row instead of 1000 x 1024 + 1024 x 512. Those
two products ran at onnxruntime's MLAS speed, near the machine's FMA peak (187 GFLOP/s on
2 Zen 4 cores), and made about 70% of the model's time, so no kernel could make it much
faster; doing less work can.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from ..onnx_domain import ONNX_DOMAINS
from .fold import FLOATS, Constant, constants, drop_unused, fresh_name, value_names
from .model import declare_initializers, node_inputs
from .rewrite import replaced_doc
from .translate.context import attrs

_GEMM_DEFAULTS = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}

# The most multiply-adds composing two weights may take (K x N1 x N2, in float64 at
# optimize time: 4.3 G took 0.1-0.2 s on 2 Zen 4 cores, DLRM's 0.5 G 11 ms), so that a
# model of huge layers cannot stall optimize here.
MAX_COMPOSE_MACS = 1 << 32


@dataclass(frozen=True)
class _Chain:
    """Two Gemms that compose: `first`'s output is columns `offset` .. `offset` + its width
    of `second`'s input, through `concat` (its position `at` there) or directly."""

    first: int
    second: int
    concat: int | None
    at: int
    offset: int


def linears_composed(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each Gemm that composes into the Gemm reading it (see the
    module's docstring) composed (`model` itself when none does; it is never mutated).

    Both Gemms have alpha 1, beta 1 where they have a bias, transA 0, and float weights
    and biases that are constants (`fold.constants`) of one type, the biases of one row;
    the first Gemm's output, and the Concat's, have no other reader and are not graph
    outputs; every input of the Concat has a known width."""
    inits = constants(model)
    widths = _widths(model)
    chains = _chains(model, inits, widths)
    if not chains:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    taken = value_names(graph)
    old: set[str] = set()
    for chain in chains:
        first, second = graph.node[chain.first], graph.node[chain.second]
        old.update(name for name in (*first.input[1:], *second.input[1:]) if name)
        weight, bias = _composed(first, second, chain.offset, inits)
        for tensor, base in ((weight, second.input[1]), (bias, f"{second.input[1]}_bias")):
            tensor.name = fresh_name(f"{base}__composed", taken)
            graph.initializer.append(tensor)
        if chain.concat is None:
            second.input[0] = first.input[0]
        else:
            graph.node[chain.concat].input[chain.at] = first.input[0]
            _widen(graph, second.input[0], widths[first.input[0]] - widths[first.output[0]])
        second.doc_string = replaced_doc([model.graph.node[chain.second], first])
        second.input[1] = weight.name
        del second.input[2:]
        second.input.append(bias.name)
        # Its own C had beta 1 (_gemm); without one, a beta was moot, and would now
        # scale the composed bias.
        kept = [a for a in second.attribute if a.name != "beta"]
        del second.attribute[:]
        second.attribute.extend(kept)
    gone = {graph.node[c.first].output[0] for c in chains}
    nodes = [n for k, n in enumerate(graph.node) if k not in {c.first for c in chains}]
    del graph.node[:]
    graph.node.extend(nodes)
    drop_unused(graph, old, gone)
    declare_initializers(out, (t.name for t in model.graph.initializer))
    return out


def _chains(
    model: onnx.ModelProto, inits: Mapping[str, Constant], widths: Mapping[str, int]
) -> list[_Chain]:
    """The Gemm pairs that compose, no node in two of them."""
    graph = model.graph
    readers: dict[str, list[int]] = {}
    for k, node in enumerate(graph.node):
        for name in node_inputs(node):
            readers.setdefault(name, []).append(k)
    outputs = {v.name for v in graph.output}

    def only_reader(name: str) -> int | None:
        found = readers.get(name, [])
        return found[0] if len(found) == 1 and name not in outputs else None

    chains: list[_Chain] = []
    used: set[int] = set()
    for k, node in enumerate(graph.node):
        if not _gemm(node, inits) or not node.output:
            continue
        chain = _chain_from(graph, k, only_reader, widths)
        if chain is None or {chain.first, chain.second} & used:
            continue
        if _gemm(graph.node[chain.second], inits) and _cheaper(graph, chain, inits, widths):
            chains.append(chain)
            used.update((chain.first, chain.second))
    return chains


def _chain_from(
    graph: onnx.GraphProto,
    first: int,
    only_reader: Callable[[str], int | None],
    widths: Mapping[str, int],
) -> _Chain | None:
    """The chain from Gemm `first` to the Gemm that reads its output, if the output goes
    there whole or through one Concat along columns."""
    y = graph.node[first].output[0]
    reader = only_reader(y)
    if reader is None or y not in widths:
        return None
    node = graph.node[reader]
    if node.op_type == "Gemm":
        return _Chain(first, reader, None, 0, 0) if node.input[0] == y else None
    if (
        node.op_type != "Concat"
        or node.domain not in ONNX_DOMAINS
        or list(node.input).count(y) != 1
    ):
        return None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    second = only_reader(node.output[0])
    if axis not in (1, -1) or second is None or any(name not in widths for name in node.input):
        return None
    if graph.node[second].op_type != "Gemm" or graph.node[second].input[0] != node.output[0]:
        return None
    at = list(node.input).index(y)
    return _Chain(first, second, reader, at, sum(widths[name] for name in node.input[:at]))


def _gemm(node: onnx.NodeProto, inits: Mapping[str, Constant]) -> bool:
    """A Gemm that computes x W + b with W, b float constants of one type, b a row."""
    if node.op_type != "Gemm" or node.domain not in ONNX_DOMAINS or len(node.input) < 2:
        return False
    at = _gemm_attrs(node)
    bias = len(node.input) > 2 and bool(node.input[2])
    if at["alpha"] != 1.0 or at["transA"] != 0 or (bias and at["beta"] != 1.0):
        return False
    weight = inits.get(node.input[1])
    if weight is None or weight.data_type not in FLOATS or len(weight.dims) != 2:
        return False
    if not bias:
        return True
    b = inits.get(node.input[2])
    n = weight.dims[0] if at["transB"] else weight.dims[1]
    return b is not None and b.data_type == weight.data_type and b.dims in ((n,), (1, n))


def _cheaper(
    graph: onnx.GraphProto, chain: _Chain, inits: Mapping[str, Constant], widths: Mapping[str, int]
) -> bool:
    """Fewer multiply-adds a row composed (K x N2) than as written (K x N1 + N1 x N2),
    composing them takes at most MAX_COMPOSE_MACS, and the two Gemms' weights are of one
    type."""
    first, second = graph.node[chain.first], graph.node[chain.second]
    w1, w2 = inits[first.input[1]], inits[second.input[1]]
    k, n1 = widths.get(first.input[0]), widths[first.output[0]]
    n2 = w2.dims[0] if _trans_b(second) else w2.dims[1]
    if w1.data_type != w2.data_type or k is None:
        return False
    return k * n2 < n1 * (k + n2) and k * n1 * n2 <= MAX_COMPOSE_MACS


def _gemm_attrs(node: onnx.NodeProto) -> dict[str, object]:
    return {**_GEMM_DEFAULTS, **attrs(node)}


def _trans_b(node: onnx.NodeProto) -> bool:
    return bool(_gemm_attrs(node)["transB"])


def _matrix(node: onnx.NodeProto, inits: Mapping[str, Constant]) -> np.ndarray:
    """A Gemm's weight as the K x N matrix it multiplies by, in float64."""
    w = inits[node.input[1]].read().astype(np.float64)
    return w.T if _trans_b(node) else w


def _bias(node: onnx.NodeProto, inits: Mapping[str, Constant], n: int) -> np.ndarray:
    if len(node.input) > 2 and node.input[2]:
        return inits[node.input[2]].read().astype(np.float64).reshape(n)
    return np.zeros(n)


def _composed(
    first: onnx.NodeProto, second: onnx.NodeProto, offset: int, inits: Mapping[str, Constant]
) -> tuple[onnx.TensorProto, onnx.TensorProto]:
    """The second Gemm's composed weight (in its own orientation) and bias (unnamed)."""
    w1, w2 = _matrix(first, inits), _matrix(second, inits)
    rows = w2[offset : offset + w1.shape[1]]
    w = np.concatenate([w2[:offset], w1 @ rows, w2[offset + w1.shape[1] :]])
    b = _bias(second, inits, w2.shape[1]) + _bias(first, inits, w1.shape[1]) @ rows
    dtype = onnx.helper.tensor_dtype_to_np_dtype(inits[second.input[1]].data_type)
    if len(second.input) > 2 and second.input[2]:
        b = b.reshape(inits[second.input[2]].dims)
    w = w.T if _trans_b(second) else w
    return numpy_helper.from_array(np.ascontiguousarray(w).astype(dtype)), numpy_helper.from_array(
        b.astype(dtype)
    )


def _widths(model: onnx.ModelProto) -> dict[str, int]:
    """The last dimension of each rank-2 value whose type gives it."""
    out: dict[str, int] = {}
    for v in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        dims = v.type.tensor_type.shape.dim
        if len(dims) == 2 and dims[1].HasField("dim_value"):
            out[v.name] = dims[1].dim_value
    for t in model.graph.initializer:
        if len(t.dims) == 2:
            out[t.name] = t.dims[1]
    return out


def _widen(graph: onnx.GraphProto, name: str, by: int) -> None:
    """In place: the declared width of `name` (a Concat's output) changed by `by`, where
    it is declared as a number (no shape, or a symbolic width, still holds)."""
    for v in graph.value_info:
        dims = v.type.tensor_type.shape.dim
        if v.name == name and len(dims) == 2 and dims[1].HasField("dim_value"):
            dims[1].dim_value += by
