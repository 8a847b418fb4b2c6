"""Partition and rewrite on hand-built ONNX graphs.

The oracles are independent of the partitioner's bitset reachability: convexity is
checked with networkx descendants/ancestors, validity with onnx.checker, topological
order by walking the rewritten node list.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import networkx as nx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tc_graph.errors import TcError
from tc_graph.graph.model import Graph, load, to_graph
from tc_graph.graph.partition import (
    MAX_GROUP_NODES,
    Group,
    candidate_groups,
    components,
    excluded,
    is_convex,
    make_group,
)
from tc_graph.graph.rewrite import NodeAttrs, rewrite

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def only(*ops: str):
    """A stand-in translator: these op types translate, nothing else does."""
    allowed = set(ops)
    return lambda node: None if node.op_type in allowed else f"no translation for {node.op_type}"


def model_of(nodes, inputs, outputs, inits=(), value_info=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info)
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def vi(name: str, elem: int, shape: Sequence[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(name: str, shape: Sequence[int], dtype=np.float32, seed: int = 0) -> TensorProto:
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def mlp3_gemm() -> onnx.ModelProto:
    sizes = [16, 8, 4, 2]
    nodes, inits = [], []
    prev = "x"
    for k in range(3):
        inits += [init(f"W{k}", (sizes[k + 1], sizes[k]), seed=k), init(f"b{k}", (sizes[k + 1],))]
        nodes.append(helper.make_node("Gemm", [prev, f"W{k}", f"b{k}"], [f"h{k}"], transB=1))
        out = "y" if k == 2 else f"r{k}"
        nodes.append(helper.make_node("Relu", [f"h{k}"], [out]))
        prev = out
    return model_of(nodes, [vi("x", F, [4, 16])], [vi("y", F, [4, 2])], inits)


def mlp3_matmul() -> onnx.ModelProto:
    sizes = [16, 8, 4, 2]
    nodes, inits = [], []
    prev = "x"
    for k in range(3):
        inits += [init(f"W{k}", (sizes[k], sizes[k + 1]), seed=k), init(f"b{k}", (sizes[k + 1],))]
        nodes.append(helper.make_node("MatMul", [prev, f"W{k}"], [f"m{k}"]))
        nodes.append(helper.make_node("Add", [f"m{k}", f"b{k}"], [f"h{k}"]))
        out = "y" if k == 2 else f"r{k}"
        nodes.append(helper.make_node("Relu", [f"h{k}"], [out]))
        prev = out
    return model_of(nodes, [vi("x", F, [4, 16])], [vi("y", F, [4, 2])], inits)


def two_lut(consumer: str | None = None) -> onnx.ModelProto:
    """Two Gather+ReduceSum lookups; `consumer` (an op type) joins them, else two outputs."""
    nodes = []
    for k in range(2):
        nodes.append(helper.make_node("Gather", [f"T{k}", f"I{k}"], [f"g{k}"], axis=0))
        nodes.append(helper.make_node("ReduceSum", [f"g{k}", "axes"], [f"s{k}"], keepdims=0))
    inits = [init("T0", (100, 8)), init("T1", (100, 8), seed=1)]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    inputs = [vi("I0", I64, [4, 5]), vi("I1", I64, [4, 5])]
    if consumer is None:
        return model_of(nodes, inputs, [vi("s0", F, [4, 8]), vi("s1", F, [4, 8])], inits)
    attrs = {"axis": 1} if consumer == "Concat" else {}
    nodes.append(helper.make_node(consumer, ["s0", "s1"], ["y"], **attrs))
    shape = [4, 16] if consumer == "Concat" else [4, 8]
    return model_of(nodes, inputs, [vi("y", F, shape)], inits)


def assert_convex(g: Graph, nodes: Iterable[int]) -> None:
    """Oracle: no node outside the set is both a descendant and an ancestor of it."""
    nodes = set(nodes)
    down = set().union(*(nx.descendants(g.dag, n) for n in nodes)) - nodes
    up = set().union(*(nx.ancestors(g.dag, n) for n in nodes)) - nodes
    assert not (down & up), f"path leaves {sorted(nodes)} through {sorted(down & up)}"


def assert_topological(model: onnx.ModelProto) -> None:
    defined = {v.name for v in model.graph.input} | {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        for name in node.input:
            assert not name or name in defined, f"{node.name} reads {name} before it exists"
        defined.update(node.output)
    for value in model.graph.output:
        assert value.name in defined


def fake_attrs(g: Graph, group: Group, *, inputs=None, initializers=()) -> NodeAttrs:
    """NodeAttrs a translator could have produced for `group` (types from g)."""
    inputs = tuple(group.inputs if inputs is None else inputs)
    types = dict(g.types)
    for t in initializers:
        types[t.name] = (numpy_helper.to_array(t).dtype, tuple(t.dims))

    def code(name: str) -> int:
        return helper.np_dtype_to_tensor_dtype(types[name][0])

    return NodeAttrs(
        source="def f(...) {}",
        entry="f",
        options="{}",
        kernel_key="k" * 16,
        inputs=inputs,
        outputs=group.outputs,
        input_dtypes=tuple(code(n) for n in inputs),
        output_dtypes=tuple(code(n) for n in group.outputs),
        input_shapes=tuple(types[n][1] for n in inputs),
        output_shapes=tuple(types[n][1] for n in group.outputs),
        initializers=tuple(initializers),
    )


# --- model.py -------------------------------------------------------------------------


def test_graph_types_constants_and_edges() -> None:
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.float32(2.0))),
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Mul", ["x", "c"], ["m"]),
        helper.make_node("Add", ["m", "m"], ["a"]),
        helper.make_node("Reshape", ["a", "sx"], ["y"]),
    ]
    g = Graph.from_model(model_of(nodes, [vi("x", F, [3, 4])], [vi("y", F, [3, 4])]))
    assert set(g.dag.nodes) == set(range(5))
    assert g.dag.nodes[2]["op"] == "Mul" and g.node(2).op_type == "Mul"
    assert g.dag.edges[2, 3]["tensors"] == ("m",)
    assert set(g.dag.edges) == {(0, 2), (1, 4), (2, 3), (3, 4)}
    assert g.types["m"] == (np.dtype(np.float32), (3, 4))  # from shape inference
    assert g.types["sx"] == (np.dtype(np.int64), (2,))
    np.testing.assert_array_equal(g.constants["sx"], [3, 4])  # Shape of a static value
    assert float(g.constants["c"]) == 2.0
    assert "m" not in g.constants and "x" not in g.constants


def test_constant_subgraph_folded_and_initializer_inputs_not_constant() -> None:
    nodes = [
        helper.make_node("Add", ["k", "k"], ["k2"]),
        helper.make_node("Mul", ["x", "k2"], ["y"]),
        helper.make_node("Mul", ["x", "d"], ["z"]),
    ]
    inits = [numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "k")]
    inits.append(numpy_helper.from_array(np.array([5.0, 5.0], np.float32), "d"))
    model = model_of(
        nodes,
        [vi("x", F, [2]), vi("d", F, [2])],  # 'd' has a default but may be overridden
        [vi("y", F, [2]), vi("z", F, [2])],
        inits,
    )
    g = Graph.from_model(model)
    np.testing.assert_array_equal(g.constants["k2"], [2.0, 4.0])
    assert "d" not in g.constants and "k" in g.constants
    assert "computes a constant" in excluded(g, translatable=only("Add", "Mul"))[0]


def test_to_graph_merges_parallel_edges() -> None:
    nodes = [
        helper.make_node("Split", ["x"], ["p", "q"], axis=0, num_outputs=2),
        helper.make_node("Add", ["q", "p"], ["y"]),
    ]
    model = model_of(nodes, [vi("x", F, [4])], [vi("y", F, [2])])
    dag = to_graph(model)
    assert dag.edges[0, 1]["tensors"] == ("q", "p")


def test_load_rejects_invalid_models(tmp_path) -> None:
    with pytest.raises(TcError, match="does not exist"):
        load(tmp_path / "missing.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x07 this is not protobuf \xff\xff\xff")
    with pytest.raises(TcError):
        load(junk)
    bad = model_of(
        [helper.make_node("Relu", ["nowhere"], ["y"])], [vi("x", F, [2])], [vi("y", F, [2])]
    )
    with pytest.raises(TcError, match="invalid ONNX model"):
        load(bad)
    with pytest.raises(TcError):
        Graph.from_model(bad)
    big = init("W", (200, 100))  # 80 kB: checked outside onnx.checker (see load)
    big.raw_data = big.raw_data[:-4]
    truncated = model_of(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        [vi("x", F, [2, 200])],
        [vi("y", F, [2, 100])],
        [big],
    )
    with pytest.raises(TcError, match="does not match dims"):
        load(truncated)
    good = tmp_path / "good.onnx"
    onnx.save(mlp3_gemm(), good)
    assert len(load(good).graph.node) == 6


def test_big_initializers_keep_their_types_and_values() -> None:
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    w = init("W", (300, 100))
    model = model_of(nodes, [vi("x", F, [2, 300])], [vi("y", F, [2, 100])], [w])
    g = Graph.from_model(model)
    assert [t.name for t in g.model.graph.initializer] == ["W"]
    assert [v.name for v in g.model.graph.input] == ["x"]
    assert g.types["m"] == (np.dtype(np.float32), (2, 100))
    np.testing.assert_array_equal(g.constants["W"], numpy_helper.to_array(w))


def test_load_does_not_mutate_input() -> None:
    model = mlp3_matmul()
    before = model.SerializeToString()
    g = Graph.from_model(model)
    assert model.SerializeToString() == before
    assert g.model is not model and len(g.model.graph.value_info) > 0


# --- partition ------------------------------------------------------------------------


@pytest.mark.parametrize("build", [mlp3_gemm, mlp3_matmul])
def test_mlp3_is_one_group(build) -> None:
    g = Graph.from_model(build())
    groups = candidate_groups(g, translatable=only("Gemm", "MatMul", "Add", "Relu"))
    assert len(groups) == 1
    (group,) = groups
    assert group.nodes == tuple(range(len(g.model.graph.node)))
    assert group.inputs == ("x", "W0", "b0", "W1", "b1", "W2", "b2")
    assert group.outputs == ("y",)


def test_two_lut_pairs_merge_into_one_group() -> None:
    g = Graph.from_model(two_lut())
    assert not nx.is_weakly_connected(g.dag)  # the two lookups share no path
    tr = only("Gather", "ReduceSum")
    (group,) = candidate_groups(g, translatable=tr)
    assert group.nodes == (0, 1, 2, 3)
    assert group.inputs == ("T0", "I0", "axes", "T1", "I1")
    assert group.outputs == ("s0", "s1")
    parts = components(g, group)
    assert [p.nodes for p in parts] == [(0, 1), (2, 3)]
    assert [p.outputs for p in parts] == [("s0",), ("s1",)]
    assert len(candidate_groups(g, translatable=tr, merge="none")) == 2


@pytest.mark.parametrize("consumer", ["Concat", "Add"])
def test_two_lut_siblings_merge_even_when_consumer_is_outside(consumer: str) -> None:
    g = Graph.from_model(two_lut(consumer))
    (group,) = candidate_groups(g, translatable=only("Gather", "ReduceSum"), merge="siblings")
    assert group.nodes == (0, 1, 2, 3) and group.outputs == ("s0", "s1")
    (whole,) = candidate_groups(g, translatable=only("Gather", "ReduceSum", consumer))
    assert whole.nodes == (0, 1, 2, 3, 4) and whole.outputs == ("y",)


def diamond() -> onnx.ModelProto:
    """a → u → d and a → d, with u untranslatable (Neg); then a tail e after d."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["u"]),
        helper.make_node("Add", ["a", "u"], ["d"]),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    return model_of(nodes, [vi("x", F, [4])], [vi("y", F, [4])])


