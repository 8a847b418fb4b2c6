"""ONNX node groups translated to one TC (tc_graph.graph.translate), run on the CPU target.

Oracles: onnx's own backend node test cases (inputs and expected outputs) for every
translated op type, and onnxruntime running the same nodes for multi-node groups.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tc_graph as tg
from tc_graph.codegen import forms
from tc_graph.errors import TcError
from tc_graph.graph import translate as tr
from tc_graph.graph.translate import (
    TRANSLATABLE,
    Translation,
    Untranslatable,
    library,
    translatable,
    translate,
)
from tests.tolerances import assert_matches

Types = dict[str, tuple[np.dtype, tuple[int, ...]]]


# Inputs that a model has as constants (axes, shapes, flags), by op type: the backend
# cases feed them, and the tests turn them into initializers of the same value.
ATTRIBUTE_INPUTS: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("Reshape", "Squeeze", "Unsqueeze"), (1,)),
    **{op: (1,) for op in TRANSLATABLE if op.startswith("Reduce")},
    "Dropout": (1, 2),
}


def _types(model: onnx.ModelProto, constants: Mapping[str, np.ndarray] | None = None) -> Types:
    """Static dtype and shape of every tensor value (inputs, initializers, node outputs);
    `constants` are graph inputs whose values shape inference may read."""
    if constants:
        model = _with_initializers(model, constants)
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    out: Types = {}
    g = inferred.graph
    for vi in (*g.input, *g.output, *g.value_info):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.elem_type or not tt.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
            out[vi.name] = (np.dtype(dtype), tuple(d.dim_value for d in tt.shape.dim))
    for init in g.initializer:
        array = numpy_helper.to_array(init)
        out[init.name] = (array.dtype, array.shape)
    return out


def _with_initializers(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy in which the named graph inputs are initializers of the given values."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = [vi for vi in out.graph.input if vi.name not in values]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    for name, value in values.items():
        if name not in {i.name for i in out.graph.initializer}:
            out.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return out


def _run_tc(t: Translation, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """The translation's entry on the CPU target, arguments looked up by ONNX name."""
    values = {**values, **{i.name: numpy_helper.to_array(i) for i in t.initializers}}
    result = tg.define(t.source)[t.entry](*(values[name] for name in t.inputs))
    return tuple(np.asarray(r) for r in (result if isinstance(result, tuple) else (result,)))


# ---------------------------------------------------------------------------------------
# (a) onnx's backend node test cases


# The ops of the first translations, checked here at the TC level; every translated op
# is checked end to end through optimize in test_conformance_onnx.py.
CORE_OPS = frozenset(
    {"MatMul", "Gemm", "Add", "Relu", "Gather", "ReduceSum", "Transpose", "Concat", "Identity"}
    | {"Conv"}
)


def _backend_cases() -> list[Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [
        pytest.param(c, id=c.name)
        for c in cases
        if c.model is not None
        and len(c.model.graph.node) == 1
        and c.model.graph.node[0].op_type in CORE_OPS
    ]


BACKEND_CASES = _backend_cases()

# The cases whose types the translation does not support: translate must refuse them
# (the partitioner then leaves the node to onnxruntime). Value: a part of the reason.
UNTRANSLATABLE_CASES: dict[str, str] = {
    **{f"test_add_{t}": f"dtype {t}" for t in ("int8", "int16", "uint8", "uint16", "uint32")},
    "test_add_uint64": "dtype uint64",  # arithmetic is translated for float dtypes only
    "test_identity_sequence": "no static type",  # a sequence, not a tensor
    "test_identity_opt": "no static type",  # an optional, not a tensor
}


def test_backend_cases_cover_every_op() -> None:
    ops = {c.values[0].model.graph.node[0].op_type for c in BACKEND_CASES}
    assert ops == CORE_OPS


@pytest.mark.parametrize("case", BACKEND_CASES)
def test_backend_node_case(case: Any) -> None:
    model = case.model
    graph = model.graph
    node = graph.node[0]
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: np.asarray(a) for vi, a in zip(graph.input, inputs, strict=False)}
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for k in ATTRIBUTE_INPUTS.get(node.op_type, ()):
        if k < len(node.input) and node.input[k] in feeds:
            # Attribute-like inputs (axes, shapes): a model has them as constants.
            constants[node.input[k]] = feeds[node.input[k]]
    types = _types(model, constants)
    outputs = [o.name for o in graph.output]
    opset = tr.opset_version(model)
    if case.name in UNTRANSLATABLE_CASES:
        with pytest.raises(Untranslatable, match=UNTRANSLATABLE_CASES[case.name]):
            translate(
                list(graph.node), types=types, constants=constants, outputs=outputs, opset=opset
            )
        assert translatable(node, types, constants, opset=opset) is not None
        return
    assert translatable(node, types, constants, opset=opset) is None
    t = translate(list(graph.node), types=types, constants=constants, outputs=outputs, opset=opset)
    assert t.outputs == tuple(outputs)
    got = _run_tc(t, {**feeds, **constants})
    for name, g, e in zip(outputs, got, expected, strict=True):
        assert_matches(g, np.asarray(e), f"{case.name}: {name}")


# ---------------------------------------------------------------------------------------
# (b) multi-node groups against onnxruntime


def _value(name: str, array: np.ndarray) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape
    )


