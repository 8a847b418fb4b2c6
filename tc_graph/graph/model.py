"""An ONNX model seen as a dependency graph: nodes, static value types, known constants.

The partitioner needs three facts the ModelProto only implies: who feeds whom (a
networkx DiGraph over node indices), which values have a fully static shape (the only
ones a compiled kernel can take), and which values are constants (so a translator can
read them as attributes or fold them into the kernel).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import networkx as nx
import numpy as np
import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from onnx import numpy_helper

from ..arguments import whole
from ..errors import TcError
from ..onnx_domain import ONNX_DOMAINS, OPSET, TC_DOMAIN, TC_OP
from . import external

ValueType = tuple[np.dtype, tuple[int, ...]]

# Constant folding is for shape arithmetic and small tables, not for weights: bigger
# tensors stay as they are (onnxruntime folds them itself if it wants to).
_FOLD_MAX_ELEMENTS = 1 << 16
_NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "Dropout",
    }
)


def load(
    model: str | os.PathLike[str] | onnx.ModelProto, fixed: Mapping[str, int] | None = None
) -> onnx.ModelProto:
    """Read and check a model, then add inferred shapes (with data propagation); the
    symbolic dimensions named in `fixed` are pinned to their sizes first (fix_dims).

    The input proto is never mutated (a proto argument is copied once). A file's big
    initializers stored as external data stay in their files (external.load). Raises
    TcError for a missing file, a file that is not an ONNX model, or a model the ONNX
    checker rejects. Checking and inference run on a skeleton whose big initializers are graph
    inputs of the same type: serializing hundreds of MB of weights twice per load (the
    checker and inference both do) was most of the time, and it lifts the 2 GB limit.
    """
    if isinstance(checked_model_argument(model), onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
    else:
        path = model_file(model)
        try:
            proto = external.load(path)
        except TcError:
            raise
        except Exception as exc:  # protobuf DecodeError, external data errors, ...
            raise TcError(f"'{path}' is not a readable ONNX model: {exc}") from exc
    fix_dims(proto, fixed or {})
    skeleton = _skeleton(proto)
    _check(proto, skeleton)
    bare = _infer_shapes(_without_hints(skeleton))
    if bare is not None:
        # The model's annotations that agree with what its inputs and initializers
        # imply; the second inference propagates them through ops it cannot infer.
        hints = _merge_hints(bare.graph.value_info, skeleton.graph.value_info)
        outputs = _merge_hints(bare.graph.output, skeleton.graph.output, keep_all=False)
        for field_value, merged in (
            (skeleton.graph.value_info, hints),
            (skeleton.graph.output, outputs),
        ):
            del field_value[:]
            field_value.extend(merged)
    inferred = _infer_shapes(skeleton)
    if inferred is not None:
        graph = proto.graph
        nodes = _with_own_bodies(inferred.graph.node, graph.node)
        for field_name, merged in (
            ("node", nodes),
            ("value_info", inferred.graph.value_info),
            ("output", inferred.graph.output),
        ):
            field_value = getattr(graph, field_name)
            del field_value[:]
            field_value.extend(merged)
    _contrib_shapes(proto)
    return proto


def _contrib_shapes(proto: onnx.ModelProto) -> None:
    """Types for the values onnx's inference left untyped past an operator it has no
    schema for (com.microsoft's Gelu, Attention, ...: a model through onnxruntime's
    transformer optimizer lost every type after its first contrib op), from onnxruntime's
    symbolic shape inference, which knows them. Added as value_info, never replacing a
    type onnx gave; where that inference fails too, the values stay untyped."""
    graph = proto.graph
    if all(n.domain in ONNX_DOMAINS or n.domain == TC_DOMAIN for n in graph.node):
        return
    typed = {v.name for v in (*graph.input, *graph.value_info, *graph.output)
             if _static_type(v.type) is not None}  # fmt: skip
    wanted = {o for n in graph.node for o in n.output if o and o not in typed}
    if not wanted:
        return
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        inferred = SymbolicShapeInference.infer_shapes(_skeleton(proto), auto_merge=True)
    except Exception:  # an op it cannot infer either (its own exception types)
        return
    if inferred is None:
        return
    found = [v for v in (*inferred.graph.value_info, *inferred.graph.output)
             if v.name in wanted and _static_type(v.type) is not None]  # fmt: skip
    names = {v.name for v in found}
    kept = [v for v in graph.value_info if v.name not in names]
    del graph.value_info[:]
    graph.value_info.extend([*kept, *found])


def symbolic_dims(graph: onnx.GraphProto) -> list[str]:
    """The names of the symbolic dimensions (dim_param) of a graph's inputs, outputs and
    annotated values, in order of first appearance."""
    names: dict[str, None] = {}
    for value in (*graph.input, *graph.output, *graph.value_info):
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param:
                    names.setdefault(dim.dim_param, None)
    return list(names)


def input_symbols(graph: onnx.GraphProto) -> list[str]:
    """The symbolic dimensions (dim_param) of a graph's inputs, in order: the sizes a
    caller chooses (the others follow from them)."""
    names: dict[str, None] = {}
    for value in graph.input:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param:
                    names.setdefault(dim.dim_param, None)
    return list(names)


def checked_model_argument(model: object) -> str | os.PathLike[str] | onnx.ModelProto:
    """The model argument of the public API, which takes a path or a ModelProto (TcError
    otherwise: a TypeError from Path or onnx.load escaped)."""
    if not isinstance(model, str | os.PathLike | onnx.ModelProto):
        raise TcError(
            f"the model must be a path (str or os.PathLike) or an onnx.ModelProto, not "
            f"{type(model).__name__}",
            hint="for a serialized model, pass onnx.load_from_string(data)",
        )
    return model


def model_file(model: str | os.PathLike[str]) -> Path:
    """The path of a model file that exists (TcError otherwise)."""
    path = Path(model)
    if path.is_dir():
        raise TcError(f"'{path}' is a directory, not an ONNX model file")
    if not path.is_file():
        raise TcError(f"ONNX model file '{path}' does not exist")
    return path


def fix_dims(proto: onnx.ModelProto, fixed: Mapping[str, int]) -> None:
    """Pin symbolic dimensions to sizes in place, with onnxruntime's make_dim_param_fixed
    (what its make_dynamic_shape_fixed tool does): a model with a dynamic batch then has
    static types, and its groups can be translated. A name the model does not use, or a
    size that is not a positive integer, is a TcError. Nothing to pin imports nothing:
    where torch is installed, onnxruntime.tools imports it (2.7 s)."""
    if not fixed:
        return
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

    known = symbolic_dims(proto.graph)
    for name, size in fixed.items():
        if name not in known:
            have = ", ".join(known) if known else "none"
            raise TcError(
                f"fix_shapes: the model has no symbolic dimension '{name}'",
                hint=f"its symbolic dimensions: {have}",
            )
        n = whole(size)
        if n is None or n < 1:
            raise TcError(
                f"fix_shapes: dimension '{name}' must be pinned to a positive integer, not {size!r}"
            )
        if n >= 2**31:  # tc_graph's sizes (binding); protobuf's int64 raised ValueError
            raise TcError(
                f"fix_shapes: dimension '{name}' must be pinned to a positive integer up to "
                f"2^31 - 1, not {size!r}"
            )
        make_dim_param_fixed(proto.graph, name, n)


def _with_own_bodies(
    inferred: Iterable[onnx.NodeProto], original: Iterable[onnx.NodeProto]
) -> list[onnx.NodeProto]:
    """The inferred nodes, except that a node with subgraphs (If/Loop/Scan bodies) stays
    as the model wrote it: inference annotates the bodies, and optimize leaves them
    untouched."""
    out = list(inferred)
    for k, node in enumerate(original):
        if k < len(out) and _has_bodies(node) and out[k].output == node.output:
            out[k] = node
    return out


def _has_bodies(node: onnx.NodeProto) -> bool:
    return any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute
    )


def _without_hints(skeleton: onnx.ModelProto) -> onnx.ModelProto:
    """The skeleton without its value_info and the shapes of its outputs: a model's own
    annotations are hints that may contradict its inputs and initializers (onnx's lenient
    inference keeps them, and a kernel compiled for them fails at run time), so types are
    inferred from the inputs and initializers alone, then merged with the hints."""
    out = onnx.ModelProto()
    out.CopyFrom(skeleton)
    del out.graph.value_info[:]
    for value in out.graph.output:
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    return out


def _merge_hints(
    inferred: Iterable[onnx.ValueInfoProto],
    declared: Iterable[onnx.ValueInfoProto],
    *,
    keep_all: bool = True,
) -> list[onnx.ValueInfoProto]:
    """Inferred types, completed by the model's declared ones where these agree (a size
    that inference left unknown); a declared type that contradicts the inferred one is
    dropped. With `keep_all`, declared values that inference did not reach are kept
    (custom ops' outputs), after the inferred ones."""
    hints = {v.name: v for v in declared}
    out = []
    for value in inferred:
        hint = hints.get(value.name)
        out.append(_completed(value, hint) if hint is not None and _agrees(value, hint) else value)
    if keep_all:
        known = {v.name for v in out}
        out += [v for v in hints.values() if v.name not in known]
    return out


def _completed(inferred: onnx.ValueInfoProto, hint: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    """The inferred type with what it leaves unknown (element type, shape, sizes) taken
    from an agreeing declared one."""
    out = onnx.ValueInfoProto()
    out.CopyFrom(inferred)
    if out.type.WhichOneof("value") is None:
        out.type.CopyFrom(hint.type)
        return out
    if not hint.type.HasField("tensor_type"):
        return out
    mine, theirs = out.type.tensor_type, hint.type.tensor_type
    if not mine.elem_type:
        mine.elem_type = theirs.elem_type
    if not mine.HasField("shape"):
        if theirs.HasField("shape"):
            mine.shape.CopyFrom(theirs.shape)
        return out
    for dim, known in zip(mine.shape.dim, theirs.shape.dim, strict=True):
        if not dim.HasField("dim_value") and known.WhichOneof("value") is not None:
            dim.CopyFrom(known)
    return out


def _agrees(inferred: onnx.ValueInfoProto, declared: onnx.ValueInfoProto | None) -> bool:
    """Whether a declared type is compatible with the inferred one: same element type and
    rank, and equal sizes wherever both give a number."""
    if declared is None:
        return False
    a, b = inferred.type, declared.type
    if a.WhichOneof("value") != "tensor_type" or b.WhichOneof("value") != "tensor_type":
        return a.WhichOneof("value") is None
    ta, tb = a.tensor_type, b.tensor_type
    if ta.elem_type and tb.elem_type and ta.elem_type != tb.elem_type:
        return False
    if not ta.HasField("shape") or not tb.HasField("shape"):
        return tb.HasField("shape") or not ta.HasField("shape")
    if len(ta.shape.dim) != len(tb.shape.dim):
        return False
    return all(
        not (x.HasField("dim_value") and y.HasField("dim_value")) or x.dim_value == y.dim_value
        for x, y in zip(ta.shape.dim, tb.shape.dim, strict=True)
    )


def check(
    model: onnx.ModelProto, *, initializers: Iterable[onnx.TensorProto] | None = None
) -> None:
    """onnx.checker.check_model, fast on models with big weights and not limited to
    2 GB (see `load`); TcError if the model is invalid. `initializers`: the big
    initializers whose data to verify (default: all; reading each one's data costs a
    copy, so a caller that knows which are new can say so)."""
    _check(model, _skeleton(model), initializers)


def _check(
    proto: onnx.ModelProto,
    skeleton: onnx.ModelProto,
    initializers: Iterable[onnx.TensorProto] | None = None,
) -> None:
    try:
        onnx.checker.check_model(skeleton)
        _check_big_initializers(proto.graph.initializer if initializers is None else initializers)
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise TcError(
            f"invalid ONNX model: {str(exc).strip()}",
            hint="the model must pass onnx.checker.check_model",
        ) from exc


# The first IR version in which a graph input overrides the initializer of its name: before
# it every initializer was also listed as an input, and onnxruntime treats those as
# constants (its Graph::CanOverrideInitializer).
OVERRIDE_IR_VERSION = 4


def overridable(proto: onnx.ModelProto) -> frozenset[str]:
    """The initializers a run may override by feeding a graph input of their name: those
    listed as graph inputs, from IR version 4 on; none before (onnx's light_* models list
    every weight as an input, and onnxruntime folds them as constants all the same)."""
    if proto.ir_version < OVERRIDE_IR_VERSION:
        return frozenset()
    inputs = {v.name for v in proto.graph.input}
    return frozenset(t.name for t in proto.graph.initializer if t.name in inputs)


def declare_initializers(proto: onnx.ModelProto, before: Iterable[str]) -> None:
    """Before IR version 4 every initializer must also be a graph input (the checker says
    so): in place, declare the graph's initializers that are not inputs as inputs, and
    drop the inputs named in `before` (the initializers the graph had) that are no
    longer initializers. Nothing from IR version 4 on."""
    if proto.ir_version >= OVERRIDE_IR_VERSION:
        return
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    gone = set(before) - set(inits)
    kept = [v for v in graph.input if v.name not in gone]
    listed = {v.name for v in kept}
    kept += [
        onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims)
        for name, t in inits.items()
        if name not in listed
    ]
    del graph.input[:]
    graph.input.extend(kept)


def copy_without_initializers(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of everything but `graph.initializer` (cheap even for huge models)."""
    out = onnx.ModelProto()
    for desc, value in proto.ListFields():
        if desc.name != "graph":
            _copy_field(out, desc, value)
    for desc, value in proto.graph.ListFields():
        if desc.name != "initializer":
            _copy_field(out.graph, desc, value)
    return out


_SKELETON_MIN_BYTES = external.KEEP_EXTERNAL_BYTES


def _tensor_nbytes(tensor: onnx.TensorProto) -> int:
    dtype = _np_dtype(tensor.data_type)
    return int(np.prod(tensor.dims, dtype=np.int64)) * (dtype.itemsize if dtype else 1)


def _is_big(tensor: onnx.TensorProto) -> bool:
    return _tensor_nbytes(tensor) >= _SKELETON_MIN_BYTES


def _skeleton(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model with each big initializer turned into a graph input of its type (small
    ones stay: data propagation reads shape tensors)."""
    out = copy_without_initializers(proto)
    inputs = {v.name for v in proto.graph.input}
    for tensor in proto.graph.initializer:
        if not _is_big(tensor):
            out.graph.initializer.append(tensor)
        elif tensor.name not in inputs:
            out.graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            )
    return out


def _copy_field(dst: Message, desc: FieldDescriptor, value: object) -> None:
    """Copy one field (as `ListFields` gives it) into another message."""
    repeated = getattr(desc, "is_repeated", None)  # protobuf >= 6; `label` before
    if repeated is None:
        repeated = desc.label == desc.LABEL_REPEATED
    if repeated:
        getattr(dst, desc.name).extend(value)
    elif desc.message_type is not None:
        getattr(dst, desc.name).CopyFrom(value)
    else:
        setattr(dst, desc.name, value)


def _check_big_initializers(tensors: Iterable[onnx.TensorProto]) -> None:
    """What the checker would verify of the initializers left out of the skeleton: a
    known type, and as much data as the dims say."""
    for tensor in tensors:
        if not _is_big(tensor) or tensor.data_location == onnx.TensorProto.EXTERNAL:
            continue
        dtype = _np_dtype(tensor.data_type)
        if dtype is None:
            raise ValueError(f"initializer '{tensor.name}' has an unsupported data type")
        count = int(np.prod(tensor.dims, dtype=np.int64))
        if tensor.raw_data:
            if len(tensor.raw_data) != count * dtype.itemsize:
                raise ValueError(f"initializer '{tensor.name}': raw_data does not match dims")
        else:
            if len(numpy_helper.to_array(tensor).reshape(-1)) != count:
                raise ValueError(f"initializer '{tensor.name}': data does not match dims")


def _infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    """Shape inference with data propagation, falling back to none when it fails (an
    op it cannot handle just means fewer static types)."""
    for data_prop in (True, False):
        try:
            return onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=data_prop)
        except Exception:
            continue
    return None


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """Every value a node reads: its inputs (omitted optional ones dropped) and the
    outer-scope values its subgraphs (If/Loop/Scan bodies) capture."""
    names = [name for name in node.input if name]
    for name in _captured(node):
        if name not in names:
            names.append(name)
    return names


