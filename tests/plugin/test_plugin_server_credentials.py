"""Credentials in a rollout server's URL (``--osmosis-server http://user:pass@host``) are
used, and never written: report.json, run.json, every file of the run and the terminal show
the URL with ``***`` in place of its userinfo."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _support.servers import uvicorn_thread
from workspaces import multiply_rows

from osmosis_rollout import LocalBackend
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.workspace.entrypoint import load_entrypoint

POLICY = "--osmosis-policy=policy.py:policy"
PASSWORD = "s3cret-PASSWORD-in-url"


@pytest.fixture
def served_demo(workspace: Callable[..., Path]) -> Iterator[str]:
    """The workspace's demo rollout served in this process; yields its URL."""
    root = workspace(multiply_rows(3))
    loaded = load_entrypoint(str(root / "rollouts" / "demo" / "main.py"), base_dir=root)
    assert isinstance(loaded.backend, LocalBackend)
    app = create_rollout_server(backend=loaded.backend, configure_logging=False)
    with uvicorn_thread(app) as url:
        yield url


def test_credentials_in_a_server_url_are_starred_in_the_reports_and_the_terminal(
    served_demo: str, pytester: pytest.Pytester
) -> None:
    url = served_demo.replace("http://", f"http://controller:{PASSWORD}@")
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        f"--osmosis-server={url}",
        "--osmosis-output=out",
        "--osmosis-report=out/report.json",
    )
    result.assert_outcomes(passed=3 + 1)  # the dataset preflight: no entrypoint to check
    starred = served_demo.replace("http://", "http://***@")
    report = (pytester.path / "out" / "report.json").read_text()
    run = (pytester.path / "out" / "run.json").read_text()
    assert starred in report and starred in run
    assert starred in result.stdout.str()
    for path in (pytester.path / "out").rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), f"the password leaked into {path}"
    assert PASSWORD not in result.stdout.str() + result.stderr.str()


def test_an_unreachable_server_is_named_without_its_credentials(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    from _support.net import free_port

    workspace(multiply_rows(2))
    url = f"http://controller:{PASSWORD}@127.0.0.1:{free_port()}"
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, f"--osmosis-server={url}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "--osmosis-server http://***@127.0.0.1:" in out
    assert PASSWORD not in out
