"""An ONNX model as Graphviz DOT text: what `tc-graph optimize --graph-dot` writes.

One DOT node per ONNX node, graph input and graph output, one edge per value passed
(labelled with the tensor's name); TcKernel nodes are filled and list the nodes they
replaced (read from their doc_string). Text only: Graphviz itself is not needed here.
"""

from __future__ import annotations

import onnx

from ..onnx_domain import TC_DOMAIN, TC_OP
from .model import node_inputs
from .rewrite import replaced_nodes

_TC_FILL = "#9ecae1"
_ORT_FILL = "#eeeeee"


def quote(text: str) -> str:
    """A DOT double-quoted string holding `text` exactly (newlines as the \\n escape)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def _label(node: onnx.NodeProto, index: int) -> str:
    title = f"{node.op_type}\n{node.name}" if node.name else f"{node.op_type}\n#{index}"
    if node.domain != TC_DOMAIN or node.op_type != TC_OP:
        return title
    replaced = replaced_nodes(node)
    lines = [f"{op} {name}".rstrip() for op, name in replaced]
    return "\n".join([title, f"replaces {len(replaced)} nodes:", *lines])


def to_dot(model: onnx.ModelProto) -> str:
    """The model's graph as DOT text: node ids are n<index> for graph.node[index],
    in<k> and out<k> for the graph's runtime inputs and its outputs."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    lines = [
        f"digraph {quote(graph.name or 'model')} {{",
        "  rankdir=TB;",
        f'  node [shape=box, style="rounded,filled", fillcolor="{_ORT_FILL}", fontsize=10];',
    ]
    producer: dict[str, str] = {}
    inputs = [v.name for v in graph.input if v.name not in initializers]
    for k, name in enumerate(inputs):
        lines.append(f"  in{k} [shape=ellipse, style=solid, label={quote(name)}];")
        producer[name] = f"in{k}"
    for i, node in enumerate(graph.node):
        fill = _TC_FILL if node.domain == TC_DOMAIN and node.op_type == TC_OP else _ORT_FILL
        lines.append(f"  n{i} [label={quote(_label(node, i))}, fillcolor={quote(fill)}];")
        producer.update((v, f"n{i}") for v in node.output if v)
    for i, node in enumerate(graph.node):
        for v in node_inputs(node):
            if v in producer:
                lines.append(f"  {producer[v]} -> n{i} [label={quote(v)}];")
    for k, value in enumerate(graph.output):
        lines.append(f"  out{k} [shape=ellipse, style=solid, label={quote(value.name)}];")
        if value.name in producer:
            lines.append(f"  {producer[value.name]} -> out{k} [label={quote(value.name)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