def _captured(node: onnx.NodeProto) -> list[str]:
    """Outer-scope names referenced inside a node's subgraph attributes."""
    out: list[str] = []
    for attr in node.attribute:
        graphs = list(attr.graphs)
        if attr.HasField("g"):
            graphs.append(attr.g)
        for sub in graphs:
            for name in _graph_free_names(sub):
                if name not in out:
                    out.append(name)
    return out


def _graph_free_names(graph: onnx.GraphProto) -> list[str]:
    """Names a (sub)graph reads without defining them itself."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.name for t in graph.sparse_initializer}
    free: list[str] = []
    for node in graph.node:
        for name in node_inputs(node):
            if name not in defined and name not in free:
                free.append(name)
        defined.update(n for n in node.output if n)
    for value in graph.output:
        if value.name not in defined and value.name not in free:
            free.append(value.name)
    return free


def to_graph(model: onnx.ModelProto) -> nx.DiGraph:
    """One graph node per ONNX node (key: its index in `model.graph.node`; data: `node`
    the NodeProto, `op` its op type), one edge per producer→consumer pair (data:
    `tensors`, the names of the values passed, in consumer input order)."""
    dag = nx.DiGraph()
    producer: dict[str, int] = {}
    for index, node in enumerate(model.graph.node):
        dag.add_node(index, node=node, op=node.op_type)
        for name in node.output:
            if name:
                producer[name] = index
    for index, node in enumerate(model.graph.node):
        for name in node_inputs(node):
            src = producer.get(name)
            if src is None or src == index:
                continue
            if dag.has_edge(src, index):
                tensors = dag.edges[src, index]["tensors"]
                if name not in tensors:
                    dag.edges[src, index]["tensors"] = (*tensors, name)
            else:
                dag.add_edge(src, index, tensors=(name,))
    if not nx.is_directed_acyclic_graph(dag):
        raise TcError("the ONNX graph has a cycle")
    return dag


def _static_type(type_proto: onnx.TypeProto) -> ValueType | None:
    """dtype and shape of a tensor type whose every dimension is a known number."""
    if type_proto.WhichOneof("value") != "tensor_type":
        return None
    tensor = type_proto.tensor_type
    if not tensor.elem_type or not tensor.HasField("shape"):
        return None
    dims: list[int] = []
    for dim in tensor.shape.dim:
        if not dim.HasField("dim_value") or dim.dim_value < 0:
            return None
        dims.append(int(dim.dim_value))
    dtype = _np_dtype(tensor.elem_type)
    return None if dtype is None else (dtype, tuple(dims))


def _np_dtype(elem_type: int) -> np.dtype | None:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None


def _tc_kernel_types(node: onnx.NodeProto) -> dict[str, ValueType]:
    """Output types of an already fused TcKernel node, read from its attributes
    (shape inference does not know the op)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    dtypes, ranks, dims = (
        attrs.get("output_dtypes"),
        attrs.get("output_ranks"),
        attrs.get("output_shapes"),
    )
    if dtypes is None or ranks is None or dims is None or len(dtypes) != len(node.output):
        return {}
    out: dict[str, ValueType] = {}
    pos = 0
    for name, code, rank in zip(node.output, dtypes, ranks, strict=True):
        dtype = _np_dtype(int(code))
        shape = tuple(int(d) for d in dims[pos : pos + rank])
        pos += rank
        if name and dtype is not None and len(shape) == rank:
            out[name] = (dtype, shape)
    return out