def _check_group(
    nodes: Sequence[onnx.NodeProto],
    feeds: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    *,
    opset: int = 17,
    **kwargs: Any,
) -> Translation:
    """Translate the nodes as one group and compare with onnxruntime running them."""
    graph = helper.make_graph(
        list(nodes),
        "group",
        [_value(n, a) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    expected = session.run(list(outputs), dict(feeds))
    t = translate(nodes, types=_types(model), constants=weights, outputs=outputs, **kwargs)
    got = _run_tc(t, {**feeds, **weights})
    for name, g, e in zip(outputs, got, expected, strict=True):
        assert_matches(g, e, name)
    return t


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _mlp3(rng: np.random.Generator) -> tuple[list[onnx.NodeProto], dict, dict]:
    sizes = [24, 40, 32, 10]
    weights: dict[str, np.ndarray] = {}
    nodes = []
    x = "x"
    for k in range(3):
        weights[f"W{k}"] = _rand(rng, sizes[k + 1], sizes[k])  # (out, in): transB=1
        weights[f"b{k}"] = _rand(rng, sizes[k + 1])
        nodes.append(
            helper.make_node("Gemm", [x, f"W{k}", f"b{k}"], [f"g{k}"], transB=1, name=f"fc{k}")
        )
        nodes.append(helper.make_node("Relu", [f"g{k}"], [f"h{k}"]))
        x = f"h{k}"
    return nodes, {"x": _rand(rng, 6, sizes[0])}, weights


@pytest.mark.parametrize("pack", [True, False])
def test_mlp3(pack: bool) -> None:
    nodes, feeds, weights = _mlp3(np.random.default_rng(0))
    t = _check_group(nodes, feeds, weights, ["h2"], pack_weights=pack)
    # One gemm def and one relu def serve all three layers, called from the entry.
    assert t.source.count("def ") == 3
    assert t.source.count("= gemm_1(") == 3 and t.source.count("= relu_1(") == 3
    if pack:
        assert t.inputs == ("x", "W0__tc_t", "b0", "W1__tc_t", "b1", "W2__tc_t", "b2")
        assert [i.name for i in t.initializers] == ["W0__tc_t", "W1__tc_t", "W2__tc_t"]
        np.testing.assert_array_equal(numpy_helper.to_array(t.initializers[1]), weights["W1"].T)
    else:
        assert t.inputs == ("x", "W0", "b0", "W1", "b1", "W2", "b2")
        assert t.initializers == ()


@pytest.mark.parametrize(
    ("trans_b", "bias", "sizes"),
    [
        (1, False, (9, 70, 37)),
        (0, False, (5, 64, 16)),
        (1, True, (7, 300, 21)),
        (0, True, (33, 256, 50)),
    ],
)
def test_gemm_weights_packed_as_panels(
    trans_b: int, bias: bool, sizes: tuple[int, int, int]
) -> None:
    """A constant weight of a Gemm that gets a contraction kernel of its own becomes one
    initializer of panels, (ceil(N / w), K, w) with zeros past the last column, which the
    kernel reads in place; the result is onnxruntime's."""
    m, k, n = sizes
    rng = np.random.default_rng(m + k + n)
    w = _rand(rng, *((n, k) if trans_b else (k, n)))
    weights = {"W": w, **({"c": _rand(rng, n)} if bias else {})}
    node = helper.make_node(
        "Gemm", ["x", "W", *(["c"] if bias else [])], ["y"], transB=trans_b, alpha=0.5
    )
    t = _check_group([node], {"x": _rand(rng, m, k)}, weights, ["y"], panel=16)
    _check_panels(t, w.T if trans_b else w, 16)


def _check_panels(t: Translation, w: np.ndarray, width: int) -> None:
    """The translation's one initializer is the (K, N) weight w in panels of `width`."""
    k, n = w.shape
    (init,) = t.initializers
    panels = numpy_helper.to_array(init)
    assert init.name == f"W__tc_p{width}" and panels.shape == (-(-n // width), k, width)
    columns = panels.transpose(0, 2, 1).reshape(-1, k)
    np.testing.assert_array_equal(columns[:n], w.T)
    assert not columns[n:].any()


def test_convolution_with_many_channels_matches_onnxruntime() -> None:
    """Enough output channels and a long enough window for the outer-product kernel
    (tests/cpu/test_outer_product.py): padding, a bias, unequal strides."""
    rng = np.random.default_rng(6)
    node = helper.make_node("Conv", ["x", "W", "b"], ["y"], pads=[1, 1, 1, 1], strides=[1, 2])
    weights = {"W": _rand(rng, 40, 32, 3, 3), "b": _rand(rng, 40)}
    _check_group([node], {"x": _rand(rng, 1, 32, 10, 39)}, weights, ["y"])


@pytest.mark.parametrize(
    ("channels", "window", "grown"),
    [
        ((256, 1, 1), "1x1", 258),
        ((128, 3, 3), "3x3", None),
        ((256, 3, 3), "3x3", 257),
        ((1, 1, 1), "1x1", None),
    ],
)
def test_convolution_weight_rows_lie_apart_in_l1(
    channels: tuple[int, int, int], window: str, grown: int | None
) -> None:
    """A constant weight whose rows are a multiple of 1 KiB apart (256 channels by 1x1 or
    3x3: 4 of L1's 64 sets per 12 rows) is passed with zero channels appended so that
    12 rows put at most two lines in a set; 128 by 3x3 (8 sets) is left as it is. The
    result is onnxruntime's either way, and with no panel width asked for (no CPU kernel)
    the weight is passed as it is."""
    c, kh, kw = channels
    rng = np.random.default_rng(c + kh)
    node = helper.make_node("Conv", ["x", "W", "b"], ["y"], pads=[kh // 2] * 2 + [kw // 2] * 2)
    w = _rand(rng, 24, c, kh, kw)
    weights = {"W": w, "b": _rand(rng, 24)}
    feeds = {"x": _rand(rng, 1, c, 5, 7)}
    t = _check_group([node], feeds, weights, ["y"], panel=16)
    if grown is None:
        assert t.initializers == ()
    else:
        (init,) = t.initializers
        padded = numpy_helper.to_array(init)
        assert init.name == f"W__tc_c{grown}" and padded.shape == (24, grown, kh, kw)
        np.testing.assert_array_equal(padded[:, :c], w)
        assert not padded[:, c:].any()
    assert _check_group([node], feeds, weights, ["y"]).initializers == ()


def test_matmul_weights_packed_as_panels() -> None:
    """A batched MatMul by a constant 2-D weight: the same panels, the batch outside."""
    rng = np.random.default_rng(3)
    w = _rand(rng, 70, 37)
    node = helper.make_node("MatMul", ["x", "W"], ["y"])
    t = _check_group([node], {"x": _rand(rng, 2, 9, 70)}, {"W": w}, ["y"], panel=32)
    _check_panels(t, w, 32)
    t = _check_group([node], {"x": _rand(rng, 2, 9, 70)}, {"W": w}, ["y"])
    assert t.initializers == (), "no panels unless asked for"
    # A rows node's kernel: (rows, 1, K), its rows the batch (contraction._rows_index).
    t = _check_group([node], {"x": _rand(rng, 40, 1, 70)}, {"W": w}, ["y"], panel=32)
    _check_panels(t, w, 32)
    # One row: each output a dot product along the weight's rows, the weight transposed.
    for x in (_rand(rng, 1, 1, 70), _rand(rng, 2, 70)):
        (init,) = _check_group([node], {"x": x}, {"W": w}, ["y"], panel=32).initializers
        assert init.name == "W__tc_t"
        np.testing.assert_array_equal(numpy_helper.to_array(init), w.T)


def test_mlp3_intermediate_outputs() -> None:
    nodes, feeds, weights = _mlp3(np.random.default_rng(1))
    _check_group(nodes, feeds, weights, ["g0", "h1", "h2"])


def test_gemm_alpha_beta_trans_a_matrix_bias() -> None:
    rng = np.random.default_rng(2)
    node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], alpha=0.5, beta=-2.0, transA=1)
    feeds = {"a": _rand(rng, 7, 5), "c": _rand(rng, 5, 1)}
    _check_group([node], feeds, {"w": _rand(rng, 7, 3)}, ["y"])


@pytest.mark.parametrize(
    ("opset", "index_dtype", "negative"),
    [(13, np.int64, False), (13, np.int32, True), (11, np.int64, True)],
)
def test_gather_reduce_sum_pairs(opset: int, index_dtype: type, negative: bool) -> None:
    """2LUT: two embedding-bag lookups (Gather rows, sum over the bag) in one group."""
    rng = np.random.default_rng(3)
    nodes, feeds, weights = [], {}, {}
    for k, (rows, dim, bag) in enumerate([(50, 16, 6), (30, 8, 3)]):
        weights[f"E{k}"] = _rand(rng, rows, dim)
        low = -rows if negative else 0
        feeds[f"idx{k}"] = rng.integers(low, rows, size=(4, bag)).astype(index_dtype)
        nodes.append(helper.make_node("Gather", [f"E{k}", f"idx{k}"], [f"rows{k}"], axis=0))
        if opset >= 13:
            weights[f"axes{k}"] = np.array([1], np.int64)
            nodes.append(
                helper.make_node("ReduceSum", [f"rows{k}", f"axes{k}"], [f"sum{k}"], keepdims=0)
            )
        else:
            nodes.append(
                helper.make_node("ReduceSum", [f"rows{k}"], [f"sum{k}"], axes=[-2], keepdims=0)
            )
    t = _check_group(nodes, feeds, weights, ["sum0", "sum1"], opset=opset)
    assert "axes0" not in t.inputs and "axes1" not in t.inputs  # part of the TC
    assert "ix < 0" in t.source  # indices from outside may be negative: mapped by a select


def test_gather_constant_indices_axis1_keepdims() -> None:
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
        helper.make_node("ReduceSum", ["g", "axes"], ["s"], keepdims=1),
    ]
    weights = {"idx": np.array([[2, 0], [1, 1], [3, 2]], np.int64), "axes": np.array([0, 3])}
    t = _check_group(nodes, {"x": _rand(rng, 2, 4, 5)}, weights, ["s"])
    assert "ix < 0" not in t.source  # constant, non-negative indices need no select


def test_gather_out_of_range_index_is_an_error() -> None:
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    types = {"x": (np.dtype(np.float32), (5, 2)), "i": (np.dtype(np.int64), (2,))}
    types["y"] = (np.dtype(np.float32), (2, 2))
    t = translate([node], types=types, constants={}, outputs=["y"])
    mod = tg.define(t.source)
    x = np.zeros((5, 2), np.float32)
    np.testing.assert_array_equal(mod[t.entry](x, np.array([-5, 4])), np.zeros((2, 2)))
    for bad in (5, -6):
        with pytest.raises(TcError, match="out of bounds"):
            mod[t.entry](x, np.array([0, bad]))
    bad_constant = translatable(node, types, {"i": np.array([0, 5])})
    assert bad_constant is not None and "outside" in bad_constant


def test_reduce_sum_all_axes_and_noop() -> None:
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["all"], keepdims=0),
        helper.make_node("ReduceSum", ["x", "none"], ["same"], noop_with_empty_axes=1),
        helper.make_node("ReduceSum", ["same", "last"], ["kept"]),
    ]
    weights = {"none": np.zeros(0, np.int64), "last": np.array([-1], np.int64)}
    _check_group(nodes, {"x": _rand(rng, 3, 4, 2)}, weights, ["all", "same", "kept"])


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "bias_shape"),
    [((2, 3, 5, 8), (8, 6), (6,)), ((2, 1, 5, 8), (3, 8, 4), (5, 1)), ((8,), (2, 8, 4), ())],
)
def test_matmul_add_relu(a_shape: tuple, b_shape: tuple, bias_shape: tuple) -> None:
    rng = np.random.default_rng(6)
    nodes = [
        helper.make_node("MatMul", ["a", "w"], ["p"]),
        helper.make_node("Add", ["p", "bias"], ["q"]),
        helper.make_node("Relu", ["q"], ["y"]),
    ]
    feeds = {"a": _rand(rng, *a_shape), "bias": _rand(rng, *bias_shape)}
    t = _check_group(nodes, feeds, {"w": _rand(rng, *b_shape)}, ["y"])
    assert t.initializers == ()  # MatMul weights are (in, out) already


