"""Candidate groups: sets of translatable ONNX nodes that can become one TcKernel.

A group must be convex (no path leaves it and comes back), or replacing it by one node
would create a cycle. Convexity of each group alone is not enough for replacing several
at once, so every test is made in the graph with the groups formed so far contracted
(`_Quotient`).

Groups are grown greedily from seeds in topological order, one neighbouring node at a
time, as long as the group stays convex. Then groups are merged while the union stays
convex — siblings first (groups that read a common value or feed a common consumer,
graph outputs counting as one consumer), then any pair. The merge is what puts the two
unconnected Gather+ReduceSum lookups of 2LUT into one kernel. `components` undoes it for
the optimizer when a merged kernel does not pay off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import networkx as nx
import onnx

from ..errors import TcError
from .model import Graph, node_inputs

Translatable = Callable[[onnx.NodeProto], str | None]
MergePolicy = Literal["none", "siblings", "all"]

MAX_GROUP_NODES = 32
"""Most nodes in one candidate group; a larger group is cut into runs of its topological
order. Compile time grows faster than the group: on light_inception_v1's 130-node group
(2 cores, tc_graph of Nov 2026) 10 nodes compiled in 3.5 s, 30 in 11 s, 60 in 25 s and
all 130 in 105 s (isl's AST generation 50 s, scheduling 22 s, gcc 22 s), and densenet121
gave one group of 910. At 32 a compile stays near 12 s, small against optimize's budget,
and a fused kernel of that many operators already holds several layers."""


@dataclass(frozen=True)
class Group:
    """A convex set of nodes to fuse.

    `nodes`: indices into the model's node list, in topological order. `inputs`: values
    the group reads from outside (graph inputs, initializers, other nodes' outputs), in
    order of first use — constants included; dropping attribute-like ones is the
    translator's call. `outputs`: values produced inside that a node outside reads or
    that are graph outputs, in production order.
    """

    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.nodes)


def excluded(g: Graph, *, translatable: Translatable) -> dict[int, str]:
    """Why each node that cannot be in a group is left out (node index → reason).

    Left out: nodes the translator refuses; nodes with a value of non-static shape;
    nodes whose outputs are all known constants (onnxruntime folds them; their values
    reach the group as constant inputs the translator can read)."""
    out: dict[int, str] = {}
    for index in g.order:
        node = g.node(index)
        reason = translatable(node)
        if reason is not None:
            out[index] = reason
            continue
        outputs = [n for n in node.output if n]
        dynamic = [n for n in (*node_inputs(node), *outputs) if not g.is_static(n)]
        if dynamic:
            out[index] = f"value '{dynamic[0]}' has no static shape"
        elif outputs and all(n in g.constants for n in outputs):
            out[index] = "computes a constant"
    return out


def candidate_groups(
    g: Graph,
    *,
    translatable: Translatable,
    merge: MergePolicy = "all",
    max_nodes: int = MAX_GROUP_NODES,
) -> list[Group]:
    """Maximal connected convex groups of eligible nodes, then merged (see module doc),
    then cut to at most `max_nodes` nodes each (see MAX_GROUP_NODES).

    Every eligible node ends up in exactly one group. The groups are disjoint, each is
    convex, and — stronger — they can all be replaced at once, or any subset of them,
    each whole or split by `components`, without creating a cycle. A group made only of
    Identity nodes is dropped (nothing to compute). Single-node groups are kept: whether
    fusing pays is the cost model's decision. Returned in topological order of their
    first node.
    """
    if merge not in ("none", "siblings", "all"):
        raise TcError(f"unknown merge policy '{merge}' (expected 'none', 'siblings' or 'all')")
    skip = excluded(g, translatable=translatable)
    eligible = [n for n in g.order if n not in skip]
    eligible_set = set(eligible)
    q = _Quotient(g)
    pos = g.reach.position
    assigned: set[int] = set()
    units: list[int] = []  # member bitsets of the contracted groups
    for seed in eligible:
        if seed in assigned:
            continue
        members = {seed}
        bits, anc, desc = q.unit(pos[seed])
        # The eligible unassigned neighbours of the members, kept as they grow: working
        # it out from all members each round was quadratic (7 s on densenet121).
        frontier = _free_neighbours(g, seed, eligible_set, assigned)
        while frontier:
            grown, reached = False, set()
            for cand in sorted(frontier, key=pos.__getitem__):
                c_bits, c_anc, c_desc = q.unit(pos[cand])
                if _convex(bits | c_bits, anc | c_anc, desc | c_desc):
                    bits, anc, desc = bits | c_bits, anc | c_anc, desc | c_desc
                    members.add(cand)
                    reached |= _free_neighbours(g, cand, eligible_set, assigned)
                    grown = True
            if not grown:
                break
            frontier = (frontier | reached) - members
        assigned |= members
        if all(g.node(n).op_type == "Identity" for n in members):
            continue
        q.contract(bits)
        units.append(bits)
    if merge != "none":
        units = _merge(g, q, units, siblings_only=merge == "siblings")
    groups = [part for u in units for part in _cut(g, _nodes_of(g, u), max_nodes)]
    return sorted(groups, key=lambda grp: pos[grp.nodes[0]])


def _cut(g: Graph, nodes: list[int], max_nodes: int) -> list[Group]:
    """A group's nodes (in topological order) as runs of at most max_nodes. Each run is
    convex, and the runs can be replaced together with the other groups: a path from
    one run to another only goes forward in the order, and a path that leaves the group
    never comes back (it is convex in the quotient graph). Runs of Identity nodes only
    are dropped, like such groups."""
    if max_nodes < 1:
        raise TcError(f"max_nodes must be at least 1, not {max_nodes}")
    runs = [nodes[k : k + max_nodes] for k in range(0, len(nodes), max_nodes)]
    return [
        _describe(g, set(run))
        for run in runs
        if not all(g.node(n).op_type == "Identity" for n in run)
    ]


def _free_neighbours(g: Graph, n: int, eligible: set[int], assigned: set[int]) -> set[int]:
    """n's producers and consumers that are eligible and in no group yet."""
    return {
        m
        for m in (*g.dag.predecessors(n), *g.dag.successors(n))
        if m in eligible and m not in assigned
    }


def make_group(g: Graph, nodes: Iterable[int]) -> Group:
    """The Group of an arbitrary node set (its inputs and outputs worked out); TcError
    if the set is empty, names unknown nodes, or is not convex."""
    nodes = set(nodes)
    if not nodes:
        raise TcError("a group needs at least one node")
    unknown = [n for n in nodes if n not in g.dag]
    if unknown:
        raise TcError(f"node index {unknown[0]} is not in the graph")
    if not g.reach.is_convex(nodes):
        raise TcError("the node set is not convex: a path leaves it and comes back")
    return _describe(g, nodes)


def is_convex(g: Graph, nodes: Iterable[int]) -> bool:
    """Whether no path leaves the node set and comes back into it."""
    return g.reach.is_convex(nodes)


def components(g: Graph, group: Group) -> list[Group]:
    """The weakly connected components of a group, each a Group of its own (convex:
    a path between two parts of one component that left it would leave the group).
    The optimizer's fallback when a merged kernel of unrelated parts does not pay."""
    sub = g.dag.subgraph(group.nodes)
    parts = [_describe(g, set(c)) for c in _weak_components(sub)]
    return sorted(parts, key=lambda grp: g.reach.position[grp.nodes[0]])


def _weak_components(sub: nx.DiGraph) -> list[set[int]]:
    return [set(c) for c in nx.weakly_connected_components(sub)]


def _convex(members: int, ancestors: int, descendants: int) -> bool:
    """No node outside `members` is both below and above it."""
    return (ancestors & descendants & ~members) == 0


class _Quotient:
    """Reachability in the graph where every group formed so far is contracted to one
    node, as bitsets over node positions (a contracted group's bits all move together).

    Checking each new group for convexity in this graph, not the original one, is what
    keeps the groups jointly acyclic: two groups each convex in the original graph can
    still form a cycle once both are contracted (a1→b1 and b2→a2 with a1, a2 and b1, b2
    unrelated). Contracting a convex set S adds exactly the paths p ⇝ S ⇝ q, so the
    update is one pass over the nodes."""

    def __init__(self, g: Graph) -> None:
        reach = g.reach
        n = len(g.order)
        self.anc = [0] * n
        self.desc = [0] * n
        self.members = [1 << i for i in range(n)]
        for node, i in reach.position.items():
            self.anc[i] = reach.ancestors[node]
            self.desc[i] = reach.descendants[node]

    def unit(self, i: int) -> tuple[int, int, int]:
        """Members, ancestors and descendants of the unit holding position `i`."""
        return self.members[i], self.anc[i], self.desc[i]

    def contract(self, bits: int) -> None:
        """Make the convex set `bits` one unit."""
        anc = desc = 0
        for i in _positions(bits):
            anc |= self.anc[i]
            desc |= self.desc[i]
        anc &= ~bits
        desc &= ~bits
        for i in _positions(bits):
            self.anc[i], self.desc[i], self.members[i] = anc, desc, bits
        for i in _positions(desc):
            self.anc[i] |= anc | bits
        for i in _positions(anc):
            self.desc[i] |= desc | bits


def _positions(bits: int) -> list[int]:
    out: list[int] = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def _nodes_of(g: Graph, bits: int) -> list[int]:
    order = g.order
    return [order[i] for i in _positions(bits)]


def _describe(g: Graph, nodes: set[int]) -> Group:
    """Inputs and outputs of a node set, in the orders `Group` documents."""
    order = sorted(nodes, key=g.reach.position.__getitem__)
    produced: set[str] = set()
    for n in order:
        produced.update(name for name in g.node(n).output if name)
    inputs: list[str] = []
    seen: set[str] = set()
    for n in order:
        for name in node_inputs(g.node(n)):
            if name not in produced and name not in seen:
                seen.add(name)
                inputs.append(name)
    graph_outputs = set(g.graph_outputs)
    outputs: list[str] = []
    for n in order:
        for name in g.node(n).output:
            if not name or name in outputs:
                continue
            readers = g.consumers.get(name, ())
            if name in graph_outputs or any(r not in nodes for r in readers):
                outputs.append(name)
    return Group(nodes=tuple(order), inputs=tuple(inputs), outputs=tuple(outputs))


def _merge(g: Graph, q: _Quotient, units: list[int], *, siblings_only: bool) -> list[int]:
    """Greedy pairwise merging of contracted groups while the union stays convex in the
    quotient graph: sibling pairs first, then (unless `siblings_only`) any pair, in
    topological order; repeated until stable, since a merge can make a once non-convex
    union convex."""
    units = list(units)
    keys = [_sibling_keys(g, u) for u in units]
    phases = (True,) if siblings_only else (True, False)
    for need_sibling in phases:
        changed = True
        while changed:
            changed = False
            i = 0
            while i < len(units):
                j = i + 1
                while j < len(units):
                    if need_sibling and not (keys[i] & keys[j]):
                        j += 1
                        continue
                    first, second = _lowest(units[i]), _lowest(units[j])
                    _, anc_i, desc_i = q.unit(first)
                    _, anc_j, desc_j = q.unit(second)
                    union = units[i] | units[j]
                    if _convex(union, anc_i | anc_j, desc_i | desc_j):
                        q.contract(union)
                        units[i] = union
                        keys[i] = keys[i] | keys[j]
                        del units[j], keys[j]
                        changed = True
                    else:
                        j += 1
                i += 1
    return units


def _lowest(bits: int) -> int:
    """Position of the lowest set bit."""
    return (bits & -bits).bit_length() - 1


_GRAPH_OUTPUT = ("consumer", -1)


def _sibling_keys(g: Graph, bits: int) -> frozenset[tuple[str, object]]:
    """What makes two groups siblings: a non-constant value both read, or an outside
    node (or the graph's outputs) both feed."""
    nodes = set(_nodes_of(g, bits))
    group = _describe(g, nodes)
    keys: set[tuple[str, object]] = {("reads", v) for v in group.inputs if v not in g.constants}
    graph_outputs = set(g.graph_outputs)
    for name in group.outputs:
        if name in graph_outputs:
            keys.add(_GRAPH_OUTPUT)
        keys.update(("consumer", r) for r in g.consumers.get(name, ()) if r not in nodes)
    return frozenset(keys)