class _Constants(Mapping[str, np.ndarray]):
    """Known constant values, converted to arrays only when asked for (a model's
    initializers can be gigabytes; the partitioner rarely needs to see them)."""

    def __init__(self, base_dir: str | None = None) -> None:
        self._base_dir = base_dir  # where external data lives (None: a ModelProto's)
        self._protos: dict[str, onnx.TensorProto] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._shapes: dict[str, ValueType] = {}

    def add_proto(self, tensor: onnx.TensorProto) -> None:
        self._protos[tensor.name] = tensor
        dtype = _np_dtype(tensor.data_type)
        if dtype is not None:
            self._shapes[tensor.name] = (dtype, tuple(int(d) for d in tensor.dims))

    def add_array(self, name: str, value: np.ndarray) -> None:
        value = np.asarray(value)
        value.flags.writeable = False
        self._arrays[name] = value
        self._shapes[name] = (value.dtype, tuple(value.shape))

    def type_of(self, name: str) -> ValueType | None:
        return self._shapes.get(name)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            proto = self._protos[name]
            if external.is_external(proto):
                value = external.array(proto, self._base_dir)  # a read-only map
            else:
                value = numpy_helper.to_array(proto)
                value.flags.writeable = False
            self._arrays[name] = value
        return self._arrays[name]

    def __contains__(self, name: object) -> bool:
        return name in self._arrays or name in self._protos

    def __iter__(self) -> Iterator[str]:
        yield from self._protos
        yield from (n for n in self._arrays if n not in self._protos)

    def __len__(self) -> int:
        return len(self._protos) + sum(1 for n in self._arrays if n not in self._protos)


