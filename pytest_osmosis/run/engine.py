"""The rollout engine: what runs a session's rows (:func:`start_engine` loads the rollout, or
starts or checks the rollout servers, and starts the policy endpoint and the scheduler), and
how it stops (:meth:`Engine.stop`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from osmosis_rollout.redaction import Redactor
from osmosis_rollout.rollout_notes import taking_notes
from osmosis_rollout.runs.journal import ROLLOUTS_LOG, TRAJECTORIES_DIR
from pytest_osmosis.display.live import show_startup_step
from pytest_osmosis.options import DEFAULT_CONCURRENCY, OsmosisSettings
from pytest_osmosis.run.attempts import AttemptRunner, InProcessRunner, ServerRunner
from pytest_osmosis.run.policy_choice import choose_policy
from pytest_osmosis.run.rollout_log import RolloutsLogHandler, rollouts_log
from pytest_osmosis.run.rollout_servers import (
    ServedServer,
    check_servers,
    close_clients,
    make_clients,
    start_server_subprocess,
)
from pytest_osmosis.run.scheduler import RolloutScheduler

if TYPE_CHECKING:
    from osmosis_rollout.backend.base import ExecutionBackend
    from osmosis_rollout.trajectory.save import WriteFailureCallback


@dataclass
class Engine:
    """A started engine: the scheduler, the runner it runs, and what to stop."""

    scheduler: RolloutScheduler
    runner: AttemptRunner
    entrypoint: str | None
    """The rollout entrypoint in use (discovered when none was configured)."""
    log: RolloutsLogHandler
    """The handler writing ``rollouts.log`` (its ``failure`` says why the log stopped)."""
    closers: contextlib.ExitStack
    """What stops it, the last started first (the loop outlives the clients made on it)."""

    def stop(self) -> None:
        """Cancel what still runs, then stop every server and thread (best effort, bounded)."""
        self.scheduler.cancel_pending()
        with contextlib.suppress(Exception):  # every closer runs, whichever fails
            self.closers.close()


def load_backend(
    config: pytest.Config,
    settings: OsmosisSettings,
    entrypoint: str | None,
    rollouts: Path,
    started: contextlib.ExitStack,
) -> tuple[ExecutionBackend, str]:
    """The entrypoint's backend and the entrypoint (the workspace's rollout when none was
    configured). With ``--osmosis-ray``, a pool of Ray actors (stopped with ``started``) runs
    it; each actor may take the run's whole concurrency, as the scheduler bounds the total."""
    from osmosis_rollout.errors import EntrypointError, UsageError
    from osmosis_rollout.workspace.entrypoint import load_entrypoint

    base_dir = Path(config.invocation_params.dir)
    if entrypoint is None:
        from pytest_osmosis.run.workspace import discover_entrypoint, find_workspace

        entrypoint = discover_entrypoint(find_workspace([base_dir, Path(config.rootpath)]))
    if settings.ray:
        from osmosis_rollout.backend.ray import RayBackend

        try:
            ray = RayBackend(
                entrypoint,
                address=None if settings.ray == "local" else settings.ray,
                max_concurrent=settings.concurrency or DEFAULT_CONCURRENCY,
                artifact_root=rollouts,
                base_dir=base_dir,
                log_to_driver=False,
            )
            ray.start()
        except UsageError as exc:
            raise pytest.UsageError(
                f"pytest-osmosis: --osmosis-ray {settings.ray}: {exc}"
            ) from None
        started.callback(ray.close)
        return ray, entrypoint
    try:
        loaded = load_entrypoint(entrypoint, base_dir=base_dir)
    except EntrypointError as exc:
        raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
    if loaded.backend is None:
        raise pytest.UsageError(f"pytest-osmosis: {entrypoint} exposes no rollout backend")
    return loaded.backend, entrypoint


def _concurrency(settings: OsmosisSettings, backend: ExecutionBackend, rollouts: Path) -> int:
    """The run's concurrency: the flag, else the workflow's configured one, else the default.
    A LocalBackend writes under the run's output."""
    from osmosis_rollout._internal.limiter import ConcurrencyLimiter
    from osmosis_rollout.backend.local import LocalBackend

    if not isinstance(backend, LocalBackend):
        return settings.concurrency or DEFAULT_CONCURRENCY
    backend.artifact_root = rollouts
    if settings.concurrency is None and backend.workflow_config is not None:
        configured = backend.workflow_config.concurrency.max_concurrent
        if configured is not None:
            return configured
    # The scheduler bounds the run, so the backend's own limiter must not bound it lower.
    backend.limiter = ConcurrencyLimiter(max_concurrent=settings.concurrency)
    return settings.concurrency or DEFAULT_CONCURRENCY


