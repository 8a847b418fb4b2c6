"""Recursive-descent parser: TC source to `ast.Module`, with C precedence."""

from __future__ import annotations

from ..errors import Span, TcError
from . import ast
from .lexer import Token, tokenize
from .types import TYPE_NAMES

# Binary operators by precedence level, loosest first (C's order).
_BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",),
    ("&&",),
    ("==", "!="),
    ("<", "<=", ">", ">="),
    ("+", "-"),
    ("*", "/", "%"),
)
REDUCTION_OPS = ("+=", "*=", "min=", "max=")
ASSIGN_OPS = ("=", *REDUCTION_OPS, *(op + "!" for op in REDUCTION_OPS))


def _number(tok: Token, source: str) -> ast.Num:
    text = tok.text
    if any(c in text for c in ".eE"):
        return ast.Num(text, float(text), True, tok.span)
    return ast.Num(text, int(text), False, tok.span)


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.pos = 0

    # -- token helpers -------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def at(self, text: str, kind: str | None = None) -> bool:
        t = self.tok
        return t.text == text and (kind is None or t.kind == kind) and t.kind != "eof"

    def advance(self) -> Token:
        t = self.tok
        if t.kind != "eof":
            self.pos += 1
        return t

    def error(self, message: str, tok: Token | None = None, hint: str | None = None) -> TcError:
        tok = tok or self.tok
        found = "end of input" if tok.kind == "eof" else repr(tok.text)
        return TcError(
            f"syntax error: {message}, found {found}", source=self.source, span=tok.span, hint=hint
        )

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text) or self.tok.kind not in ("op", "kw"):
            raise self.error(f"expected {what or repr(text)}")
        return self.advance()

    def name(self, what: str) -> Token:
        if self.tok.kind != "id":
            raise self.error(f"expected {what}")
        return self.advance()

    def def_name(self) -> Token:
        """Def names may be numbers-looking words like `2LUT`; the lexer already made those ids."""
        return self.name("a def name")

    def opens_call_statement(self) -> bool:
        """Whether the `(` here begins `(X, Y) = f(...)`. No expression goes on with
        `(names) =`, so after a statement that ends in a name (`where i in 0:N`) this `(`
        starts the next statement rather than an access `N(X, Y)` (issue 12 item 10)."""
        k = 1
        while self.peek(k).kind == "id":
            nxt = self.peek(k + 1)
            if nxt.text == ")" and nxt.kind == "op":
                after = self.peek(k + 2)
                return after.kind == "op" and after.text == "="
            if nxt.text != "," or nxt.kind != "op":
                return False
            k += 2
        return False

    # -- module and defs -----------------------------------------------
    def module(self) -> ast.Module:
        defs = []
        while self.tok.kind != "eof":
            if not self.at("def", "kw"):
                raise self.error("expected 'def'")
            defs.append(self.definition())
        return ast.Module(tuple(defs), self.source)

    def definition(self) -> ast.Def:
        start = self.expect("def").span
        name = self.def_name()
        self.expect("(", "'(' after the def name")
        params: list[ast.Param] = []
        if not self.at(")"):
            params.append(self.param())
            while self.at(","):
                self.advance()
                params.append(self.param())
        self.expect(")", "')' or ',' in the parameter list")
        self.expect("->", "'->' before the outputs")
        returns: list[ast.Return] = []
        if self.at("("):
            self.advance()
            returns.append(self.ret())
            while self.at(","):
                self.advance()
                returns.append(self.ret())
            self.expect(")", "')' or ',' in the output list")
        else:
            returns.append(self.ret())
        self.expect("{", "'{' to open the def body")
        body: list[ast.Stmt] = []
        while not self.at("}"):
            if self.tok.kind == "eof":
                raise self.error("expected '}' to close the def body")
            body.append(self.statement())
        end = self.advance().span
        return ast.Def(
            name.text, tuple(params), tuple(returns), tuple(body), start.merge(end), name.span
        )

    def tensor_type(self) -> ast.TensorType:
        t = self.tok
        if t.kind != "id":
            raise self.error("expected a type such as float or int32")
        if t.text not in TYPE_NAMES:
            raise TcError(
                f"unknown type '{t.text}'",
                source=self.source,
                span=t.span,
                hint="types are bool, int8/16/32/64, uint8/16/32/64, float16/32/64 and the "
                "aliases float, double, half, int, byte, long",
            )
        self.advance()
        dims: tuple[ast.Ident | ast.Num, ...] | None = None
        end = t.span
        if self.at("("):
            self.advance()
            items: list[ast.Ident | ast.Num] = []
            while not self.at(")"):
                d = self.tok
                if d.kind == "id":
                    items.append(ast.Ident(d.text, d.span))
                elif d.kind == "num" and d.text.isdigit():
                    items.append(_number(d, self.source))
                else:
                    raise self.error("expected a size name or an integer dimension")
                self.advance()
                if not self.at(")"):
                    self.expect(",", "',' or ')' in the dimension list")
            end = self.advance().span
            dims = tuple(items)
        return ast.TensorType(t.text, dims, t.span.merge(end))

    def param(self) -> ast.Param:
        ty = self.tensor_type()
        name = self.name("a parameter name")
        return ast.Param(ty, name.text, ty.span.merge(name.span))

    def ret(self) -> ast.Return:
        if (
            self.tok.kind == "id"
            and self.tok.text in TYPE_NAMES
            and self.peek().kind in ("id", "op")
        ):
            nxt = self.peek()
            if nxt.kind == "id" or nxt.text == "(":
                ty = self.tensor_type()
                name = self.name("an output name")
                return ast.Return(name.text, ty, ty.span.merge(name.span))
        name = self.name("an output name")
        return ast.Return(name.text, None, name.span)

    # -- statements ----------------------------------------------------
    def statement(self) -> ast.Stmt:
        if self.at("("):
            return self.call_statement()
        tensor = self.name("a statement (a tensor name)")
        indices: list[ast.Ident] = []
        if self.at("("):
            self.advance()
            while not self.at(")"):
                idx = self.tok
                if idx.kind != "id":
                    raise self.error(
                        "expected an index variable on the left-hand side",
                        hint="left-hand subscripts are plain index names; move arithmetic to the "
                        "right-hand side",
                    )
                indices.append(ast.Ident(idx.text, idx.span))
                self.advance()
                if not self.at(")"):
                    self.expect(",", "',' or ')' in the left-hand index list")
            self.advance()
        op_tok = self.tok
        if op_tok.kind != "op" or op_tok.text not in ASSIGN_OPS:
            raise self.error(
                "expected '=' or a reduction operator (+=, *=, min=, max=, with or without !)"
            )
        self.advance()
        rhs = self.expr()
        wheres = self.where_clause()
        op = op_tok.text.rstrip("!")
        op = op if op == "=" else op[:-1]  # "+", "*", "min", "max"
        end = wheres[-1].span if wheres else _span(rhs)
        return ast.Assign(
            tensor.text,
            tuple(indices),
            op,
            op_tok.text.endswith("!"),
            rhs,
            wheres,
            tensor.span.merge(end),
            tensor.span,
            op_tok.span,
        )

    def call_statement(self) -> ast.CallStmt:
        start = self.advance().span
        outs = [self.name("an output name")]
        while self.at(","):
            self.advance()
            outs.append(self.name("an output name"))
        self.expect(")", "')' after the call's outputs")
        self.expect("=", "'=' before the called def")
        callee = self.def_name()
        self.expect("(", "'(' after the called def's name")
        args: list[Token] = []
        while not self.at(")"):
            args.append(self.name("a tensor name as call argument"))
            if not self.at(")"):
                self.expect(",", "',' or ')' in the call's arguments")
        end = self.advance().span
        return ast.CallStmt(
            tuple(ast.Ident(t.text, t.span) for t in outs),
            callee.text,
            tuple(ast.Ident(t.text, t.span) for t in args),
            start.merge(end),
            callee.span,
        )

    def where_clause(self) -> tuple[ast.Where, ...]:
        if not self.at("where", "kw"):
            return ()
        self.advance()
        items = [self.where_item()]
        while self.at(","):
            self.advance()
            items.append(self.where_item())
        return tuple(items)

    def where_item(self) -> ast.Where:
        if self.at("exists", "kw"):
            start = self.advance().span
            e = self.expr()
            return ast.ExistsWhere(e, start.merge(_span(e)))
        var = self.name("an index name, or 'exists', after 'where'")
        if self.at("in", "id"):
            self.advance()
            lo = self.expr()
            self.expect(":", "':' between the bounds of a range (lo:hi)")
            hi = self.expr()
            return ast.RangeWhere(var.text, lo, hi, var.span.merge(_span(hi)))
        if self.at("="):
            self.advance()
            if self.at("["):
                raise TcError(
                    "syntax error: the range syntax `[lo, hi[` is not TC any more",
                    source=self.source,
                    span=self.tok.span,
                    hint=f"write `where {var.text} in lo:hi`, e.g. `{var.text} in 0:2` for [0, 2[",
                )
            e = self.expr()
            return ast.LetWhere(var.text, e, var.span.merge(_span(e)))
        raise self.error(f"expected 'in' (a range) or '=' (a let) after '{var.text}'")

    # -- expressions ---------------------------------------------------
    def expr(self) -> ast.Expr:
        cond = self.binary(0)
        if self.at("?"):
            self.advance()
            then = self.expr()
            self.expect(":", "':' in a conditional expression")
            other = self.expr()
            return ast.Ternary(cond, then, other, _span(cond).merge(_span(other)))
        return cond

    def binary(self, level: int) -> ast.Expr:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.tok.kind == "op" and self.tok.text in _BINARY_LEVELS[level]:
            op = self.advance().text
            right = self.binary(level + 1)
            left = ast.Binary(op, left, right, _span(left).merge(_span(right)))
        return left

    def unary(self) -> ast.Expr:
        if self.tok.kind == "op" and self.tok.text in ("-", "!", "+"):
            op = self.advance()
            operand = self.unary()
            if op.text == "+":
                return operand
            return ast.Unary(op.text, operand, op.span.merge(_span(operand)))
        return self.primary()

    def primary(self) -> ast.Expr:
        t = self.tok
        if t.kind == "num":
            self.advance()
            return _number(t, self.source)
        if t.kind == "id":
            self.advance()
            if self.at("(") and not self.opens_call_statement():
                self.advance()
                args: list[ast.Expr] = []
                while not self.at(")"):
                    args.append(self.expr())
                    if not self.at(")"):
                        self.expect(",", "',' or ')' in an argument list")
                end = self.advance().span
                return ast.Apply(t.text, tuple(args), t.span.merge(end), t.span)
            if self.at(".") and self.peek().kind == "num" and self.peek().text.isdigit():
                self.advance()
                d = self.advance()
                return ast.DimOf(t.text, int(d.text), t.span.merge(d.span))
            return ast.Ident(t.text, t.span)
        if self.at("("):
            self.advance()
            e = self.expr()
            self.expect(")", "')'")
            return e
        raise self.error("expected an expression")


def _span(e: ast.Expr) -> Span:
    return e.span


def parse(source: str) -> ast.Module:
    """Parse TC source text; raises TcError with a caret on the first syntax error."""
    return _Parser(source).module()