def test_add_broadcast_both_ways() -> None:
    rng = np.random.default_rng(7)
    nodes = [
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("Add", ["c", "c"], ["d"]),
        helper.make_node("Add", ["s", "d"], ["e"]),
    ]
    feeds = {"a": _rand(rng, 3, 1, 5), "b": _rand(rng, 4, 1), "s": _rand(rng)}
    _check_group(nodes, feeds, {}, ["e"])


@pytest.mark.parametrize(
    ("exponent", "products"),
    [
        (np.array(3.0, np.float32), True),
        (np.array([2.0], np.float32), True),
        (np.array(2, np.int64), True),
        (np.array(2.5, np.float32), False),
        (np.array([[[3.0]]], np.float32), False),
    ],
)
def test_pow_by_a_constant_two_or_three_is_a_product(exponent: np.ndarray, products: bool) -> None:
    """Gelu's tanh form as torch exports it, x * 0.5 * (1 + tanh(c (x + 0.044715 x^3))):
    Pow by a constant 2 or 3 is x * x (* x), as onnxruntime computes it (the same bits;
    libm's powf is a call per element, and not always onnxruntime's rounding); other
    exponents, and one that broadcasts the base, stay pow."""
    rng = np.random.default_rng(5)
    k = {
        n: np.array(v, np.float32)
        for n, v in [("c", 0.7978845608), ("d", 0.044715), ("h", 0.5), ("one", 1.0)]
    }
    nodes = [
        helper.make_node("Pow", ["x", "e"], ["cube"]),
        helper.make_node("Mul", ["cube", "d"], ["t0"]),
        helper.make_node("Add", ["x", "t0"], ["t1"]),
        helper.make_node("Mul", ["t1", "c"], ["t2"]),
        helper.make_node("Tanh", ["t2"], ["t3"]),
        helper.make_node("Add", ["t3", "one"], ["t4"]),
        helper.make_node("Mul", ["x", "h"], ["t5"]),
        helper.make_node("Mul", ["t5", "t4"], ["y"]),
    ]
    feeds = {"x": _rand(rng, 6, 40) * 3}
    t = _check_group(nodes, feeds, {**k, "e": exponent}, ["y"])
    assert ("pow(" not in t.source) == products


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [
        ((1, 4, 9, 9), (6, 2, 3, 3), {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1]}),
        ((2, 3, 8, 7), (5, 3, 3, 2), {"dilations": [1, 2]}),
        ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
        ((1, 2, 7, 6), (3, 2, 2, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ],
)
def test_conv_relu(x_shape: tuple, w_shape: tuple, attrs: dict) -> None:
    rng = np.random.default_rng(8)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    weights = {"w": _rand(rng, *w_shape), "b": _rand(rng, w_shape[0])}
    _check_group(nodes, {"x": _rand(rng, *x_shape)}, weights, ["y"])