def test_diamond_with_outside_node_on_a_path_stays_convex() -> None:
    g = Graph.from_model(diamond())
    groups = candidate_groups(g, translatable=only("Relu", "Add"))
    assert sorted(n for grp in groups for n in grp.nodes) == [0, 2, 3]
    for grp in groups:
        assert_convex(g, grp.nodes)
        assert not {0, 2} <= set(grp.nodes)
    assert [grp.nodes for grp in groups] == [(0,), (2, 3)]
    assert groups[0].outputs == ("a",) and groups[1].inputs == ("a", "u")
    assert not is_convex(g, [0, 2])
    with pytest.raises(TcError, match="not convex"):
        make_group(g, [0, 2])


def test_dynamic_dims_exclude_nodes() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),  # x has a symbolic batch dimension
        helper.make_node("Relu", ["w"], ["b"]),
        helper.make_node("Neg", ["b"], ["c"]),
    ]
    model = model_of(
        nodes, [vi("x", F, ["N", 4]), vi("w", F, [3])], [vi("a", F, ["N", 4]), vi("c", F, [3])]
    )
    g = Graph.from_model(model)
    assert "x" not in g.types and "a" not in g.types
    tr = only("Relu", "Neg")
    assert "no static shape" in excluded(g, translatable=tr)[0]
    assert [grp.nodes for grp in candidate_groups(g, translatable=tr)] == [(1, 2)]


