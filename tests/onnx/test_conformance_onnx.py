"""onnx's backend node cases for every translated op type, end to end.

Each single-node case of `onnx.backend.test.case.node` whose op tc_graph translates runs
first in plain onnxruntime; a case it does not run correctly is skipped (not ours to
judge). Otherwise `tg.optimize(model, force=True)` must fuse the node into a TcKernel and
`tg.InferenceSession` must reproduce onnx's expected outputs. The exceptions are listed
in tests/data/onnx_conformance.toml, each with its reason: `[unfused]` (glob patterns of
cases the translation refuses: the node must then stay with onnxruntime, and the model
still match) and `[failing]` (known wrong results, expected to fail).

Attribute-like inputs (axes, shapes, the training flag) are fed by the cases; models have
them as constants, so they become initializers of the same values here.

`python -m tests.onnx.test_conformance_onnx` prints the pass/total figure.
"""

from __future__ import annotations

import fnmatch
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import tc_graph as tg
from tc_graph.graph.translate import TRANSLATABLE
from tc_graph.onnx_domain import TC_DOMAIN, TC_OP

TABLE = tomllib.loads(
    (Path(__file__).parents[1] / "data" / "onnx_conformance.toml").read_text(encoding="utf-8")
)
UNFUSED: dict[str, str] = TABLE["unfused"]
FAILING: dict[str, str] = TABLE["failing"]

# Inputs that models have as constants, by op type (input positions).
ATTRIBUTE_INPUTS: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("Reshape", "Squeeze", "Unsqueeze"), (1,)),
    **{op: (1,) for op in TRANSLATABLE if op.startswith("Reduce")},
    "Dropout": (1, 2),
}
# onnx's backend runner compares with rtol 1e-3, atol 1e-7; the atol is relaxed a little
# for values that cancel to near zero (a fused kernel sums in another order).
RTOL, ATOL = 1e-3, 1e-5


def _cases() -> list[Any]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [
        c
        for c in cases
        if c.model is not None
        and len(c.model.graph.node) == 1
        and c.model.graph.node[0].op_type in TRANSLATABLE
    ]


CASES = _cases()


def unfused_reason(name: str) -> str | None:
    """Why the table expects this case to stay with onnxruntime (None: it must fuse)."""
    for pattern, reason in UNFUSED.items():
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


def _prepared(case: Any) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """The case's model with its attribute-like inputs as initializers, feeds, expected."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: np.asarray(a) for vi, a in zip(graph.input, inputs, strict=False)}
    node = graph.node[0]
    constant = {
        node.input[k]
        for k in ATTRIBUTE_INPUTS.get(node.op_type, ())
        if k < len(node.input) and node.input[k] in feeds
    }
    for name in constant:
        graph.initializer.append(numpy_helper.from_array(feeds.pop(name), name))
    kept = [vi for vi in graph.input if vi.name not in constant]
    del graph.input[:]
    graph.input.extend(kept)
    return model, feeds, [np.asarray(e) for e in expected]


def _differs(got: list[np.ndarray], expected: list[np.ndarray]) -> str | None:
    """Why outputs differ from the expected ones (dtype, shape, values), or None."""
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        g = np.asarray(g)
        if g.dtype != e.dtype or g.shape != e.shape:
            return f"output {k}: {g.dtype}{list(g.shape)}, expected {e.dtype}{list(e.shape)}"
        if e.dtype.kind in "fc":
            ok = np.allclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(g, e)
        if not ok:
            return f"output {k}: values differ (max |diff| {np.max(np.abs(g - e))})"
    return None


def run_case(case: Any) -> tuple[str, str]:
    """('skip' | 'fused' | 'unfused' | 'wrong', detail) for one case."""
    model, feeds, expected = _prepared(case)
    try:
        plain = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = plain.run(None, feeds)
    except Exception as e:  # onnxruntime's own exception types
        return "skip", f"plain onnxruntime fails: {str(e).splitlines()[0][:120]}"
    why = _differs(want, expected)
    if why is not None:
        return "skip", f"plain onnxruntime is wrong: {why}"
    optimized = tg.optimize(model, force=True)
    fused = any(n.domain == TC_DOMAIN and n.op_type == TC_OP for n in optimized.graph.node)
    got = tg.InferenceSession(optimized).run(None, feeds)
    why = _differs(got, expected)
    if why is not None:
        return "wrong", why
    return ("fused", "") if fused else ("unfused", _decision_why(optimized))


def _decision_why(model: onnx.ModelProto) -> str:
    """Why nothing was fused: the decisions' reasons, or else the reason tc_graph states
    for each node it left untranslated (before any group was formed or measured)."""
    import json

    from tc_graph.graph.model import Graph
    from tc_graph.graph.optimize import untranslated
    from tc_graph.graph.translate import opset_version, translatable

    for p in model.metadata_props:
        if p.key == "tc_graph.decisions" and json.loads(p.value):
            return "; ".join(r["why"] for r in json.loads(p.value))
    g = Graph.from_model(model)
    opset = opset_version(g.model)
    left = untranslated(g, lambda node: translatable(node, g.types, g.constants, opset=opset))
    return "; ".join(f"{label}: {reason}" for label, reason in left) or "no reason stated"


def _params() -> list[Any]:
    out = []
    for c in CASES:
        marks = []
        if c.name in FAILING:
            marks.append(pytest.mark.xfail(reason=FAILING[c.name], strict=True))
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


def test_table_names_existing_cases() -> None:
    names = {c.name for c in CASES}
    assert not set(FAILING) - names, "failing entries that name no case"
    for pattern in UNFUSED:
        assert any(fnmatch.fnmatchcase(n, pattern) for n in names), pattern


def test_every_translated_op_has_cases() -> None:
    """Every op type in the table of translations has onnx cases, except a listed few."""
    covered = {c.model.graph.node[0].op_type for c in CASES}
    assert TRANSLATABLE - covered == set()


@pytest.mark.parametrize("case", _params())
def test_onnx_case(case: Any) -> None:
    status, detail = run_case(case)
    if status == "skip":
        pytest.skip(detail)
    assert status != "wrong", detail
    reason = unfused_reason(case.name)
    if reason is None:
        assert status == "fused", f"not fused: {detail}"
    else:
        assert status == "unfused", f"fused, but the table says it stays with onnxruntime: {reason}"
        # tc_graph states why (a refusal before measuring), except for Identity-only
        # groups, which the partitioner drops as having nothing to compute.
        if {n.op_type for n in case.model.graph.node} != {"Identity"}:
            assert detail != "no reason stated", "tc_graph must state why it leaves the node"


def main() -> None:
    """Run every case (2 processes) and print pass/total and the exceptions."""
    import os
    from concurrent.futures import ProcessPoolExecutor

    names = [c.name for c in CASES]
    with ProcessPoolExecutor(2) as pool:
        results = dict(zip(names, pool.map(_run_named, names), strict=True))
    counted = {n: r for n, r in results.items() if r[0] != "skip"}
    passed = sum(1 for r in counted.values() if r[0] == "fused")
    for name, (status, detail) in sorted(results.items()):
        if status != "fused":
            print(f"{status:8} {name}: {detail}")
    print(f"skipped (plain onnxruntime wrong or failing): {len(results) - len(counted)}")
    print(f"conformance: {passed}/{len(counted)} fused and matching (pid {os.getpid()})")


def _run_named(name: str) -> tuple[str, str]:
    case = next(c for c in CASES if c.name == name)
    try:
        return run_case(case)
    except Exception as e:
        return "wrong", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


if __name__ == "__main__":
    main()
