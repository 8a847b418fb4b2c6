"""CUDA text: every conformance program compiles with `nvcc -ptx` (all in one nvcc call),
and the TC paper's kernels compile for sm_90 without register spills. Skipped where nvcc
is not on PATH. tests/cuda/test_cuda_run.py runs the kernels where a GPU is."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler
from tc_graph.codegen.gpu import CUDA
from tests.unit import test_conformance as conf

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
ROOT = Path(__file__).resolve().parents[2]


def _cuda_text(source: str, entry: str, args: list[Any], options: tg.MappingOptions) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(source)[entry]
    return compiler.source(compiler.prepare(compiler.bind(fn, args)), "cuda", options).text


def _nvcc(texts: dict[str, str], flags: list[str]) -> str:
    """Compile each text as its own .cu in one nvcc invocation; returns nvcc's output."""
    assert NVCC is not None
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, text in texts.items():
            path = Path(tmp) / f"{name}.cu"
            path.write_text(text, encoding="utf-8")
            files.append(str(path))
        done = subprocess.run(
            [NVCC, *flags, "-w", "-odir", tmp, *files],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return done.stdout + done.stderr


def _one_file(texts: list[str]) -> str:
    """Many programs' kernels in one translation unit (nvcc's start-up dominates small
    files): the shared prelude once, each program's kernels renamed apart."""
    prelude = [CUDA.prelude(True, True)]
    bodies = []
    for k, text in enumerate(texts):
        head, _, body = text.partition("// launch")
        prelude += [line for line in head.splitlines() if "tc_clamp(" in line][:1]
        bodies.append(("// launch" + body).replace("tc_kernel_", f"p{k}_kernel_"))
    return "\n".join([*dict.fromkeys(prelude), *bodies])


@needs_nvcc
def test_every_conformance_program_compiles_to_ptx() -> None:
    texts = [
        _cuda_text(c["source"], conf.entry_of(c), conf.build_args(c), tg.MappingOptions())
        for c in conf.SHAPE_CASES
    ]
    unit = _one_file(texts)
    assert unit.count("p0_kernel_") >= 1 and f"p{len(texts) - 1}_kernel_" in unit
    _nvcc({"conformance": unit}, ["-ptx"])


@needs_nvcc
def test_written_tiles_compile_to_ptx() -> None:
    """Without private memory, outputs get written shared tiles (copy-in, copy-out)."""
    options = tg.MappingOptions(block=(8, 4), use_private_memory=False)
    texts = [
        _cuda_text(c["source"], conf.entry_of(c), conf.build_args(c), options)
        for c in conf.SHAPE_CASES
    ]
    assert sum("written: copied out" in t for t in texts) >= 10
    _nvcc({"written": _one_file(texts)}, ["-ptx"])


@needs_nvcc
def test_private_depth_compiles_to_ptx() -> None:
    """Accumulators held across whole reduction nests and private tiles split by depth."""
    options = tg.MappingOptions(block=(4, 4), tile=(8, 8), private_depth=1)
    texts = [
        _cuda_text(c["source"], conf.entry_of(c), conf.build_args(c), options)
        for c in conf.SHAPE_CASES
    ]
    assert any("in a register over" in t for t in texts)
    _nvcc({"private_depth": _one_file(texts)}, ["-ptx"])


def _paper_cases() -> list[tuple[str, str, str, list[np.ndarray], tg.MappingOptions]]:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import _bench_models as bm
    finally:
        sys.path.pop(0)
    out = []
    for name, builder, options in [
        ("MLP3", bm._mlp3, tg.MappingOptions.mlp()),
        ("2LUT", bm._2lut, tg.MappingOptions()),
        ("C3", bm._c3, tg.MappingOptions.mlp()),
        ("tbmm", bm._tbmm, tg.MappingOptions()),
        ("gconv", bm._gconv, tg.MappingOptions.group_convolution()),
        ("tmm", bm._tmm, tg.MappingOptions.mlp()),
    ]:
        case = builder(True)
        out.append((name, case.source, case.name, list(case.args), options))
    return out


@needs_nvcc
def test_paper_kernels_compile_for_sm90_without_spills() -> None:
    texts = {
        f"k_{name}": _cuda_text(src, entry, args, options)
        for name, src, entry, args, options in _paper_cases()
    }
    log = _nvcc(texts, ["-cubin", "-arch=sm_90", "-Xptxas", "-v"])
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills, log[-2000:]
    assert all(s == ("0", "0") for s in spills), log[-4000:]


def test_cuda_text_is_self_contained() -> None:
    a = np.ones((40, 5), np.float32)
    b = np.ones((5, 60), np.float32)
    src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
    k = tg.define(src).mm.compile(a, b, target="cuda")
    assert 'extern "C" __global__' in k.source and "__restrict__" in k.source
    assert "blockIdx.x" in k.source and "threadIdx.y" in k.source
    assert "// launch tc_kernel_0: grid [2, 5] block [32, 8]" in k.source


def test_cuda_shared_tiles_and_barriers() -> None:
    """The paper's tbmm: shared tiles of X and Y and one __syncthreads after the copies."""
    (case,) = [c for c in _paper_cases() if c[0] == "tbmm"]
    text = _cuda_text(case[1], case[2], case[3], case[4])
    assert "__shared__ float tc_sh" in text and "__syncthreads();" in text
    assert "barrier(" not in text