def test_identity_only_groups_dropped() -> None:
    nodes = [
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"]),
        helper.make_node("Identity", ["b"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    g = Graph.from_model(model_of(nodes, [vi("x", F, [4])], [vi("y", F, [4])]))
    groups = candidate_groups(g, translatable=only("Identity", "Relu"), merge="none")
    assert [grp.nodes for grp in groups] == [(2, 3)]


def random_dag_model(seed: int, n: int = 24) -> tuple[onnx.ModelProto, set[int]]:
    """A random DAG of Add/Relu (translatable) and Neg/Sub (not) nodes over one shape."""
    rng = random.Random(seed)
    nodes, values = [], ["x0", "x1"]
    for i in range(n):
        if rng.random() < 0.5 or len(values) < 2:
            op = rng.choice(["Relu", "Neg"])
            ins = [rng.choice(values[-6:])]
        else:
            op = rng.choice(["Add", "Add", "Sub"])
            ins = rng.sample(values, 2)
        nodes.append(helper.make_node(op, ins, [f"v{i}"], name=f"n{i}"))
        values.append(f"v{i}")
    read = {name for node in nodes for name in node.input}
    outs = [vi(v, F, [3]) for v in values[2:] if v not in read]
    model = model_of(nodes, [vi("x0", F, [3]), vi("x1", F, [3])], outs)
    return model, {i for i, node in enumerate(nodes) if node.op_type in ("Add", "Relu")}


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("merge", ["none", "all"])
def test_random_dags_give_disjoint_convex_groups_that_rewrite(seed: int, merge: str) -> None:
    model, translatable_nodes = random_dag_model(seed)
    g = Graph.from_model(model)
    groups = candidate_groups(g, translatable=only("Add", "Relu"), merge=merge)
    covered = [n for grp in groups for n in grp.nodes]
    assert len(covered) == len(set(covered))
    assert set(covered) == translatable_nodes  # every eligible node is in one group
    for grp in groups:
        assert_convex(g, grp.nodes)
        assert list(grp.nodes) == sorted(grp.nodes)
        if merge == "none":
            assert nx.is_weakly_connected(g.dag.subgraph(grp.nodes))
        for part in components(g, grp):
            assert_convex(g, part.nodes)
    out = rewrite(g.model, [(grp, fake_attrs(g, grp)) for grp in groups])
    onnx.checker.check_model(out)
    assert_topological(out)
    assert sum(n.op_type == "TcKernel" for n in out.graph.node) == len(groups)
    # any subset of the groups, each whole or split into components, rewrites too
    rng = random.Random(seed)
    chosen: list[Group] = []
    for grp in groups:
        if rng.random() < 0.3:
            continue
        chosen += components(g, grp) if rng.random() < 0.5 else [grp]
    out = rewrite(g.model, [(grp, fake_attrs(g, grp)) for grp in chosen])
    assert_topological(out)


def test_oversized_group_is_cut_into_runs_of_the_cap() -> None:
    """A chain of Relus longer than the cap is one group uncapped, and runs of at most
    MAX_GROUP_NODES capped, in order, that rewrite together into a valid model."""
    n = 2 * MAX_GROUP_NODES + 5
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"r{i}") for i in range(n)]
    g = Graph.from_model(model_of(nodes, [vi("v0", F, [4])], [vi(f"v{n}", F, [4])]))
    whole = candidate_groups(g, translatable=only("Relu"), max_nodes=n)
    assert [grp.nodes for grp in whole] == [tuple(range(n))]
    groups = candidate_groups(g, translatable=only("Relu"))
    cap = MAX_GROUP_NODES
    assert [grp.nodes for grp in groups] == [
        tuple(range(0, cap)), tuple(range(cap, 2 * cap)), tuple(range(2 * cap, n))
    ]  # fmt: skip
    assert [grp.inputs for grp in groups] == [("v0",), (f"v{cap}",), (f"v{2 * cap}",)]
    assert [grp.outputs for grp in groups] == [(f"v{cap}",), (f"v{2 * cap}",), (f"v{n}",)]
    out = rewrite(g.model, [(grp, fake_attrs(g, grp)) for grp in groups])
    onnx.checker.check_model(out)
    assert_topological(out)


@pytest.mark.parametrize("seed", range(20))
def test_random_dags_cut_small_still_rewrite_together(seed: int) -> None:
    model, translatable_nodes = random_dag_model(seed)
    g = Graph.from_model(model)
    groups = candidate_groups(g, translatable=only("Add", "Relu"), max_nodes=3)
    assert all(len(grp) <= 3 for grp in groups)
    assert sorted(n for grp in groups for n in grp.nodes) == sorted(translatable_nodes)
    for grp in groups:
        assert_convex(g, grp.nodes)
    out = rewrite(g.model, [(grp, fake_attrs(g, grp)) for grp in groups])
    onnx.checker.check_model(out)
    assert_topological(out)


def test_groups_convex_alone_but_cyclic_together_are_not_formed() -> None:
    """A = {p, a1, a2} and B = {r, b1, b2} are each convex, but a1 → b1 and b2 → a2 make a
    cycle once both are contracted. Relu/Add translate, Neg does not: the Neg nodes keep
    A and B from growing into each other."""
    nodes = [
        helper.make_node("Relu", ["x"], ["p"], name="p"),
        helper.make_node("Relu", ["p"], ["a1"], name="a1"),
        helper.make_node("Neg", ["a1"], ["na1"], name="na1"),
        helper.make_node("Relu", ["x"], ["r"], name="r"),
        helper.make_node("Add", ["r", "na1"], ["b1"], name="b1"),
        helper.make_node("Relu", ["r"], ["b2"], name="b2"),
        helper.make_node("Neg", ["b2"], ["nb2"], name="nb2"),
        helper.make_node("Add", ["p", "nb2"], ["a2"], name="a2"),
    ]
    model = model_of(nodes, [vi("x", F, [4])], [vi("b1", F, [4]), vi("a2", F, [4])])
    g = Graph.from_model(model)
    assert is_convex(g, [0, 1, 7]) and is_convex(g, [3, 4, 5])
    for merge in ("none", "all"):
        groups = candidate_groups(g, translatable=only("Relu", "Add"), merge=merge)
        assert {frozenset(grp.nodes) for grp in groups} != {
            frozenset({0, 1, 7}),
            frozenset({3, 4, 5}),
        }
        out = rewrite(g.model, [(grp, fake_attrs(g, grp)) for grp in groups])
        assert_topological(out)
    a = make_group(g, [0, 1, 7])
    b = make_group(g, [3, 4, 5])
    with pytest.raises(TcError, match="cycle"):
        rewrite(g.model, [(a, fake_attrs(g, a)), (b, fake_attrs(g, b))])


# --- rewrite --------------------------------------------------------------------------


def tc_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "TcKernel"]


