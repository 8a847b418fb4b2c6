"""The mapping vocabulary (tc_graph/poly/marks.py): every mark reads back from its isl id as
the value it was written from, on the schedule tree and in the AST, and an id that spells
no mark is refused by name."""

from __future__ import annotations

import islpy as isl
import pytest

from tc_graph.poly.marks import (
    Kernel,
    Loop,
    LoopMark,
    Mapped,
    Mark,
    NoPrivateTile,
    NoSharedTiles,
    PrivateTile,
    Shared,
    SharedTiles,
    ThreadLoop,
    Tile,
    Unit,
    annotate,
    insert,
    is_loop,
    of_node,
    parse,
    to_id,
)

MARKS: list[Mark] = [
    *(LoopMark(k, depth) for k in Loop for depth in (None, 0, 3)),
    Mapped(Unit.THREAD, 0, 3, 1),
    Mapped(Unit.BLOCK, 2, 0, 32),
    Mapped(Unit.THREAD, 1, 12, 64),
    Kernel(0),
    Kernel(11),
    Shared(),
    SharedTiles(
        (Tile("tc_sh0_0", "A", "float32", ("c0", "0"), (16, 64), frozenset(), True, False),)
    ),
    NoSharedTiles("no loop of thread dim 1: a barrier would diverge"),
    PrivateTile("S0", (ThreadLoop(2, 1, 4, 0, 1, 16),), (4, 5), (4,)),
    NoPrivateTile("no reduction loop below the thread loops"),
]


@pytest.mark.parametrize("mark", MARKS, ids=str)
def test_a_mark_reads_back_from_its_id(mark: Mark) -> None:
    assert parse(to_id(mark)) == mark


def test_the_spelling_of_the_marks() -> None:
    """The names isl shows in a printed schedule tree (the mapped loop's iterator is the
    name isl's AST generator gives the loop at that depth)."""
    assert to_id(LoopMark(Loop.PARALLEL, 2)).get_name() == "parallel"
    assert to_id(LoopMark(Loop.PARALLEL, 2)).get_user() == 2
    assert to_id(Mapped(Unit.THREAD, 0, 3, 1)).get_name() == "map:thread:0:c3:1"
    assert Mapped(Unit.THREAD, 0, 3, 1).iterator == "c3"
    assert to_id(Kernel(4)).get_name() == "kernel:4"
    assert to_id(Shared()).get_name() == "shared"


def test_marks_survive_the_ast() -> None:
    """A mark inserted on the schedule tree is the one the printer reads on the AST."""
    sched = isl.Schedule.from_domain(isl.UnionSet("{ S[i] : 0 <= i < 8 }"))
    band = (
        sched.get_root()
        .child(0)
        .insert_partial_schedule(isl.MultiUnionPwAff("[{ S[i] -> [(i)] }]"))
    )
    mapped = Mapped(Unit.THREAD, 0, band.get_schedule_depth(), 1)
    node = insert(insert(band, mapped), Kernel(0))
    ast = isl.AstBuild.alloc(isl.DEFAULT_CONTEXT).node_from_schedule(node.get_schedule())
    assert of_node(ast) == Kernel(0)
    inner = ast.mark_get_node()
    assert of_node(inner) == mapped
    assert inner.mark_get_node().for_get_iterator().to_C_str() == mapped.iterator


def test_a_copy_of_a_shared_mark_reads_back_its_decision() -> None:
    """The decision of a copy of a `shared` mark is the AST node's annotation."""
    sched = isl.Schedule.from_domain(isl.UnionSet("{ S[i] : 0 <= i < 8 }"))
    node = insert(sched.get_root().child(0), Shared())
    ast = isl.AstBuild.alloc(isl.DEFAULT_CONTEXT).node_from_schedule(node.get_schedule())
    decision = NoSharedTiles("no loop of thread dim 0: a barrier would diverge")
    assert of_node(annotate(ast, decision)) == decision


def test_is_loop() -> None:
    assert is_loop(LoopMark(Loop.REGTILE, 1), Loop.REGTILE)
    assert not is_loop(LoopMark(Loop.SIMD, 1), Loop.REGTILE)
    assert not is_loop(Shared(), Loop.REDUCE)


@pytest.mark.parametrize(
    "name",
    ["vectorize", "", "map:warp:0:c1:1", "map:thread:x:c1:1", "map:thread:0:i:1", "kernel:",
     "kernel:1:2", "Parallel", "shared:0"],
)  # fmt: skip
def test_an_unknown_mark_is_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match="is not a mapping mark") as info:
        parse(isl.Id(name, context=isl.DEFAULT_CONTEXT))
    assert repr(name) in str(info.value)


def test_a_loop_mark_without_a_depth_in_its_user_is_refused() -> None:
    with pytest.raises(ValueError, match="not a schedule depth"):
        parse(isl.Id("simd", user="c3", context=isl.DEFAULT_CONTEXT))


def test_a_private_mark_without_a_decision_in_its_user_is_refused() -> None:
    with pytest.raises(ValueError, match="not a private-tile decision"):
        parse(isl.Id("private", user=3, context=isl.DEFAULT_CONTEXT))


def test_a_shared_mark_without_a_decision_in_its_user_is_refused() -> None:
    with pytest.raises(ValueError, match="not a shared-tile decision"):
        parse(isl.Id("shared", user="A", context=isl.DEFAULT_CONTEXT))
