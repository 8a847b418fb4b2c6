"""codegen/stmt.ast_value: isl's AST expressions of the sizes evaluated at a point, as
the printer does to find a loop's count at the sample, against isl's own evaluation of
the piecewise affine function the expression was built from."""

from __future__ import annotations

import islpy as isl
import pytest

from tc_graph.codegen.stmt import ast_value

CONTEXT = isl.Set("[N, M] -> { : 0 <= N <= 1000 and 0 <= M <= 1000 }")
FUNCTIONS = [
    "[N, M] -> { [(N - 1)] }",
    "[N, M] -> { [(floor((N + 3) / 4) * 4 - M)] }",
    "[N, M] -> { [(max(N, M) - min(N, 7))] }",
    "[N, M] -> { [(N mod 5 + 3 * floor((M - 1) / 8))] }",
    "[N, M] -> { [(-N + floor(M / 3))] : N >= M; [(2 * N)] : N < M }",
]


@pytest.mark.parametrize("text", FUNCTIONS)
def test_ast_value_agrees_with_isl(text: str) -> None:
    pa = isl.PwAff(text)
    expr = isl.AstBuild.from_context(CONTEXT).expr_from_pw_aff(pa.gist_params(CONTEXT))
    for n, m in [(0, 0), (1, 9), (13, 5), (64, 64), (999, 17)]:
        point = isl.Point.zero(pa.get_domain_space())
        point = point.set_coordinate_val(isl.dim_type.param, 0, n)
        want = pa.eval(point.set_coordinate_val(isl.dim_type.param, 1, m)).to_python()
        assert ast_value(expr, {"N": n, "M": m}) == want, (text, n, m, expr.to_C_str())


def test_an_unknown_identifier_has_no_value() -> None:
    expr = isl.AstBuild.from_context(CONTEXT).expr_from_pw_aff(isl.PwAff("[N, M] -> { [(N + M)] }"))
    assert ast_value(expr, {"N": 3}) is None