def test_rewrite_mlp3_into_one_kernel_passes_checker() -> None:
    original = mlp3_gemm()
    g = Graph.from_model(original)
    (group,) = candidate_groups(g, translatable=only("Gemm", "Relu"))
    packed = numpy_helper.from_array(np.zeros((16 * 8 + 8 * 4 + 4 * 2,), np.float32), "W_packed")
    attrs = fake_attrs(g, group, inputs=("x", "W_packed", "b0"), initializers=(packed,))
    before = g.model.SerializeToString()
    out = rewrite(g.model, [(group, attrs)])
    assert g.model.SerializeToString() == before  # input untouched
    onnx.checker.check_model(out, full_check=True)
    (node,) = out.graph.node
    assert node.op_type == "TcKernel" and node.domain == "ai.tc_graph"
    assert node.name == "tc_fused_0"
    assert list(node.input) == ["x", "W_packed", "b0"] and list(node.output) == ["y"]
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    assert a["source"] == b"def f(...) {}" and a["entry"] == b"f"
    assert a["options"] == b"{}" and a["kernel_key"] == b"k" * 16
    assert a["input_dtypes"] == [F, F, F] and a["output_dtypes"] == [F]
    assert a["input_ranks"] == [2, 1, 1] and a["output_ranks"] == [2]
    assert a["input_shapes"] == [4, 16, 168, 8] and a["output_shapes"] == [4, 2]
    assert {t.name for t in out.graph.initializer} == {"W_packed", "b0"}  # unused dropped
    assert any(o.domain == "ai.tc_graph" and o.version == 1 for o in out.opset_import)
    assert out.ir_version == original.ir_version
    # the rewritten model loads back, TcKernel types and all
    g2 = Graph.from_model(out)
    assert g2.types["y"] == (np.dtype(np.float32), (4, 2))


