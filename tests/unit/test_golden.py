"""The generated code of the TC paper's kernels is the golden files' text, character for
character (tests/regen_golden.py; tests/data/golden/README.md says how to update them)."""

from __future__ import annotations

import difflib

import pytest

from tests.regen_golden import GOLDEN, SUFFIXES, TABLE, GoldenKernel, emitted, kernels, path

KERNELS = kernels()


@pytest.mark.parametrize("target", list(SUFFIXES))
@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_generated_code_is_the_golden_file(kernel: GoldenKernel, target: str) -> None:
    file = path(kernel.name, target)
    assert file.exists(), f"{file.name} is missing: run `python -m tests.regen_golden`"
    want = file.read_text(encoding="utf-8")
    got = emitted(kernel, target)
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(), got.splitlines(), f"{file.name} (golden)", "generated", lineterm=""
        )
        pytest.fail(
            "generated code differs from the golden file; if the change is intended, run "
            "`python -m tests.regen_golden` and commit the files with it:\n"
            + "\n".join(list(diff)[:60])
        )


def test_the_golden_folder_holds_only_golden_files() -> None:
    expected = {path(k.name, t) for k in KERNELS for t in SUFFIXES}
    expected |= {TABLE, GOLDEN / "README.md"}
    assert set(GOLDEN.iterdir()) == expected