def test_conv_without_bias() -> None:
    rng = np.random.default_rng(9)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, 2], pads=[0, 1, 0, 1])
    _check_group([node], {"x": _rand(rng, 1, 3, 5, 6)}, {"w": _rand(rng, 2, 3, 2, 2)}, ["y"])


def test_transpose_matmul() -> None:
    rng = np.random.default_rng(10)
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["xt", "y"], ["p"]),
        helper.make_node("Transpose", ["p"], ["z"]),
    ]
    feeds = {"x": _rand(rng, 2, 6, 4), "y": _rand(rng, 2, 6, 5)}
    _check_group(nodes, feeds, {}, ["z", "xt"])


def test_concat_of_several() -> None:
    rng = np.random.default_rng(11)
    nodes = [
        helper.make_node("Relu", ["b"], ["rb"]),
        helper.make_node("Add", ["c", "one"], ["c1"]),
        helper.make_node("Identity", ["a"], ["a2"]),
        helper.make_node("Concat", ["a", "rb", "c1", "a2", "a"], ["y"], axis=-1),
        helper.make_node("Concat", ["y", "y"], ["z"], axis=0),
    ]
    feeds = {"a": _rand(rng, 2, 3), "b": _rand(rng, 2, 4), "c": _rand(rng, 2, 1)}
    _check_group(nodes, feeds, {"one": np.array(1.0, np.float32)}, ["rb", "z"])


