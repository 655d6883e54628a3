"""Run rollouts on a Ray cluster: a pool of actors, each a LocalBackend around the user's rollout.

:class:`RayBackend` is an :class:`~osmosis_rollout.backend.base.ExecutionBackend`: the server
and the plugin drive it as they drive :class:`LocalBackend`; only where the workflow and
grader run changes.

- **Connect.** ``address=None`` starts a private local cluster; ``"auto"`` joins the one
  ``ray start`` runs here (or ``$RAY_ADDRESS``); ``"HOST:PORT"`` or ``"ray://HOST:PORT"`` joins
  that one. The rollout's directory travels as Ray's ``runtime_env`` ``working_dir``.
- **Dispatch.** Each ``execute`` goes to the least-loaded live actor, each taking at most
  ``max_concurrent`` rollouts; when all are full, callers wait here, and that wait counts
  against the agent deadline as a LocalBackend queue's would (a timeout's message names the
  original limit and the time queued).
- **Inside the actor** the entrypoint's own backend runs the rollout under a
  :class:`RolloutContext` carrying the caller's chat URL, key and rollout id, so outcomes are
  LocalBackend's; status changes (``grading``) stream back to the caller's context.
- **Cancellation** of the caller's task cancels the rollout in its actor; a workflow that
  swallows it still delivers its real result, as in-process.
- **Lost actors.** A rollout whose actor dies ends as a ``failure`` with category
  ``internal_error`` and a message starting ``worker_lost:`` (the wire's categories are
  closed, so the cause is in the message and in ``extra_fields["cause"]``). With
  ``retry_lost=True`` it runs once more on another actor; one that never started is always
  redispatched. Either way: one outcome per ``execute``, and the pool replaces the actor.
  "Never started" is as the caller saw it: the actor's ``started`` reaches the caller
  asynchronously, so a rollout that had just started when its actor died can run again.
  ``rollouts_redispatched`` in the health counts every redispatch, of either kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.backend.local import deadline_message
from osmosis_rollout.context import RolloutContext, RolloutProgress, get_rollout_context
from osmosis_rollout.errors import EntrypointError, RayClusterError
from osmosis_rollout.types import (
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    RolloutErrorCategory,
    RolloutStatus,
)

logger = logging.getLogger(__name__)

WORKER_LOST = "worker_lost"
"""The cause named (message prefix and ``extra_fields["cause"]``) when a rollout's actor died."""

NAMESPACE = "osmosis-rollout"
DEFAULT_START_TIMEOUT_SEC = 120.0
"""Actors wait for the working dir to unpack (and any ``runtime_env`` pip install) first."""
CANCEL_GRACE_SEC = 10.0
"""How long a cancelled rollout's actor has to end it before the caller stops waiting."""
CONNECT_CHECK_TIMEOUT_SEC = 5.0
"""Ray retries an unreachable address for minutes; a plain TCP connect says so at once."""
UNBOUNDED_ACTOR_CALLS = 1000
"""Ray's own cap on concurrent calls into one actor when ``max_concurrent`` is unbounded."""
CONTROL_CALLS = 16
"""Extra actor call slots for ``describe``/``cancel`` beside the rollouts themselves."""
REPLACE_ATTEMPTS = 3
REDISPATCH_LIMIT = 3
"""Dispatches of one rollout that found its actor already dead before it started."""

_QUEUED_SUFFIX = re.compile(r" \((\d+(?:\.\d+)?)s of it spent queued\)")


@dataclass(frozen=True)
class ActorSpec:
    """How each rollout actor finds and configures the user's rollout (pickled to the cluster).

    ``entrypoint`` is relative to the shipped working dir. When this backend did not make
    the connection (so the working dir, if any, is someone else's), ``fallback`` (absolute)
    is imported instead.
    """

    entrypoint: str
    fallback: str
    shipped: bool
    max_concurrent: int | None
    override_concurrency: bool
    artifact_root: str | None
    secrets: tuple[tuple[str, str], ...] = ()
    """Secrets handed to the server beyond the environment's (name, value): the actor
    redacts them from what it prints and logs, as the server does."""


