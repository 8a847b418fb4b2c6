"""The one error hierarchy of tc_graph: every user-facing error is a TcError."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A half-open character range [start, end) in a TC source text."""

    start: int
    end: int

    def merge(self, other: Span) -> Span:
        return Span(min(self.start, other.start), max(self.end, other.end))


def render_location(source: str, span: Span) -> str:
    """The source line of `span` with a caret under it, as compilers print it."""
    start = max(0, min(span.start, len(source)))
    line_no = source.count("\n", 0, start) + 1
    line_start = source.rfind("\n", 0, start) + 1
    line_end = source.find("\n", start)
    if line_end < 0:
        line_end = len(source)
    line = source[line_start:line_end]
    col = start - line_start
    width = max(1, min(span.end, line_end) - start)
    gutter = f"{line_no:>4} | "
    pad = " " * (len(gutter) - 2) + "| "
    caret_pad = "".join("\t" if ch == "\t" else " " for ch in line[:col])
    return f"  --> line {line_no}, column {col + 1}\n{gutter}{line}\n{pad}{caret_pad}{'^' * width}"


class TcError(Exception):
    """An error in a TC program or in a call of one.

    `str()` shows the rule that was broken, the source line with a caret under
    the offending token when there is one, and a hint when the fix is obvious.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        span: Span | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.span = span
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [f"error: {self.message}"]
        if self.source is not None and self.span is not None:
            parts.append(render_location(self.source, self.span))
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    @property
    def line(self) -> int | None:
        """1-based line of the offending token, when known."""
        if self.source is None or self.span is None:
            return None
        return self.source.count("\n", 0, self.span.start) + 1


class TcWarning(UserWarning):
    """A TC program that is legal but probably not what its author meant."""


@contextlib.contextmanager
def not_too_deep() -> Iterator[None]:
    """Python's recursion limit met in parsing, checking, compiling or interpreting an
    expression (a 600-term sum is accepted, then recursed past it) as a TcError."""
    try:
        yield
    except RecursionError:
        raise TcError(
            "the program is nested too deeply to compile",
            hint="split very long or deeply nested expressions into several statements",
        ) from None
