"""Every module and name of the official SDK 0.3.8 has its counterpart under osmosis_rollout,
and every official function and constructor's parameters are accepted by ours.

``official_names_0_3_8.json`` is generated from the official package by
``scripts/official_names.py`` (``tests/interop/test_official_names_file.py`` checks it is
current), so this test runs without the official SDK installed. A module the official SDK
has and we deliberately do not mirror is listed below with the reason.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.errors import MissingExtraError

OFFICIAL: dict[str, Any] = json.loads(
    (Path(__file__).parent / "official_names_0_3_8.json").read_text(encoding="utf-8")
)
MODULES: dict[str, dict[str, Any]] = OFFICIAL["modules"]

# Official modules outside ``osmosis_ai.rollout`` and where their names live here.
RENAMED = {
    "osmosis_ai": "osmosis_rollout",
    "osmosis_ai.eval.rubric": "osmosis_rollout.rubric",
    "osmosis_ai.eval.rubric.engine": "osmosis_rollout.rubric",
    "osmosis_ai.eval.rubric.types": "osmosis_rollout.rubric",
}

HARBOR = (
    "Harbor trials (sandboxed containers) run through the official SDK; importing "
    "osmosis_rollout.backend.harbor raises PlatformOnlyError pointing at docs/platform.md"
)
# Official module (and its submodules) -> why osmosis_rollout has no counterpart.
NOT_MIRRORED = {
    "osmosis_ai.rollout.backend.harbor": HARBOR,
    "osmosis_ai.rollout.types.harbor": HARBOR,
    "osmosis_ai.rollout.container": "the entry points Harbor runs inside its containers",
    "osmosis_ai.rollout.trajectory.preview": "live file previews of Harbor trials for the platform",
    "osmosis_ai.rollout.utils": "the official SDK's internal helpers; rollouts do not import them",
    "osmosis_ai.rollout.server.observability": "the official server's internal metrics object",
    "osmosis_ai.rollout.server.result_registry": (
        "the official server's internal registry; ours is osmosis_rollout.server.registry"
    ),
    "osmosis_ai.rollout.backend.local.backend": (
        "an internal module; LocalBackend is imported from osmosis_rollout.backend.local, "
        "the path the official package exports it from"
    ),
}
# (official module, name) -> why the name is absent from our module (none today: keep the
# mechanism, so a deliberate gap is written down here with its reason).
NAMES_NOT_MIRRORED: dict[tuple[str, str], str] = {}


def ours(official: str) -> str:
    """The ``osmosis_rollout`` module that mirrors an official module."""
    if official in RENAMED:
        return RENAMED[official]
    return official.replace("osmosis_ai.rollout", "osmosis_rollout", 1)


def excluded(official: str) -> str | None:
    for prefix, reason in NOT_MIRRORED.items():
        if official == prefix or official.startswith(prefix + "."):
            return reason
    return None


MIRRORED = sorted(name for name in MODULES if excluded(name) is None)


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except MissingExtraError as exc:
        pytest.skip(f"{module_name} needs an extra that is not installed: {exc}")


@pytest.mark.parametrize("official", MIRRORED)
def test_each_official_module_has_every_name_under_osmosis_rollout(official: str) -> None:
    module = _import(ours(official))
    expected = MODULES[official]["names"]
    missing = [
        name
        for name in expected
        if (official, name) not in NAMES_NOT_MIRRORED and not hasattr(module, name)
    ]
    assert missing == [], f"{ours(official)} lacks {missing} (official {official})"


@pytest.mark.parametrize(
    "official", [name for name in MIRRORED if MODULES[name]["source"] == "__all__"]
)
def test_star_imports_give_the_official_all(official: str) -> None:
    module = _import(ours(official))
    expected = {
        name for name in MODULES[official]["names"] if (official, name) not in NAMES_NOT_MIRRORED
    }
    assert expected - set(getattr(module, "__all__", ())) == set()


CALLABLES = [
    (official, name)
    for official in MIRRORED
    for name in sorted(MODULES[official].get("parameters", {}))
    if name in MODULES[official]["names"] and (official, name) not in NAMES_NOT_MIRRORED
]


@pytest.mark.parametrize(("official", "name"), CALLABLES)
def test_each_official_function_and_constructor_takes_the_official_parameters(
    official: str, name: str
) -> None:
    target = getattr(_import(ours(official)), name)
    parameters = inspect.signature(target).parameters
    takes_any = any(param.kind is inspect.Parameter.VAR_KEYWORD for param in parameters.values())
    missing = [
        param
        for param in MODULES[official]["parameters"][name]
        if param not in parameters and not takes_any
    ]
    assert missing == [], f"{ours(official)}.{name} lacks the official parameters {missing}"


def test_the_list_is_the_official_0_3_8_and_covers_the_rollout_package() -> None:
    assert (OFFICIAL["package"], OFFICIAL["version"]) == ("osmosis-ai", "0.3.8")
    for name in (
        "osmosis_ai.rollout",
        "osmosis_ai.rollout.client",
        "osmosis_ai.rollout.trajectory",
    ):
        assert MODULES[name]["names"], name


def test_every_exclusion_names_an_official_module_or_name() -> None:
    stale = [prefix for prefix in NOT_MIRRORED if prefix not in MODULES]
    stale += [
        f"{module}.{name}"
        for module, name in NAMES_NOT_MIRRORED
        if name not in MODULES.get(module, {}).get("names", ())
    ]
    assert stale == []


def test_unknown_lease_error_is_the_key_error_our_lease_manager_raises() -> None:
    # The official class is a KeyError its LeaseManager raises for a rollout with no lease.
    from osmosis_rollout.server.lease import LeaseManager, UnknownLeaseError

    async def never(rollout_id: str) -> None:
        raise AssertionError(rollout_id)

    manager = LeaseManager(timeout_sec=5.0, on_expired=never)
    assert issubclass(UnknownLeaseError, KeyError)
    with pytest.raises(UnknownLeaseError) as caught:
        manager.get("r-unknown")
    assert caught.value.args == ("r-unknown",)


def test_the_harbor_backend_path_refuses_with_the_official_route() -> None:
    from osmosis_rollout.errors import PlatformOnlyError

    with pytest.raises(ImportError) as caught:
        importlib.import_module("osmosis_rollout.backend.harbor")
    assert isinstance(caught.value, PlatformOnlyError)
    message = str(caught.value)
    assert "official SDK" in message
    assert "docs/platform.md" in message
    assert 'pip install "osmosis-ai[harbor]"' in message
    assert "LocalBackend" in message
    doc = Path(__file__).parents[2] / "docs" / "platform.md"
    assert "## Harbor" in doc.read_text(encoding="utf-8")
