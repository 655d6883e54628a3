"""``osmosis-rollout serve ENTRYPOINT[:ATTR]``: serve a rollout to the Osmosis controller.

What it serves and how it stops is :data:`DESCRIPTION` (``serve --help``). The adaptive
``--max-concurrent auto`` (the default) is :mod:`osmosis_rollout.server.concurrency`'s; the
shedding of slow clients (``--header-timeout``, ``--max-connections``) is
:mod:`osmosis_rollout.server.connections`'.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from osmosis_rollout.server.auth import SERVER_API_KEY_ENV
from osmosis_rollout.server.connections import HEADER_TIMEOUT_SEC
from osmosis_rollout.server.shutdown import DEFAULT_DRAIN_TIMEOUT_SEC, KEEP_ALIVE_SEC

PORT_ENV = "_OSMOSIS_ROLLOUT_PORT"
DEFAULT_PORT = 8000

DESCRIPTION = """\
Serve a rollout to the Osmosis controller over the remote-rollout protocol.

ENTRYPOINT is a file (path/to/main.py) or a module (package.module), optionally with :ATTR:
an app built with create_rollout_server, a backend, or the workflow and grader classes. The
server flags (timings, --enable-metrics, --max-queue-depth, --max-body-bytes) apply to the
app serve builds and equally to an app the entrypoint built itself. Idle keep-alive
connections are kept 2160 s, past the platform load balancer's 2100 s idle timeout.

--backend ray keeps admission, leases and long polls in this process and runs the rollouts
on a Ray cluster (--ray-address: auto or HOST:PORT; default a local cluster started here),
on --ray-actors actors that each import the entrypoint.

SIGTERM (or SIGINT) starts a staged drain: new rollouts get 503 with Retry-After while
result polls and cancels are still served, until every finished result has been fetched
or --drain-timeout passes; then the process exits 0. A second signal stops at once.
"""
"""``serve --help``'s text."""

_TIMING_OPTIONS = ("result_wait_timeout_sec", "polling_lease_timeout_sec", "result_retention_sec")


def add_parser(subparsers: Any) -> None:
    """Register the ``serve`` subcommand."""
    parser = subparsers.add_parser(
        "serve",
        help="serve a rollout entrypoint over the remote-rollout protocol",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("entrypoint", help="path/to/main.py[:ATTR] or package.module[:ATTR]")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        help=f"port (default ${PORT_ENV} or {DEFAULT_PORT}; 0: one the system picks, named in "
        "the first line printed)",
    )
    parser.add_argument(
        "--api-key",
        help=f"inbound bearer key every request must carry (default ${SERVER_API_KEY_ENV})",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    parser.add_argument(
        "--enable-metrics", action="store_true", help="serve Prometheus metrics at /metrics"
    )
    parser.add_argument(
        "--max-queue-depth",
        type=int,
        metavar="N",
        help="admit at most N rollouts beyond the running slots; more get 429 + Retry-After",
    )
    parser.add_argument(
        "--max-concurrent",
        metavar="auto|N",
        help=(
            "rollouts running at once: 'auto' (default) adapts to latency and event-loop lag, "
            "N fixes it; capped by the rollout's own max_concurrent"
        ),
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="open connections at most; past it the oldest idle one without the key is "
        "closed, never one that completed a request (default: the open-file limit less an "
        "eighth)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=HEADER_TIMEOUT_SEC,
        metavar="SEC",
        help=f"close a request whose headers take longer (default {HEADER_TIMEOUT_SEC:g})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        metavar="BYTES",
        help="request bodies over BYTES get 413 (default 16 MiB)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=DEFAULT_DRAIN_TIMEOUT_SEC,
        metavar="SEC",
        help=(
            "on SIGTERM, keep serving results for up to SEC seconds until every finished "
            f"one was fetched (default {DEFAULT_DRAIN_TIMEOUT_SEC:g}; 0 stops at once)"
        ),
    )
    parser.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where rollouts run: in this process (default) or on a Ray cluster",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --backend ray: 'auto', HOST:PORT or ray://HOST:PORT (default: a local cluster)",
    )
    parser.add_argument(
        "--ray-actors",
        type=int,
        metavar="N",
        help="with --backend ray: rollout actors in the pool (default: one per cluster CPU)",
    )
    for option in _TIMING_OPTIONS:
        parser.add_argument(
            "--" + option.replace("_", "-"),
            type=float,
            metavar="SEC",
            help="server timing override",
        )
    parser.set_defaults(handler=run)


