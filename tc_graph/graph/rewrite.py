"""Replace groups of ONNX nodes by `TcKernel` nodes (domain `ai.tc_graph`, docs/onnx.md).

The result is a new model; the input is never mutated. Nodes are re-sorted
topologically (stable: untouched nodes keep their relative order, each fused node goes
as early as its inputs allow), because a convex group can need a place that none of its
original nodes had — e.g. one member feeds an outside node that comes before another
member's outside producer.

The IR version is left as the caller made it: adding the `ai.tc_graph` opset import
needs no newer IR, and the onnxruntime we support (1.31.1) loads IR versions up to 13
but refuses 14, onnx 1.23's `make_model` default — a model onnxruntime already ran keeps
working.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import onnx

from ..errors import TcError
from ..onnx_domain import ONNX_DOMAINS, TC_DOMAIN, TC_DOMAIN_VERSION, TC_OP
from .model import check as check_model
from .model import copy_without_initializers, declare_initializers, node_inputs, overridable
from .partition import Group

# The kernel_key rule, shared with ort_op.c (check_key): a key names what the node computes.
_KEY_TAG = b"tc_graph TcKernel key 1"
KEY_STRINGS = ("source", "entry", "options")
KEY_INTS = (
    "input_dtypes", "input_ranks", "input_shapes", "output_dtypes", "output_ranks",
    "output_shapes",
)  # fmt: skip
# A node that serves every size of one symbolic dimension (docs/onnx.md, "Symbolic dimensions") names
# the sizes it has kernels for and which of its tensors lead with that dimension.
ROW_INTS = ("row_sizes", "row_tensors")
# A node whose kernel serves every size (docs/onnx.md, "Kernels for every size"): [1];
# and the sizes it has kernels specialised to, its kernel's sizes for each, one after another.
EVERY_SIZE = "every_size"
EVERY_SIZE_AT = "every_size_at"
# The sizes each of its kernels for every size made its choices at: the node's own kernel
# first, then each other one's (other_key), one list after another.
EVERY_SIZE_FROM = "every_size_from"


def kernel_key(attributes: Mapping[str, object]) -> str:
    """The kernel_key that a TcKernel node's other attributes give: "tck-" and 40 hex digits
    of the sha256 of the source, entry and options strings (their bytes) and the six int
    lists (as decimal text joined by commas), each preceded by its length in 8 bytes.

    Deriving the key from the content, and checking it wherever a node is opened (prepare,
    the native op), means a model cannot name another model's kernel: same key, same
    source. The compiler and tc_graph version are not part of it, so a model carries its
    keys to any machine; the cache entry records which build made it (cc.adopt)."""
    h = hashlib.sha256()

    def part(data: bytes) -> None:
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    part(_KEY_TAG)
    for name in KEY_STRINGS:
        value = attributes[name]
        part(value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass"))
    sizes = list(attributes.get("row_sizes") or ())  # type: ignore[call-overload]
    every = tuple(
        n
        for n in (EVERY_SIZE, EVERY_SIZE_AT, EVERY_SIZE_FROM)
        if EVERY_SIZE in attributes and n in attributes
    )
    for name in KEY_INTS + every + (ROW_INTS if sizes else ()):
        part(",".join(str(int(x)) for x in attributes[name]).encode())  # type: ignore[attr-defined]
    for rows in sizes[1:]:
        name = row_source(int(rows))
        if name in attributes:
            value = attributes[name]
            part(name.encode())
            part(value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass"))
    return "tck-" + h.hexdigest()[:40]


def row_source(rows: int) -> str:
    """The attribute holding a rows node's source for `rows` rows, where it has its own."""
    return f"row_source_{rows}"


def special_key(key: str, k: int) -> str:
    """The cache key of a node for every size's kernel specialised to its k-th sizes."""
    return f"{key}-s{k}"


def other_key(key: str, k: int) -> str:
    """The cache key of a node for every size's k-th other kernel for every size (its
    choices made at the (k + 1)-th sizes of every_size_from)."""
    return f"{key}-p{k}"


def variant_key(key: str, rows: int) -> str:
    """The cache key of a rows node's kernel for `rows` rows: derived from the node's key,
    which covers every size it names, so it names its content as the key does."""
    return f"{key}-r{rows}"