class RolloutActor:
    """One process of the pool: the entrypoint's backend, running rollouts as they arrive.

    Wrapped with ``ray.remote`` at pool start (so importing this module never needs Ray).
    """

    def __init__(self, spec: ActorSpec) -> None:
        from osmosis_rollout._internal.limiter import ConcurrencyLimiter
        from osmosis_rollout.backend.local import LocalBackend
        from osmosis_rollout.redaction import LiveRedactor, redact_all_handlers, redact_std_streams
        from osmosis_rollout.workspace.entrypoint import load_entrypoint

        # Before the entrypoint runs: what this process prints or logs from here on (its
        # worker log files, the lines Ray forwards to the driver) is redacted as the
        # server's own output is, each rollout's key included while it runs.
        self.redactor = LiveRedactor.from_environment(extra=dict(spec.secrets))
        redact_std_streams(self.redactor)
        redact_all_handlers(self.redactor)

        entrypoint = spec.entrypoint if spec.shipped else spec.fallback
        loaded = load_entrypoint(entrypoint, base_dir=Path.cwd())
        if loaded.backend is None:
            raise EntrypointError(
                f"{loaded.describe()}: its app exposes no backend to run in a Ray actor; "
                "define the workflow and grader classes (or a backend) at module level"
            )
        backend = loaded.backend
        if isinstance(backend, LocalBackend):
            if spec.override_concurrency:
                backend.limiter = ConcurrencyLimiter(max_concurrent=spec.max_concurrent)
            if spec.artifact_root is not None:
                backend.artifact_root = Path(spec.artifact_root)
        self.backend: ExecutionBackend = backend
        self.description = loaded.describe()
        self.tasks: dict[str, asyncio.Task[ExecutionOutcome]] = {}
        self.cancelled_early: dict[str, float] = {}

    def describe(self) -> dict[str, Any]:
        """``{pid, node, max_concurrent, rollout}``: who this actor is, for health and tests."""
        from osmosis_rollout.backend.local import LocalBackend

        ray = require_extra("ray", extra="ray")
        limit = (
            self.backend.limiter.max_concurrent if isinstance(self.backend, LocalBackend) else None
        )
        return {
            "pid": os.getpid(),
            "node": ray.util.get_node_ip_address(),
            "max_concurrent": limit,
            "rollout": self.description,
        }

    async def execute(
        self, request: ExecutionRequest, context: dict[str, Any]
    ) -> AsyncIterator[tuple[str, Any]]:
        """Stream ``started``, then ``status`` changes, then ``outcome`` (or ``cancelled``)."""
        if self.cancelled_early.pop(request.id, None) is not None:
            yield ("cancelled", None)
            return
        events: asyncio.Queue[RolloutStatus | None] = asyncio.Queue()
        progress = RolloutProgress(status=RolloutStatus.RUNNING, on_status=events.put_nowait)
        rollout_ctx = RolloutContext(progress=progress, **context)

        async def run() -> ExecutionOutcome:
            key = rollout_ctx.api_key
            self.redactor.hold("POLICY_API_KEY", key)
            try:
                with rollout_ctx:
                    return await self.backend.execute(request)
            finally:
                self.redactor.release(key)

        task = asyncio.create_task(run())
        self.tasks[request.id] = task
        task.add_done_callback(lambda _: events.put_nowait(None))
        try:
            yield ("started", None)
            while (status := await events.get()) is not None:
                yield ("status", status.value)
        finally:
            self.tasks.pop(request.id, None)
        if task.cancelled():
            yield ("cancelled", None)
            return
        yield ("outcome", task.result())

    def cancel(self, rollout_id: str, *, before_start: bool = False) -> bool:
        """Cancel a rollout's task.

        ``before_start``: the caller has not seen this rollout start, so the cancel may have
        overtaken its execute call (both queue in this actor); that call then ends at once.
        The mark expires after ``CANCEL_GRACE_SEC`` so a later rollout reusing the id runs.
        """
        now = time.monotonic()
        for stale in [k for k, at in self.cancelled_early.items() if now - at > CANCEL_GRACE_SEC]:
            del self.cancelled_early[stale]
        task = self.tasks.get(rollout_id)
        if task is None:
            if before_start:
                self.cancelled_early[rollout_id] = now
            return False
        task.cancel()
        return True


