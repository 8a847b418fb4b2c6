"""The code in README.md and docs/*.md runs as written (issue 13): a reader who pastes a
block gets what the page says, and a change that breaks an example fails here, naming the
file and line of the block.

Every fence names a language, and the language says what happens to the block:

- ``python``: run. A block of ``>>>`` examples is a doctest: the file must pass
  ``python -m doctest FILE`` (its doctest blocks run in order, in one namespace). Any other
  block is a script run by a fresh interpreter in a fresh temporary directory, so it must
  create what it uses. ``python continued`` marks a snippet that goes on from the file's
  previous python block: it runs appended to that block's script.
- ``console``: every ``$ tc-graph ...`` line runs in a fresh temporary directory, and what
  it prints (stdout and stderr, interleaved as a terminal shows them) must be the lines
  under it; its exit status must be 1 where those lines report an error, else 0. A
  ``NAME.tc`` argument is the nearest ``tc`` block above, written to that file.
- ``tc``: a TC source; one that no console block checks must ``tg.define`` without error.
- ``illustrative`` after the language (```` ```sh illustrative ````): shown, not run. For
  commands that install or take minutes (the README's first two, which CI runs itself:
  .ci/run) and synopses with placeholders such as ``[--force]``.
- ``text`` and ``c``: not code to run (grammars, messages, declarations).

A fence without a language fails, so every new block says which of these it is.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import tc_graph as tg

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_RUN = {"text", "c"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (the fence's line), its info string and its text."""

    page: Path
    line: int
    info: str
    text: str

    @property
    def lang(self) -> str:
        return self.info.split()[0] if self.info else ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def illustrative(self) -> bool:
        return "illustrative" in self.info.split()[1:]

    @property
    def is_doctest(self) -> bool:
        return self.text.lstrip().startswith(">>>")


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, each dedented by its fence's indentation."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        i += 1
        if m is None:
            continue
        indent, fence, body = len(m["indent"]), m["fence"], []
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        found.append(Block(page, i - len(body), m["info"].strip(), "\n".join(body) + "\n"))
        i += 1
    return found


ALL = [b for page in PAGES for b in blocks(page)]


def _ids(selected: list[Block]) -> list[str]:
    return [b.where for b in selected]


def _env() -> dict[str, str]:
    """This checkout's tc_graph first, and the suite's kernel cache (conftest sets it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run unbuffered, stderr into stdout: the output interleaved as a terminal shows it."""
    env = {**_env(), "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT_S,
    )


def test_every_fence_names_what_it_is() -> None:
    known = {"python", "console", "tc", "sh", *NOT_RUN}
    bad = [
        f"{b.where}: ```{b.info}"
        for b in ALL
        if b.lang not in known or (b.lang == "sh" and not b.illustrative)
    ]
    assert not bad, (
        "give each block a language this test knows (python, console, tc, text, c) "
        "or mark commands it cannot run `sh illustrative` (see this module's docstring):\n"
        + "\n".join(bad)
    )


def _scripts() -> list[tuple[Block, str]]:
    """Each non-doctest python block with the script that runs it: its own text, after the
    previous block's script when it is marked ``continued``."""
    out: list[tuple[Block, str]] = []
    previous: dict[Path, str] = {}
    for b in ALL:
        if b.lang != "python" or b.is_doctest:
            continue
        continued = "continued" in b.info.split()[1:]
        if continued and b.page not in previous:
            pytest.fail(f"{b.where}: `python continued` with no python block before it")
        script = previous[b.page] + b.text if continued else b.text
        previous[b.page] = script
        out.append((b, script))
    return out


SCRIPTS = _scripts()


@pytest.mark.parametrize(("block", "script"), SCRIPTS, ids=_ids([b for b, _ in SCRIPTS]))
def test_python_block_runs(block: Block, script: str, tmp_path: Path) -> None:
    (tmp_path / "block.py").write_text(script, encoding="utf-8")
    r = _run([sys.executable, "block.py"], tmp_path)
    assert r.returncode == 0, f"{block.where}: the python block fails as written\n{r.stdout}"


DOCTEST_PAGES = sorted({b.page for b in ALL if b.lang == "python" and b.is_doctest})


@pytest.mark.parametrize("page", DOCTEST_PAGES, ids=[p.name for p in DOCTEST_PAGES])
def test_doctest_blocks_pass(page: Path, tmp_path: Path) -> None:
    r = _run([sys.executable, "-m", "doctest", str(page)], tmp_path)
    assert r.returncode == 0, f"python -m doctest {page.relative_to(REPO)} fails:\n{r.stdout}"


def _tc_above(block: Block) -> Block:
    """The nearest tc block above `block` on its page."""
    above = [b for b in ALL if b.page == block.page and b.line < block.line and b.lang == "tc"]
    if not above:
        pytest.fail(f"{block.where}: a .tc argument but no tc block above it")
    return above[-1]


def _sessions(block: Block) -> list[tuple[str, list[str]]]:
    """The ``$`` commands of a console block, each with the output lines written under it."""
    sessions: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        elif sessions:
            sessions[-1][1].append(line.rstrip())
        elif line.strip():
            pytest.fail(f"{block.where}: output before the first `$ ` command")
    return sessions


def _argv(block: Block, command: str, cwd: Path) -> list[str]:
    """The command as this checkout runs it, with its .tc arguments written to `cwd`."""
    argv = shlex.split(command)
    if argv[0] != "tc-graph":
        pytest.fail(f"{block.where}: only tc-graph commands run here; mark others illustrative")
    for arg in argv[1:]:
        if arg.endswith(".tc") and "/" not in arg:
            (cwd / arg).write_text(_tc_above(block).text, encoding="utf-8")
    return [sys.executable, "-m", "tc_graph.cli", *argv[1:]]


CONSOLE = [b for b in ALL if b.lang == "console" and not b.illustrative]


@pytest.mark.parametrize("block", CONSOLE, ids=_ids(CONSOLE))
def test_console_block_prints_what_it_shows(block: Block, tmp_path: Path) -> None:
    for command, expected in _sessions(block):
        r = _run(_argv(block, command, tmp_path), tmp_path)
        printed = [line.rstrip() for line in r.stdout.splitlines()]
        assert printed == expected, f"{block.where}: `{command}` prints\n" + "\n".join(printed)
        error = any(re.match(r"\S*: error: ", line) for line in expected)
        assert r.returncode == (1 if error else 0), f"{block.where}: `{command}` exit status"


CHECKED = {_tc_above(b) for b in CONSOLE if ".tc" in b.text}
TC_ALONE = [b for b in ALL if b.lang == "tc" and b not in CHECKED]


@pytest.mark.parametrize("block", TC_ALONE, ids=_ids(TC_ALONE))
def test_tc_block_defines(block: Block) -> None:
    tg.define(block.text)
