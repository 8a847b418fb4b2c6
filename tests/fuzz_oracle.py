"""The oracle of the program fuzzer: a generated Case (tests/fuzz_programs.py) runs on the
NumPy reference in this process and on a compiled target in a child process (a crash or a
hang costs the child, and is a finding), and the two outcomes are judged.

Allowed: the same outputs (dtypes and shapes exactly, integers exactly, floats within
tolerance); both raise tg.TcError (a hostile index value, a precondition); a TcError from
`define` (the generator wrote an invalid program: counted as invalid); a TcError from the
target under random options when the default options give the reference's values (an
option refused with a reason); a target TcError that names a documented limit of the
target (UNSUPPORTED). Anything else is a finding: a mismatch, one side raising
TcError and the other not, any other exception, a dead or hung child.

`Fuzzer.reduce` shrinks a finding (drops statements, outputs, unused inputs, the options)
while it stays the same kind, and `reproducer` writes it as a standalone script.
"""

from __future__ import annotations

import re
import traceback
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import tc_graph as tg
from tc_graph.runtime.sandbox import Sandbox, SandboxError
from tests.fuzz_programs import BUILTINS, Case, generate
from tests.tolerances import TOLERANCES

_BUILTIN = re.compile(rf"\b({'|'.join(BUILTINS)})f?\(")

UNSUPPORTED = re.compile(r"need the cl_khr_fp(16|64) extension|has no opencl equivalent")
"""Target TcErrors that name a documented limit of the target or device (float16 or float64
without the OpenCL extension, a builtin OpenCL lacks): counted as unsupported."""

FINDINGS = ("mismatch", "crash", "timeout", "exception")
"""Outcome kinds that are bugs (the others: ok, raises, refused, invalid)."""


@dataclass(frozen=True)
class Outcome:
    kind: str  # ok, raises (both TcError), refused, unsupported, invalid, or a FINDING
    detail: str = ""

    @property
    def finding(self) -> bool:
        return self.kind in FINDINGS


def _as_tuple(x: Any) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)


def run_compiled(
    source: str, entry: str, args: tuple[Any, ...], target: str, options: dict[str, Any] | None
) -> tuple[str, Any]:
    """In the child: ("ok", outputs), ("tcerror", message), ("refused", message) when the
    options themselves are out of bounds, or ("exception", traceback)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            opts = None if options is None else tg.MappingOptions(**options)
        except tg.TcError as e:
            return "refused", str(e)
        try:
            fn = tg.define(source)[entry]
            return "ok", _as_tuple(fn(*args, target=target, options=opts))
        except tg.TcError as e:
            return "tcerror", str(e)
        except Exception:
            return "exception", traceback.format_exc(limit=8)


def run_reference(source: str, entry: str, args: tuple[Any, ...]) -> tuple[str, Any]:
    """define and the reference, here: ("invalid", why) when define refuses."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn = tg.define(source)[entry]
        except tg.TcError as e:
            return "invalid", str(e)
        except Exception:
            return "exception", "define: " + traceback.format_exc(limit=8)
        try:
            return "ok", _as_tuple(fn(*args, target="reference"))
        except tg.TcError as e:
            return "tcerror", str(e)
        except Exception:
            return "exception", "reference: " + traceback.format_exc(limit=8)