@dataclass(frozen=True)
class NodeAttrs:
    """What a translated group becomes: the TcKernel node's inputs, outputs and
    attributes (docs/onnx.md), plus initializers the translation introduces (e.g. a
    pre-transposed weight) — their names must be new and may appear in `inputs`.

    dtypes are ONNX element type codes; shapes are full static shapes, one per input /
    output (ranks and the flattened `*_shapes` attribute are derived from them).
    """

    source: str
    entry: str
    options: str
    kernel_key: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_dtypes: tuple[int, ...]
    output_dtypes: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    initializers: tuple[onnx.TensorProto, ...] = ()
    # A rows node: the row counts it has kernels for (the shapes are those of the first),
    # one flag per input then output (how many leading dimensions the rows span, 0 where
    # none), and the symbolic dimensions' names, which the outputs' value_info take.
    row_sizes: tuple[int, ...] = ()
    row_tensors: tuple[int, ...] = ()
    row_symbols: tuple[str, ...] = ()
    # The sources of sizes after the first that have their own (translated for that many
    # rows: a weight's layout may differ), by size.
    row_sources: Mapping[int, str] = field(default_factory=dict)
    # A node for every size: its shapes are the sample its kernel's choices were made at;
    # the sizes of its specialised kernels, each in the order of the kernel's sizes.
    every_size: bool = False
    every_size_at: tuple[tuple[int, ...], ...] = ()
    # Where each of its kernels for every size made its choices: its own, then others'.
    every_size_from: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if not (len(self.inputs) == len(self.input_dtypes) == len(self.input_shapes)):
            raise TcError("NodeAttrs: inputs, input_dtypes and input_shapes differ in length")
        if not (len(self.outputs) == len(self.output_dtypes) == len(self.output_shapes)):
            raise TcError("NodeAttrs: outputs, output_dtypes and output_shapes differ in length")
        if not self.outputs:
            raise TcError("NodeAttrs: a TcKernel needs at least one output")
        if len(set(self.outputs)) != len(self.outputs):
            raise TcError("NodeAttrs: an output name appears twice")

    def attributes(self) -> dict[str, object]:
        """The node attributes, by name, as docs/onnx.md lists them."""
        return {
            "source": self.source,
            "entry": self.entry,
            "options": self.options,
            "kernel_key": self.kernel_key,
            "input_dtypes": [int(d) for d in self.input_dtypes],
            "output_dtypes": [int(d) for d in self.output_dtypes],
            "input_ranks": [len(s) for s in self.input_shapes],
            "output_ranks": [len(s) for s in self.output_shapes],
            "input_shapes": [int(d) for s in self.input_shapes for d in s],
            "output_shapes": [int(d) for s in self.output_shapes for d in s],
            **(
                {"row_sizes": list(self.row_sizes), "row_tensors": list(self.row_tensors)}
                if self.row_sizes
                else {}
            ),
            **{row_source(r): text for r, text in sorted(self.row_sources.items())},
            **({EVERY_SIZE: [1]} if self.every_size else {}),
            **(
                {EVERY_SIZE_AT: [int(n) for at in self.every_size_at for n in at]}
                if self.every_size and self.every_size_at
                else {}
            ),
            **(
                {EVERY_SIZE_FROM: [int(n) for at in self.every_size_from for n in at]}
                if self.every_size and self.every_size_from
                else {}
            ),
        }


def make_tc_node(name: str, attrs: NodeAttrs) -> onnx.NodeProto:
    """One TcKernel NodeProto. Empty int lists (all-scalar shapes) are typed explicitly,
    since onnx cannot infer an attribute type from an empty list."""
    node = onnx.helper.make_node(
        TC_OP, list(attrs.inputs), list(attrs.outputs), name=name, domain=TC_DOMAIN
    )
    for key, value in attrs.attributes().items():
        if isinstance(value, list) and not value:
            node.attribute.append(
                onnx.helper.make_attribute(key, value, attr_type=onnx.AttributeProto.INTS)
            )
        else:
            node.attribute.append(onnx.helper.make_attribute(key, value))
    return node


_DOC_HEAD = "tc_graph: this node replaces these nodes of the original model (op_type name):"
# The heading of TcKernels optimized before other nodes carried listings.
_TC_DOC_HEAD = "tc_graph: this TcKernel replaces these nodes of the original model (op_type name):"


def replaced_doc(nodes: Sequence[onnx.NodeProto]) -> str:
    """The doc_string of a node that replaces `nodes` (a TcKernel; a Conv with a batch
    normalization folded in, a Gemm with another composed in): the nodes of the user's
    model it stands for, one `op_type "name"` line each (the name as a JSON string, empty
    for an unnamed node), so viewers such as Netron show what was fused. A node of
    `nodes` that itself replaced others counts as those."""
    entries = [e for n in nodes for e in (replaced_nodes(n) or [(n.op_type, n.name)])]
    lines = [_DOC_HEAD]
    lines += [f"{op_type} {json.dumps(name, ensure_ascii=False)}" for op_type, name in entries]
    return "\n".join(lines)