@dataclass(frozen=True, eq=False)
class Graph:
    """A loaded model with its dependency graph, static types and known constants.

    `dag` keys are indices into `model.graph.node` (which ONNX keeps topologically
    sorted); `types` holds only values whose shape is fully static; `constants` holds
    initializers (except those a graph input overrides: `overridable`),
    Constant node outputs and the outputs of small all-constant nodes folded here.
    """

    model: onnx.ModelProto
    dag: nx.DiGraph
    types: Mapping[str, ValueType]
    constants: Mapping[str, np.ndarray]
    producer: Mapping[str, int] = field(repr=False)
    consumers: Mapping[str, tuple[int, ...]] = field(repr=False)
    graph_inputs: tuple[str, ...] = ()
    graph_outputs: tuple[str, ...] = ()
    base_dir: str | None = None  # the model file's folder: where its external data lives
    # The checked model before `simplify` (the user's, symbolic dimensions pinned): what
    # optimize races against and gives back when it keeps no group.
    original: onnx.ModelProto | None = field(default=None, repr=False)

    @classmethod
    def from_model(
        cls,
        model: str | os.PathLike[str] | onnx.ModelProto,
        fixed: Mapping[str, int] | None = None,
        simplify: Callable[[onnx.ModelProto], onnx.ModelProto] | None = None,
    ) -> Graph:
        """Build from a path or proto; runs `load` (check + shape inference, with the
        symbolic dimensions in `fixed` pinned) first, then `simplify` on the checked
        model (optimize folds batch normalizations into convolutions)."""
        proto = original = load(model, fixed)
        if simplify is not None:
            proto = simplify(proto)
        dag = to_graph(proto)
        base_dir = None
        if not isinstance(model, onnx.ModelProto):
            base_dir = str(Path(model).resolve().parent)
        constants = _Constants(base_dir)
        inputs = overridable(proto)
        for tensor in proto.graph.initializer:
            if tensor.name not in inputs:
                constants.add_proto(tensor)
        types: dict[str, ValueType] = {}
        for tensor in proto.graph.initializer:
            dtype = _np_dtype(tensor.data_type)
            if dtype is not None:
                types[tensor.name] = (dtype, tuple(int(d) for d in tensor.dims))
        for value in (*proto.graph.input, *proto.graph.value_info, *proto.graph.output):
            static = _static_type(value.type)
            if static is not None and value.name not in types:
                types[value.name] = static
        for node in proto.graph.node:
            if node.domain == TC_DOMAIN and node.op_type == TC_OP:
                for name, vt in _tc_kernel_types(node).items():
                    types.setdefault(name, vt)
        _fold_constants(proto, constants, types)
        for name in constants:
            vt = constants.type_of(name)
            if vt is not None:
                types.setdefault(name, vt)
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = {}
        for index, node in enumerate(proto.graph.node):
            for name in node.output:
                if name:
                    producer[name] = index
            for name in node_inputs(node):
                consumers.setdefault(name, []).append(index)
        return cls(
            model=proto,
            dag=dag,
            types=types,
            constants=constants,
            producer=producer,
            consumers={k: tuple(v) for k, v in consumers.items()},
            graph_inputs=tuple(v.name for v in proto.graph.input),
            graph_outputs=tuple(v.name for v in proto.graph.output),
            base_dir=base_dir,
            original=original,
        )

    def node(self, index: int) -> onnx.NodeProto:
        """The NodeProto of graph node `index`."""
        return self.dag.nodes[index]["node"]

    @cached_property
    def external_tensors(self) -> Mapping[str, onnx.TensorProto]:
        """Initializers whose data stays in a file of `base_dir`, by name: a model built
        from the graph can name them instead of copying their data."""
        return {t.name: t for t in self.model.graph.initializer if external.is_external(t)}

    @cached_property
    def defaults(self) -> Mapping[str, onnx.TensorProto]:
        """Graph inputs that have an initializer a caller may override (`overridable`), by
        name: not constants, but a model cut out of this one, or a run that does not feed
        them, needs their default (inception's Reshape shapes are such inputs)."""
        inputs = overridable(self.model)
        return {t.name: t for t in self.model.graph.initializer if t.name in inputs}

    def is_static(self, name: str) -> bool:
        """Whether value `name` has a known dtype and fully static shape."""
        return name in self.types

    @cached_property
    def order(self) -> tuple[int, ...]:
        """Node indices in a topological order (index order for a checked model)."""
        return tuple(nx.lexicographical_topological_sort(self.dag))

    @cached_property
    def reach(self) -> Reachability:
        """Ancestor/descendant bitsets of every node, for fast convexity tests."""
        return Reachability.of(self.dag, self.order)


