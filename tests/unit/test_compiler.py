"""The compiler driver's stages (tc_graph/compiler.py) as data: a call binds its arguments
once, every stage `tc-graph compile --emit` names prints that stage, and the API and the
command line start from the same default options. Nothing here runs a C compiler."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import api, binding, cli, compiler
from tc_graph.options import AVX512, default_options
from tc_graph.runtime import cc
from tc_graph.runtime.kernel import sources_hash

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
SHAPES = "A=16x8,B=8x12"


@pytest.fixture(autouse=True)
def _no_c_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C compiler's identity (in the tuning database's key) and vector unit (in the
    CPU's default options) are fixed, so no test here asks the compiler."""
    monkeypatch.setattr(cc, "compiler_identity", lambda: "no compiler")
    monkeypatch.setattr(cc, "vector_unit", lambda: AVX512)


def _args() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 12))]


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Counts the calls of module.name from now on (one entry per call)."""
    calls: list[int] = []
    original: Callable[..., Any] = getattr(module, name)

    def counting(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return original(*a, **k)

    monkeypatch.setattr(module, name, counting)
    return calls


@pytest.mark.parametrize(
    "call",
    [
        lambda fn, args: fn.compile(*args, target="cuda"),
        lambda fn, args: fn(*args, target="reference"),
        lambda fn, args: fn.output_shapes(*args),
    ],
    ids=["compile", "reference", "output_shapes"],
)
def test_a_call_binds_its_arguments_once(
    monkeypatch: pytest.MonkeyPatch, call: Callable[[tg.TcFunction, list[Any]], Any]
) -> None:
    binds = _counted(monkeypatch, compiler, "bind")
    checks = _counted(monkeypatch, binding, "bind_inputs")
    call(tg.define(MM).mm, _args())
    assert (len(binds), len(checks)) == (1, 1)


def test_the_bind_stage_holds_the_shapes_and_dtypes_numpy_gives() -> None:
    a, b = _args()
    bound = compiler.bind(tg.define(MM).mm, [a, b])
    want = a @ b
    assert bound.output_shapes == (want.shape,)
    assert bound.output_dtypes == (want.dtype,)
    assert dict(bound.sizes) == {"M": 16, "K": 8, "N": 12}


def _emit(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    file = tmp_path / "mm.tc"
    file.write_text(MM, encoding="utf-8")
    code = cli.main(["compile", str(file), "--shapes", SHAPES, *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize(
    ("flags", "present", "absent"),
    [
        (["--emit", "scop"], ["S0 (update): { S0[m, n, k]", "reads: ", "dependences: "], []),
        (["--emit", "schedule"], ['domain: "{ S0_init[m, n]', "permutable: 1"], ["mark:"]),
        (["--emit", "mapped"], ['mark: "parallel"', 'mark: "simd"'], ["# launch"]),
        (["--emit", "mapped", "--target", "opencl"], ["# launch tc_kernel_0", "map:thread"], []),
        (["--emit", "ast"], ["// parallel", "for (int c0 = 0;", "S0("], ["tc_kernel"]),
        (["--emit", "forms"], ["c0: parallel\n", "c3: as isl built it: no register"], ["for ("]),
        (["--emit", "cuda"], ["__global__", "// launch tc_kernel_0"], []),
        (["--emit", "opencl"], ["__kernel", "get_group_id"], ["__global__ void"]),
    ],
    ids=["scop", "schedule", "mapped", "mapped-gpu", "ast", "forms", "cuda", "opencl"],
)
def test_emit_prints_each_stage(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    present: list[str],
    absent: list[str],
) -> None:
    out = _emit(tmp_path, capsys, *flags)
    assert all(p in out for p in present), out
    assert not any(a in out for a in absent), out


def test_emit_forms_is_the_cpus_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A GPU target has no loop forms: a clear error naming what to ask for instead."""
    file = tmp_path / "mm.tc"
    file.write_text(MM, encoding="utf-8")
    code = cli.main(
        ["compile", str(file), "--shapes", SHAPES, "--emit", "forms", "--target", "cuda"]
    )
    assert (
        code == 1 and "--emit forms shows the CPU printer's loop forms" in capsys.readouterr().err
    )