def test_rewrite_places_kernel_where_dependencies_allow() -> None:
    """Group {a, c}: a feeds b (outside) that precedes e (outside) feeding c. Neither a's
    nor c's original position is valid for the fused node."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Neg", ["a"], ["b"], name="b"),
        helper.make_node("Neg", ["x"], ["e"], name="e"),
        helper.make_node("Relu", ["e"], ["c"], name="c"),
        helper.make_node("Sub", ["b", "c"], ["y"], name="y"),
    ]
    g = Graph.from_model(model_of(nodes, [vi("x", F, [4])], [vi("y", F, [4])]))
    (group,) = candidate_groups(g, translatable=only("Relu"))
    assert group.nodes == (0, 3) and group.inputs == ("x", "e") and group.outputs == ("a", "c")
    out = rewrite(g.model, [(group, fake_attrs(g, group))])
    onnx.checker.check_model(out)
    assert_topological(out)
    assert [n.name for n in out.graph.node] == ["e", "tc_fused_0", "b", "y"]
    assert {v.name for v in out.graph.value_info} >= {"a", "c"}


def test_rewrite_two_groups_and_keeps_outside_nodes_in_order() -> None:
    g = Graph.from_model(diamond())
    groups = candidate_groups(g, translatable=only("Relu", "Add"))
    out = rewrite(g.model, [(grp, fake_attrs(g, grp)) for grp in groups])
    onnx.checker.check_model(out)
    assert_topological(out)
    assert [n.op_type for n in out.graph.node] == ["TcKernel", "Neg", "TcKernel"]
    assert [n.name for n in tc_nodes(out)] == ["tc_fused_0", "tc_fused_1"]


def test_rewrite_drops_constant_nodes_that_only_fed_the_group() -> None:
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(4, "f"))),
        helper.make_node("Mul", ["x", "c"], ["m"]),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    g = Graph.from_model(model_of(nodes, [vi("x", F, [4])], [vi("y", F, [4])]))
    (group,) = candidate_groups(g, translatable=only("Constant", "Mul", "Relu"))
    assert group.nodes == (1, 2) and group.inputs == ("x", "c")  # Constant stays outside
    out = rewrite(g.model, [(group, fake_attrs(g, group, inputs=("x",)))])
    assert [n.op_type for n in out.graph.node] == ["TcKernel"]
    onnx.checker.check_model(out)


def test_rewrite_rejects_bad_replacements() -> None:
    g = Graph.from_model(diamond())
    a, d = candidate_groups(g, translatable=only("Relu", "Add"))
    with pytest.raises(TcError, match="both contain"):
        rewrite(g.model, [(a, fake_attrs(g, a)), (a, fake_attrs(g, a))])
    bad = fake_attrs(g, d)
    with pytest.raises(TcError, match="does not produce 'a'"):
        rewrite(g.model, [(a, NodeAttrs(**{**bad.__dict__, "outputs": ("y",)}))])
    with pytest.raises(TcError, match="computed inside"):
        rewrite(g.model, [(d, _inner(g, d))])
    non_convex = Group(nodes=(0, 2), inputs=("x", "u"), outputs=("d",))
    attrs = NodeAttrs("s", "f", "{}", "k", ("x", "u"), ("d",), (F, F), (F,), ((4,), (4,)), ((4,),))
    with pytest.raises(TcError):
        rewrite(g.model, [(non_convex, attrs)])


def _inner(g: Graph, group: Group) -> NodeAttrs:
    """Attrs of `group` that wrongly read a value the group itself computes."""
    attrs = fake_attrs(g, group)
    return NodeAttrs(
        **{
            **attrs.__dict__,
            "inputs": (*attrs.inputs, "d"),
            "input_dtypes": (*attrs.input_dtypes, F),
            "input_shapes": (*attrs.input_shapes, (4,)),
        }
    )


def test_node_attrs_validates_lengths() -> None:
    with pytest.raises(TcError, match="differ in length"):
        NodeAttrs("s", "f", "{}", "k", ("x",), ("y",), (), (F,), ((4,),), ((4,),))


def test_scalar_shapes_make_valid_empty_int_lists() -> None:
    nodes = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)]
    g = Graph.from_model(model_of(nodes, [vi("x", F, [4])], [vi("y", F, [])]))
    (group,) = candidate_groups(g, translatable=only("ReduceSum"))
    out = rewrite(g.model, [(group, fake_attrs(g, group))])
    onnx.checker.check_model(out)
    a = {x.name: helper.get_attribute_value(x) for x in tc_nodes(out)[0].attribute}
    assert a["output_shapes"] == [] and a["output_ranks"] == [0]


def test_rewrite_without_replacements_still_runs_in_onnxruntime() -> None:
    """The added `ai.tc_graph` opset import and the kept IR version (8 here; the
    onnxruntime we support refuses 14, onnx's default) do not stop onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    g = Graph.from_model(mlp3_gemm())
    out = rewrite(g.model, [])
    assert out.ir_version == 8
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    runs = [
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x}
        )[0]
        for m in (mlp3_gemm(), out)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])
