"""The helpers that read and rebuild isl's AST expressions (codegen/stmt.py) rather than
the C text isl prints: a register tile's rows are its iterator replaced by each value."""

from __future__ import annotations

import islpy as isl
import pytest

from tc_graph.codegen.stmt import affine, mentions, with_value


def _expr(text: str) -> isl.AstExpr:
    build = isl.AstBuild.from_context(isl.Set("[c0, c3] -> { : }"))
    return build.expr_from_pw_aff(isl.PwAff(f"[c0, c3] -> {{ [({text})] }}"))


@pytest.mark.parametrize(
    ("text", "is_affine", "has_c3"),
    [
        ("4*c0 + c3 - 1", True, True),
        ("-c3", True, True),
        ("2*c0", True, False),
        ("floor((c0 + c3)/2)", False, True),
        ("(c0 + c3) mod 3", False, True),
    ],
)
def test_affinity_and_mentions_read_the_expression(
    text: str, is_affine: bool, has_c3: bool
) -> None:
    e = _expr(text)
    assert affine(e) == is_affine and mentions(e, "c3") == has_c3


@pytest.mark.parametrize("value", [0, 1, 5])
def test_with_value_evaluates_as_the_expression_at_that_value(value: int) -> None:
    """The rebuilt expression, evaluated as C would, equals the original with the
    iterator set (c0 = 7): an independent oracle is Python's own arithmetic."""
    for text in ("4*c0 + c3 - 1", "-c3 + 2*c0", "3*c3"):
        printed = with_value(_expr(text), "c3", value).to_C_str()
        assert "c3" not in printed
        want = eval(text.replace("c3", f"({value})").replace("c0", "7"))
        assert eval(printed.replace("c0", "7")) == want
