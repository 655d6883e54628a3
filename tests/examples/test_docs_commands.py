"""Every shell block of README.md and docs/*.md runs as written, offline.

A block fenced as ```bash is run line by line, as a reader would paste it, in a fresh copy
of a small workspace: the ``plain`` template rendered as rollout ``multiply`` with its
dataset ``data/test.jsonl`` and the workspace ``pyproject.toml`` that names them (so a bare
``pytest`` runs its 8 rows), beside a copy of ``example_rollouts/``. ``pytest`` and
``osmosis-rollout`` run with this interpreter; ``cd`` moves; every command must exit 0.

A block that cannot run offline says so, and why, on the line above its fence::

    <!-- docs-test: skip: needs OPENAI_API_KEY (a real model) -->

and :func:`test_the_skipped_blocks_are_listed_with_their_reason` prints that list. A block
of code a page shows as a file (``<!-- docs-test: file tests/test_x.py -->``) is written
there, in the workspace of every shell block of the same page, so the page's command that
runs it runs it as written. A block that calls a model on an OpenAI-compatible server names
the server's URL and key on the line above its fence::

    <!-- docs-test: model-server http://127.0.0.1:8000/v1 sk-local -->

and runs against a stand-in served on loopback: an OpenAI-compatible chat-completions
endpoint (our ``PolicyServer``) answering with the workspace's reference policy, its URL put
where the block names the server's. A command may start with ``NAME=value`` assignments,
set in its environment. An
untagged block holding a command fails :func:`test_every_command_block_is_tagged`: tag it
``bash`` (it runs) or ``text`` (it is output), so no command escapes this test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _support.inner_runs import INNER_RUN_ADDOPTS

from osmosis_rollout.templates import render_template, render_workspace_pyproject

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_TIMEOUT_SEC = 120.0

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
_ANNOTATION = re.compile(r"<!-- docs-test: (?P<text>.*?) -->[ \t]*\n\Z")
_COMMAND = re.compile(r"^\s*(\$ )?(pytest|osmosis-rollout|python|pip|cd|bash|osmosis)\b", re.M)
SHELL = ("bash", "sh", "shell", "console")


@dataclass(frozen=True)
class Block:
    """A fenced block: where it is, its language, its text and the annotation above it."""

    path: Path
    line: int
    lang: str
    body: str
    annotation: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def file(self) -> str | None:
        """Where the page means this block to be saved (a ``file`` annotation)."""
        if self.annotation and self.annotation.startswith("file "):
            return self.annotation.removeprefix("file ").strip()
        return None

    @property
    def model_server(self) -> tuple[str, str] | None:
        """The URL and key of the model server the block calls (a ``model-server`` annotation)."""
        if self.annotation and self.annotation.startswith("model-server "):
            url, key = self.annotation.removeprefix("model-server ").split()
            return url, key
        return None

    @property
    def skip_reason(self) -> str | None:
        if self.annotation and self.annotation.startswith("skip:"):
            return self.annotation.removeprefix("skip:").strip()
        return None


def _blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            above = _ANNOTATION.search(text, 0, match.start())
            found.append(
                Block(
                    path,
                    text.count("\n", 0, match.start()) + 1,
                    match.group("lang"),
                    match.group("body"),
                    above.group("text") if above else None,
                )
            )
    return found


BLOCKS = _blocks()
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]
RUN = [b for b in SHELL_BLOCKS if b.skip_reason is None]


def _workspace(root: Path, page: Path) -> Path:
    """The rendered ``multiply`` workspace, with ``example_rollouts/`` beside its files and
    the page's file blocks where the page puts them. The README's is the one
    ``osmosis-rollout init multiply --template plain`` writes (its dataset named as the
    template names it); the reference pages' keep their rows in ``data/test.jsonl``."""
    dataset = None if page.name == "README.md" else "test"
    for rel, text in render_template("plain", "multiply", dataset=dataset).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        render_workspace_pyproject("plain", "multiply", dataset=dataset), encoding="utf-8"
    )
    shutil.copytree(
        ROOT / "example_rollouts",
        root / "example_rollouts",
        ignore=shutil.ignore_patterns(".osmosis", "__pycache__", ".pytest_cache", ".venv"),
    )
    for block in BLOCKS:
        if block.path == page and block.file is not None:
            (root / block.file).parent.mkdir(parents=True, exist_ok=True)
            (root / block.file).write_text(block.body, encoding="utf-8")
    return root