def loosest_float(source: str) -> np.dtype:
    """The least precise float type a program computes in: float16 if it names one,
    float32 if it names one, has a float literal or calls a builtin (float32 unless an
    argument is float64), else float64. A float32 builtin's last bit differs between libm
    and NumPy, and it stays visible when the result is added into a float64 tensor."""
    if re.search(r"\b(half|float16)\b", source):
        return np.dtype(np.float16)
    if re.search(r"\b(float|float32)\b|\d\.|\.\d|\de", source) or _BUILTIN.search(source):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def compare(
    got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...], loosest: np.dtype | None = None
) -> str | None:
    """None when they agree, else what differs. Floats: NaN and infinities in the same
    places, finite values within TOLERANCES of the output's dtype or of `loosest` (the
    program's least precise float type) if looser, the absolute part scaled by the
    output's largest magnitude (generated expressions cancel: summation order and FMA
    contraction move the last bits of large intermediate values)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if not isinstance(g, np.ndarray) or g.dtype != w.dtype or g.shape != w.shape:
            what = f"{g.dtype} {g.shape}" if isinstance(g, np.ndarray) else type(g).__name__
            return f"output {k}: {what}, the reference has {w.dtype} {w.shape}"
        tol = TOLERANCES.get(w.dtype)
        if tol is not None and loosest is not None:
            tol = max(tol, TOLERANCES[loosest], key=lambda t: t["rtol"])
        if tol is None:
            bad = g != w
        else:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(w64)
            scale = max(1.0, float(np.abs(w64[finite]).max(initial=0.0)))
            with np.errstate(invalid="ignore"):  # inf - inf
                close = np.abs(g64 - w64) <= tol["atol"] * scale + tol["rtol"] * np.abs(w64)
            same = (np.isnan(g64) & np.isnan(w64)) | (g64 == w64)
            bad = ~(close | same)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return (
                f"output {k} differs at {int(bad.sum())} of {w.size} elements, first at "
                f"{at}: got {g[at]!r}, reference {w[at]!r}"
            )
    return None


class Fuzzer:
    """Judges cases on one target, with one child process (restarted after a crash)."""

    def __init__(self, target: str = "cpu", timeout: float = 60.0) -> None:
        self.target = target
        self.timeout = timeout
        self.box = Sandbox()

    def close(self) -> None:
        self.box.close()

    def _target(self, case: Case, options: dict[str, Any] | None) -> tuple[str, Any]:
        try:
            return self.box.call(
                run_compiled,
                case.source,
                case.entry,
                case.args,
                self.target,
                options,
                timeout=self.timeout,
            )
        except SandboxError as e:
            kind = "timeout" if "timed out" in str(e) else "crash"
            return kind, str(e)

    def judge(self, case: Case) -> Outcome:
        ref, want = run_reference(case.source, case.entry, case.args)
        if ref in ("invalid", "exception"):
            return Outcome(ref, want)
        kind, got = self._target(case, case.options)
        if kind == "refused":  # options out of bounds: a TcError before any compiling
            return Outcome("refused", got)
        if kind == "tcerror" and ref == "ok" and UNSUPPORTED.search(got):
            return Outcome("unsupported", got)
        if kind == "tcerror" and ref == "ok" and case.options is not None:
            again, values = self._target(case, None)
            if again == "ok" and compare(values, want, loosest_float(case.source)) is None:
                return Outcome("refused", got)
        return self._verdict(ref, want, kind, got, loosest_float(case.source))

    def _verdict(self, ref: str, want: Any, kind: str, got: Any, loosest: np.dtype) -> Outcome:
        t = self.target
        if kind in ("crash", "timeout"):
            return Outcome(kind, f"{t}: {got}")
        if kind == "exception":
            return Outcome("exception", f"{t}: {got}")
        if ref == "tcerror" and kind == "tcerror":
            return Outcome("raises", want)
        if ref == "tcerror":
            return Outcome("mismatch", f"the reference raised TcError, {t} did not: {want}")
        if kind == "tcerror":
            return Outcome("mismatch", f"{t} raised TcError, the reference did not: {got}")
        why = compare(got, want, loosest)
        return Outcome("ok") if why is None else Outcome("mismatch", f"{t}: {why}")

    # -- shrinking
    def reduce(self, case: Case, outcome: Outcome, budget: int = 80) -> Case:
        """A smaller case with a finding of the same kind (greedy: one edit at a time,
        kept when the finding survives), in at most `budget` judgements."""
        tries = 0
        progress = True
        while progress and tries < budget:
            progress = False
            for smaller in _candidates(case):
                tries += 1
                if self.judge(smaller).kind == outcome.kind:
                    case, progress = smaller, True
                    break
                if tries >= budget:
                    break
        return case


def _candidates(case: Case) -> list[Case]:
    """Each one edit smaller: default options; without a def nobody calls; without a
    statement; without an output; without an input nothing reads."""
    out: list[Case] = []
    if case.options is not None:
        out.append(replace(case, options=None))
        for k in case.options:  # that option at its default
            out.append(replace(case, options={n: v for n, v in case.options.items() if n != k}))
    defs = list(case.defs)
    main = next(d for d in defs if d.name == case.entry)
    for d in defs:
        if d is not main and not any(f"{d.name}(" in s for s in main.statements):
            out.append(case.with_defs(tuple(x for x in defs if x is not d)))
    for d in defs:
        for k in range(len(d.statements)):
            smaller = replace(d, statements=d.statements[:k] + d.statements[k + 1 :])
            out.append(case.with_defs(tuple(smaller if x is d else x for x in defs)))
        for k in range(len(d.outputs)):
            if len(d.outputs) > 1:
                smaller = replace(d, outputs=d.outputs[:k] + d.outputs[k + 1 :])
                out.append(case.with_defs(tuple(smaller if x is d else x for x in defs)))
    body = " ".join(main.statements)
    for k, p in enumerate(main.params):
        name = p.split()[-1]
        if not re.search(rf"\b{re.escape(name)}\b", body):
            smaller = replace(main, params=main.params[:k] + main.params[k + 1 :])
            args = case.args[:k] + case.args[k + 1 :]
            out.append(
                replace(case.with_defs(tuple(smaller if x is main else x for x in defs)), args=args)
            )
    return out


INLINE_ELEMENTS = 64
"""Larger inputs of a reproducer go to an .npz file beside it."""


def _literal(k: int, a: Any) -> str:
    if isinstance(a, np.ndarray) and a.size > INLINE_ELEMENTS:
        return f"inputs['a{k}']"
    if isinstance(a, np.ndarray):
        return f"np.array({a.tolist()!r}, dtype=np.{a.dtype}).reshape({a.shape})"
    return f"np.{np.asarray(a).dtype}({np.asarray(a).item()!r})"


def large_inputs(case: Case) -> dict[str, np.ndarray]:
    """The inputs a reproducer loads from its .npz file, by name."""
    return {
        f"a{k}": a
        for k, a in enumerate(case.args)
        if isinstance(a, np.ndarray) and a.size > INLINE_ELEMENTS
    }


def reproducer(case: Case, outcome: Outcome, target: str, npz: str = "") -> str:
    """A standalone script that shows the finding (large inputs loaded from `npz`, written
    with `np.savez(npz, **large_inputs(case))`)."""
    shapes = ", ".join(f"{np.asarray(a).dtype}{tuple(np.shape(a))}" for a in case.args)
    detail = "\n".join(f"# {line}" for line in outcome.detail.strip().splitlines()[-12:])
    options = "None" if case.options is None else f"tg.MappingOptions(**{case.options!r})"
    args = ",\n    ".join(_literal(k, a) for k, a in enumerate(case.args))
    load = f"inputs = np.load({npz!r})\n" if large_inputs(case) else ""
    return f'''# {outcome.kind} on {target}: tests.fuzz_programs.generate({case.seed}, {case.index})
# (shrunk), inputs {shapes}
{detail}
import numpy as np

import tc_graph as tg

nan, inf = np.nan, np.inf
{load}src = """
{case.source}"""
args = (
    {args},
)
options = {options}
fn = tg.define(src)[{case.entry!r}]
print("reference:", fn(*args, target="reference"))
print({target!r}, fn(*args, target={target!r}, options=options))
'''


def summary(case: Case) -> str:
    """The source, inputs and options of a case, for a test failure message."""
    shapes = ", ".join(f"{np.asarray(a).dtype}{tuple(np.shape(a))}" for a in case.args)
    return (
        f"generate({case.seed}, {case.index}); inputs {shapes}; options "
        f"{case.options}\n{case.source}"
    )


def judge_slice(
    fuzzer: Fuzzer, indices: Iterable[int], budget: int, runs: Callable[[Case], bool]
) -> tuple[list[str], int]:
    """The CI slices: programs (0, index), even ones under random options, odd ones under
    the defaults, those `runs` accepts judged; each finding shrunk (within `budget` tries)
    and described. Returns the findings and how many programs ran."""
    findings, ran = [], 0
    for index in indices:
        case = generate(0, index, options="random" if index % 2 == 0 else "default")
        if not runs(case):
            continue
        ran += 1
        outcome = fuzzer.judge(case)
        if outcome.finding:
            small = fuzzer.reduce(case, outcome, budget=budget)
            findings.append(f"{outcome.kind}: {outcome.detail.strip()}\n{summary(small)}")
    return findings, ran