def test_api_and_cli_start_from_the_same_default_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fn = tg.define(MM).mm
    defaults = default_options(compiler.bind(fn, _args()).program)
    assert defaults != tg.MappingOptions()  # (the command line used to start from these)
    seen: list[tg.MappingOptions] = []
    scop = compiler.scop
    monkeypatch.setattr(compiler, "scop", lambda p, t, o: seen.append(o) or scop(p, t, o))
    api = fn.compile(*_args(), target="cuda")
    assert _emit(tmp_path, capsys, "--emit", "cuda") == api.source
    _emit(tmp_path, capsys, "--emit", "mapped")
    assert seen == [defaults] * 3


def test_gpu_stages_agree_on_launches() -> None:
    """The mapped tree's launches are the ones the printed text declares, in order."""
    bound = compiler.bind(tg.define(MM).mm, _args())
    prepared = compiler.prepare(bound)
    options = compiler.default_options(bound.program, "opencl")
    scop = compiler.scop(prepared, "opencl", options)
    tree = compiler.mapped(scop, compiler.schedule(scop, "opencl", options), "opencl", options)
    assert tree.gpu is not None
    text = compiler.text(scop, tree, "opencl", options)
    assert [lc.name for lc in text.launches] == [lc.name for lc in tree.gpu.launches]
    assert all(f"__kernel void {lc.name}(" in text.text for lc in text.launches)


@pytest.mark.parametrize("target", ["opencl", "cuda"])
def test_gpu_text_of_a_float_program_has_no_double_helpers(target: str) -> None:
    """Whether the prelude declares double helpers (and OpenCL's cl_khr_fp64, which a
    device without doubles refuses to build) follows the program's types, not the word
    'double' in its printed text: a float32 tensor named `doubled` asks for neither."""
    fn = tg.define("def f(float(N) doubled) -> (O) { O(i) = doubled(i) * 2 }").f
    bound = compiler.bind(fn, [np.zeros(8, np.float32)])
    options = compiler.default_options(bound.program, target)
    text = compiler.source(compiler.prepare(bound), target, options).text
    assert "doubled" in text
    assert "cl_khr_fp64" not in text and "double tc_" not in text


def test_define_entry_gives_what_define_gives_for_the_entry() -> None:
    """optimize's define: the entry's program is define()'s (the defs it calls inlined
    into it; the others are checked, not inferred), and a name the source lacks is
    None."""
    source = (
        "def scale(float(N) A) -> (B) { B(i) = A(i) * 2 }\n"
        "def shift(float(N) A) -> (B) { B(i) = A(i + 1) }\n"
        "def top(float(N) X) -> (Y) { Y = scale(X) }"
    )
    fn = api.define_entry(source, "top")
    assert fn is not None and fn.program == tg.define(source).top.program
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(fn(x), 2 * x)
    assert api.define_entry(source, "nothing") is None
    with pytest.raises(tg.TcError, match="syntax error"):
        api.define_entry(source + " def", "top")


def test_the_code_version_covers_the_native_op_and_the_operator_templates(
    tmp_path: Path,
) -> None:
    """A decision measured under one native op is not reused under another: ort_op.c
    decides how a rows node runs its chunks (a DLRM export's cached loss outlived it)."""
    root = Path(tg.__file__).parent
    copy = tmp_path / "tc_graph"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    first = sources_hash(copy)
    assert first == sources_hash(root)
    for name in ("runtime/ort_op.c", "operators/gemm.tc"):
        (copy / name).write_text((copy / name).read_text() + "\n")
        assert sources_hash(copy) != first, name
        first = sources_hash(copy)
