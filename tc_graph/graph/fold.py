"""BatchNormalization folded into the Conv before it, before the model is partitioned.

onnxruntime's own optimizer makes this fold (its Conv+BatchNormalization fusion), so a
Conv+BatchNormalization+Relu group raced a tc_graph kernel doing three things against one
fused onnxruntime Conv, and the cost model split the normalization from the convolution
before measuring (a memory-bound cluster joined with a contraction). Folded here, the
group is a Conv with a bias and an elementwise epilogue: one contraction kernel whose
accumulators start at the bias and apply the Relu in the store (poly/scop.py).

For inference-mode y = scale (x - mean) / sqrt(var + epsilon) + B on x = W * X + b:
W' = W s and b' = (b - mean) s + B with s = scale / sqrt(var + epsilon), per output
channel, computed in float64 and rounded once to the weights' type.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
import onnx
from onnx import numpy_helper

from ..onnx_domain import ONNX_DOMAINS
from . import external
from .model import declare_initializers, node_inputs, overridable
from .rewrite import replaced_doc

FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE})


@dataclass(frozen=True)
class _Pair:
    """A Conv and the BatchNormalization that is its output's only reader."""

    conv: onnx.NodeProto
    norm: onnx.NodeProto


def batch_norms_folded(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each foldable Conv -> BatchNormalization pair as one Conv
    with new weights and bias (`model` itself when none folds; it is never mutated).

    A pair folds when the BatchNormalization is in inference mode (one output), the
    Conv's output has no other reader and is not a graph output, and the weights, the
    bias and the four normalization tensors are float constants of matching shapes
    (`constants`: initializers no graph input overrides and not in external data, or
    made by a ConstantOfShape)."""
    graph = model.graph
    inits = constants(model)
    pairs = [p for p in _pairs(graph) if _foldable(p, inits)]
    if not pairs:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    taken = value_names(out.graph)
    new_inits: list[onnx.TensorProto] = []
    replaced: dict[str, onnx.NodeProto] = {}
    for pair in pairs:
        conv = onnx.NodeProto()
        conv.CopyFrom(pair.conv)
        weight, bias = _folded(pair, inits)
        for tensor, base in ((weight, conv.input[1]), (bias, f"{conv.input[1]}_bias")):
            tensor.name = fresh_name(f"{base}__bn", taken)
            new_inits.append(tensor)
        del conv.input[:]
        conv.input.extend([pair.conv.input[0], weight.name, bias.name])
        conv.output[0] = pair.norm.output[0]
        conv.doc_string = replaced_doc([pair.conv, pair.norm])
        replaced[pair.conv.output[0]] = conv
    _replace_nodes(out.graph, replaced)
    out.graph.initializer.extend(new_inits)
    old = {name for p in pairs for name in (*p.conv.input[1:], *p.norm.input[1:]) if name}
    drop_unused(out.graph, old, replaced)
    declare_initializers(out, (t.name for t in graph.initializer))
    return out


@dataclass(frozen=True)
class Constant:
    """A value known before the model runs: its ONNX element type, its shape, and how to
    read it (only for the pairs that fold: onnx's light_* models make every weight with
    a ConstantOfShape, hundreds of MB in all)."""

    data_type: int
    dims: tuple[int, ...]
    read: Callable[[], np.ndarray]


def constants(model: onnx.ModelProto) -> dict[str, Constant]:
    """The initializers a node may treat as constants (not overridden by a graph input,
    not external data), and the outputs of ConstantOfShape nodes of a constant shape."""
    inputs = overridable(model)
    out = {
        t.name: Constant(t.data_type, tuple(t.dims), partial(numpy_helper.to_array, t))
        for t in model.graph.initializer
        if t.name not in inputs and not external.is_external(t)
    }
    for node in model.graph.node:
        shape = out.get(node.input[0]) if node.input else None
        if node.op_type != "ConstantOfShape" or node.domain not in ONNX_DOMAINS or shape is None:
            continue
        dims = tuple(int(d) for d in shape.read())
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        fill = numpy_helper.to_array(value).reshape(-1) if value else np.zeros(1, np.float32)
        data_type = value.data_type if value else onnx.TensorProto.FLOAT
        out[node.output[0]] = Constant(data_type, dims, partial(np.full, dims, fill[0]))
    return out


def _pairs(graph: onnx.GraphProto) -> list[_Pair]:
    """Each BatchNormalization whose input a Conv makes and nothing else reads."""
    producer = {name: n for n in graph.node for name in n.output if name}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node_inputs(node):
            readers[name] = readers.get(name, 0) + 1
    outputs = {v.name for v in graph.output}
    pairs = []
    for node in graph.node:
        if node.op_type != "BatchNormalization" or node.domain not in ONNX_DOMAINS:
            continue
        conv = producer.get(node.input[0])
        if (conv is None or conv.op_type != "Conv" or conv.domain not in ONNX_DOMAINS
                or readers.get(node.input[0]) != 1 or node.input[0] in outputs):  # fmt: skip
            continue
        pairs.append(_Pair(conv, node))
    return pairs


def _foldable(pair: _Pair, inits: Mapping[str, Constant]) -> bool:
    """Whether the pair's tensors are all float constants of one type and agreeing
    shapes, and the normalization is in inference mode."""
    norm, conv = pair.norm, pair.conv
    attrs = {a.name: a for a in norm.attribute}
    if len([o for o in norm.output if o]) != 1 or len(norm.input) != 5:
        return False
    if any(onnx.helper.get_attribute_value(attrs[k]) != v for k, v in
           (("training_mode", 0), ("spatial", 1)) if k in attrs):  # fmt: skip
        return False
    names = [*conv.input[1:], *norm.input[1:]]
    tensors = [inits.get(name) for name in names if name]
    if len(tensors) != len([n for n in names if n]) or len(conv.input) < 2:
        return False
    if any(t is None for t in tensors):
        return False
    if len({t.data_type for t in tensors}) != 1 or tensors[0].data_type not in FLOATS:
        return False
    channels = tensors[0].dims[0] if tensors[0].dims else -1
    return len(tensors[0].dims) >= 3 and all(list(t.dims) == [channels] for t in tensors[1:])


def _folded(
    pair: _Pair, inits: Mapping[str, Constant]
) -> tuple[onnx.TensorProto, onnx.TensorProto]:
    """The folded weights and bias (unnamed)."""
    conv, norm = pair.conv, pair.norm
    weight = inits[conv.input[1]].read()
    scale, shift, mean, var = (inits[name].read().astype(np.float64) for name in norm.input[1:])
    bias = np.zeros(weight.shape[0])
    if len(conv.input) > 2 and conv.input[2]:
        bias = inits[conv.input[2]].read().astype(np.float64)
    epsilon = next((a.f for a in norm.attribute if a.name == "epsilon"), 1e-5)
    s = scale / np.sqrt(var + epsilon)
    w = weight.astype(np.float64) * s.reshape((-1,) + (1,) * (weight.ndim - 1))
    b = (bias - mean) * s + shift
    return numpy_helper.from_array(w.astype(weight.dtype)), numpy_helper.from_array(
        b.astype(weight.dtype)
    )


def value_names(graph: onnx.GraphProto) -> set[str]:
    """Every value name the graph uses, its subgraphs' own included (If and Loop bodies),
    so a new initializer's name collides with none."""
    names = {t.name for t in graph.initializer} | {v.name for v in graph.input}
    for node in graph.node:
        names.update(node_inputs(node))
        names.update(node.output)
        for attr in node.attribute:
            for body in (*attr.graphs, *([attr.g] if attr.HasField("g") else [])):
                names |= value_names(body)
    return names


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, or `base` with the first free suffix; recorded as taken."""
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


def _replace_nodes(graph: onnx.GraphProto, convs: Mapping[str, onnx.NodeProto]) -> None:
    """Each folded Conv in its place (keyed by its old output) and its normalization
    gone: the Conv now writes the normalization's output."""
    nodes = []
    for node in graph.node:
        if node.output and node.output[0] in convs:
            nodes.append(convs[node.output[0]])
        elif not (node.op_type == "BatchNormalization" and node.input and node.input[0] in convs):
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def drop_unused(graph: onnx.GraphProto, old: set[str], gone: Collection[str]) -> None:
    """In place: the `old` constants that no node reads any more (the tensors folded,
    unless something else shares them: initializers, and the ConstantOfShape nodes that
    made them, whose shapes go too when unread), and the value_info of the `gone` values
    (no node makes them any more)."""
    used = {name for node in graph.node for name in node_inputs(node)}
    used |= {v.name for v in graph.output}
    dead = [n for n in graph.node if n.op_type == "ConstantOfShape"
            and n.output[0] in old and n.output[0] not in used]  # fmt: skip
    old = old | {name for n in dead for name in n.input}
    nodes = [n for n in graph.node if n not in dead]
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in graph.node for name in node_inputs(node)}
    used |= {v.name for v in graph.output}
    kept = [t for t in graph.initializer if t.name in used or t.name not in old]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    info = [v for v in graph.value_info if v.name not in gone]
    del graph.value_info[:]
    graph.value_info.extend(info)
