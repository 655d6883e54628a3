"""Helpers for the wire-compatibility tests against the official ``osmosis-ai`` 0.3.8 SDK.

- ``ensure_official_venv()``: the Python of a 3.12 virtualenv with
  ``osmosis-ai[server,openai-agents,strands]==0.3.8`` (the integrations are compared too),
  built before pytest by ``scripts/test.sh`` (``_support.venvs.OFFICIAL_SDK``); without it,
  ``OfficialSdkUnavailable`` says why (tests SKIP).
- ``start_our_server`` / ``start_official_server``: the same official-style entrypoint
  (``scripts/rollout_main.py``) served by ``osmosis-rollout serve`` from our ``.venv`` (imports
  migrated to ``osmosis_rollout``) and by ``python main.py`` in the official venv, each on a
  free loopback port; ``ServerProcess.stop()`` sends SIGTERM, then SIGKILL.
- ``run_official_client``: runs ``scripts/official_client_driver.py`` in the official venv.
- ``run_on_both``: runs one official-style snippet in the official venv and, imports migrated,
  in ours; each prints what it observed as JSON.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _support.net import HEALTHY_TIMEOUT, ServerNotHealthy, free_port, wait_until_healthy
from _support.repo import REPO
from _support.venvs import OFFICIAL_SDK, VenvUnavailable

SCRIPTS = Path(__file__).parent / "scripts"

SERVER_STOP_TIMEOUT_SEC = 10

RESULT_WAIT_SEC = 0.5
"""Both servers long-poll for at most this long (30 s in production) to keep tests fast."""
LEASE_SEC = 4.0
"""Both servers' polling lease (120 s in production): short enough to test expiry quickly,
eight result waits long so a client that polls keeps its rollout alive."""

OfficialSdkUnavailable = VenvUnavailable


def _tail(text: str | bytes | None, lines: int = 15) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join((text or "").strip().splitlines()[-lines:])


def ensure_official_venv() -> Path:
    """The official SDK venv's Python (built by ``scripts/test.sh`` before pytest, never here);
    raises :class:`OfficialSdkUnavailable` with the reason when it is not there."""
    return OFFICIAL_SDK.ready()


# ---------------------------------------------------------------------------------------------
# Processes


@dataclass
class ServerProcess:
    """A rollout server subprocess on loopback."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        try:
            return _tail(self.log.read_text(encoding="utf-8", errors="replace"), 40)
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``SERVER_STOP_TIMEOUT_SEC``; only this process."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(SERVER_STOP_TIMEOUT_SEC)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_server(name: str, command: list[str], *, cwd: Path, env: dict[str, str]) -> ServerProcess:
    """Start ``command`` (which serves on ``env["_OSMOSIS_ROLLOUT_PORT"]``) and wait for /health."""
    port = env["_OSMOSIS_ROLLOUT_PORT"]
    log = cwd / f"{name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = ServerProcess(name, f"http://127.0.0.1:{port}", process, log)
    try:
        # Any answer means it listens (a keyed server answers 401 without the key).
        wait_until_healthy(
            server.url,
            process=process,
            accept=(200, 401),
            timeout=HEALTHY_TIMEOUT,
            describe=lambda: f"{name} server log:\n{server.log_tail()}",
        )
    except ServerNotHealthy:
        server.stop()
        raise
    return server


def migrate_imports(source: str) -> str:
    """The documented migration: ``osmosis_ai.rollout`` -> ``osmosis_rollout``, nothing else."""
    return re.sub(r"\bosmosis_ai\.rollout\b", "osmosis_rollout", source)


SNIPPET_TIMEOUT_SEC = 240
"""A hang guard for one snippet: a cold LiteLLM import takes minutes on a busy 2-core machine."""


def _snippet_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    # LiteLLM's bundled cost map: no fetch over the network at import.
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    # Our checkout first, so the code under test wins over an installed copy.
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(REPO), env.get("PYTHONPATH", "")) if part
    )
    return env