def test_value_names_that_are_not_tc_identifiers() -> None:
    rng = np.random.default_rng(12)
    nodes = [
        helper.make_node("Relu", ["onnx::Relu_0"], ["1"]),
        helper.make_node("Add", ["1", "exp"], ["def"]),
        helper.make_node("Identity", ["def"], ["/layer.1/out"]),
        helper.make_node("Identity", ["/layer.1/out"], ["fused"]),
    ]
    feeds = {"onnx::Relu_0": _rand(rng, 3), "exp": _rand(rng, 3)}
    _check_group(nodes, feeds, {}, ["/layer.1/out", "fused"])


# ---------------------------------------------------------------------------------------
# translatable(), errors, the operator library

F32 = np.dtype(np.float32)


@pytest.mark.parametrize(
    ("node", "types", "constants", "reason"),
    [
        (
            helper.make_node("Hardmax", ["x"], ["y"]),
            {"x": (F32, (2,)), "y": (F32, (2,))},
            {},
            "no TC translation for op type Hardmax",
        ),
        (
            helper.make_node("Conv", ["x", "w"], ["y"]),
            {"x": (F32, (1, 1, 5)), "w": (F32, (1, 1, 3)), "y": (F32, (1, 1, 3))},
            {},
            "only 2-D convolutions",
        ),
        (
            helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", dilations=[2, 1]),
            {"x": (F32, (1, 1, 5, 5)), "w": (F32, (1, 1, 3, 3)), "y": (F32, (1, 1, 5, 5))},
            {},
            "auto_pad SAME_UPPER with dilations",
        ),
        (
            helper.make_node("ReduceSum", ["x", "axes"], ["y"]),
            {"x": (F32, (2, 3)), "axes": (np.dtype(np.int64), (1,)), "y": (F32, (1, 3))},
            {},
            "not a constant",
        ),
        (
            helper.make_node("Gather", ["x", "i"], ["y"]),
            {"x": (F32, (4, 3)), "i": (F32, (2,)), "y": (F32, (2, 3))},
            {},
            "int32/int64",
        ),
        (
            helper.make_node("MatMul", ["a", "b"], ["y"]),
            {"a": (F32, (2, 3)), "b": (F32, (3, 4)), "y": (F32, (2, -1))},
            {},
            "no static shape",
        ),
        (
            helper.make_node("Relu", ["x"], ["y"]),
            {"x": (F32, (2, 3))},
            {},
            "'y' has no static type",
        ),
    ],
)
def test_translatable_reasons(
    node: onnx.NodeProto, types: Types, constants: dict, reason: str
) -> None:
    got = translatable(node, types, constants)
    assert got is not None and reason in got


def test_translatable_accepts() -> None:
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)
    types = {"a": (F32, (2, 3)), "b": (F32, (4, 3)), "y": (F32, (2, 4))}
    assert translatable(node, types, {}) is None


def test_group_errors() -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name="r")
    types = {"x": (F32, (2,)), "y": (F32, (2,))}
    with pytest.raises(Untranslatable, match="output 'x' is not produced"):
        translate([node], types=types, constants={}, outputs=["x"])
    with pytest.raises(Untranslatable, match="Softmax node 's'"):
        translate(
            [node, helper.make_node("Softmax", ["y"], ["z"], name="s")],
            types={**types, "z": (F32, (2,))},
            constants={},
            outputs=["z"],
        )
    with pytest.raises(TcError, match="not a TC identifier"):
        translate([node], types=types, constants={}, outputs=["y"], name="my-kernel")
    assert issubclass(Untranslatable, TcError)


def test_operator_library_is_complete() -> None:
    table = library.table()
    assert set(table) == TRANSLATABLE
    for op, entry in table.items():
        for file in entry["templates"].values():
            assert "${name}" in library.template_file(file).template, (op, file)


# ---------------------------------------------------------------------------------------
# float64 and float16 (onnxruntime 1.32 runs onnx's float64 cases), zero-size axes

_REDUCERS = {
    "ReduceSum": lambda x: np.sum(x, axis=1, keepdims=True),
    "ReduceMean": lambda x: np.mean(x, axis=1, keepdims=True),
    "ReduceMax": lambda x: np.max(x, axis=1, keepdims=True),
    "ReduceLogSumExp": lambda x: np.log(np.sum(np.exp(x), axis=1, keepdims=True)),
}