@dataclass(kw_only=True)
class _Actor:
    """The caller's view of one actor in the pool."""

    index: int
    handle: Any
    pid: int | None = None
    node: str | None = None
    max_concurrent: int | None = None
    in_flight: int = 0
    dispatched: int = 0
    alive: bool = True

    def summary(self) -> dict[str, Any]:
        """This actor as ``/health`` lists it."""
        keys = ("index", "pid", "node", "in_flight", "max_concurrent", "alive")
        return {key: getattr(self, key) for key in keys}


class _ActorLost(Exception):
    """The actor running (or about to run) a rollout died."""

    def __init__(self, actor: _Actor, started: bool, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.actor = actor
        self.started = started
        self.cause = cause


class _NoActors(Exception):
    """Every actor is dead and none could be replaced."""


def _plan_shipping(
    entrypoint: str, base_dir: Path, working_dir: Path | None
) -> tuple[Path, str, str]:
    """``(working_dir, spec inside it, absolute spec)`` for an entrypoint spec."""
    from osmosis_rollout.workspace.entrypoint import split_reference
    from osmosis_rollout.workspace.user_code import looks_like_file

    if not entrypoint or not entrypoint.strip():
        raise EntrypointError("empty entrypoint; pass path/to/main.py or package.module")
    target, attr = split_reference(entrypoint)
    suffix = f":{attr}" if attr else ""
    if not looks_like_file(target, base_dir):
        return (working_dir or base_dir).resolve(), entrypoint, entrypoint
    path = (base_dir / target).resolve()  # an absolute target stays as it is
    if not path.is_file():
        raise EntrypointError(f"entrypoint file not found: {path}")
    shipped = (working_dir or path.parent).resolve()
    try:
        relative = path.relative_to(shipped).as_posix()
    except ValueError:
        raise EntrypointError(
            f"entrypoint {path} is not inside working_dir {shipped}; pass a working_dir "
            "that contains it (it is what Ray ships to the cluster)"
        ) from None
    return shipped, relative + suffix, str(path) + suffix


def _resolve_auto() -> str | None:
    """Where ``address="auto"`` leads: ``$RAY_ADDRESS``, else the last ``ray start`` here."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    marker = Path(os.environ.get("RAY_TMPDIR") or "/tmp") / "ray" / "ray_current_cluster"
    try:
        return marker.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _check_reachable(address: str) -> None:
    """Fail fast, naming the address, when nothing listens at ``HOST:PORT``.

    Ray itself retries an unreachable address for minutes, and ``"auto"`` follows a marker
    file that ``ray start`` leaves behind even after that cluster stopped.
    """
    if address == "auto":
        resolved = _resolve_auto()
        if resolved is None:
            raise RayClusterError(
                "no Ray cluster for address 'auto': RAY_ADDRESS is unset and no `ray start` "
                "cluster runs on this machine; start one with `ray start --head`, or pass "
                "the head node's HOST:PORT"
            )
        try:
            _check_reachable(resolved)
        except RayClusterError as exc:
            raise RayClusterError(f"address 'auto' resolved to {resolved!r}, but {exc}") from None
        return
    bare = address.removeprefix("ray://")
    host, sep, port = bare.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_CHECK_TIMEOUT_SEC).close()
    except OSError as exc:
        raise RayClusterError(
            f"no Ray cluster at {address!r} ({exc}); start one with `ray start --head` "
            "(it prints the address to use) or pass the head node's HOST:PORT"
        ) from None


def _last_line(exc: BaseException) -> str:
    """The gist of a Ray error: its last line, without Ray's generic troubleshooting advice."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    line = lines[-1] if lines else type(exc).__name__
    return line.split(" Some common causes include")[0]


def _restore_deadline_message(
    outcome: ExecutionOutcome, limit: float | None, shipped: float | None, queued: float
) -> ExecutionOutcome:
    """Name the caller's limit and queue time in a workflow timeout, as LocalBackend would.

    The actor was given what was left of the budget after queueing here, so its message
    names that remainder; the caller configured ``limit``.
    """
    workflow = outcome.workflow
    message = workflow.err_message or ""
    prefix = f"workflow exceeded its {shipped}s deadline"
    if (
        shipped == limit  # also when there is no limit
        or workflow.err_category is not RolloutErrorCategory.TIMEOUT
        or (workflow.extra_fields or {}).get("phase") != "workflow"
        or not message.startswith(prefix)  # the user's own TimeoutError keeps its message
    ):
        return outcome
    rest = message[len(prefix) :]
    match = _QUEUED_SUFFIX.fullmatch(rest)
    if rest and match is None:
        return outcome
    queued_in_actor = float(match.group(1)) if match else 0.0
    message = deadline_message("workflow", limit, queued + queued_in_actor)
    return outcome.model_copy(
        update={"workflow": workflow.model_copy(update={"err_message": message})}
    )


class _Slots:
    """The pool's actors and the rollouts waiting for one of them: dispatch to the least
    loaded live actor, and the replacement of a dead one."""

    def __init__(self, backend: RayBackend) -> None:
        self.backend = backend
        self.actors: list[_Actor] = []
        self.waiting = 0
        self.replacing: set[asyncio.Task[None]] = set()
        self._cond: asyncio.Condition | None = None
        self._cond_loop: asyncio.AbstractEventLoop | None = None

    def condition(self) -> asyncio.Condition:
        """The slot condition, rebuilt when an idle pool is first used on a new loop."""
        loop = asyncio.get_running_loop()
        if self._cond is None or (
            self._cond_loop is not loop and self.waiting == 0 and self.in_flight() == 0
        ):
            self._cond = asyncio.Condition()
            self._cond_loop = loop
        return self._cond

    def in_flight(self) -> int:
        return sum(actor.in_flight for actor in self.actors)

    async def acquire(self) -> _Actor:
        cond = self.condition()
        async with cond:
            self.waiting += 1
            try:
                while True:
                    free = [
                        a
                        for a in self.actors
                        if a.alive and (a.max_concurrent is None or a.in_flight < a.max_concurrent)
                    ]
                    if free:
                        actor = min(free, key=lambda a: (a.in_flight, a.dispatched))
                        actor.in_flight += 1
                        actor.dispatched += 1
                        return actor
                    if not any(a.alive for a in self.actors) and not self.replacing:
                        raise _NoActors()
                    await cond.wait()
            finally:
                self.waiting -= 1

    async def release(self, actor: _Actor) -> None:
        cond = self.condition()
        async with cond:
            actor.in_flight -= 1
            cond.notify()

    def mark_lost(self, actor: _Actor, exc: BaseException) -> None:
        """Take a dead actor out of dispatch and start its replacement (once per actor)."""
        if not actor.alive:
            return
        actor.alive = False
        logger.warning(
            "ray backend: actor %d (pid %s on %s) died: %s",
            actor.index,
            actor.pid,
            actor.node,
            _last_line(exc),
        )
        with contextlib.suppress(Exception):
            self.backend._ray().kill(actor.handle)
        task = asyncio.get_running_loop().create_task(self._replace(actor))
        self.replacing.add(task)
        task.add_done_callback(self.replacing.discard)

    async def _replace(self, dead: _Actor) -> None:
        delay = 0.5
        try:
            for attempt in range(1, REPLACE_ATTEMPTS + 1):
                handle = self.backend._new_handle()
                try:
                    info = await asyncio.wait_for(
                        handle.describe.remote(), timeout=self.backend.start_timeout_sec
                    )
                except Exception as exc:
                    logger.warning(
                        "ray backend: replacement %d for actor %d failed: %s",
                        attempt,
                        dead.index,
                        _last_line(exc),
                    )
                    self.backend._ray().kill(handle)
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                fresh = self.backend._adopt(handle, info)
                self.actors = [a for a in self.actors if a is not dead] + [fresh]
                self.backend.actors_replaced += 1
                logger.info(
                    "ray backend: actor %d (pid %s) replaces actor %d",
                    fresh.index,
                    fresh.pid,
                    dead.index,
                )
                return
            logger.error("ray backend: gave up replacing actor %d", dead.index)
        finally:
            # Wake waiters whatever happened: a new slot, or no actor left to wait for.
            cond = self.condition()
            async with cond:
                self.replacing.discard(asyncio.current_task())  # type: ignore[arg-type]
                cond.notify_all()


class RayBackend(ExecutionBackend):
    """Execute rollouts on a pool of Ray actors (see the module docstring).

    ``entrypoint`` is what ``osmosis-rollout serve`` takes (``path/to/main.py[:ATTR]`` or
    ``package.module[:ATTR]``, relative to ``base_dir``, default the current directory).
    ``actors`` defaults to the cluster's CPUs divided by ``num_cpus`` (each actor's CPU
    reservation). ``max_concurrent`` caps rollouts per actor (default: the entrypoint's
    workflow config, else 4). ``working_dir`` is shipped to the cluster (default: the
    entrypoint file's directory, or ``base_dir`` for a module). ``runtime_env`` adds to Ray's
    job runtime env (``pip``, ``env_vars``...). ``local_num_cpus`` sizes the private cluster
    started when ``address`` is ``None``. ``artifact_root`` is where actors write artifacts
    (on their own node). ``max_queue_depth`` bounds the rollouts waiting for an actor slot, so
    ``has_capacity()`` turns false (a server answers 429). Each actor redacts what it prints
    and logs: the environment's secrets, each rollout's key while it runs, and ``secrets``
    (name -> value; ``serve`` passes its ``--api-key``), shipped to the actors for that.

    :meth:`start` connects and waits for the actors; ``execute`` calls it if needed (blocking
    the event loop while the pool starts), so call it first in long-lived processes.
    """

    def __init__(
        self,
        entrypoint: str,
        *,
        address: str | None = None,
        actors: int | None = None,
        max_concurrent: int | None = None,
        num_cpus: float = 1.0,
        working_dir: str | Path | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        retry_lost: bool = False,
        max_queue_depth: int | None = None,
        artifact_root: str | Path | None = None,
        base_dir: str | Path | None = None,
        local_num_cpus: int | None = None,
        log_to_driver: bool = True,
        start_timeout_sec: float = DEFAULT_START_TIMEOUT_SEC,
        secrets: Mapping[str, str | None] | None = None,
    ) -> None:
        if actors is not None and actors < 1:
            raise ValueError(f"actors must be >= 1, got {actors}")
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1 or None, got {max_concurrent}")
        if num_cpus < 0:
            raise ValueError(f"num_cpus must be >= 0, got {num_cpus}")
        if max_queue_depth is not None and max_queue_depth < 0:
            raise ValueError(f"max_queue_depth must be >= 0 or None, got {max_queue_depth}")
        if start_timeout_sec <= 0:
            raise ValueError(f"start_timeout_sec must be > 0, got {start_timeout_sec}")
        self.entrypoint = entrypoint
        self.address = address
        self.actors = actors
        self.max_concurrent = max_concurrent
        self.num_cpus = num_cpus
        self.runtime_env = dict(runtime_env or {})
        self.retry_lost = retry_lost
        self.max_queue_depth = max_queue_depth
        self.local_num_cpus = local_num_cpus
        self.log_to_driver = log_to_driver
        self.start_timeout_sec = start_timeout_sec
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        shipped, relative, fallback = _plan_shipping(
            entrypoint, base, Path(working_dir) if working_dir is not None else None
        )
        self.working_dir = shipped
        self._spec = ActorSpec(
            entrypoint=relative,
            fallback=fallback,
            shipped=False,
            max_concurrent=max_concurrent,
            override_concurrency=max_concurrent is not None,
            artifact_root=str(artifact_root) if artifact_root is not None else None,
            secrets=tuple((name, value) for name, value in (secrets or {}).items() if value),
        )
        self._ray_module: ModuleType | None = None
        self._owns_connection = False
        self._slots = _Slots(self)
        self._started = False
        self._next_index = 0
        self.actors_replaced = 0
        self.rollouts_lost = 0
        self.rollouts_retried = 0
        self.rollouts_redispatched = 0

    # -- connection and pool ---------------------------------------------------------------

    def _ray(self) -> ModuleType:
        if self._ray_module is None:
            self._ray_module = require_extra("ray", extra="ray")
        return self._ray_module

    def _connect(self) -> None:
        ray = self._ray()
        if ray.is_initialized():
            # Someone in this process connected first (a trainer, a test): share it. Actors
            # then import the entrypoint by absolute path, which needs a shared filesystem.
            return
        runtime_env = {"working_dir": str(self.working_dir), **self.runtime_env}
        options: dict[str, Any] = {
            "namespace": NAMESPACE,
            "runtime_env": runtime_env,
            "log_to_driver": self.log_to_driver,
            "logging_level": logging.WARNING,
        }
        if self.address is None:
            options.update(address="local", include_dashboard=False, num_cpus=self.local_num_cpus)
        else:
            _check_reachable(self.address)
            options["address"] = self.address
        try:
            ray.init(**options)
        except ConnectionError as exc:
            raise RayClusterError(
                f"no Ray cluster at {self.address!r}: {_last_line(exc)}; start one with "
                "`ray start --head` or pass the head node's HOST:PORT"
            ) from None
        except getattr(ray.exceptions, "AuthenticationError", ()) as exc:
            raise RayClusterError(
                f"the Ray cluster at {self.address!r} refused this process: {_last_line(exc)} "
                "(a `ray start` cluster with token auth needs RAY_AUTH_MODE=token and its "
                "token here, in ~/.ray/auth_token or RAY_AUTH_TOKEN)"
            ) from None
        self._owns_connection = True

    def _new_handle(self) -> Any:
        ray = self._ray()
        per_actor = self.max_concurrent or UNBOUNDED_ACTOR_CALLS
        return (
            ray.remote(RolloutActor)
            .options(
                num_cpus=self.num_cpus, max_restarts=0, max_concurrency=per_actor + CONTROL_CALLS
            )
            .remote(self._spec)
        )

    def _adopt(self, handle: Any, info: Mapping[str, Any]) -> _Actor:
        limit = self.max_concurrent or info.get("max_concurrent")
        actor = _Actor(
            index=self._next_index,
            handle=handle,
            pid=info.get("pid"),
            node=info.get("node"),
            max_concurrent=limit,
        )
        self._next_index += 1
        return actor

    def _actor_count(self) -> int:
        if self.actors is not None:
            return self.actors
        cpus = float(self._ray().cluster_resources().get("CPU", 1.0))
        per_actor = self.num_cpus if self.num_cpus > 0 else 1.0
        return max(1, int(cpus // per_actor))

    def start(self) -> RayBackend:
        """Connect (or start a local cluster) and wait until every actor loaded the rollout.

        Raises :class:`RayClusterError` when no cluster answers or the actors cannot be
        placed in time, :class:`EntrypointError` when an actor cannot load the rollout, and
        :class:`MissingExtraError` (with the install command) without Ray.
        """
        if self._started:
            return self
        self._connect()
        self._spec = dataclasses.replace(self._spec, shipped=self._owns_connection)
        ray = self._ray()
        handles: list[Any] = []
        try:
            handles = [self._new_handle() for _ in range(self._actor_count())]
            try:
                infos = ray.get(
                    [h.describe.remote() for h in handles], timeout=self.start_timeout_sec
                )
            except ray.exceptions.GetTimeoutError:
                raise RayClusterError(
                    f"{len(handles)} rollout actors (num_cpus={self.num_cpus} each) did not "
                    f"start within {self.start_timeout_sec:g}s on the Ray cluster at "
                    f"{self.address or 'local'}; available: {ray.available_resources()}. "
                    "Use fewer actors or a smaller num_cpus, or add nodes"
                ) from None
            except ray.exceptions.RayActorError as exc:
                raise EntrypointError(
                    f"a Ray rollout actor could not load {self.entrypoint} (shipped from "
                    f"{self.working_dir}): {_actor_failure(exc)}"
                ) from None
        except BaseException:
            for handle in handles:
                ray.kill(handle)
            self._disconnect()
            raise
        self._slots.actors = [self._adopt(h, info) for h, info in zip(handles, infos, strict=True)]
        self._started = True
        logger.info(
            "ray backend: %d actors ready for %s (%s)",
            len(self._slots.actors),
            self.entrypoint,
            self.address or "local cluster",
        )
        return self

    def _disconnect(self) -> None:
        if self._owns_connection:
            self._ray().shutdown()
            self._owns_connection = False

    def close(self) -> None:
        """Kill the actors and, when this backend connected, disconnect from the cluster."""
        for task in list(self._slots.replacing):
            task.cancel()
        if self._ray_module is not None:
            for actor in self._slots.actors:
                try:
                    self._ray_module.kill(actor.handle)
                except Exception:
                    logger.debug("ray backend: killing actor %d failed", actor.index)
        self._slots.actors = []
        self._started = False
        self._disconnect()

    async def shutdown(self) -> None:
        """Release the actors after the server drained (see :meth:`close`)."""
        self.close()

    # -- ExecutionBackend ------------------------------------------------------------------

    def has_capacity(self) -> bool:
        """True unless ``max_queue_depth`` is set and that many rollouts already wait for a slot."""
        return self.max_queue_depth is None or self._slots.waiting < self.max_queue_depth

    def health(self) -> dict[str, Any]:
        """LocalBackend's ``concurrency`` block summed over the pool, plus the pool itself."""
        alive = [a for a in self._slots.actors if a.alive]
        limits = [a.max_concurrent for a in alive]
        total = None if any(m is None for m in limits) else sum(m or 0 for m in limits)
        health: dict[str, Any] = {
            "status": "ok" if alive or not self._started else "degraded",
            "concurrency": {
                "max_concurrent": total,
                "queued": self._slots.waiting,
                "running": self._slots.in_flight(),
            },
            "ray": {
                "address": self.address or "local",
                "actors": [a.summary() for a in self._slots.actors],
                "actors_replaced": self.actors_replaced,
                "rollouts_lost": self.rollouts_lost,
                "rollouts_retried": self.rollouts_retried,
                "rollouts_redispatched": self.rollouts_redispatched,
            },
        }
        if self.max_queue_depth is not None:
            health["max_queue_depth"] = self.max_queue_depth
        return health

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        """Run ``request`` on the least-loaded actor; one outcome, whatever happens to it."""
        if not self._started:
            self.start()
        ctx = get_rollout_context() or RolloutContext(rollout_id=request.id)
        context = {
            "chat_completions_url": ctx.chat_completions_url,
            "api_key": ctx.api_key,
            "rollout_id": ctx.rollout_id or request.id,
            "process_id": ctx.process_id,
            "streaming": ctx.streaming,
        }
        enqueued = time.monotonic()
        retried = False
        redispatched = 0
        while True:
            try:
                actor = await self._slots.acquire()
            except _NoActors:
                self.rollouts_lost += 1
                return _lost_outcome(None, "no rollout actor is alive in the pool", retried)
            queued = time.monotonic() - enqueued
            limit = request.agent_timeout_sec
            shipped = None if limit is None else max(limit - queued, 0.0)
            try:
                outcome = await _run_on(self, actor, request, shipped, context, ctx)
            except _ActorLost as lost:
                if not lost.started and redispatched < REDISPATCH_LIMIT:
                    redispatched += 1
                    self.rollouts_redispatched += 1
                    continue
                if self.retry_lost and not retried:
                    retried = True
                    self.rollouts_retried += 1
                    continue
                self.rollouts_lost += 1
                return _lost_outcome(lost.actor, _last_line(lost.cause), retried)
            finally:
                await self._slots.release(actor)
            return _restore_deadline_message(outcome, limit, shipped, queued)


async def _run_on(
    backend: RayBackend,
    actor: _Actor,
    request: ExecutionRequest,
    shipped: float | None,
    context: dict[str, Any],
    ctx: RolloutContext,
) -> ExecutionOutcome:
    """Run ``request`` on ``actor`` with ``shipped`` seconds left of its agent deadline.

    The actor's event stream is read by a task of its own, so that cancelling the caller does
    not cut it mid-read: the caller asks the actor to cancel, then keeps reading for the outcome.
    """
    if shipped != request.agent_timeout_sec:
        request = request.model_copy(update={"agent_timeout_sec": shipped})
    stream = actor.handle.execute.options(num_returns="streaming").remote(request, context)
    started = False

    async def read() -> ExecutionOutcome | None:
        """The outcome, ``None`` when the actor cancelled the rollout; raises ``_ActorLost``."""
        nonlocal started
        exceptions = backend._ray().exceptions
        result: ExecutionOutcome | None = None
        try:
            async for ref in stream:
                kind, value = await ref
                if kind == "started":
                    started = True
                elif kind == "status":
                    await ctx.set_status(RolloutStatus(value))
                elif kind == "outcome":
                    result = value
                elif kind == "cancelled":
                    return None
        except exceptions.RayActorError as exc:
            backend._slots.mark_lost(actor, exc)
            raise _ActorLost(actor, started, exc) from exc
        except exceptions.RayTaskError as exc:
            # The backend inside the actor raised: surface the original exception, so the
            # caller categorizes it exactly as it would have in-process.
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise
        if result is None:
            raise RuntimeError("the rollout actor ended its stream without an outcome")
        return result

    consumer = asyncio.ensure_future(read())
    try:
        outcome = await asyncio.shield(consumer)
    except asyncio.CancelledError:
        return await _cancel(actor, request.id, consumer, not started)
    if outcome is None:
        # Cancelled inside the actor without our asking (its own shutdown): as cancelled.
        raise asyncio.CancelledError()
    return outcome


async def _cancel(
    actor: _Actor,
    rollout_id: str,
    consumer: asyncio.Future[ExecutionOutcome | None],
    before_start: bool,
) -> ExecutionOutcome:
    """Forward a cancellation to the actor; a workflow that swallows it still reports."""
    try:
        actor.handle.cancel.remote(rollout_id, before_start=before_start)
    except Exception:
        consumer.cancel()
        raise asyncio.CancelledError() from None
    try:
        async with asyncio.timeout(CANCEL_GRACE_SEC):
            outcome = await consumer
    except BaseException:
        consumer.cancel()
        raise asyncio.CancelledError() from None
    if outcome is None:
        raise asyncio.CancelledError()
    return outcome


def _actor_failure(exc: BaseException) -> str:
    """The user-facing part of an actor's construction error (the exception line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception): ", line):
            return line
    return lines[-1] if lines else type(exc).__name__


def _lost_outcome(actor: _Actor | None, cause: str, retried: bool) -> ExecutionOutcome:
    where = (
        f"the Ray actor running this rollout (pid {actor.pid} on {actor.node}) died"
        if actor is not None
        else "the rollout could not be placed"
    )
    message = f"{WORKER_LOST}: {where}: {cause}"
    if retried:
        message += " (after one retry on another actor)"
    return ExecutionOutcome(
        workflow=ExecutionResult(
            status=RolloutStatus.FAILURE,
            err_message=message,
            err_category=RolloutErrorCategory.INTERNAL_ERROR,
            extra_fields={
                "phase": "workflow",
                "cause": WORKER_LOST,
                "actor_pid": actor.pid if actor is not None else None,
                "actor_node": actor.node if actor is not None else None,
                "retried": retried,
            },
        )
    )


__all__ = ["WORKER_LOST", "ActorSpec", "RayBackend", "RolloutActor"]
