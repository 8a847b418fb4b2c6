"""The one dtype table (lang/types.SCALARS) and the ONNX names (onnx_domain) against
independent sources: NumPy, onnx's own type mapping, and the C runtime ort_op.c, whose
element-size switch and type-name array must agree with the Python table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import tc_graph
from tc_graph.lang import types
from tc_graph.onnx_domain import TC_DOMAIN, TC_OP

_ORT_OP_C = (Path(tc_graph.__file__).parent / "runtime" / "ort_op.c").read_text()


def _c_function(name: str) -> str:
    """The text of one top-level C function of ort_op.c, from its definition to its end."""
    found = re.search(rf"^static [^\n(]*\b{name}\(", _ORT_OP_C, re.MULTILINE)
    assert found, f"ort_op.c defines no {name}"
    return _ORT_OP_C[found.start() : _ORT_OP_C.index("}\n", found.start()) + 1]


def _c_element_sizes() -> dict[int, int]:
    sizes: dict[int, int] = {}
    for cases, size in re.findall(r"((?:case \d+: )+)return (\d+);", _c_function("element_size")):
        for code in re.findall(r"\d+", cases):
            sizes[int(code)] = int(size)
    return sizes


def _c_dtype_names() -> list[str]:
    body = _c_function("dtype_name")
    array = body[body.index("{", body.index("names[]")) : body.index("};")]
    return re.findall(r'"([^"]*)"', array)


@pytest.mark.parametrize("name", types.CANONICAL)
def test_row_matches_numpy_and_onnx(name: str) -> None:
    row = types.SCALARS[name]
    assert row.numpy == np.dtype(name) and row.numpy.name == name
    assert row.bytes == np.dtype(name).itemsize
    assert np.dtype(helper.tensor_dtype_to_np_dtype(row.onnx)) == row.numpy
    assert helper.np_dtype_to_tensor_dtype(row.numpy) == row.onnx
    assert types.BY_NUMPY[row.numpy] == name


@pytest.mark.parametrize("name", types.CANONICAL)
def test_row_matches_ort_op_c(name: str) -> None:
    row = types.SCALARS[name]
    assert _c_element_sizes()[row.onnx] == row.bytes
    assert _c_dtype_names()[row.onnx] == name


def test_ort_op_c_sizes_match_onnx() -> None:
    """The C switch also sizes types TC has no row for (bfloat16, complex): onnx says how big."""
    for code, size in _c_element_sizes().items():
        assert np.dtype(helper.tensor_dtype_to_np_dtype(code)).itemsize == size, code


def test_derived_lookups_cover_every_row() -> None:
    assert set(types.C_TYPES) == set(types.ONNX_TYPES) == set(types.SCALARS)
    assert set(types.INT_TYPES) | set(types.FLOAT_TYPES) | {"bool"} == set(types.CANONICAL)
    assert all(types.SCALARS[t].numpy.kind in "iu" for t in types.INT_TYPES)
    assert all(types.SCALARS[t].numpy.kind == "f" for t in types.FLOAT_TYPES)
    assert len(set(types.ONNX_TYPES.values())) == len(types.SCALARS)
    assert types.SCALARS["bool"].numpy == np.dtype(np.bool_)
    assert types.ONNX_TYPES["float32"] == onnx.TensorProto.FLOAT


def test_ort_op_c_names_the_same_op() -> None:
    assert f'return "{TC_OP}";' in _c_function("op_name")
    assert f'("{TC_DOMAIN}", &domain)' in _ORT_OP_C
