"""Render the repository's example workspaces from the templates.

    python -m osmosis_rollout.templates example_rollouts           # rewrite them
    python -m osmosis_rollout.templates example_rollouts --check   # exit 1 if any differs

Only the rendered files are written; other files in an example folder are reported by
``--check`` (an example holds nothing the templates do not render).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from osmosis_rollout.templates import EXAMPLES, render_example

#: Run outputs and caches that may sit in an example folder without being part of it.
IGNORED = (".osmosis", "__pycache__", ".pytest_cache", ".venv")


def differences(root: Path) -> list[str]:
    """What differs between ``root/<example>/`` and a fresh render, one line per file."""
    found: list[str] = []
    for name in EXAMPLES:
        folder = root / name
        rendered = {folder / rel: text for rel, text in render_example(name).items()}
        for path, text in rendered.items():
            if not path.is_file():
                found.append(f"missing: {path}")
            elif path.read_text(encoding="utf-8") != text:
                found.append(f"differs: {path}")
        on_disk = (
            p
            for p in folder.rglob("*")
            if p.is_file() and not any(part in IGNORED for part in p.relative_to(folder).parts)
        )
        found += [f"not rendered: {path}" for path in sorted(on_disk) if path not in rendered]
    return found


def write(root: Path) -> list[Path]:
    """Write every example's rendered files under ``root``; returns the paths written."""
    written: list[Path] = []
    for name in EXAMPLES:
        for rel, text in render_example(name).items():
            path = root / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or ``--check``) the example workspaces under the given folder."""
    parser = argparse.ArgumentParser(prog="python -m osmosis_rollout.templates")
    parser.add_argument("root", type=Path, help="the example_rollouts/ folder")
    parser.add_argument("--check", action="store_true", help="report differences, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = differences(args.root)
        print("\n".join(found) if found else "examples match the templates")
        return 1 if found else 0
    for path in write(args.root):
        print(path)
    stale = [line for line in differences(args.root) if line.startswith("not rendered")]
    if stale:
        print("\n".join(stale), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