def run_snippet(python: Path | str, source: str, *, cwd: Path) -> Any:
    """Run ``source`` with ``python``; return the JSON its last stdout line holds."""
    completed = subprocess.run(
        [str(python), "-c", source],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_snippet_env(),
        timeout=SNIPPET_TIMEOUT_SEC,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise AssertionError(
            f"{python} exited {completed.returncode}:\n{_tail(completed.stdout, 20)}\n"
            f"{_tail(completed.stderr, 30)}"
        )
    return json.loads(lines[-1])


def run_on_both(official_python: Path, source: str, *, cwd: Path) -> tuple[Any, Any]:
    """What ``source`` (official imports) observes on the official SDK, then on ours.

    Ours runs the same text with the documented migration of the imports, plus
    ``osmosis_ai.eval.rubric`` -> ``osmosis_rollout.rubric`` (where ours keeps the rubric).
    """
    ours_source = migrate_imports(
        re.sub(r"\bosmosis_ai\.eval\.rubric(\.engine)?\b", "osmosis_rollout.rubric", source)
    )
    return (
        run_snippet(official_python, source, cwd=cwd),
        run_snippet(sys.executable, ours_source, cwd=cwd),
    )


def _server_env(workdir: Path, port: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("OSMOSIS_ROLLOUT_API_KEY", None)  # our serve would read it: keys are explicit here
    env.update(
        _OSMOSIS_ROLLOUT_PORT=str(port),
        _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(workdir / "artifacts"),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def start_official_server(
    python: Path, workdir: Path, *, api_key: str | None = None
) -> ServerProcess:
    """The official entrypoint, run the way its template says: ``python main.py``.

    ``api_key`` is the server's inbound bearer key (``create_rollout_server(api_key=...)``).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCRIPTS / "rollout_main.py", workdir / "main.py")
    env = _server_env(
        workdir,
        free_port(),
        INTEROP_RESULT_WAIT_SEC=str(RESULT_WAIT_SEC),
        INTEROP_LEASE_SEC=str(LEASE_SEC),
        INTEROP_SERVER_API_KEY=api_key or "",
    )
    return start_server("official", [str(python), "main.py"], cwd=workdir, env=env)


OUR_HEALTH_EXTRAS = ("admission", "connections")
"""The keys our ``/health`` adds to the official body (the adaptive limit and the open
connections, docs/serving.md): left out where bodies are compared."""


def start_our_server(workdir: Path, *, api_key: str | None = None) -> ServerProcess:
    """The migrated entrypoint under ``osmosis-rollout serve`` in our own ``.venv``.

    ``api_key`` is the server's inbound bearer key (``serve --api-key``).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    source = (SCRIPTS / "rollout_main.py").read_text(encoding="utf-8")
    (workdir / "main.py").write_text(migrate_imports(source), encoding="utf-8")
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "osmosis_rollout.cli",
        "serve",
        "main.py",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--result-wait-timeout-sec",
        str(RESULT_WAIT_SEC),
        "--polling-lease-timeout-sec",
        str(LEASE_SEC),
        # The official server's fixed slots (LocalBackend's default 4), not the adaptive
        # limit, which backs off on a busy machine and shows that in /health.
        "--max-concurrent",
        "4",
        *(["--api-key", api_key] if api_key else []),
    ]
    return start_server("ours", command, cwd=workdir, env=_server_env(workdir, port))


def multiply_policy(request: Any) -> str:
    """Multiplies the first two numbers of the last user message; 'wrong' gets a wrong answer."""
    text = str(request.messages[-1].get("content") or "")
    if "wrong" in text:
        return "I do not know"
    numbers = [int(n) for n in re.findall(r"-?\d+", text)]
    if len(numbers) >= 2:
        return f"The answer is {numbers[0] * numbers[1]}"
    return "ok"


def run_official_client(
    python: Path, plan: dict[str, Any], *, timeout_sec: float = 60
) -> dict[str, Any]:
    """Run ``scripts/official_client_driver.py`` with ``plan``; return its JSON report."""
    plan = {"timeout_sec": timeout_sec - 10, **plan}
    completed = subprocess.run(
        [str(python), str(SCRIPTS / "official_client_driver.py")],
        input=json.dumps(plan).encode(),
        capture_output=True,
        timeout=timeout_sec,
    )
    if completed.returncode != 0:
        raise AssertionError(
            f"official client driver exited {completed.returncode}:\n{_tail(completed.stderr, 30)}"
        )
    report: dict[str, Any] = json.loads(completed.stdout)
    return report