def _run_node(
    node: onnx.NodeProto, types: Types, values: Mapping[str, np.ndarray], constants: dict
) -> np.ndarray:
    t = translate([node], types=types, constants=constants, outputs=[node.output[0]], opset=18)
    (got,) = _run_tc(t, {**constants, **values})
    return got


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("op", sorted(_REDUCERS))
def test_reduction_takes_float64_and_float16(op: str, dtype: type) -> None:
    """NumPy is the oracle, in float64 for float64 and in float32 for float16 (the
    language computes float16 in float32 and stores 16 bits)."""
    x = np.random.default_rng(1).standard_normal((3, 40, 5)).astype(dtype)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    dt = np.dtype(dtype)
    types = {"x": (dt, x.shape), "y": (dt, (3, 1, 5))}
    got = _run_node(node, types, {"x": x}, {"axes": np.array([1], np.int64)})
    wide = np.float64 if dtype == np.float64 else np.float32
    assert_matches(got, _REDUCERS[op](x.astype(wide)).astype(dtype), f"{op} {dt.name}")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_elementwise_takes_float64_and_float16(dtype: type) -> None:
    rng = np.random.default_rng(2)
    dt = np.dtype(dtype)
    a, b = rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal(3).astype(dtype)
    types = {"a": (dt, (4, 3)), "b": (dt, (3,)), "y": (dt, (4, 3)), "s": (dt, (4, 3))}
    wide = np.float64 if dtype == np.float64 else np.float32
    got = _run_node(helper.make_node("Add", ["a", "b"], ["y"]), types, {"a": a, "b": b}, {})
    assert_matches(got, (a.astype(wide) + b.astype(wide)).astype(dtype), "Add")
    got = _run_node(helper.make_node("Sigmoid", ["a"], ["s"]), types, {"a": a}, {})
    assert_matches(got, (1 / (1 + np.exp(-a.astype(wide)))).astype(dtype), "Sigmoid")


def test_mixed_operand_dtypes_are_refused() -> None:
    types = {"a": (np.dtype(np.float64), (3,)), "b": (F32, (3,)), "y": (F32, (3,))}
    reason = translatable(helper.make_node("Add", ["a", "b"], ["y"]), types, {})
    assert reason is not None and "different dtypes (float32, float64)" in reason


