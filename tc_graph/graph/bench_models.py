"""The benchmark ONNX models, built in code: the TC paper's kernels as standalone models and
`prodmodel`, which chains several of them the way a recommendation model does.

One definition serves `models/build.py`, `scripts/bench.py models`, the tests and `tc-graph
demo`, so they all see the same graphs. Every model is opset 17 (IR version 8: newer IR
versions are rejected by the onnxruntime we support), float32, with its weights as seeded
initializers, int64 indices and fixed input shapes. Weight layouts follow what exporters
produce: Gemm with `transB=1` and (out, in) weights as PyTorch's Linear exports them, or MatMul
with (in, out) weights followed by Add.

The small helpers (`make_model`, `normal`, `weight`) are also what scripts/_bench_models.py
builds its per-kernel models with.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import TcError
from ..onnx_domain import IR_VERSION, OPSET

NAMES: tuple[str, ...] = (
    "mlp3_gemm",
    "mlp3_matmul",
    "mlp1",
    "c3",
    "2lut",
    "tbmm",
    "gconv",
    "tmm",
    "prodmodel",
)
# Convolutions of real models: in and out channels, height = width, kernel, stride, pad,
# groups. ResNet-50's stem and four of its layers at batch 1, and a MobileNet depthwise.
CONVS: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "conv_stem": (3, 64, 224, 7, 2, 3, 1),
    "conv3x3": (64, 64, 56, 3, 1, 1, 1),
    "conv1x1": (256, 64, 56, 1, 1, 0, 1),
    "conv3x3s2": (128, 128, 56, 3, 2, 1, 1),
    "conv1x1_14": (1024, 256, 14, 1, 1, 0, 1),
    "depthwise": (32, 32, 112, 3, 1, 1, 32),
}
# Single layers of real models (scripts/bench.py layers): each convolution alone and with
# BatchNormalization + Relu after it, BERT-base's feed-forward product alone and with its
# Gelu, attention (12 heads, 128 tokens, head size 64) without and with a padding mask, and
# the memory-bound operators of a transformer encoder (and Tanh).
LAYERS: tuple[str, ...] = (
    *CONVS,
    *(f"{name}_bn_relu" for name in CONVS),
    "bert_gemm",
    "bert_gemm_gelu",
    "attention",
    "attention_mask",
    "softmax",
    "layernorm_add",
    "gelu",
    "tanh",
)

InputSpec = tuple[np.dtype | type, Sequence[int]]


def normal(rng: np.random.Generator, shape: Sequence[int], scale: float = 1.0) -> np.ndarray:
    """Standard normal float32 values times `scale`."""
    return rng.standard_normal(tuple(shape), dtype=np.float32) * np.float32(scale)


def weight(rng: np.random.Generator, shape: Sequence[int], fan_in: int) -> np.ndarray:
    """A weight scaled by 1/sqrt(fan_in), so that layer outputs stay near unit variance."""
    return normal(rng, shape, 1.0 / np.sqrt(fan_in))


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, np.ndarray | InputSpec],
    initializers: Mapping[str, np.ndarray],
    outputs: Mapping[str, Sequence[int]],
    name: str = "tc_graph",
) -> onnx.ModelProto:
    """A checked opset-17 model. `inputs` are graph inputs (an example array, or a
    (dtype, shape) pair), `initializers` constants, `outputs` float32 graph outputs."""

    def info(value: str, dtype: np.dtype | type, shape: Sequence[int]) -> onnx.ValueInfoProto:
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        return helper.make_tensor_value_info(value, elem, list(shape))

    def spec(v: np.ndarray | InputSpec) -> InputSpec:
        return (v.dtype, v.shape) if isinstance(v, np.ndarray) else v

    graph = helper.make_graph(
        list(nodes),
        name,
        [info(n, *spec(v)) for n, v in inputs.items()],
        [info(n, np.float32, s) for n, s in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in initializers.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    return model


@dataclass(frozen=True)
class Sizes:
    """Every size of the models; `FULL` are the paper's, `SMALL` about an eighth of them."""

    batch: int
    mlp3: tuple[int, int, int, int]  # widths: input, hidden, hidden, output
    mlp1: tuple[int, int]  # in, out
    c3: tuple[int, int]  # in, out
    lut: tuple[int, int, int]  # table rows, row width, indices per sample
    tbmm: tuple[int, int, int]  # batch, rows (N and K), reduction (M)
    gconv: tuple[int, int, int, int, int]  # batch, groups, channels per group, height=width, kernel
    tmm: tuple[int, int]  # in, out
    softmax: tuple[int, int, int, int]  # batch, heads, queries, keys (softmax over keys)
    layernorm: tuple[int, int]  # rows (tokens), hidden
    gelu: tuple[int, int]  # rows, width
    conv_scale: int  # CONVS' channels (but 3 inputs) and sizes divided by this
    ffn: tuple[int, int, int]  # tokens, hidden, feed-forward width
    attention: tuple[int, int, int, int]  # batch, heads, tokens, head size


