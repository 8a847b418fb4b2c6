"""CPU arithmetic where C itself traps or is undefined (docs/language.md): checked in a
child process, so a trap (SIGFPE) fails one test instead of ending the session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_int_min_divided_by_minus_one_wraps_instead_of_trapping(dtype: str) -> None:
    script = (
        "from tests.oracles import check_numpy_call\n"
        "from tests.unit import test_reference as ref\n"
        "[c] = [c for c in ref.CASES\n"
        f"       if c.name == 'int_min_div_mod_minus_one_wraps_{dtype}']\n"
        "check_numpy_call(c, 'cpu')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, f"exit {run.returncode} (negative: a signal)\n{run.stderr[-3000:]}"
