"""The rollout engine: what runs a session's rows, and how it starts and stops.

:func:`start_engine` loads the rollout (in-process: the entrypoint's backend; server mode:
the given or started rollout servers), starts the policy endpoint and the scheduler, and
returns an :class:`Engine` that knows how to stop all of it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from osmosis_rollout.redaction import Redactor, redact_handler
from osmosis_rollout.rollout_notes import taking_notes
from pytest_osmosis.display.live import show_startup_step
from pytest_osmosis.options import DEFAULT_CONCURRENCY, OsmosisSettings
from pytest_osmosis.run.attempts import AttemptRunner, InProcessRunner, RunPaths, ServerRunner
from pytest_osmosis.run.policy_choice import choose_policy
from pytest_osmosis.run.rollout_log import RolloutsLogHandler
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
    closers: list[Callable[[], None]] = field(default_factory=list)
    """Run after the scheduler stopped, in order."""
    loop_closers: list[Callable[[], None]] = field(default_factory=list)
    """Run while the scheduler's loop still runs (e.g. closing HTTP clients made on it)."""
    log: RolloutsLogHandler | None = None
    """The handler writing ``rollouts.log`` (its :attr:`~RolloutsLogHandler.failure` says
    why the log stopped, if it did)."""

    def stop(self) -> None:
        """Cancel what still runs, then stop every server and thread (best effort, bounded)."""
        self.scheduler.cancel_pending()
        for closer in [*self.loop_closers, self.scheduler.close, *self.closers]:
            try:
                closer()
            except Exception:
                pass


def load_backend(config: pytest.Config, entrypoint: str | None) -> tuple[ExecutionBackend, str]:
    """The entrypoint's backend (module-level, from its app, or built from its classes).

    Without an ``entrypoint`` (marker-driven rows, no ``--osmosis-dataset``) the workspace's
    rollout is found now. Returns the backend and the entrypoint used.
    """
    from osmosis_rollout.errors import EntrypointError
    from osmosis_rollout.workspace.entrypoint import load_entrypoint

    if entrypoint is None:
        from pytest_osmosis.run.workspace import discover_entrypoint, find_workspace

        workspace = find_workspace([Path(config.invocation_params.dir), Path(config.rootpath)])
        entrypoint = discover_entrypoint(workspace)
    try:
        loaded = load_entrypoint(entrypoint, base_dir=Path(config.invocation_params.dir))
    except EntrypointError as exc:
        raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
    if loaded.backend is None:
        raise pytest.UsageError(f"pytest-osmosis: {entrypoint} exposes no rollout backend")
    backend: ExecutionBackend = loaded.backend
    return backend, entrypoint


def ray_backend(
    config: pytest.Config,
    settings: OsmosisSettings,
    entrypoint: str | None,
    paths: RunPaths,
    closers: list[Callable[[], None]],
) -> tuple[ExecutionBackend, str]:
    """``--osmosis-ray``: the entrypoint on a pool of Ray actors, started and registered to close.

    Each actor may take the run's whole concurrency: the scheduler bounds the total and the
    pool spreads it over the actors. Actors write artifacts under the run's output.
    """
    from osmosis_rollout.backend.ray import RayBackend
    from osmosis_rollout.errors import UsageError

    if entrypoint is None:
        from pytest_osmosis.run.workspace import discover_entrypoint, find_workspace

        workspace = find_workspace([Path(config.invocation_params.dir), Path(config.rootpath)])
        entrypoint = discover_entrypoint(workspace)
    try:
        backend = RayBackend(
            entrypoint,
            address=None if settings.ray == "local" else settings.ray,
            max_concurrent=settings.concurrency or DEFAULT_CONCURRENCY,
            artifact_root=paths.rollouts,
            base_dir=Path(config.invocation_params.dir),
            log_to_driver=False,
        )
        backend.start()
    except UsageError as exc:
        raise pytest.UsageError(f"pytest-osmosis: --osmosis-ray {settings.ray}: {exc}") from None
    closers.append(backend.close)
    return backend, entrypoint


def _concurrency(settings: OsmosisSettings, backend: ExecutionBackend | None) -> int:
    from osmosis_rollout._internal.limiter import ConcurrencyLimiter
    from osmosis_rollout.backend.local import LocalBackend

    if settings.concurrency is not None:
        if isinstance(backend, LocalBackend):
            # The flag bounds the run, so the backend's own limiter must not bound it lower.
            backend.limiter = ConcurrencyLimiter(max_concurrent=settings.concurrency)
        return settings.concurrency
    if isinstance(backend, LocalBackend) and backend.workflow_config is not None:
        configured = backend.workflow_config.concurrency.max_concurrent
        if configured is not None:
            return configured
    if isinstance(backend, LocalBackend):
        backend.limiter = ConcurrencyLimiter(max_concurrent=None)
    return DEFAULT_CONCURRENCY