@dataclass(frozen=True, eq=False)
class Reachability:
    """Per node, the set of strict ancestors and strict descendants as int bitsets
    (bit `position[n]`), so a convexity test is a few big-int operations instead of a
    graph traversal: a node set S is convex iff no node outside S is both a
    descendant and an ancestor of S."""

    position: Mapping[int, int]
    ancestors: Mapping[int, int]
    descendants: Mapping[int, int]

    @classmethod
    def of(cls, dag: nx.DiGraph, order: Iterable[int]) -> Reachability:
        order = list(order)
        position = {n: i for i, n in enumerate(order)}
        anc: dict[int, int] = {}
        for n in order:
            bits = 0
            for p in dag.predecessors(n):
                bits |= anc[p] | (1 << position[p])
            anc[n] = bits
        desc: dict[int, int] = {}
        for n in reversed(order):
            bits = 0
            for s in dag.successors(n):
                bits |= desc[s] | (1 << position[s])
            desc[n] = bits
        return cls(position=position, ancestors=anc, descendants=desc)

    def bits(self, nodes: Iterable[int]) -> int:
        out = 0
        for n in nodes:
            out |= 1 << self.position[n]
        return out

    def is_convex(self, nodes: Iterable[int]) -> bool:
        nodes = list(nodes)
        s = self.bits(nodes)
        a = d = 0
        for n in nodes:
            a |= self.ancestors[n]
            d |= self.descendants[n]
        return (a & d & ~s) == 0