FULL = Sizes(
    batch=128,
    mlp3=(128, 64, 32, 2),
    mlp1=(2000, 128),
    c3=(1000, 1024),
    lut=(1_000_000, 64, 50),
    tbmm=(500, 26, 72),
    gconv=(32, 32, 16, 14, 3),
    tmm=(1024, 1024),
    softmax=(8, 12, 128, 128),
    layernorm=(1024, 384),
    gelu=(1024, 1536),
    conv_scale=1,
    ffn=(128, 768, 3072),
    attention=(8, 12, 128, 64),
)
SMALL = Sizes(
    batch=16,
    mlp3=(16, 8, 4, 2),
    mlp1=(250, 16),
    c3=(125, 128),
    lut=(1000, 8, 6),
    tbmm=(62, 3, 9),
    gconv=(4, 4, 2, 6, 3),  # 14 / 8 would leave no room for a 3x3 window
    tmm=(128, 128),
    softmax=(2, 3, 32, 32),
    layernorm=(128, 48),
    gelu=(128, 192),
    conv_scale=8,
    ffn=(16, 96, 384),
    attention=(2, 3, 16, 8),
)


class _Graph:
    """Collects nodes, inputs and seeded initializers, naming intermediate values."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: dict[str, InputSpec] = {}
        self.inits: dict[str, np.ndarray] = {}
        self.outputs: dict[str, tuple[int, ...]] = {}
        self._count = 0

    def input(self, name: str, dtype: type, shape: Sequence[int]) -> str:
        self.inputs[name] = (dtype, tuple(shape))
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        if name not in self.inits:
            self.inits[name] = array
        return name

    def node(self, op: str, inputs: Sequence[str], out: str | None = None, **attrs: object) -> str:
        self._count += 1
        out = out or f"{op.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def output(self, value: str, shape: Sequence[int]) -> None:
        self.outputs[value] = tuple(shape)

    def model(self) -> onnx.ModelProto:
        return make_model(self.nodes, self.inputs, self.inits, self.outputs, self.name)


def _mlp_gemm(g: _Graph, x: str, widths: Sequence[int], prefix: str, out: str | None) -> str:
    """Gemm(transB=1)+Relu per layer, weights (out, in) as PyTorch exports Linear."""
    for k, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        w = g.const(f"{prefix}_w{k}", weight(g.rng, (n_out, n_in), n_in))
        b = g.const(f"{prefix}_b{k}", normal(g.rng, (n_out,), 0.1))
        gemm = g.node("Gemm", [x, w, b], transB=1)
        x = g.node("Relu", [gemm], out if k == len(widths) - 2 else None)
    return x


def _mlp_matmul(g: _Graph, x: str, widths: Sequence[int], prefix: str, out: str | None) -> str:
    """MatMul+Add+Relu per layer, weights (in, out)."""
    for k, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        w = g.const(f"{prefix}_w{k}", weight(g.rng, (n_in, n_out), n_in))
        b = g.const(f"{prefix}_b{k}", normal(g.rng, (n_out,), 0.1))
        mm = g.node("MatMul", [x, w])
        add = g.node("Add", [mm, b])
        x = g.node("Relu", [add], out if k == len(widths) - 2 else None)
    return x


def _matmul_t(g: _Graph, x: str, n_in: int, n_out: int, prefix: str, out: str | None) -> str:
    """`x · Wᵀ` without bias: Gemm(transB=1) with a (out, in) weight (C3, tmm)."""
    w = g.const(f"{prefix}_w", weight(g.rng, (n_out, n_in), n_in))
    return g.node("Gemm", [x, w], out, transB=1)


def _bags(g: _Graph, s: Sizes, outs: Sequence[str | None]) -> list[str]:
    """Two embedding bags: Gather of int64 indices from a table, then ReduceSum over axis 1
    (the axes as an int64 initializer, as opset 13+ wants)."""
    rows, dim, length = s.lut
    axes = g.const("axes_1", np.array([1], dtype=np.int64))
    sums = []
    for t, out in enumerate(outs, start=1):
        # Scaled so that a sum of `length` rows has about unit variance.
        table = g.const(f"lut{t}", normal(g.rng, (rows, dim), 1.0 / np.sqrt(length)))
        idx = g.input(f"I{t}", np.int64, (s.batch, length))
        gathered = g.node("Gather", [table, idx], axis=0)
        sums.append(g.node("ReduceSum", [gathered, axes], out, keepdims=0))
    return sums


def _build_mlp3_gemm(g: _Graph, s: Sizes) -> None:
    x = g.input("X", np.float32, (s.batch, s.mlp3[0]))
    g.output(_mlp_gemm(g, x, s.mlp3, "mlp3", "Y"), (s.batch, s.mlp3[-1]))


def _build_mlp3_matmul(g: _Graph, s: Sizes) -> None:
    x = g.input("X", np.float32, (s.batch, s.mlp3[0]))
    g.output(_mlp_matmul(g, x, s.mlp3, "mlp3", "Y"), (s.batch, s.mlp3[-1]))


def _build_mlp1(g: _Graph, s: Sizes) -> None:
    x = g.input("X", np.float32, (s.batch, s.mlp1[0]))
    g.output(_mlp_gemm(g, x, s.mlp1, "mlp1", "Y"), (s.batch, s.mlp1[1]))


def _build_c3(g: _Graph, s: Sizes) -> None:
    x = g.input("X", np.float32, (s.batch, s.c3[0]))
    g.output(_matmul_t(g, x, *s.c3, "c3", "Y"), (s.batch, s.c3[1]))


def _build_tmm(g: _Graph, s: Sizes) -> None:
    x = g.input("X", np.float32, (s.batch, s.tmm[0]))
    g.output(_matmul_t(g, x, *s.tmm, "tmm", "Y"), (s.batch, s.tmm[1]))


def _build_2lut(g: _Graph, s: Sizes) -> None:
    for out in _bags(g, s, ["O1", "O2"]):
        g.output(out, (s.batch, s.lut[1]))


def _build_tbmm(g: _Graph, s: Sizes) -> None:
    """Z = X·Yᵀ per batch: Transpose(Y) then a batched MatMul."""
    b, n, m = s.tbmm
    x = g.input("X", np.float32, (b, n, m))
    y = g.input("Y", np.float32, (b, n, m))
    yt = g.node("Transpose", [y], perm=[0, 2, 1])
    g.output(g.node("MatMul", [x, yt], "Z"), (b, n, n))


def _build_gconv(g: _Graph, s: Sizes) -> None:
    """A grouped 3x3 convolution, stride 1, no padding, no bias, as many filters as channels."""
    n, groups, c, hw, k = s.gconv
    x = g.input("X", np.float32, (n, groups * c, hw, hw))
    w = g.const("gconv_w", weight(g.rng, (groups * c, c, k, k), c * k * k))
    out = hw - k + 1
    g.output(
        g.node("Conv", [x, w], "Y", group=groups, kernel_shape=[k, k]), (n, groups * c, out, out)
    )


def _build_prodmodel(g: _Graph, s: Sizes) -> None:
    """2LUT and C3 side by side, concatenated, then MLP1 (to MLP3's width) and MLP3."""
    bags = _bags(g, s, [None, None])
    x = g.input("X", np.float32, (s.batch, s.c3[0]))
    dense = _matmul_t(g, x, *s.c3, "c3", None)
    cat = g.node("Concat", [*bags, dense], axis=1)
    hidden = _mlp_gemm(g, cat, (2 * s.lut[1] + s.c3[1], s.mlp3[0]), "mlp1", None)
    g.output(_mlp_gemm(g, hidden, s.mlp3, "mlp3", "Y"), (s.batch, s.mlp3[-1]))


def _build_softmax(g: _Graph, s: Sizes) -> None:
    """Attention's Softmax over the keys."""
    x = g.input("X", np.float32, s.softmax)
    g.output(g.node("Softmax", [x], "Y", axis=-1), s.softmax)


def _build_layernorm_add(g: _Graph, s: Sizes) -> None:
    """A residual Add and the LayerNormalization after it (a transformer block's end)."""
    rows, hidden = s.layernorm
    x = g.input("X", np.float32, (rows, hidden))
    r = g.input("R", np.float32, (rows, hidden))
    scale = g.const("ln_scale", 1.0 + normal(g.rng, (hidden,), 0.1))
    bias = g.const("ln_bias", normal(g.rng, (hidden,), 0.1))
    added = g.node("Add", [x, r])
    norm = g.node("LayerNormalization", [added, scale, bias], "Y", axis=-1, epsilon=1e-5)
    g.output(norm, (rows, hidden))


def _build_gelu(g: _Graph, s: Sizes) -> None:
    """Gelu on its own."""
    g.output(_gelu_of(g, g.input("X", np.float32, s.gelu), "Y"), s.gelu)


def _build_tanh(g: _Graph, s: Sizes) -> None:
    """Tanh on its own (Gelu's tanh form, an LSTM's gates), at Gelu's size."""
    g.output(g.node("Tanh", [g.input("X", np.float32, s.gelu)], "Y"), s.gelu)


def _conv_layer(name: str, epilogue: bool) -> Callable[[_Graph, Sizes], None]:
    """The builder of convolution `name` (CONVS), with a bias, then with `epilogue`
    BatchNormalization (inference statistics) and Relu."""

    def build_conv(g: _Graph, s: Sizes) -> None:
        c, f, size, k, stride, pad, groups = CONVS[name]
        scale = s.conv_scale
        c, f, groups = (c if c == 3 else c // scale), f // scale, max(1, groups // scale)
        size = size // scale
        x = g.input("X", np.float32, (1, c, size, size))
        w = g.const("conv_w", weight(g.rng, (f, c // groups, k, k), c // groups * k * k))
        b = g.const("conv_b", normal(g.rng, (f,), 0.1))
        out = (size + 2 * pad - k) // stride + 1
        y = g.node(
            "Conv", [x, w, b], None if epilogue else "Y", group=groups, kernel_shape=[k, k],
            pads=[pad] * 4, strides=[stride] * 2,
        )  # fmt: skip
        if epilogue:
            stats = [
                g.const("bn_scale", 1.0 + normal(g.rng, (f,), 0.1)),
                g.const("bn_bias", normal(g.rng, (f,), 0.1)),
                g.const("bn_mean", normal(g.rng, (f,), 0.1)),
                g.const("bn_var", 1.0 + np.abs(normal(g.rng, (f,), 0.1))),
            ]
            y = g.node("Relu", [g.node("BatchNormalization", [y, *stats], epsilon=1e-5)], "Y")
        g.output(y, (1, f, out, out))

    return build_conv


def _gelu_of(g: _Graph, x: str, out: str) -> str:
    """Gelu as torch exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    root2 = g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    one = g.const("one", np.array(1.0, np.float32))
    half = g.const("half", np.array(0.5, np.float32))
    inner = g.node("Add", [g.node("Erf", [g.node("Div", [x, root2])]), one])
    return g.node("Mul", [g.node("Mul", [x, inner]), half], out)


def _ffn_layer(gelu: bool) -> Callable[[_Graph, Sizes], None]:
    """BERT's feed-forward product (MatMul + Add, weights (in, out)), with `gelu` its Gelu."""

    def build_ffn(g: _Graph, s: Sizes) -> None:
        tokens, hidden, width = s.ffn
        x = g.input("X", np.float32, (tokens, hidden))
        w = g.const("ffn_w", weight(g.rng, (hidden, width), hidden))
        b = g.const("ffn_b", normal(g.rng, (width,), 0.1))
        y = g.node("Add", [g.node("MatMul", [x, w]), b], None if gelu else "Y")
        g.output(_gelu_of(g, y, "Y") if gelu else y, (tokens, width))

    return build_ffn


def _attention_layer(mask: bool) -> Callable[[_Graph, Sizes], None]:
    """softmax(Q K^T / sqrt(d) [+ mask]) V per head, K given as (.., tokens, d) and
    transposed; the mask is additive, one row per sequence (padding), broadcast."""

    def build_attention(g: _Graph, s: Sizes) -> None:
        batch, heads, tokens, d = s.attention
        shape = (batch, heads, tokens, d)
        q, k, v = (g.input(n, np.float32, shape) for n in "QKV")
        scores = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
        scaled = g.node("Mul", [scores, g.const("scale", np.array(d**-0.5, np.float32))])
        if mask:
            scaled = g.node("Add", [scaled, g.input("M", np.float32, (batch, 1, 1, tokens))])
        probs = g.node("Softmax", [scaled], axis=-1)
        g.output(g.node("MatMul", [probs, v], "Y"), shape)

    return build_attention


_BUILDERS = {
    "mlp3_gemm": _build_mlp3_gemm,
    "mlp3_matmul": _build_mlp3_matmul,
    "mlp1": _build_mlp1,
    "c3": _build_c3,
    "2lut": _build_2lut,
    "tbmm": _build_tbmm,
    "gconv": _build_gconv,
    "tmm": _build_tmm,
    "prodmodel": _build_prodmodel,
    "softmax": _build_softmax,
    "layernorm_add": _build_layernorm_add,
    "gelu": _build_gelu,
    "tanh": _build_tanh,
    **{name: _conv_layer(name, False) for name in CONVS},
    **{f"{name}_bn_relu": _conv_layer(name, True) for name in CONVS},
    "bert_gemm": _ffn_layer(False),
    "bert_gemm_gelu": _ffn_layer(True),
    "attention": _attention_layer(False),
    "attention_mask": _attention_layer(True),
}


def build(name: str, *, small: bool = False) -> onnx.ModelProto:
    """The model `name` (one of NAMES or LAYERS), checked; the same weights on every call."""
    if name not in _BUILDERS:
        raise TcError(f"unknown model {name!r}", hint=f"choose from {', '.join((*NAMES, *LAYERS))}")
    g = _Graph(name)
    _BUILDERS[name](g, SMALL if small else FULL)
    return g.model()


def _index_bound(graph: onnx.GraphProto, name: str) -> int | None:
    """The smallest extent of the gathered axis over every Gather that indexes with `name`."""
    shapes = {t.name: tuple(t.dims) for t in graph.initializer}
    for vi in [*graph.input, *graph.value_info]:
        dims = vi.type.tensor_type.shape.dim
        if vi.name not in shapes and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    bound = None
    for node in graph.node:
        if node.op_type != "Gather" or len(node.input) < 2 or node.input[1] != name:
            continue
        data = shapes.get(node.input[0])
        if data is None:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        extent = data[axis % len(data)]
        bound = extent if bound is None else min(bound, extent)
    return bound


def sample_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random valid feeds for every graph input of `model`: standard normal floats, and
    integers in range for the Gathers they index. Raises ValueError for an input whose
    shape is not fixed or whose valid values are unknown."""
    rng = np.random.default_rng(seed)
    graph = model.graph
    constants = {t.name for t in graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for vi in graph.input:
        if vi.name in constants:
            continue
        tt = vi.type.tensor_type
        if not all(d.HasField("dim_value") for d in tt.shape.dim):
            raise ValueError(f"input {vi.name!r} has no fixed shape")
        shape = tuple(d.dim_value for d in tt.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        elif np.issubdtype(dtype, np.integer):
            bound = _index_bound(graph, vi.name)
            if bound is None:
                raise ValueError(f"integer input {vi.name!r} indexes no Gather: unknown range")
            feeds[vi.name] = rng.integers(0, bound, shape, dtype=dtype)
        else:
            raise ValueError(f"input {vi.name!r} has unsupported type {dtype}")
    return feeds
