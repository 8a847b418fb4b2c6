"""The proof behind every `parallel` and `simd` loop of a CPU kernel (tc_graph/poly/proof.py):
a mark on a loop that carries a dependence is refused, and the loop printed sequential
(or, as in the test suite, reported)."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler
from tc_graph.codegen.c import emit
from tc_graph.options import MappingOptions
from tc_graph.poly.marks import Loop, LoopMark, to_id
from tc_graph.poly.scop import Scop, build_scop

ROW_SUMS = "def f(float(N,K) B) -> (O) { O(i) +=! B(i, k) }"


def _scop() -> Scop:
    fn = tg.define(ROW_SUMS).f
    bound = compiler.bind(fn, [np.zeros((8, 32), np.float32)])
    return build_scop(
        bound.program, bound.sizes, {"B": (8, 32), **bound.shapes}, contractions=False
    )


def _schedule(scop: Scop, mark: Loop, on: str) -> isl.Schedule:
    """S0_init, then S0 in loops i, k, with `mark` on loop `on` (i: depth 0, k: depth 1)."""
    sched = isl.Schedule.from_domain(scop.domain)
    filters = isl.UnionSetList.alloc(isl.DEFAULT_CONTEXT, 2)
    for name in ("S0_init", "S0"):
        filters = filters.add(isl.UnionSet.from_set(scop.statement(name).domain))
    seq = sched.get_root().child(0).insert_sequence(filters)
    node = seq.child(1).child(0)
    for depth, loop in enumerate("ik"):
        band = node.insert_partial_schedule(isl.MultiUnionPwAff(f"[{{ S0[i, k] -> [({loop})] }}]"))
        if loop == on:
            band = band.insert_mark(to_id(LoopMark(mark, depth))).child(0)
        node = band.child(0)
    return node.get_schedule()


@pytest.mark.parametrize("mark", ["parallel", "simd"])
def test_a_mark_on_a_reduction_loop_is_refused(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    scop = _scop()
    options = MappingOptions(register_tile=0)
    monkeypatch.setenv("TC_GRAPH_CHECK_MARKS", "1")
    with pytest.raises(AssertionError, match=f"'{mark}' mark on loop c1"):
        emit(scop, _schedule(scop, Loop(mark), "k"), options)
    monkeypatch.setenv("TC_GRAPH_CHECK_MARKS", "0")
    text = emit(scop, _schedule(scop, Loop(mark), "k"), options)
    main = text[text.index("tc_kernel(") : text.index("tc_abi_version")]
    assert "#pragma omp" not in main, "a reduction loop printed parallel"


@pytest.mark.parametrize("mark", ["parallel", "simd"])
def test_a_mark_on_an_output_loop_is_proved(mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    scop = _scop()
    monkeypatch.setenv("TC_GRAPH_CHECK_MARKS", "1")
    text = emit(scop, _schedule(scop, Loop(mark), "i"), MappingOptions(register_tile=0))
    # tc_kernel runs a phase split on its parallel loop on OpenMP's threads, the loop
    # itself printed once, in tc_phase (codegen/phases.run_phases)
    main = text[text.index("tc_kernel(") : text.index("tc_abi_version")]
    assert f"#pragma omp {'parallel' if mark == 'parallel' else 'simd'}" in main
