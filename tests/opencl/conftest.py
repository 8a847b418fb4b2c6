"""Skip tests/opencl when no OpenCL device can build a kernel (pyopencl missing, or no
platform): the reason names what is missing."""

from __future__ import annotations

import pytest

import tc_graph as tg


def _unusable() -> str | None:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return "pyopencl is not installed (pip install '.[test]' in the checkout)"
    from tc_graph.runtime import opencl

    try:
        opencl.context()
    except tg.TcError as e:
        return f"no usable OpenCL device: {e}"
    return None


REASON = _unusable()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REASON is None:
        return
    for item in items:
        if "tests/opencl" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=REASON))