def _commands(body: str) -> list[list[str]]:
    """The block's commands, each a word list; ``&&`` and ``;`` separate commands too."""
    commands: list[list[str]] = []
    for line in body.replace("\\\n", " ").splitlines():
        line = line.strip().removeprefix("$ ")
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&")
        lexer.whitespace_split = True
        current: list[str] = []
        for word in lexer:
            if word in ("&&", ";"):
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def _assignments(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """A command's leading ``NAME=value`` words (its environment), and the rest."""
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        name, _, value = words[0].partition("=")
        env[name] = value
        words = words[1:]
    return env, words


@contextlib.contextmanager
def _model_server(workspace: Path, key: str) -> Iterator[str]:
    """An OpenAI-compatible endpoint answering with the workspace's reference policy; yields
    its base URL (``POST {base}/chat/completions``)."""
    from osmosis_rollout.controller import PolicyServer
    from osmosis_rollout.workspace.user_code import load_object

    policy = load_object("rollouts/multiply/policy.py:policy", base_dir=workspace)
    with PolicyServer(policy, api_key=key) as server:
        yield server.rollout_url("docs")


def _run_commands(block: Block, body: str, cwd: Path, env: dict[str, str]) -> None:
    for words in _commands(body):
        if words[0] == "cd":
            cwd = (cwd / words[1]).resolve()
            assert cwd.is_dir(), f"{block.name}: cd {words[1]}: no such folder"
            continue
        assigned, words = _assignments(words)
        ran = subprocess.run(
            _argv(words),
            cwd=cwd,
            env={**env, **assigned},
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SEC,
            check=False,
        )
        assert ran.returncode == 0, (
            f"{block.name}: `{shlex.join(words)}` exited {ran.returncode}\n"
            f"{ran.stdout[-3000:]}\n{ran.stderr[-2000:]}"
        )


def _argv(words: list[str]) -> list[str]:
    program, *args = words
    if program == "pytest":
        return [sys.executable, "-m", "pytest", *args]
    if program == "osmosis-rollout":
        return [sys.executable, "-m", "osmosis_rollout.cli", *args]
    if program == "python":
        return [sys.executable, *args]
    pytest.fail(
        f"`{shlex.join(words)}` cannot run offline here: run it elsewhere or annotate the "
        "block with <!-- docs-test: skip: REASON -->"
    )


@pytest.mark.parametrize("block", RUN, ids=[b.name for b in RUN])
def test_every_shell_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    cwd = _workspace(tmp_path, block.path)
    env = {**os.environ, "PYTEST_ADDOPTS": INNER_RUN_ADDOPTS}
    if block.model_server is None:
        _run_commands(block, block.body, cwd, env)
        return
    url, key = block.model_server
    assert url in block.body, f"{block.name}: the block never names {url}"
    with _model_server(cwd, key) as served:
        _run_commands(block, block.body.replace(url, served), cwd, env)


def test_every_command_block_is_tagged() -> None:
    untagged = [b.name for b in BLOCKS if not b.lang and _COMMAND.search(b.body)]
    assert not untagged, f"tag these blocks ```bash (they run) or ```text (output): {untagged}"


def test_the_skipped_blocks_are_listed_with_their_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    skipped = [(b.name, b.skip_reason) for b in SHELL_BLOCKS if b.skip_reason is not None]
    assert all(reason for _, reason in skipped), skipped
    assert RUN and SHELL_BLOCKS  # the pages were read
    with capsys.disabled():
        print(f"\ndocs blocks run: {len(RUN)}; skipped:")
        for name, reason in skipped:
            print(f"  {name}: {reason}")


# ---------------------------------------------------------------------------------------------
# The CI examples (docs/ci/): valid YAML of their system's shape, and the commands they run
# run in the workspace they describe (pip's requirement is checked, not installed: offline).

CI_EXAMPLES = sorted((ROOT / "docs" / "ci").glob("*.yml"))
BASELINE_COMMAND = "pytest --osmosis-report eval-baseline/report.json"
"""How a workspace keeps its baseline (README, "Compare with a baseline"); run first."""


def _ci_commands(path: Path) -> list[str]:
    yaml = pytest.importorskip("yaml")
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{path.name}: not a YAML mapping"
    if "jobs" in document:  # GitHub Actions (YAML 1.1 reads the key `on` as True)
        assert document.get("on", document.get(True)), f"{path.name}: no `on:` trigger"
        steps = [step for job in document["jobs"].values() for step in job["steps"]]
        assert all(("run" in step) != ("uses" in step) for step in steps), steps
        return [step["run"] for step in steps if "run" in step]
    jobs = [job for name, job in document.items() if isinstance(job, dict) and "script" in job]
    assert jobs, f"{path.name}: no GitLab CI job (a mapping with `script:`)"
    return [line for job in jobs for line in job["script"]]


def _check_pip_install(path: Path, words: list[str]) -> None:
    from packaging.requirements import Requirement

    assert words[:2] == ["pip", "install"] and len(words) == 3, words
    requirement = Requirement(words[2])
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert requirement.name == project["name"], requirement
    assert requirement.extras <= set(project["optional-dependencies"]), requirement.extras
    assert requirement.url == f"git+{project['urls']['Source']}", requirement.url


@pytest.mark.parametrize("path", CI_EXAMPLES, ids=[p.name for p in CI_EXAMPLES])
def test_a_ci_example_is_valid_and_its_commands_run_in_the_workspace(
    path: Path, tmp_path: Path
) -> None:
    commands = _ci_commands(path)
    assert [c for c in commands if c.startswith("pytest ")], f"{path.name} runs no pytest"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert BASELINE_COMMAND in readme, "the README no longer says how to keep a baseline"
    cwd = _workspace(tmp_path, path)
    env = {**os.environ, "PYTEST_ADDOPTS": INNER_RUN_ADDOPTS}
    block = Block(path, 1, "bash", "", None)
    _run_commands(block, BASELINE_COMMAND, cwd, env)
    for command in commands:
        (words,) = _commands(command)
        if words[0] == "pip":
            _check_pip_install(path, words)
        else:
            _run_commands(block, command, cwd, env)
    for written in ("report.json", "report.html", "junit.xml"):
        assert (cwd / ".osmosis" / "ci" / written).is_file(), written


def test_every_ci_example_is_tested() -> None:
    assert {p.name for p in CI_EXAMPLES} >= {"github-actions.yml", "gitlab-ci.yml"}
