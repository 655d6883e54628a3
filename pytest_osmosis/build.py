"""Build a session's runtime: the policy, its endpoint, the backend or servers, the scheduler."""

from __future__ import annotations

import functools
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx
import pytest

from pytest_osmosis.options import DEFAULT_CONCURRENCY, resolve_path
from pytest_osmosis.runtime import InProcessRunner, ServerRunner
from pytest_osmosis.scheduler import RolloutScheduler
from pytest_osmosis.workspace import load_callable

if TYPE_CHECKING:
    from osmosis_rollout.backend.base import ExecutionBackend
    from osmosis_rollout.policy.recording import RecordMode
    from pytest_osmosis.session import OsmosisSession, Runtime

SERVE_START_TIMEOUT_SEC = 60.0
SERVE_STOP_TIMEOUT_SEC = 10.0


def cassette_dir(session: OsmosisSession) -> Path:
    """``--osmosis-cassette-dir``, else ``cassettes/`` beside the first dataset."""
    s = session.settings
    if s.cassette_dir:
        return resolve_path(session.config, s.cassette_dir)
    if s.datasets:
        return resolve_path(session.config, s.datasets[0]).parent / "cassettes"
    return Path(session.config.invocation_params.dir) / "cassettes"


def _has_cassettes(directory: Path) -> bool:
    return directory.is_dir() and any(directory.rglob("*.json"))


def build_policy(session: OsmosisSession) -> Any:
    """The policy serving model calls: scripted, LiteLLM, or replay, maybe wrapped to record."""
    from osmosis_rollout.policy import RecordingPolicy, as_policy

    s = session.settings
    base = Path(session.config.invocation_params.dir)
    inner: Any = None
    if s.policy:
        inner = as_policy(load_callable(s.policy, base=base, what="--osmosis-policy"))
    elif s.model:
        inner = _litellm_policy(s.model, "--osmosis-model")
    cassettes = cassette_dir(session)
    mode = s.record_mode
    if inner is None:
        if mode in (None, "none") and _has_cassettes(cassettes):
            return RecordingPolicy(None, cassettes, "none")
        if s.toml_model and (mode is not None or not _has_cassettes(cassettes)):
            inner = _litellm_policy(s.toml_model, "the eval TOML's model_path")
        else:
            raise pytest.UsageError(
                "pytest-osmosis: no policy to answer the rollouts' model calls. Pass "
                "--osmosis-policy FILE:CALLABLE (a scripted policy), --osmosis-model LITELLM_ID (a real "
                f"model), or record cassettes into {cassettes} first (--osmosis-record-mode once)."
            )
    if mode is None or (mode == "none" and not _has_cassettes(cassettes)):
        return inner
    return RecordingPolicy(inner, cassettes, cast("RecordMode", mode))


def _litellm_policy(model: str, source: str) -> Any:
    """A LiteLLM policy, refused up front when LiteLLM finds no credentials for the model."""
    from osmosis_rollout.integrations._litellm import import_litellm
    from osmosis_rollout.policy import LiteLLMPolicy

    litellm = import_litellm(extra="litellm")
    try:
        check = litellm.validate_environment(model=model)
    except Exception:
        check = {}
    missing = check.get("missing_keys") if isinstance(check, dict) else None
    if missing and not check.get("keys_in_environment", True):
        raise pytest.UsageError(
            f"pytest-osmosis: model {model!r} (from {source}) needs {', '.join(missing)} in the "
            "environment. Set it, or replay recorded cassettes, or pass --osmosis-policy FILE:CALLABLE."
        )
    return LiteLLMPolicy(model)


def check_servers(urls: list[str]) -> None:
    """Refuse to start when a rollout server does not answer ``GET /health``."""
    key = _server_api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for url in urls:
        try:
            response = httpx.get(url.rstrip("/") + "/health", timeout=5.0, headers=headers)
        except httpx.HTTPError as exc:
            raise pytest.UsageError(
                f"pytest-osmosis: --osmosis-server {url}: no rollout server there ({type(exc).__name__}: {exc}). "
                "Start it (osmosis-rollout serve ...) or use --osmosis-serve."
            ) from None
        if response.status_code != 200:
            hint = (
                " (set OSMOSIS_ROLLOUT_API_KEY to its inbound key)"
                if response.status_code == 401
                else ""
            )
            raise pytest.UsageError(
                f"pytest-osmosis: --osmosis-server {url}: GET /health answered {response.status_code}{hint}"
            )


def load_backend(session: OsmosisSession) -> ExecutionBackend:
    """The entrypoint's backend (module-level, from its app, or built from its classes)."""
    from osmosis_rollout.entrypoint import load_entrypoint
    from osmosis_rollout.errors import EntrypointError

    if session.entrypoint is None:
        # Marker-driven rows (no --osmosis-dataset): find the workspace's rollout now.
        from pytest_osmosis.workspace import discover_entrypoint, find_workspace

        config = session.config
        workspace = find_workspace([Path(config.invocation_params.dir), Path(config.rootpath)])
        session.entrypoint = discover_entrypoint(workspace)
    try:
        loaded = load_entrypoint(
            session.entrypoint, base_dir=Path(session.config.invocation_params.dir)
        )
    except EntrypointError as exc:
        raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
    if loaded.backend is None:
        raise pytest.UsageError(f"pytest-osmosis: {session.entrypoint} exposes no rollout backend")
    backend: ExecutionBackend = loaded.backend
    return backend