def _before_the_clock(rollouts: Path, *, in_process: bool) -> None:
    """Do once, before the first rollout starts, what the first rollouts would each wait on
    (so the first rows' times do not include it); nothing a row does is skipped or changed."""
    from osmosis_rollout._internal.gc_freeze import freeze_startup_heap
    from osmosis_rollout.chat_client import warm_up

    warm_up()  # the CA bundle and httpx's transport, before the clock, not in a rollout
    if in_process:
        import osmosis_rollout.trajectory  # noqa: F401 - imported by the first row's save

        rollouts.mkdir(parents=True, exist_ok=True)  # else the first rollout's mkdir -p
    freeze_startup_heap()  # user code and frameworks are imported: keep them out of GC


def _shown(config: pytest.Config, entrypoint: str | None) -> str:
    """The entrypoint as the user would name it: relative to where pytest was started."""
    if entrypoint is None:
        return "the workspace's rollout"
    path, sep, attr = entrypoint.partition(":")
    with contextlib.suppress(ValueError):
        path = str(Path(path).resolve().relative_to(Path(config.invocation_params.dir).resolve()))
    return path + sep + attr


def start_engine(
    config: pytest.Config,
    settings: OsmosisSettings,
    *,
    output: Path,
    entrypoint: str | None,
    redactor: Redactor,
    on_write_failure: WriteFailureCallback,
) -> Engine:
    """Import, start and wire everything the rows need; what was started is stopped on error.
    Nothing is written under ``output`` before the rollout and the policy loaded. The policy
    endpoint's key joins ``redactor``; a file that cannot be written goes to ``on_write_failure``."""
    from osmosis_rollout.controller import PolicyServer

    s = settings
    started = contextlib.ExitStack()
    rollouts = output / TRAJECTORIES_DIR
    runner: AttemptRunner
    try:
        show_startup_step(config, "starting the policy endpoint…")
        # Each rollout gets its own key, which opens only its own URL (the policy endpoint
        # may be reachable beyond this process: --osmosis-policy-host).
        policy_server = PolicyServer(
            choose_policy(config, settings, on_write_failure),
            host=s.policy_host,
            scoped_keys=True,
        )
        policy_server.start()
        started.callback(policy_server.stop)
        redactor.add_family("POLICY_API_KEY", policy_server.api_key)
        prices = None
        if s.price_in is not None and s.price_out is not None:
            from osmosis_rollout.policy import TokenPrices

            prices = TokenPrices(s.price_in, s.price_out)
        if s.servers or s.serve:
            urls = list(s.servers)
            if urls:
                show_startup_step(config, "checking the rollout servers…")
            check_servers(urls)
            served: ServedServer | None = None
            if s.serve:
                assert entrypoint is not None  # startup discovers it for --osmosis-serve
                show_startup_step(
                    config, f"starting a rollout server for {_shown(config, entrypoint)}…"
                )
                served = start_server_subprocess(
                    entrypoint,
                    cwd=Path(config.invocation_params.dir),
                    output=output,
                    artifact_root=rollouts,
                )
                started.callback(served.stop)
                urls.append(served.url)
            scheduler = RolloutScheduler(s.concurrency or DEFAULT_CONCURRENCY)
            started.callback(scheduler.close)
            clients = make_clients(scheduler, urls)
            started.callback(close_clients, scheduler, clients)
            runner = ServerRunner(
                clients=clients,
                served=served,
                policy_server=policy_server,
                rollouts=rollouts,
                agent_timeout=s.agent_timeout,
                grader_timeout=s.grader_timeout,
                prices=prices,
            )
        else:
            show_startup_step(config, f"importing {_shown(config, entrypoint)}…")
            backend, entrypoint = load_backend(config, s, entrypoint, rollouts, started)
            scheduler = RolloutScheduler(_concurrency(settings, backend, rollouts))
            started.callback(scheduler.close)
            runner = InProcessRunner(
                backend=backend,
                on_write_failure=on_write_failure,
                policy_server=policy_server,
                rollouts=rollouts,
                agent_timeout=s.agent_timeout,
                grader_timeout=s.grader_timeout,
                prices=prices,
            )
        _before_the_clock(rollouts, in_process=not (s.servers or s.serve or s.ray))
    except BaseException:
        with contextlib.suppress(Exception):
            started.close()
        raise
    # Undone last, in this order, after the scheduler and the servers stopped.
    closers = contextlib.ExitStack()
    # What each rollout logs is kept on its own row too (the grader's reason).
    closers.enter_context(taking_notes())
    # With -s, the user asked to see what runs print: rollouts' prints join the terminal.
    echo = config.getoption("capture", None) == "no"
    log = closers.enter_context(rollouts_log(output / ROLLOUTS_LOG, redactor, echo=echo))
    closers.push(started)
    return Engine(scheduler, runner, entrypoint, log, closers)
