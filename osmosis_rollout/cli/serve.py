"""``osmosis-rollout serve ENTRYPOINT[:ATTR]``: serve a rollout to the Osmosis controller.

The entrypoint is resolved by :func:`osmosis_rollout.entrypoint.load_entrypoint` (an app, a
backend, or workflow/grader classes). Uvicorn runs with ``timeout_keep_alive=2160`` so idle
keep-alive connections outlive the platform load balancer's 2100 s idle timeout. SIGTERM and
SIGINT shut down gracefully: uvicorn finishes in-flight requests, then the server's lifespan
drains rollouts (spec I.1.8), and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from osmosis_rollout.server.auth import SERVER_API_KEY_ENV

logger = logging.getLogger(__name__)

KEEP_ALIVE_SEC = 2160
"""Uvicorn ``timeout_keep_alive``: longer than the platform load balancer's 2100 s idle timeout."""

PORT_ENV = "_OSMOSIS_ROLLOUT_PORT"
DEFAULT_PORT = 8000

_SERVER_OPTIONS = (
    "result_wait_timeout_sec",
    "polling_lease_timeout_sec",
    "result_retention_sec",
)


def add_parser(subparsers: Any) -> None:
    """Register the ``serve`` subcommand."""
    parser = subparsers.add_parser(
        "serve",
        help="serve a rollout entrypoint over the remote-rollout protocol",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("entrypoint", help="path/to/main.py[:ATTR] or package.module[:ATTR]")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port (default ${PORT_ENV} or {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"inbound bearer key every request must carry (default ${SERVER_API_KEY_ENV})",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    parser.add_argument(
        "--enable-metrics",
        action="store_true",
        help="serve Prometheus metrics at /metrics (when serve builds the app)",
    )
    for option in _SERVER_OPTIONS:
        parser.add_argument(
            "--" + option.replace("_", "-"),
            type=float,
            default=None,
            help="server timing override (when serve builds the app)",
        )
    parser.set_defaults(handler=run)


def _ignore_signal(signum: int, frame: FrameType | None) -> None:
    """Uvicorn re-raises the shutdown signal after a graceful stop; let that be a no-op."""


def build_asgi_app(args: argparse.Namespace) -> tuple[Any, str]:
    """Load the entrypoint and return ``(asgi_app, description)``; raises on misuse."""
    from osmosis_rollout.entrypoint import load_entrypoint
    from osmosis_rollout.errors import UsageError
    from osmosis_rollout.server.auth import BearerAuthMiddleware, ControllerAuth

    api_key = args.api_key if args.api_key is not None else os.environ.get(SERVER_API_KEY_ENV)
    auth = ControllerAuth(api_key or None)
    overrides = {
        name: getattr(args, name) for name in _SERVER_OPTIONS if getattr(args, name) is not None
    }
    loaded = load_entrypoint(args.entrypoint, base_dir=Path.cwd())
    if loaded.app is not None:
        if overrides or args.enable_metrics:
            flags = ", ".join(
                ["--" + name.replace("_", "-") for name in overrides]
                + (["--enable-metrics"] if args.enable_metrics else [])
            )
            raise UsageError(
                f"{flags}: {loaded.describe()} defines its own app; pass these options to its "
                "create_rollout_server(...) call instead"
            )
        app: Any = loaded.app
        if auth.enabled:
            app = BearerAuthMiddleware(app, auth)
        return app, loaded.describe()
    from osmosis_rollout.server import create_rollout_server

    assert loaded.backend is not None
    built = create_rollout_server(
        backend=loaded.backend,
        api_key=auth.api_key,
        enable_metrics=args.enable_metrics,
        **overrides,
    )
    return built, loaded.describe()


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; 0 after a graceful shutdown, 2 on a usage error."""
    from osmosis_rollout._imports import require_extra
    from osmosis_rollout.errors import UsageError

    uvicorn = require_extra("uvicorn", extra="server")
    try:
        app, description = build_asgi_app(args)
    except (UsageError, ValueError) as exc:
        print(f"osmosis-rollout serve: error: {exc}", file=sys.stderr)
        return 2
    port = args.port if args.port is not None else int(os.environ.get(PORT_ENV) or DEFAULT_PORT)
    print(f"osmosis-rollout serve: {description} on http://{args.host}:{port}", flush=True)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=port,
        timeout_keep_alive=KEEP_ALIVE_SEC,
        log_level=args.log_level,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    previous = {sig: signal.signal(sig, _ignore_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        return 1
    print("osmosis-rollout serve: stopped", flush=True)
    return 0


__all__ = ["KEEP_ALIVE_SEC", "add_parser", "build_asgi_app", "run"]