def _ray_app(args: argparse.Namespace, api_key: str | None, options: dict[str, Any]) -> Any:
    """``--backend ray``: this process serves the wire; a RayBackend runs the rollouts."""
    from osmosis_rollout.backend.ray import RayBackend
    from osmosis_rollout.errors import UsageError
    from osmosis_rollout.server.app import create_rollout_server

    # The actors redact the inbound key too: a workflow could print it (read from a file).
    backend = RayBackend(
        args.entrypoint,
        address=args.ray_address,
        actors=args.ray_actors,
        secrets={SERVER_API_KEY_ENV: api_key},
    )
    backend.start()
    try:
        return create_rollout_server(backend=backend, api_key=api_key, **options)
    except TypeError as exc:
        backend.close()
        raise UsageError(f"{_flags(options)}: {exc}") from exc


def _ignore_signal(signum: int, frame: FrameType | None) -> None:
    """Uvicorn re-raises the shutdown signal after a graceful stop; let that be a no-op."""


def _server_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {
        name: getattr(args, name) for name in _TIMING_OPTIONS if getattr(args, name) is not None
    }
    if args.enable_metrics:
        options["enable_metrics"] = True
    for name in ("max_queue_depth", "max_body_bytes"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.max_concurrent is not None:
        from osmosis_rollout.errors import UsageError
        from osmosis_rollout.server.concurrency import parse_max_concurrent

        try:
            options["max_concurrent"] = parse_max_concurrent(args.max_concurrent)
        except ValueError as exc:
            raise UsageError(f"--max-concurrent: {exc}") from exc
    return options


def _apply_default_concurrency(app: Any, options: dict[str, Any]) -> None:
    """``--max-concurrent auto`` unless given, where it applies (see the module docstring)."""
    from osmosis_rollout.server.app import adaptive_concurrency_applies, configure_rollout_app
    from osmosis_rollout.server.concurrency import AUTO

    if "max_concurrent" not in options and adaptive_concurrency_applies(app):
        configure_rollout_app(app, max_concurrent=AUTO)


def _flags(options: dict[str, Any]) -> str:
    return ", ".join("--" + name.replace("_", "-") for name in options)


def build_asgi_app(args: argparse.Namespace) -> tuple[Any, str]:
    """Load the entrypoint and return ``(asgi_app, description)``; raises on misuse."""
    from osmosis_rollout.errors import UsageError
    from osmosis_rollout.server.app import configure_rollout_app, create_rollout_server
    from osmosis_rollout.server.auth import BearerAuthMiddleware, ControllerAuth
    from osmosis_rollout.server.runner import rollout_server_of
    from osmosis_rollout.workspace.entrypoint import load_entrypoint

    api_key = args.api_key if args.api_key is not None else os.environ.get(SERVER_API_KEY_ENV)
    auth = ControllerAuth(api_key or None)
    options = _server_options(args)
    if args.backend == "ray":
        ray_app = _ray_app(args, auth.api_key, options)
        _apply_default_concurrency(ray_app, options)
        return ray_app, f"{args.entrypoint} on Ray ({args.ray_address or 'local cluster'})"
    if args.ray_address or args.ray_actors:
        raise UsageError("--ray-address and --ray-actors need --backend ray")
    loaded = load_entrypoint(args.entrypoint, base_dir=Path.cwd())
    if loaded.app is not None:
        app: Any = loaded.app
        if options:
            if rollout_server_of(app) is None:
                raise UsageError(
                    f"{_flags(options)}: the app in {loaded.describe()} was not built by "
                    "create_rollout_server, so serve cannot apply these options; pass them "
                    "where that app is built"
                )
            try:
                configure_rollout_app(app, **options)
            except TypeError as exc:
                raise UsageError(f"{_flags(options)}: {exc}") from exc
        _apply_default_concurrency(app, options)
        if auth.enabled:
            own = rollout_server_of(app)
            if own is not None:  # the key may come from --api-key, not the environment
                own.add_secret(SERVER_API_KEY_ENV, auth.api_key)
            app = BearerAuthMiddleware(app, auth)
        return app, loaded.describe()
    assert loaded.backend is not None
    try:
        built = create_rollout_server(backend=loaded.backend, api_key=auth.api_key, **options)
    except TypeError as exc:
        raise UsageError(f"{_flags(options)}: {exc}") from exc
    _apply_default_concurrency(built, options)
    return built, loaded.describe()


def _bind_any_port(host: str) -> socket.socket:
    """A socket bound to ``host`` on a port the system picks (``--port 0``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT and the drain; 0 after it, 2 on a usage error."""
    from osmosis_rollout._internal.imports import require_extra
    from osmosis_rollout.errors import UsageError

    require_extra("uvicorn", extra="server")
    from osmosis_rollout.server.runner import rollout_server_of, run_rollout_app

    try:
        loaded_app, description = build_asgi_app(args)
        if args.drain_timeout < 0:
            raise UsageError("--drain-timeout must be >= 0")
        if not args.header_timeout > 0 or (
            args.max_connections is not None and args.max_connections < 1
        ):
            raise UsageError("--header-timeout must be > 0 and --max-connections >= 1")
    except (UsageError, ValueError) as exc:
        print(f"osmosis-rollout serve: error: {exc}", file=sys.stderr)
        return 2
    from osmosis_rollout._internal.gc_freeze import freeze_startup_heap
    from osmosis_rollout.chat_client import warm_up

    warm_up()  # the CA bundle and httpx's transport, before the first rollout
    freeze_startup_heap()  # the entrypoint and its frameworks are imported: keep them out of GC
    port = args.port if args.port is not None else int(os.environ.get(PORT_ENV) or DEFAULT_PORT)
    sockets = None
    if port == 0:
        # Bound here, so the line below names the port the system chose: a parent that asked
        # for port 0 (pytest's --osmosis-serve) reads it there, with no window for a race.
        sockets = [_bind_any_port(args.host)]
        port = int(sockets[0].getsockname()[1])
    print(f"osmosis-rollout serve: {description} on http://{args.host}:{port}", flush=True)
    inner = getattr(loaded_app, "app", loaded_app)  # behind BearerAuthMiddleware
    previous = {sig: signal.signal(sig, _ignore_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server = run_rollout_app(
            loaded_app,
            host=args.host,
            port=port,
            drain_timeout_sec=args.drain_timeout,
            log_level=args.log_level,
            timeout_keep_alive=KEEP_ALIVE_SEC,
            rollout_server=rollout_server_of(loaded_app) or rollout_server_of(inner),
            max_connections=args.max_connections,
            header_timeout_sec=args.header_timeout,
            sockets=sockets,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        return 1
    if server.unfetched:
        print(
            f"osmosis-rollout serve: stopped; {len(server.unfetched)} result(s) were never "
            "fetched before the drain deadline",
            flush=True,
        )
    else:
        print("osmosis-rollout serve: stopped", flush=True)
    return 0


__all__ = ["DEFAULT_DRAIN_TIMEOUT_SEC", "KEEP_ALIVE_SEC", "add_parser", "build_asgi_app", "run"]
