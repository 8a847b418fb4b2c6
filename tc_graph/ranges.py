"""Range inference, as tc-range-inference.txt describes it, solved with isl.

Per statement, in rounds: every subscript with exactly one unresolved index
variable bounds that variable, universally quantified over the variables
already resolved; bounds found in one round intersect. The maximal interval is
the complement of the projection of the out-of-bounds set (dim_min/dim_max of
what is left). `where` ranges are resolved first. Everything is symbolic in the
size names; integer scalars used as sizes are parameters too, unless their
values are given (then they are constants, and the program is specialized).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from . import affine, ir
from .errors import Span, TcError
from .lang.sema import CheckedDef, CheckedStmt

_CTX = isl.DEFAULT_CONTEXT


@dataclass(frozen=True)
class _Interval:
    lo: isl.PwAff | None
    hi: isl.PwAff | None  # exclusive


class _Inference:
    def __init__(self, d: CheckedDef, constants: Mapping[str, int] | None) -> None:
        self.d = d
        self.constants = dict(constants or {})
        self.params = tuple(n for n in (*d.sizes, *d.index_scalars) if n not in self.constants)
        pspace = isl.Space.params_alloc(_CTX, len(self.params))
        for k, name in enumerate(self.params):
            pspace = pspace.set_dim_name(isl.dim_type.param, k, ir.isl_name(name))
        self.pspace = pspace
        ctx_set = isl.Set.universe(self.pspace)
        for k, name in enumerate(self.params):
            if name in d.sizes:
                ctx_set = ctx_set.lower_bound_val(isl.dim_type.param, k, isl.Val.zero(_CTX))
        self.context = ctx_set
        self.extents: dict[str, list[isl.PwAff | None]] = {}
        self.lower_checks: list[ir.Precondition] = []
        for name, t in d.tensors.items():
            if t.dims is not None:
                self.extents[name] = [self.param_pa(e) for e in t.dims]
            else:
                self.extents[name] = [None] * t.rank

    def err(self, message: str, span: Span | None, hint: str | None = None) -> TcError:
        return TcError(message, source=self.d.source, span=span, hint=hint)

    # -- isl helpers -----------------------------------------------------
    def space(self, iters: Sequence[str]) -> isl.Space:
        return isl.Space.create_from_names(
            _CTX,
            set=[ir.isl_name(v) for v in iters],
            params=[ir.isl_name(p) for p in self.params],
        )

    def const(self, sp: isl.Space, v: int) -> isl.PwAff:
        return affine.constant(sp, v)

    def lift(self, pa: isl.PwAff, sp: isl.Space) -> isl.PwAff:
        return affine.lift(pa, sp)

    def param_pa(self, e: ir.Expr) -> isl.PwAff:
        pa = self.to_pa(e, self.pspace, ())
        if pa is None:
            raise self.err(
                f"'{ir.to_text(e)}' is not an affine size expression",
                e.span,
                hint="sizes may be combined with + and -, and multiplied or divided by integers",
            )
        return pa

    def to_pa(self, e: ir.Expr, sp: isl.Space, iters: Sequence[str]) -> isl.PwAff | None:
        return affine.to_pw_aff(
            e,
            sp,
            iters,
            params=self.params,
            constants=self.constants,
            extent=lambda t, k: self.extents[t][k],
        )

    def box(self, sp: isl.Space, iters: Sequence[str], bounds: Mapping[str, _Interval]) -> isl.Set:
        s = isl.Set.universe(sp)
        ls = isl.LocalSpace.from_space(sp)
        for k, v in enumerate(iters):
            var = isl.PwAff.var_on_domain(ls, isl.dim_type.set, k)
            iv = bounds[v]
            assert iv.lo is not None and iv.hi is not None
            s = s.intersect(var.ge_set(self.lift(iv.lo, sp))).intersect(
                var.lt_set(self.lift(iv.hi, sp))
            )
        for k, v in enumerate(iters):
            s = s.set_dim_name(isl.dim_type.set, k, ir.isl_name(v))
        return s

    def total(self, pa: isl.PwAff, default: int) -> isl.PwAff:
        """pa where it is defined, `default` on the rest of the context."""
        missing = self.context.subtract(pa.domain())
        if not missing.is_empty():
            pa = pa.union_add(self.const(self.pspace, default).intersect_domain(missing))
        return self.simplify(pa)

    def simplify(self, pa: isl.PwAff) -> isl.PwAff:
        """One piece instead of several where one of the pieces (or its max with 0)
        is the whole function, so `M` prints as `M`, not `M > 0 ? M : 0`."""
        pa = pa.gist_params(self.context).coalesce()
        if pa.n_piece() <= 1:
            return pa
        zero = self.const(self.pspace, 0)
        for _, aff in pa.get_pieces():
            whole = isl.PwAff.from_aff(aff).intersect_domain(self.context)
            target = pa.intersect_params(self.context)
            for cand in (whole, whole.max(zero)):
                if cand.is_equal(target):
                    return cand.gist_params(self.context).coalesce()
        return pa

    def provable(self, s: isl.Set) -> bool:
        """s (a parameter set) holds for every context point."""
        return self.context.subtract(s).is_empty()

    # -- one access ----------------------------------------------------
    def solve(
        self, v: str, sub: ir.Expr, ext: isl.PwAff, resolved: Mapping[str, _Interval]
    ) -> isl.Set | None:
        """The values of v keeping sub in [0, ext) for every value of the resolved
        variables (a set over [v]); None when sub is not affine."""
        others = sorted(ir.index_names(sub) - {v})
        iters = (v, *others)
        sp = self.space(iters)
        pa = self.to_pa(sub, sp, iters)
        if pa is None:
            return None
        domain = isl.Set.universe(sp)
        if others:
            ls = isl.LocalSpace.from_space(sp)
            for k, r in enumerate(others, start=1):
                var = isl.PwAff.var_on_domain(ls, isl.dim_type.set, k)
                iv = resolved[r]
                assert iv.lo is not None and iv.hi is not None
                domain = domain.intersect(var.ge_set(self.lift(iv.lo, sp)))
                domain = domain.intersect(var.lt_set(self.lift(iv.hi, sp)))
        zero = self.const(sp, 0)
        out = pa.lt_set(zero).union(pa.ge_set(self.lift(ext, sp)))
        bad = domain.intersect(out).project_out(isl.dim_type.set, 1, len(others))
        # Where the resolved variables have empty ranges, nothing is read.
        live = domain.project_out(isl.dim_type.set, 1, len(others)).params()
        good = isl.Set.universe(self.space((v,))).subtract(bad).intersect_params(live)
        return good.intersect_params(self.context)

    # -- statements ----------------------------------------------------
    def statement(self, st: CheckedStmt, *, final: bool) -> dict[str, _Interval] | None:
        """Bounds of every iterator, or None when a left-hand index has to wait for
        the extent the other statements give its tensor (unless `final`)."""
        bounds: dict[str, _Interval] = {}
        for v, lo, hi in st.ranges:
            bounds[v] = _Interval(self.param_pa(lo), self.param_pa(hi))
        unresolved = [v for v in st.iterators if v not in bounds]
        accesses = [r for e in (st.rhs, *st.exists) for r in ir.reads(e)]
        while unresolved:
            found: dict[str, tuple[isl.Set, ir.Read]] = {}
            for r in accesses:
                exts = self.extents[r.tensor]
                for k, sub in enumerate(r.subscripts):
                    names = ir.index_names(sub) & set(unresolved)
                    if len(names) != 1 or exts[k] is None:
                        continue
                    if ir.reads_tensor(sub):
                        continue
                    (v,) = names
                    good = self.solve(v, sub, exts[k], bounds)
                    if good is not None:
                        # Bounds found in one round intersect.
                        prev = found.get(v)
                        found[v] = (good, r) if prev is None else (prev[0].intersect(good), prev[1])
            if not found:
                break
            for v, (good, r) in found.items():
                good = good.coalesce()
                lo, hi = _bound(good, "min"), _bound(good, "max", shift=1)
                if lo is None or hi is None:
                    raise self.err(
                        f"cannot infer the range of '{v}': its accesses do not bound it "
                        f"{'below' if lo is None else 'above'}",
                        r.span,
                        hint=f"add `where {v} in lo:hi`",
                    )
                bounds[v] = _Interval(self.total(lo, 0), self.total(hi, 0))
                unresolved.remove(v)
        for v in unresolved:
            if v not in st.lhs or any(
                v in ir.index_names(s)
                for r in accesses
                for s in r.subscripts
                if r.tensor != st.tensor
            ):
                raise self.ambiguous(st, v)
            ext = self.extents[st.tensor][st.lhs.index(v)]
            if ext is None:
                if not final:
                    return None
                raise self.ambiguous(st, v)
            bounds[v] = _Interval(self.const(self.pspace, 0), ext)
        return bounds

    def ambiguous(self, st: CheckedStmt, v: str) -> TcError:
        span = st.lhs_spans[st.lhs.index(v)] if v in st.lhs else st.span
        return self.err(
            f"cannot infer the range of '{v}': no access of this statement determines it "
            "unambiguously",
            span,
            hint=f"add `where {v} in lo:hi`",
        )

    def check_lower_bounds(self, st: CheckedStmt, bounds: Mapping[str, _Interval]) -> None:
        """A left-hand range starting below 0 is an error: at once when it always
        does, else on the sizes of each call (`reverted` with I > 11)."""
        for k, v in enumerate(st.lhs):
            lo = bounds[v].lo
            assert lo is not None
            below = lo.neg().pos_set().intersect(self.context)
            if below.is_empty():
                continue
            span = st.lhs_spans[k] if st.lhs_spans else st.span
            message = f"the range of left-hand index '{v}' starts below 0"
            hint = f"add `where {v} in 0:...` to say which part of the output to compute"
            if self.context.subtract(below).is_empty():
                raise self.err(message, span, hint=hint)
            self.lower_checks.append(ir.Precondition(f"{message} ({hint})", below, span))

    def contribute(self, st: CheckedStmt, bounds: Mapping[str, _Interval]) -> None:
        exts = self.extents[st.tensor]
        for k, v in enumerate(st.lhs):
            iv = bounds[v]
            assert iv.lo is not None and iv.hi is not None
            zero = self.const(self.pspace, 0)
            if self.provable(iv.lo.eq_set(zero)):
                size = iv.hi.max(zero)
            else:
                nonempty = iv.hi.gt_set(iv.lo)
                size = iv.hi.intersect_domain(nonempty).union_add(
                    zero.intersect_domain(self.context.subtract(nonempty))
                )
            exts[k] = self.simplify(size if exts[k] is None else exts[k].max(size))

    # -- the whole def -------------------------------------------------
    def run(self) -> ir.Program:
        d = self.d
        solved: dict[int, dict[str, _Interval]] = {}
        waiting: list[int] = []
        for n, st in enumerate(d.statements):
            b = self.statement(st, final=False)
            if b is None:
                waiting.append(n)
                continue
            self.check_lower_bounds(st, b)
            self.contribute(st, b)
            solved[n] = b
        for n in waiting:
            st = d.statements[n]
            b = self.statement(st, final=True)
            assert b is not None
            self.check_lower_bounds(st, b)
            solved[n] = b
        for n in waiting:
            self.contribute(d.statements[n], solved[n])
        statements = tuple(self.lower(st, solved[n]) for n, st in enumerate(d.statements))
        tensors = {
            name: ir.Tensor(
                name,
                t.dtype,
                t.role,
                tuple(self.extent(name, k) for k in range(t.rank)),
                self.needs_zero_fill(name, statements),
            )
            for name, t in d.tensors.items()
        }
        return ir.Program(
            name=d.name,
            source=d.source,
            inputs=d.inputs,
            outputs=d.outputs,
            tensors=tensors,
            statements=statements,
            params=self.params,
            context=self.context,
            preconditions=(
                *self.equality_checks(),
                *self.lower_checks,
                *self.access_checks(statements),
            ),
            constants=self.constants,
            size_params=tuple(n for n in self.params if n in d.sizes),
        )

    def extent(self, name: str, k: int) -> isl.PwAff:
        ext = self.extents[name][k]
        if ext is None:
            raise self.err(f"cannot infer the size of dimension {k} of '{name}'", None)
        return self.simplify(ext)

    def lower(self, st: CheckedStmt, bounds: Mapping[str, _Interval]) -> ir.Statement:
        sp = self.space(st.iterators)
        domain = self.box(sp, st.iterators, bounds).intersect_params(self.context)
        rhs = ir.map_expr(st.rhs, self.specialize) if self.constants else st.rhs
        return ir.Statement(
            tensor=st.tensor,
            lhs=st.lhs,
            iterators=st.iterators,
            op=st.op,
            init=st.init,
            rhs=rhs,
            domain=domain,
            bounds=tuple(
                (self.simplify(_req(bounds[v].lo)), self.simplify(_req(bounds[v].hi)))
                for v in st.iterators
            ),
            span=st.span,
        )

    def specialize(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Size) and e.name in self.constants:
            return ir.Const(self.constants[e.name], e.dtype, span=e.span)
        return e

    def needs_zero_fill(self, name: str, statements: Sequence[ir.Statement]) -> bool:
        """False when the first statement writing the tensor assigns all of it."""
        first = next((s for s in statements if s.tensor == name), None)
        if first is None or (first.op != "=" and not first.init):
            return True
        if any(r.tensor == name for r in ir.reads(first.rhs)):
            return True  # it reads what is there before it writes (sgemm's `C = b * C`)
        for k, v in enumerate(first.lhs):
            lo, hi = first.bounds[first.iterators.index(v)]
            ext = self.extent(name, k)
            if not self.provable(lo.le_set(self.const(self.pspace, 0))):
                return True
            if not self.provable(hi.ge_set(ext)):
                return True
        return False

    def equality_checks(self) -> list[ir.Precondition]:
        out = []
        for eq in self.d.equalities:
            a, b = self.param_pa(eq.left), self.param_pa(eq.right)
            bad = a.ne_set(b).intersect(self.context)
            if not bad.is_empty():
                out.append(ir.Precondition(f"{eq.message} ({ir.to_text(eq.left)})", bad, eq.span))
        return out

    def access_checks(self, statements: Sequence[ir.Statement]) -> list[ir.Precondition]:
        """Accesses inference could not prove in bounds: checked on the call's sizes."""
        out = []
        for st in statements:
            sp = self.space(st.iterators)
            for r in ir.reads(st.rhs):
                for k, sub in enumerate(r.subscripts):
                    pa = self.to_pa(sub, sp, st.iterators)
                    if pa is None:
                        continue
                    ext = self.lift(self.extent(r.tensor, k), sp)
                    out_of = pa.lt_set(self.const(sp, 0)).union(pa.ge_set(ext))
                    bad = st.domain.intersect(out_of).params()
                    if not bad.is_empty():
                        out.append(
                            ir.Precondition(
                                f"access {ir.to_text(r)} goes out of bounds of '{r.tensor}' "
                                f"(dimension {k})",
                                bad,
                                r.span,
                            )
                        )
        return out


def _req(pa: isl.PwAff | None) -> isl.PwAff:
    assert pa is not None
    return pa


def _bound(good: isl.Set, which: str, shift: int = 0) -> isl.PwAff | None:
    """dim_min/dim_max of a one-dimensional set; None when unbounded."""
    try:
        pa = good.dim_min(0) if which == "min" else good.dim_max(0)
    except isl.Error:
        return None
    if shift:
        pa = pa.add(isl.PwAff.val_on_domain(pa.domain(), isl.Val.int_from_si(_CTX, shift)))
    return pa


def infer(d: CheckedDef, constants: Mapping[str, int] | None = None) -> ir.Program:
    """Range inference for one checked def; `constants` specializes integer scalars."""
    return _Inference(d, constants).run()
