"""The ``osmosis-rollout`` command line: ``serve``, ``template``, ``init``, ``validate``, ``report``.

Each subcommand lives in its own module with ``add_parser(subparsers)`` and ``run(args)``;
modules are imported only when listed here, and heavy imports happen inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand name -> module under osmosis_rollout.cli
SUBCOMMANDS: dict[str, str] = {
    "serve": "osmosis_rollout.cli.serve",
    "template": "osmosis_rollout.cli.workspace",
    "templates": "osmosis_rollout.cli.workspace",
    "init": "osmosis_rollout.cli.workspace",
    "validate": "osmosis_rollout.cli.workspace",
    "report": "osmosis_rollout.cli.report",
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand whose module is present."""
    from osmosis_rollout import __version__

    parser = argparse.ArgumentParser(
        prog="osmosis-rollout", description="Write, validate and serve Osmosis agent rollouts."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module_name in dict.fromkeys(SUBCOMMANDS.values()):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``osmosis-rollout``; returns the process exit status."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