def test_reduction_over_a_zero_size_axis() -> None:
    """Sums over nothing are 0 (so LogSum gives -inf, as onnxruntime does); a mean over
    nothing is refused with its reason, before anything is compiled or measured."""
    x = np.zeros((2, 0, 4), np.float32)
    types = {"x": (F32, (2, 0, 4)), "y": (F32, (2, 1, 4))}
    axes = {"axes": np.array([1], np.int64)}
    node = helper.make_node("ReduceLogSum", ["x", "axes"], ["y"], keepdims=1)
    assert_matches(_run_node(node, types, {"x": x}, axes), np.full((2, 1, 4), -np.inf, F32), "")
    mean = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)
    reason = translatable(mean, types, axes, opset=18)
    assert reason is not None and "a reduced axis has size 0" in reason


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_contractions_take_float64_and_float16(dtype: type) -> None:
    """MatMul, Gemm (bias, packed transposed weights), Softmax, BatchNormalization;
    NumPy in float64 (float64) or float32 (float16) is the oracle."""
    rng = np.random.default_rng(3)
    dt = np.dtype(dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    a = rng.standard_normal((5, 64)).astype(dtype)
    w = rng.standard_normal((7, 64)).astype(dtype)
    c = rng.standard_normal(7).astype(dtype)
    aw, ww, cw = a.astype(wide), w.astype(wide), c.astype(wide)
    types = {"a": (dt, a.shape), "w": (dt, w.shape), "wt": (dt, (64, 7)), "c": (dt, (7,))}
    types |= {"y": (dt, (5, 7)), "s": (dt, a.shape), "b": (dt, a.shape)}
    matmul = helper.make_node("MatMul", ["a", "wt"], ["y"])
    got = _run_node(matmul, types, {"a": a, "wt": np.ascontiguousarray(w.T)}, {})
    assert_matches(got, (aw @ ww.T).astype(dtype), "MatMul")
    gemm = helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5)
    got = _run_node(gemm, types, {"a": a}, {"w": w, "c": c})
    assert_matches(got, (0.5 * aw @ ww.T + cw).astype(dtype), "Gemm")
    softmax = helper.make_node("Softmax", ["a"], ["s"])
    assert_matches(_run_node(softmax, types, {"a": a}, {}), _softmax(aw).astype(dtype), "Softmax")
    stats = {k: rng.uniform(0.5, 1.5, 64).astype(dtype) for k in ("g", "o", "m", "v")}
    types |= {k: (dt, (64,)) for k in stats}
    bn = helper.make_node("BatchNormalization", ["a", "g", "o", "m", "v"], ["b"])
    g, o, m, v = (stats[k].astype(wide) for k in "gomv")
    want = ((aw - m) * g / np.sqrt(v + np.float32(1e-5)) + o).astype(dtype)
    assert_matches(_run_node(bn, types, {"a": a, **stats}, {}), want, "BatchNormalization")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_conv_takes_float64_and_float16(dtype: type) -> None:
    """Padded, with a bias; NumPy's windows in float64 (or float32 for float16) are the oracle."""
    rng = np.random.default_rng(4)
    dt = np.dtype(dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    x = rng.standard_normal((1, 4, 6, 6)).astype(dtype)
    w = rng.standard_normal((3, 4, 3, 3)).astype(dtype)
    b = rng.standard_normal(3).astype(dtype)
    types = {"x": (dt, x.shape), "w": (dt, w.shape), "b": (dt, (3,)), "y": (dt, (1, 3, 6, 6))}
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])
    padded = np.pad(x.astype(wide), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,fcij->nfhw", windows, w.astype(wide)) + b.astype(wide)[:, None, None]
    assert_matches(_run_node(node, types, {"x": x, "w": w, "b": b}, {}), want.astype(dtype), "Conv")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_pools_take_float64_and_float16(dtype: type) -> None:
    """MaxPool and AveragePool (padding not counted), 3x3 windows padded by 1."""
    dt = np.dtype(dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    x = np.random.default_rng(5).standard_normal((1, 2, 5, 5)).astype(dtype)
    types = {"x": (dt, x.shape), "y": (dt, x.shape)}
    pads = ((0, 0), (0, 0), (1, 1), (1, 1))

    def windows(a: np.ndarray, fill: float) -> np.ndarray:
        padded = np.pad(a, pads, constant_values=fill)
        return np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))

    xw = x.astype(wide)
    counts = windows(np.ones_like(xw), 0.0).sum(axis=(-2, -1))
    want = {
        "MaxPool": windows(xw, -np.inf).max(axis=(-2, -1)),
        "AveragePool": windows(xw, 0.0).sum(axis=(-2, -1)) / counts,
    }
    for op, expected in want.items():
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        assert_matches(_run_node(node, types, {"x": x}, {}), expected.astype(dtype), op)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_layer_norm_takes_float64_and_float16(dtype: type) -> None:
    """Y in X's dtype, Mean and InvStdDev in float32 (ONNX's U); NumPy is the oracle."""
    rng = np.random.default_rng(6)
    dt = np.dtype(dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    x, s, b = (rng.standard_normal(shape).astype(dtype) for shape in ((3, 16), (16,), (16,)))
    types = {"x": (dt, (3, 16)), "s": (dt, (16,)), "b": (dt, (16,)), "y": (dt, (3, 16))}
    types |= {"m": (F32, (3, 1)), "r": (F32, (3, 1))}
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m", "r"], axis=-1)
    t = translate([node], types=types, constants={}, outputs=["y", "m", "r"], opset=18)
    y, m, r = _run_tc(t, {"x": x, "s": s, "b": b})
    xw = x.astype(wide)
    mean = xw.mean(axis=1, keepdims=True)
    inv = 1 / np.sqrt(((xw - mean) ** 2).mean(axis=1, keepdims=True) + np.float32(1e-5))
    want = (xw - mean) * inv * s.astype(wide) + b.astype(wide)
    assert_matches(y, want.astype(dtype), "Y")
    assert_matches(m, mean.astype(np.float32), "Mean")
    assert_matches(r, inv.astype(np.float32), "InvStdDev")


_EDGES = np.array(
    [[np.nan, -100.0, -90.0, -1.0, 0.0], [1.0, 88.0, 90.0, 100.0, -1000.0]], np.float32
)


@pytest.mark.parametrize(
    ("op", "inputs", "attrs"),
    [
        ("Softplus", 1, {}),
        ("ReduceLogSumExp", 1, {"axes": [1], "keepdims": 1}),
        ("ReduceLogSumExp", 1, {"axes": [0], "keepdims": 0}),
        ("HardSigmoid", 1, {}),
        ("Max", 2, {}),
        ("Min", 2, {}),
        ("Max", 3, {}),
        ("Min", 3, {}),
    ],
)
def test_large_values_and_nan_as_onnxruntime(op: str, inputs: int, attrs: dict) -> None:
    """Found by fuzzing: Softplus as log(exp(x) + 1) and ReduceLogSumExp as log(sum(exp))
    overflowed to inf above x = 88 (onnxruntime: x, and 100.41 for [100, 99, 98]);
    HardSigmoid's fmax/fmin and Max/Min's selects dropped a NaN (onnxruntime's is NaN, as
    the ONNX reference's), Max(x, NaN) giving x where Max(NaN, x) gave NaN."""
    feeds = {"x": _EDGES}
    names = ["x"]
    for k in range(1, inputs):  # the others: NaN and large values in other places
        feeds[f"x{k}"] = np.roll(_EDGES, k, axis=1) * np.float32(0.5 * k)
        names.append(f"x{k}")
    _check_group([helper.make_node(op, names, ["y"], **attrs)], feeds, {}, ["y"], opset=17)


def test_log_sum_exp_of_infinities_as_onnxruntime() -> None:
    """The shift by the maximum made rows with an infinity NaN (inf - inf): [inf, 1] is
    inf and [-inf, -inf] -inf (log 0) in onnxruntime; the shift is taken only where the
    maximum is finite (found by fuzzing)."""
    inf = np.float32(np.inf)
    x = np.array([[inf, 1.0], [-inf, -inf], [-inf, 1.0], [100.0, 99.0]], np.float32)
    node = helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[1], keepdims=0)
    _check_group([node], {"x": x}, {}, ["y"], opset=17)


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_a_pool_whose_same_padding_would_be_negative_is_left_to_onnxruntime(op: str) -> None:
    """SAME_UPPER with a stride past the kernel (length 3, kernel 1, stride 3) asks for
    padding -2: onnxruntime's AveragePool (opset 19 on) crops the input, its MaxPool
    refuses the model; tc_graph clamped it to 0 and read element 0 for onnxruntime's
    element 1 (found by fuzzing). Such a pool is not translated."""
    node = helper.make_node(op, ["x"], ["y"], auto_pad="SAME_UPPER", kernel_shape=[1], strides=[3])
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 8
    reason = translatable(node, _types(model), {}, opset=20)
    assert reason is not None and "negative" in reason