def replaced_nodes(node: onnx.NodeProto) -> list[tuple[str, str]]:
    """(op_type, name) of each node that `node` replaced, read back from its doc_string;
    empty when the doc_string is not one replaced_doc wrote."""
    lines = node.doc_string.split("\n")
    if lines[0] not in (_DOC_HEAD, _TC_DOC_HEAD):
        return []
    out = []
    for line in lines[1:]:
        op_type, _, name = line.partition(" ")
        try:
            value = json.loads(name)
        except ValueError:
            return []
        if not isinstance(value, str):
            return []
        out.append((op_type, value))
    return out


def rewrite(
    model: onnx.ModelProto,
    replacements: Sequence[tuple[Group, NodeAttrs]],
    *,
    check: bool = True,
) -> onnx.ModelProto:
    """A copy of `model` with each group replaced by one TcKernel node `tc_fused_<k>`.

    Group node indices refer to `model.graph.node` (use the model the groups were
    computed on, i.e. `Graph.model`). Each TcKernel's doc_string lists the nodes it
    replaced (replaced_doc). Initializers and Constant/standard nodes that only
    fed removed nodes are dropped; the `ai.tc_graph` opset (version 1) is declared; the
    result passes onnx.checker (when `check`). TcError when a replacement does not fit
    its group: overlapping groups, a value used outside that the kernel does not
    produce, an input the kernel cannot see, a new initializer whose name is taken, a
    cycle (a group not convex, or groups not jointly acyclic).
    """
    old_nodes = list(model.graph.node)
    removed: dict[int, int] = {}  # node index -> replacement number
    for k, (group, attrs) in enumerate(replacements):
        _check_replacement(k, group, attrs, old_nodes, removed)

    out = copy_without_initializers(model)
    graph = out.graph

    existing_names = {n.name for n in old_nodes if n.name}
    value_names = _all_value_names(model)
    fused: list[tuple[int, onnx.NodeProto]] = []  # (sort key, node)
    new_inits: list[onnx.TensorProto] = []
    counter = 0
    for group, attrs in replacements:
        for tensor in attrs.initializers:
            if _shared(tensor, new_inits):
                continue
            if tensor.name in value_names:
                raise TcError(f"new initializer '{tensor.name}' clashes with an existing value")
            value_names.add(tensor.name)
            new_inits.append(tensor)
        while f"tc_fused_{counter}" in existing_names:
            counter += 1
        name = f"tc_fused_{counter}"
        existing_names.add(name)
        counter += 1
        node = make_tc_node(name, attrs)
        node.doc_string = replaced_doc([old_nodes[i] for i in sorted(group.nodes)])
        fused.append((min(group.nodes), node))

    kept = [(i, node) for i, node in enumerate(old_nodes) if i not in removed]
    available = {v.name for v in graph.input} | {t.name for t in model.graph.initializer}
    available |= {t.name for t in new_inits} | {t.name for t in graph.sparse_initializer}
    ordered = _stable_toposort([*kept, *fused], available)
    ordered = _drop_dead(ordered, old_nodes, [v.name for v in graph.output])

    del graph.node[:]
    graph.node.extend(ordered)
    interface = overridable(model)
    _add_used_initializers(graph, [*model.graph.initializer, *new_inits], interface)
    declare_initializers(out, (t.name for t in model.graph.initializer))
    _tidy_value_info(graph, replacements)
    if not any(o.domain == TC_DOMAIN for o in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid(TC_DOMAIN, TC_DOMAIN_VERSION))

    if check:
        try:
            check_model(out, initializers=new_inits)
        except TcError as exc:
            raise TcError(f"the rewritten model is invalid: {exc.message}") from exc
    return out


def _shared(tensor: onnx.TensorProto, added: Sequence[onnx.TensorProto]) -> bool:
    """Whether an earlier replacement already added this very initializer: two groups
    that pack the same weight name it alike (translate's `<weight>__tc_t`), and one copy
    serves both."""
    return any(t.name == tensor.name and t == tensor for t in added)


def _check_replacement(
    k: int,
    group: Group,
    attrs: NodeAttrs,
    old_nodes: Sequence[onnx.NodeProto],
    removed: dict[int, int],
) -> None:
    if not group.nodes:
        raise TcError(f"replacement {k}: the group is empty")
    produced: set[str] = set()
    for index in group.nodes:
        if not 0 <= index < len(old_nodes):
            raise TcError(f"replacement {k}: node index {index} is not in the model")
        if index in removed:
            raise TcError(
                f"replacements {removed[index]} and {k} both contain node {index} "
                f"('{old_nodes[index].name or old_nodes[index].op_type}')"
            )
        removed[index] = k
        produced.update(n for n in old_nodes[index].output if n)
    missing = [v for v in group.outputs if v not in attrs.outputs]
    if missing:
        raise TcError(f"replacement {k}: the kernel does not produce '{missing[0]}', used outside")
    foreign = [v for v in attrs.outputs if v not in produced]
    if foreign:
        raise TcError(f"replacement {k}: output '{foreign[0]}' is not computed by the group")
    inner = [v for v in attrs.inputs if v in produced]
    if inner:
        raise TcError(f"replacement {k}: input '{inner[0]}' is computed inside the group")