def _fold_constants(
    proto: onnx.ModelProto, constants: _Constants, types: Mapping[str, ValueType]
) -> None:
    """Record Constant node values, Shape/Size of static values, and the outputs of
    small default-domain nodes whose inputs are all constants (evaluated with
    onnx.reference). Failures are silent: an unfolded value is merely not constant."""
    opsets = {o.domain: o.version for o in proto.opset_import}
    for node in proto.graph.node:
        try:
            folded = _fold_node(node, constants, types, opsets)
        except Exception:
            folded = None
        if not folded:
            continue
        for name, value in folded.items():
            if name and (value.size <= _FOLD_MAX_ELEMENTS or node.op_type == "Constant"):
                constants.add_array(name, value)


def _fold_node(
    node: onnx.NodeProto,
    constants: _Constants,
    types: Mapping[str, ValueType],
    opsets: Mapping[str, int],
) -> dict[str, np.ndarray] | None:
    if node.domain not in ONNX_DOMAINS or node.op_type in _NONDETERMINISTIC:
        return None
    if _has_bodies(node):
        return None
    if node.op_type == "Constant":
        return {node.output[0]: _constant_value(node)}
    inputs = [n for n in node.input if n]
    if node.op_type in ("Shape", "Size") and inputs and inputs[0] in types:
        shape = np.array(types[inputs[0]][1], dtype=np.int64)
        if node.op_type == "Size":
            return {node.output[0]: np.array(int(np.prod(shape)), dtype=np.int64)}
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        start, end = attrs.get("start", 0), attrs.get("end")
        return {node.output[0]: shape[start:end]}
    if not inputs or any(n not in constants for n in inputs):
        return None
    for name in inputs:
        vt = constants.type_of(name)
        if vt is None or int(np.prod(vt[1])) > _FOLD_MAX_ELEMENTS:
            return None
    for name in node.output:
        vt = types.get(name)
        if vt is not None and int(np.prod(vt[1])) > _FOLD_MAX_ELEMENTS:
            return None
    from onnx.reference import ReferenceEvaluator

    values = {n: constants[n] for n in inputs}
    graph = onnx.helper.make_graph(
        [node],
        "fold",
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in inputs],
        [
            onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
            for n in node.output
            if n
        ],
    )
    version = next((opsets[d] for d in ONNX_DOMAINS if d in opsets), OPSET)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", version)])
    results = ReferenceEvaluator(model).run(None, values)
    names = [n for n in node.output if n]
    return {n: np.asarray(v) for n, v in zip(names, results, strict=True)}


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    """The value of a Constant node (tensor or scalar/list forms)."""
    attr = node.attribute[0]
    if attr.name == "value":
        return numpy_helper.to_array(attr.t)
    if attr.name == "value_float":
        return np.array(attr.f, dtype=np.float32)
    if attr.name == "value_floats":
        return np.array(list(attr.floats), dtype=np.float32)
    if attr.name == "value_int":
        return np.array(attr.i, dtype=np.int64)
    if attr.name == "value_ints":
        return np.array(list(attr.ints), dtype=np.int64)
    raise ValueError(f"unsupported Constant form '{attr.name}'")
