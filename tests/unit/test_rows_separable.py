"""rows.separable: which programs compute each of their ROWS rows from that row alone (a
rows TcKernel runs them on chunks of rows, docs/onnx.md)."""

from __future__ import annotations

import pytest

from tc_graph.api import define_entry
from tc_graph.graph.rows import Dynamic, middle_sizes, separable


def _why(body: str, params: str, outputs: str) -> str | None:
    fn = define_entry(f"def f({params}) -> ({outputs}) {{\n{body}\n}}", "f")
    assert fn is not None
    return separable(fn.program_for({}))


@pytest.mark.parametrize(
    ("params", "outputs", "body"),
    [
        ("float(rows, 7) X, float(7, 5) W", "float(rows, 5) Y", "Y(i, j) +=! X(i, k) * W(k, j)"),
        ("float(rows, 7) X", "float(rows) Y", "T(i, j) = X(i, j) * 2\nY(i) +=! T(i, j)"),
        (  # an indirect read of a fixed table at the row's own indices
            "int64(rows, 3) I, float(100, 4) T",
            "float(rows, 3, 4) Y",
            "Y(i, j, k) = T(max(min(I(i, j), 99), 0), k)",
        ),
        ("float(7) B", "float(7) Y", "Y(j) = B(j)"),  # no rows at all
        (  # rows over two leading dimensions (batch, sequence)
            "float(rows, rows_1, 4) X, float(4) B",
            "float(rows, rows_1) Y",
            "Y(i, j) +=! X(i, j, k) * B(k)",
        ),
    ],
)
def test_row_by_row_programs_are_separable(params: str, outputs: str, body: str) -> None:
    assert _why(body, params, outputs) is None


@pytest.mark.parametrize(
    ("params", "outputs", "body", "why"),
    [
        (
            "float(rows, 7) X",
            "float(rows, 7) Y",
            "S(j) +=! X(i, j)\nY(i, j) = X(i, j) / S(j)",
            "writes 'S' has a loop over 'i' whose range depends on the rows",
        ),
        (
            "float(rows, rows) X",
            "float(rows, rows) Y",
            "Y(i, j) = X(j, i)",
            "the size of 'X' depends on the rows other than as its leading dimension",
        ),
        (
            "float(rows, 7) X",
            "float(rows, 7) Y",
            "Y(i, j) = X(max(i - 1, 0), j) where i in 0:rows",
            "reads other rows than the one it writes",
        ),
        ("float(rows, 7) X", "float(7) Y", "Y(j) +=! X(i, j)", "its output 'Y' does not lead"),
        (
            "float(rows, 7) X",
            "float(rows, 7) Y",
            "Y(i, j) = 0 where i in 0:rows\nY(i, j) = X(i, j) where i in 1:rows",
            "does not walk all its rows with 'i'",
        ),
        (
            "float(rows, 7) X",
            "float(rows, 7) Y",
            "Y(i, j) = X(i, j) / rows",
            "reads other rows than the one it writes, or their number",
        ),
        (  # a neighbour along the second dimension of the rows
            "float(rows, rows_1) X",
            "float(rows, rows_1) Y",
            "Y(i, j) = X(i, max(j - 1, 0)) where j in 0:rows_1",
            "reads other rows than the one it writes",
        ),
    ],
)
def test_programs_whose_rows_meet_are_refused(
    params: str, outputs: str, body: str, why: str
) -> None:
    found = _why(body, params, outputs)
    assert found is not None and why in found


def test_row_sizes_are_the_sample_products_and_the_powers_of_four_below() -> None:
    dyn = Dynamic(None, None, None, {"batch": (8, 1), "seq": (128,)}, {}, None)  # type: ignore[arg-type]
    assert dyn.row_sizes(("batch", "seq")) == (1024, 256, 128, 64, 16, 4, 1)
    assert dyn.row_sizes(("batch",)) == (8, 4, 1)


@pytest.mark.parametrize(
    ("samples", "vector", "middle"),
    [
        ({"batch": (8, 1), "seq": (128, 1)}, 16, {"batch": 3, "seq": 16}),  # 11 < 16 floats
        ({"batch": (8, 1), "seq": (128, 1)}, 8, {"batch": 3, "seq": 11}),
        ({"seq": (12, 1)}, 16, {"seq": 3}),  # no sample has a vector's floats
        ({"batch": (16, 1)}, 16, {"batch": 4}),  # 16 is the largest sample's own kernel
        ({"batch": (64, 1)}, 16, {"batch": 16}),
        ({"batch": (1,)}, 16, {"batch": 1}),
    ],
)
def test_choices_midway_are_made_at_a_vector_at_least(
    samples: dict[str, tuple[int, ...]], vector: int, middle: dict[str, int]
) -> None:
    """The geometric mean of a symbol's largest and smallest samples, but no fewer than a
    vector's floats where its largest sample has more."""
    assert middle_sizes(samples, vector) == middle
    dyn = Dynamic(None, None, None, samples, {}, None, vector=vector)  # type: ignore[arg-type]
    assert dyn.middle() == middle
