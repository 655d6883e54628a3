"""Print ``name==X`` for each framework at the lowest release pyproject.toml allows it.

Used by scripts/update-constraints.sh to build the lowest-versions environment; checked against
constraints-lowest.txt by tests/packaging/test_constraints.py.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

#: The packages whose range is exercised at both ends.
FRAMEWORKS = ("openai-agents", "strands-agents", "litellm", "mcp")


def lowest_pins(pyproject: Path) -> dict[str, str]:
    """Each framework's ``>=`` bound in ``pyproject``'s optional dependencies."""
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    pins: dict[str, str] = {}
    for requirements in extras["optional-dependencies"].values():
        for text in requirements:
            requirement = Requirement(text)
            if requirement.name not in FRAMEWORKS:
                continue
            (lower,) = [s.version for s in requirement.specifier if s.operator == ">="]
            if pins.setdefault(requirement.name, lower) != lower:
                sys.exit(f"{requirement.name} has two lower bounds in {pyproject}")
    missing = sorted(set(FRAMEWORKS) - set(pins))
    if missing:
        sys.exit(f"no lower bound for {', '.join(missing)} in {pyproject}")
    return pins


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    for name, version in sorted(lowest_pins(root / "pyproject.toml").items()):
        print(f"{name}=={version}")
