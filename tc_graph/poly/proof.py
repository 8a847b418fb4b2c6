"""Loops proved parallel: the AST of a mapped schedule, each loop annotated with what isl's
dependences say about it.

The marks of cpu.py are decisions on the schedule tree; what runs is the loops isl's AST
generator prints for them, which may differ: a band member may be split into pieces, one
of them without a loop (a statement for which it has one value). So every loop printed
`parallel` or `simd` is proved again on the AST: no dependence between two instances
inside it, at the same iteration of the loops around it, crosses its iterations. The
proof uses the AST build's own schedule at the loop (its instances to the values of the
loops that enclose them, this one last).

A loop that a mark asks for but the proof refuses is printed sequential; with
`TC_GRAPH_CHECK_MARKS=1` (set by the test suite) it is an error instead, so that every
kernel the tests generate checks its marks.

`children` and `ast_nodes` walk such an AST, for the planners on it (poly/promotion.py,
poly/private.py) and the printers (codegen/) alike.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import islpy as isl

from .. import ir
from .local import annotate
from .scop import Scop, maps_of, union_of

_CTX = isl.DEFAULT_CONTEXT


def _flat(umap: isl.UnionMap) -> isl.UnionMap:
    """The build's schedule with its nested ranges flattened (one tuple of loop values)."""
    return union_of(m.flatten_range() for m in maps_of(umap))


def carries_nothing(schedule: isl.UnionMap, deps: isl.UnionMap) -> bool:
    """The last dimension of `schedule` (instances -> enclosing loop values, flat) sees
    no dependence between instances that agree on the dimensions before it and not on it."""
    dom = schedule.domain()
    inside = deps.intersect_domain(dom).intersect_range(dom)
    if inside.is_empty():
        return True
    pairs = maps_of(inside.apply_domain(schedule).apply_range(schedule))
    return all(
        m.intersect(crossing(m.get_space(), m.dim(isl.dim_type.in_) - 1)).is_empty() for m in pairs
    )


def crossing(space: isl.Space, at: int) -> isl.Map:
    """The pairs of `space` ({ [x] -> [y] }) equal before dimension `at` and not at it:
    the dependences that loop `at` carries."""
    same = isl.Map.universe(space)
    for k in range(at):
        same = same.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    lt = same.order_lt(isl.dim_type.in_, at, isl.dim_type.out, at)
    return lt.union(same.order_gt(isl.dim_type.in_, at, isl.dim_type.out, at))


def _depth(schedule: isl.Schedule) -> int:
    return max((m.dim(isl.dim_type.out) for m in maps_of(schedule.get_map())), default=0)


def ast_build(schedule: isl.Schedule, context: isl.Set | None = None) -> isl.AstBuild:
    """An AST build for schedule whose loop iterators hold their depth (loop_depth),
    assuming `context` of the parameters (none by default)."""
    build = isl.AstBuild.from_context(context or isl.Set.universe(isl.Space.params_alloc(_CTX, 0)))
    ids = isl.IdList.alloc(_CTX, 0)
    for k in range(_depth(schedule)):
        ids = ids.add(isl.Id(f"c{k}", user=k, context=_CTX))
    return build.set_iterators(ids)


def size_bounds(program: ir.Program) -> isl.Set:
    """The sizes at most 2^31 - 1, as a kernel for every size checks they are before it
    runs (and binding refuses more): a loop that only a larger size would run is not
    printed (`B(i - 2^31)` kept a loop from i = 2^31, whose int iterator wrapped to -2^31
    and wrote out of bounds)."""
    ctx = isl.Set.universe(program.context.get_space())
    sizes = {ir.isl_name(n) for n in program.size_params}
    top = isl.Val.int_from_si(_CTX, 2**31 - 1)
    for k in range(ctx.dim(isl.dim_type.param)):
        if ctx.get_dim_name(isl.dim_type.param, k) in sizes:
            ctx = ctx.upper_bound_val(isl.dim_type.param, k, top)
    return ctx


def annotated_ast(scop: Scop, schedule: isl.Schedule) -> isl.AstNode:
    """The AST of schedule: each loop's iterator id holds its depth (loop_depth), its
    annotation the proof (loop_parallel); each local array's mark, its offsets there
    (poly/local.py)."""
    build = ast_build(schedule, None if scop.symbolic is None else size_bounds(scop.program))
    deps = scop.dependences

    def before_for(b: isl.AstBuild) -> isl.Id:
        return isl.Id("parallel", user=carries_nothing(_flat(b.get_schedule()), deps))

    seen: dict[str, isl.UnionSet] = {}

    def after_mark(node: isl.AstNode, b: isl.AstBuild) -> isl.AstNode:
        return annotate(node, b, scop, seen)

    build, _for = build.set_before_each_for(before_for)
    build, _mark = build.set_after_each_mark(after_mark)
    return build.node_from_schedule(schedule)


def children(node: isl.AstNode) -> list[isl.AstNode]:
    """The nodes directly inside an AST node: a loop's body, a mark's node, an if's
    branches, a block's statements."""
    t = node.get_type()
    if t == isl.ast_node_type.for_:
        return [node.for_get_body()]
    if t == isl.ast_node_type.mark:
        return [node.mark_get_node()]
    if t == isl.ast_node_type.if_:
        out = [node.if_get_then_node()]
        return out + ([node.if_get_else_node()] if node.if_has_else_node() else [])
    if t == isl.ast_node_type.block:
        nodes = node.block_get_children()
        return [nodes.get_at(i) for i in range(nodes.n_ast_node())]
    return []


def ast_nodes(node: isl.AstNode) -> Iterator[isl.AstNode]:
    """The nodes of an AST subtree, node first (the order they are printed in)."""
    yield node
    for child in children(node):
        yield from ast_nodes(child)


def loop_depth(node: isl.AstNode) -> int:
    """The schedule dimension a loop of an `annotated_ast` counts (where its marks sit)."""
    depth = node.for_get_iterator().get_id().get_user()
    assert isinstance(depth, int)
    return depth


def loop_parallel(node: isl.AstNode) -> bool:
    """A loop of an `annotated_ast` carries no dependence."""
    return node.get_annotation().get_user() is True


def refuse(what: str, node: isl.AstNode) -> None:
    """A mark asked for a loop the proof refuses: an error when marks are checked, else
    the caller prints the loop sequential."""
    if os.environ.get("TC_GRAPH_CHECK_MARKS") == "1":
        raise AssertionError(
            f"a '{what}' mark on loop {node.for_get_iterator().to_C_str()}, which carries a "
            "dependence"
        )