def _concurrency(session: OsmosisSession, backend: ExecutionBackend | None) -> int:
    from osmosis_rollout._limiter import ConcurrencyLimiter
    from osmosis_rollout.backend.local import LocalBackend

    s = session.settings
    if s.concurrency is not None:
        if isinstance(backend, LocalBackend):
            # The flag bounds the run, so the backend's own limiter must not bound it lower.
            backend.limiter = ConcurrencyLimiter(max_concurrent=s.concurrency)
        return s.concurrency
    if isinstance(backend, LocalBackend) and backend.workflow_config is not None:
        configured = backend.workflow_config.concurrency.max_concurrent
        if configured is not None:
            return configured
    if isinstance(backend, LocalBackend):
        backend.limiter = ConcurrencyLimiter(max_concurrent=None)
    return DEFAULT_CONCURRENCY


def _route_runtime_logs(path: Path) -> Any:
    """Send osmosis_rollout's logs to ``<output>/rollouts.log`` while rows run.

    Rollouts run concurrently on another thread, so their log records would otherwise land in
    whichever item pytest is reporting at that moment. Returns the function that undoes it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("osmosis_rollout")
    previous = (logger.propagate, logger.level)
    logger.addHandler(handler)
    logger.propagate = False
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)

    def restore() -> None:
        logger.removeHandler(handler)
        handler.close()
        logger.propagate, level = previous
        logger.setLevel(level)

    return restore


def build_runtime(session: OsmosisSession) -> Runtime:
    """Import, start and wire everything the rows need; register how to stop it."""
    from osmosis_rollout.controller import PolicyServer
    from pytest_osmosis.session import Runtime

    s = session.settings
    closers: list[Any] = [_route_runtime_logs(session.output / "rollouts.log")]
    loop_closers: list[Any] = []
    try:
        policy = build_policy(session)
        policy_server = PolicyServer(policy)
        policy_server.start()
        closers.append(policy_server.stop)
        paths = session.paths
        if s.servers or s.serve:
            urls = list(s.servers)
            check_servers(urls)
            artifact_root: Path | None = None
            if s.serve:
                url, stop, artifact_root = start_server_subprocess(session)
                closers.append(stop)
                urls.append(url)
            scheduler = RolloutScheduler(s.concurrency or DEFAULT_CONCURRENCY)
            closers.append(scheduler.close)
            per_url = max(1, -(-scheduler.concurrency // (ROLLOUTS_PER_CLIENT * len(urls))))
            # Interleaved, so round-robin spreads rows over the replicas first.
            clients = [_client(scheduler, url) for _ in range(per_url) for url in urls]
            loop_closers.append(functools.partial(_close_clients, scheduler, clients))
            runner: Any = ServerRunner(
                clients,
                policy_server,
                paths,
                agent_timeout=s.agent_timeout,
                grader_timeout=s.grader_timeout,
                server_artifact_root=artifact_root,
            )
        else:
            backend = load_backend(session)
            from osmosis_rollout.backend.local import LocalBackend

            if isinstance(backend, LocalBackend):
                backend.artifact_root = paths.rollouts
            scheduler = RolloutScheduler(_concurrency(session, backend))
            runner = InProcessRunner(
                backend,
                policy_server,
                paths,
                agent_timeout=s.agent_timeout,
                grader_timeout=s.grader_timeout,
            )
    except BaseException:
        for closer in [*loop_closers, *reversed(closers)]:
            try:
                closer()
            except Exception:
                pass
        raise
    # The scheduler is closed by the session itself, first.
    return Runtime(
        scheduler=scheduler, runner=runner, closers=[c for c in closers if c != scheduler.close]
    )


ROLLOUTS_PER_CLIENT = 16
"""Long polls each hold a connection, and httpx's pool scans all of its connections per
request, so one client per 16 rollouts in flight keeps the controller side cheap."""


def _server_api_key() -> str | None:
    """The rollout server's inbound key, from the same variable ``osmosis-rollout serve`` reads."""
    from osmosis_rollout.server import SERVER_API_KEY_ENV

    return os.environ.get(SERVER_API_KEY_ENV) or None


def _client(scheduler: RolloutScheduler, url: str) -> Any:
    from osmosis_rollout.controller import RolloutClient

    async def make() -> Any:
        return RolloutClient(url, admission_timeout_sec=120.0, api_key=_server_api_key())

    return scheduler.run(make, timeout=10)


def _close_clients(scheduler: RolloutScheduler, clients: list[Any]) -> None:
    """Close clients on the loop they were made on (best effort; the loop may be gone)."""
    for client in clients:
        try:
            scheduler.run(client.aclose, timeout=5)
        except Exception:
            pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server_subprocess(session: OsmosisSession) -> tuple[str, Any, Path]:
    """Run ``osmosis-rollout serve <entrypoint>`` on a free loopback port; return url, stop, artifact root."""
    assert session.entrypoint is not None
    port = _free_port()
    artifact_root = session.paths.rollouts
    env = dict(os.environ, _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(artifact_root), PYTHONUNBUFFERED="1")
    log_path = session.output / "server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "osmosis_rollout.cli",
            "serve",
            session.entrypoint,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=str(session.config.invocation_params.dir),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVE_START_TIMEOUT_SEC

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(SERVE_STOP_TIMEOUT_SEC)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        log.close()

    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop()
            tail = log_path.read_text(errors="replace")[-2000:]
            raise pytest.UsageError(
                f"pytest-osmosis: --osmosis-serve: the server exited early:\n{tail}"
            )
        key = _server_api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            if httpx.get(url + "/health", timeout=1.0, headers=headers).status_code == 200:
                return url, stop, artifact_root
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop()
    raise pytest.UsageError(
        f"pytest-osmosis: --osmosis-serve: no healthy server on {url} after {SERVE_START_TIMEOUT_SEC:g}s"
    )