def _route_rollout_logs(
    path: Path, redactor: Redactor
) -> tuple[Callable[[], None], RolloutsLogHandler]:
    """Send osmosis_rollout's logs to ``<output>/rollouts.log`` while rows run, redacted.

    Rollouts run concurrently on another thread, so their log records would otherwise land in
    whichever item pytest is reporting at that moment. Returns the function that undoes it,
    and the handler (which says whether the log could be written).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RolloutsLogHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    redact_handler(handler, redactor)
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

    return restore, handler


def _before_the_clock(paths: RunPaths, *, in_process: bool) -> None:
    """Do once, before the first rollout starts, what the first rollouts would each wait on.

    Without this the first rows' times include once-per-run work on the rollouts' loop: the
    CA bundle and httpx's lazily imported transport, the trajectory writer's modules
    (pydantic models, imported on the first save), and the run's artifacts root (made by
    the first rollout's ``mkdir -p``). Nothing a row does is skipped or changed.
    """
    from osmosis_rollout._internal.gc_freeze import freeze_startup_heap
    from osmosis_rollout.chat_client import warm_up

    warm_up()  # the CA bundle and httpx's transport, before the clock, not in a rollout
    if in_process:
        import osmosis_rollout.trajectory  # noqa: F401 - imported by the first row's save

        paths.rollouts.mkdir(parents=True, exist_ok=True)
    freeze_startup_heap()  # user code and frameworks are imported: keep them out of GC


def _shown(config: pytest.Config, entrypoint: str | None) -> str:
    """The entrypoint as the user would name it: relative to where pytest was started."""
    if entrypoint is None:
        return "the workspace's rollout"
    path, sep, attr = entrypoint.partition(":")
    try:
        path = str(Path(path).resolve().relative_to(Path(config.invocation_params.dir).resolve()))
    except ValueError:
        pass
    return path + sep + attr


def start_engine(
    config: pytest.Config,
    settings: OsmosisSettings,
    *,
    output: Path,
    entrypoint: str | None,
    redactor: Redactor | None = None,
    on_write_failure: WriteFailureCallback | None = None,
) -> Engine:
    """Import, start and wire everything the rows need; what was started is stopped on error.

    Nothing is written under ``output`` before the rollout and the policy loaded: a usage
    error (a bad policy path, a syntax error in the entrypoint) leaves no run directory.
    The policy endpoint's key joins ``redactor``'s secrets. A cassette or trajectory that
    cannot be written goes to ``on_write_failure``.
    """
    from osmosis_rollout.controller import PolicyServer

    s = settings
    redactor = redactor if redactor is not None else Redactor.from_environment()
    closers: list[Callable[[], None]] = []
    loop_closers: list[Callable[[], None]] = []
    scheduler: RolloutScheduler | None = None
    paths = RunPaths(output)
    runner: AttemptRunner
    try:
        in_process = not (s.servers or s.serve or s.ray)
        show_startup_step(config, "starting the policy endpoint…")
        # Each rollout gets its own key, which opens only its own URL (the policy endpoint
        # may be reachable beyond this process: --osmosis-policy-host).
        policy_server = PolicyServer(
            choose_policy(config, settings, on_write_failure),
            host=s.policy_host,
            scoped_keys=True,
        )
        policy_server.start()
        closers.append(policy_server.stop)
        redactor.add_family("POLICY_API_KEY", policy_server.api_key)
        if s.servers or s.serve:
            urls = list(s.servers)
            if urls:
                show_startup_step(config, "checking the rollout servers…")
            check_servers(urls)
            artifact_root: Path | None = None
            served: ServedServer | None = None
            if s.serve:
                assert entrypoint is not None, (
                    "startup discovers the entrypoint for --osmosis-serve"
                )
                artifact_root = paths.rollouts
                show_startup_step(
                    config, f"starting a rollout server for {_shown(config, entrypoint)}…"
                )
                served = start_server_subprocess(
                    entrypoint,
                    cwd=Path(config.invocation_params.dir),
                    output=output,
                    artifact_root=artifact_root,
                )
                closers.append(served.stop)
                urls.append(served.url)
            scheduler = RolloutScheduler(s.concurrency or DEFAULT_CONCURRENCY)
            clients = make_clients(scheduler, urls)
            loop_closers.append(functools.partial(close_clients, scheduler, clients))
            runner = ServerRunner(
                clients,
                policy_server,
                paths,
                agent_timeout=s.agent_timeout,
                grader_timeout=s.grader_timeout,
                server_artifact_root=artifact_root,
                served=served,
            )
        else:
            show_startup_step(config, f"importing {_shown(config, entrypoint)}…")
            if s.ray:
                backend, entrypoint = ray_backend(config, s, entrypoint, paths, closers)
            else:
                backend, entrypoint = load_backend(config, entrypoint)
            from osmosis_rollout.backend.local import LocalBackend

            if isinstance(backend, LocalBackend):
                backend.artifact_root = paths.rollouts
            scheduler = RolloutScheduler(_concurrency(settings, backend))
            runner = InProcessRunner(
                backend,
                policy_server,
                paths,
                agent_timeout=s.agent_timeout,
                grader_timeout=s.grader_timeout,
                on_write_failure=on_write_failure,
            )
        _before_the_clock(paths, in_process=in_process)
    except BaseException:
        stops = [*loop_closers, *([scheduler.close] if scheduler else []), *reversed(closers)]
        for closer in stops:
            try:
                closer()
            except Exception:
                pass
        raise
    if s.price_in is not None and s.price_out is not None:
        from osmosis_rollout.policy import TokenPrices

        runner.prices = TokenPrices(s.price_in, s.price_out)
    # First in, so it is undone last, after the scheduler and the servers stopped.
    restore, log = _route_rollout_logs(output / "rollouts.log", redactor)
    closers.insert(0, restore)
    if config.getoption("capture", None) == "no":
        # -s: the user asked to see what runs print; rollouts' prints join the terminal.
        from pytest_osmosis.run.rollout_log import echo_to_terminal

        closers.insert(0, echo_to_terminal(redactor))
    # What each rollout logs is kept on its own row too (the grader's reason).
    notes = contextlib.ExitStack()
    notes.enter_context(taking_notes())
    closers.insert(0, notes.close)
    return Engine(
        scheduler=scheduler,
        runner=runner,
        entrypoint=entrypoint,
        closers=list(reversed(closers)),
        loop_closers=loop_closers,
        log=log,
    )