@pytest.mark.parametrize(
    ("op", "axes"), [("ReduceMean", [2]), ("ReduceMax", [-1]), ("ReduceSum", None)]
)
def test_a_reduction_keeping_its_dimensions_runs_in_vectors(
    op: str, axes: list[int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keepdims=1, ONNX's default: the reduced dimensions' index (extent 1) in the
    reduction's left side put its init in the reduction's loop band, so no loop reduced
    in vectors (a 512 x 1000 ReduceMax ran 9 ms, against 24 us in vectors). The reduction
    runs over the dimensions it keeps, then is stored."""
    from tests.unit.test_loop_forms import decided

    x = np.random.default_rng(3).standard_normal((6, 40, 48)).astype(np.float32)
    kw = {} if axes is None else {"axes": axes}
    t = _check_group([helper.make_node(op, ["x"], ["y"], keepdims=1, **kw)], {"x": x}, {}, ["y"])
    found = decided(t.source, [x.shape], None, monkeypatch, entry=t.entry)
    assert any(isinstance(f, forms.Reduction) and f.vector for f in found), found


def _fused_as_onnxruntime(
    node: onnx.NodeProto,
    feeds: Mapping[str, np.ndarray],
    outputs: Mapping[str, int],
    opset: int,
    weights: Mapping[str, np.ndarray] | None = None,
) -> None:
    """One node in a model, tg.optimize(force=True)d into a TcKernel, computes what
    onnxruntime computes on the model (every output, its shape and dtype; each output of
    the first input's rank)."""
    rank = next(iter(feeds.values())).ndim
    graph = helper.make_graph(
        [node],
        "node",
        [_value(n, a) for n, a in feeds.items()],
        [helper.make_tensor_value_info(n, t, [None] * rank) for n, t in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in (weights or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    expected = ort.InferenceSession(model.SerializeToString()).run(None, dict(feeds))
    fused = tg.optimize(model, force=True)
    assert [n.op_type for n in fused.graph.node] == ["TcKernel"]
    got = tg.InferenceSession(fused).run(None, dict(feeds))
    for name, g, e in zip(outputs, got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype, name
        np.testing.assert_array_equal(g, e, err_msg=name)


_INF = np.array([np.inf, -np.inf, 1.0, -2.5, np.nan], np.float32)


@pytest.mark.parametrize(
    ("inputs", "attrs", "opset"),
    [
        (["x"], {}, 13),
        (["x", "lo"], {}, 13),
        (["x", "", "hi"], {}, 13),
        (["x"], {"min": -1.0}, 6),
        (["x"], {"max": 1.0}, 6),
    ],
)
def test_clip_without_a_bound_clamps_to_the_dtype_range(
    inputs: list[str], attrs: dict, opset: int
) -> None:
    """A missing bound is the dtype's lowest or largest value (ONNX's default, what
    onnxruntime clamps +-inf to), not none (found by fuzzing)."""
    weights = {"lo": np.array(-1.5, np.float32), "hi": np.array(2.0, np.float32)}
    used = {n: weights[n] for n in inputs if n in weights}
    node = helper.make_node("Clip", inputs, ["y"], **attrs)
    _fused_as_onnxruntime(node, {"x": _INF}, {"y": TensorProto.FLOAT}, opset, used)


def test_clip_takes_constant_bounds_of_one_element() -> None:
    """Bounds of shape (1,), which onnxruntime takes: numpy 2's float() of them raised
    TypeError out of optimize (found by fuzzing)."""
    weights = {"lo": np.array([-1.5], np.float32), "hi": np.array([2.0], np.float32)}
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    _fused_as_onnxruntime(node, {"x": _INF}, {"y": TensorProto.FLOAT}, 13, weights)


def test_max_pool_pads_with_minus_infinity() -> None:
    """A window reaching into the padding took float32's lowest value as a candidate: a
    float64 window of -1e300 gave -3.4e38 (found by fuzzing)."""
    x = np.full((1, 1, 2, 2), -1e300)
    x[0, 0, 1, 1] = -2e300
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1])
    _fused_as_onnxruntime(node, {"x": x}, {"y": TensorProto.DOUBLE}, 13)


@pytest.mark.parametrize(("op", "opset"), [("MaxPool", 13), ("AveragePool", 19)])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_a_dilated_pool_with_same_padding_is_left_to_onnxruntime(
    op: str, opset: int, auto_pad: str
) -> None:
    """onnxruntime sizes SAME padding from the undilated window (a 9 x 9 input, window 3,
    dilation 2: 7 x 7 out), the ONNX spec from the dilated one (9 x 9): the fused pool
    followed the spec, and the model's output changed shape (found by fuzzing). As for
    convolutions, such a pool is not translated."""
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 2],
                            auto_pad=auto_pad)  # fmt: skip
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    reason = translatable(node, _types(model), {}, opset=opset)
    assert reason is not None and "dilat" in reason


@pytest.mark.parametrize("opset", [10, 11, 12, 13])
def test_dropout_mask_as_onnxruntime(opset: int) -> None:
    """Before opset 12 onnxruntime's inference Dropout gives a mask of zeros, from 12 on of
    ones; the fused node gave ones at every opset (found by fuzzing)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    outputs = {"y": TensorProto.FLOAT, "mask": TensorProto.BOOL}
    _fused_as_onnxruntime(node, {"x": x}, outputs, opset)