def _all_value_names(model: onnx.ModelProto) -> set[str]:
    graph = model.graph
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names |= {t.name for t in graph.sparse_initializer}
    for node in graph.node:
        names.update(n for n in node.output if n)
    return names


def _stable_toposort(
    items: Sequence[tuple[int, onnx.NodeProto]], available: set[str]
) -> list[onnx.NodeProto]:
    """Kahn's algorithm, taking the ready node with the smallest key first, so nodes
    keep their original order wherever the dependencies allow."""
    producer: dict[str, int] = {}
    for pos, (_, node) in enumerate(items):
        for name in node.output:
            if name:
                producer[name] = pos
    indegree = [0] * len(items)
    users: list[list[int]] = [[] for _ in items]
    for pos, (_, node) in enumerate(items):
        deps = set()
        for name in node_inputs(node):
            if name in producer:
                deps.add(producer[name])
            elif name not in available:
                label = node.name or node.op_type
                raise TcError(
                    f"node '{label}' reads '{name}', which no node computes after the rewrite"
                )
        deps.discard(pos)
        indegree[pos] = len(deps)
        for d in deps:
            users[d].append(pos)
    heap = [(items[p][0], p) for p in range(len(items)) if indegree[p] == 0]
    heapq.heapify(heap)
    out: list[onnx.NodeProto] = []
    while heap:
        _, pos = heapq.heappop(heap)
        out.append(items[pos][1])
        for u in users[pos]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(heap, (items[u][0], u))
    if len(out) != len(items):
        raise TcError("the rewrite creates a cycle: a replaced group is not convex")
    return out


def _drop_dead(
    nodes: list[onnx.NodeProto], old_nodes: Sequence[onnx.NodeProto], graph_outputs: list[str]
) -> list[onnx.NodeProto]:
    """Remove standard-domain nodes left without readers by the rewrite (e.g. the
    Constant that fed a weight now baked into a kernel). Nodes already dead in the
    input model are the user's business and stay."""
    was_read = set(graph_outputs)
    for node in old_nodes:
        was_read.update(node_inputs(node))
    nodes = list(nodes)
    while True:
        read = set(graph_outputs)
        for node in nodes:
            read.update(node_inputs(node))
        dead = [
            i
            for i, node in enumerate(nodes)
            if node.domain in ONNX_DOMAINS
            and not any(n in read for n in node.output if n)
            and any(n in was_read for n in node.output if n)
        ]
        if not dead:
            return nodes
        dead_set = set(dead)
        nodes = [node for i, node in enumerate(nodes) if i not in dead_set]


def _add_used_initializers(
    graph: onnx.GraphProto, initializers: list[onnx.TensorProto], interface: frozenset[str]
) -> None:
    """Copy in the initializers some node still reads (graph inputs with defaults, the
    `interface`, stay too: a caller may feed them); the others are dropped uncopied."""
    read = {v.name for v in graph.output} | set(interface)
    for node in graph.node:
        read.update(node_inputs(node))
    graph.initializer.extend(t for t in initializers if t.name in read)


def _tidy_value_info(
    graph: onnx.GraphProto, replacements: Sequence[tuple[Group, NodeAttrs]]
) -> None:
    """Drop value_info of values that no longer exist; declare each kernel output's
    type (onnx shape inference does not know TcKernel)."""
    exists = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        exists.update(n for n in node.output if n)
    for i in reversed(range(len(graph.value_info))):
        if graph.value_info[i].name not in exists:
            del graph.value_info[i]
    declared = {v.name for v in graph.value_info} | {v.name for v in graph.output}
    for _, attrs in replacements:
        rows = attrs.row_tensors[len(attrs.inputs) :] if attrs.row_sizes else ()
        for k, (name, dtype, shape) in enumerate(
            zip(attrs.outputs, attrs.output_dtypes, attrs.output_shapes, strict=True)
        ):
            dims: list[int | str] = list(shape)
            if k < len(rows) and rows[k]:
                dims[: len(attrs.row_symbols)] = attrs.row_symbols
            if name not in declared:
                declared.add(name)
                graph.value_info.append(onnx.helper.make_tensor_value_info(name, int(dtype), dims))
