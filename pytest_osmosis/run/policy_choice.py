"""Which policy answers the rollouts' model calls: scripted, LiteLLM, or replayed cassettes.

Chosen from the settings, in this order: ``--osmosis-policy`` (a scripted callable),
``--osmosis-model`` (LiteLLM), cassettes already recorded beside the dataset (replay), the
eval TOML's ``model_path`` (LiteLLM); a record mode wraps the choice to record or replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_osmosis.options import DEFAULT_CONCURRENCY, OsmosisSettings, resolve_path
from pytest_osmosis.run.workspace import load_callable

if TYPE_CHECKING:
    from osmosis_rollout.policy.recording import RecordMode
    from osmosis_rollout.trajectory.save import WriteFailureCallback


def cassette_dir(config: pytest.Config, settings: OsmosisSettings) -> Path:
    """``--osmosis-cassette-dir``, else ``cassettes/`` beside the first dataset."""
    if settings.cassette_dir:
        return resolve_path(config, settings.cassette_dir)
    if settings.datasets:
        return resolve_path(config, settings.datasets[0]).parent / "cassettes"
    return Path(config.invocation_params.dir) / "cassettes"


class CassetteKeys:
    """The cassette key of each dataset row: ``<dataset path from the rootdir>::<row key>``
    (``_outside/<absolute path>`` for a dataset not under the rootdir). A row recorded in the old
    layout, ``<cassette_dir>/<dataset file name>.<row key>/``, keeps that key while no new-layout
    folder exists, so old cassettes still replay."""

    def __init__(self, config: pytest.Config, settings: OsmosisSettings) -> None:
        self.rootdir = config.rootpath
        self.directory = cassette_dir(config, settings)
        # Nothing to fall back to without the folder: no filesystem look-up per row.
        self.may_hold_old_layout = self.directory.is_dir()

    def for_row(self, dataset: Path, row_key: str) -> str:
        """The key a row of ``dataset`` records and replays its cassettes under."""
        from osmosis_rollout.policy.recording import NAMESPACE_SEPARATOR, row_folder

        try:
            namespace = dataset.relative_to(self.rootdir).as_posix()
        except ValueError:
            namespace = "_outside/" + dataset.as_posix().lstrip("/")
        key = f"{namespace}{NAMESPACE_SEPARATOR}{row_key}"
        if self.may_hold_old_layout and not row_folder(self.directory, key).exists():
            old = f"{dataset.name}.{row_key}"
            if row_folder(self.directory, old).is_dir():
                return old
        return key


def replays(settings: OsmosisSettings, cassettes: Path) -> bool:
    """True when recorded cassettes are replayed: one is under ``cassettes`` and the record
    mode is unset or ``none`` (``none`` with nothing recorded leaves the policy to answer)."""
    return (
        settings.record_mode in (None, "none")
        and cassettes.is_dir()
        and any(cassettes.rglob("*.json"))
    )


def check_policy_given(config: pytest.Config, settings: OsmosisSettings) -> None:
    """Raise ``UsageError`` at start-up when :func:`choose_policy` would find nothing to
    answer the calls."""
    s = settings
    cassettes = cassette_dir(config, settings)
    if s.policy or s.model or s.toml_model or replays(s, cassettes):
        return
    raise pytest.UsageError(
        "pytest-osmosis: no policy to answer the rollouts' model calls. Pass "
        "--osmosis-policy FILE:CALLABLE (a scripted policy), --osmosis-model LITELLM_ID (a real "
        f"model), or record cassettes into {cassettes} first (--osmosis-record-mode once)."
    )


def choose_policy(
    config: pytest.Config,
    settings: OsmosisSettings,
    on_write_failure: WriteFailureCallback | None = None,
) -> Any:
    """The policy serving model calls: scripted, LiteLLM, or replay, maybe wrapped to record
    (a cassette that cannot be written goes to ``on_write_failure``)."""
    from osmosis_rollout.policy import RecordingPolicy, as_policy

    s = settings
    cassettes = cassette_dir(config, settings)
    if s.policy:
        base = Path(config.invocation_params.dir)
        inner = as_policy(load_callable(s.policy, base=base, what="--osmosis-policy"))
    elif replays(s, cassettes) and (not s.model or s.record_mode == "none"):
        # Replay only: the model is never called, so CI needs no key for it.
        return RecordingPolicy(None, cassettes, "none")
    elif s.model:
        inner = _litellm_policy(s.model, "--osmosis-model", s)
    else:
        check_policy_given(config, settings)
        inner = _litellm_policy(str(s.toml_model), "the eval TOML's model_path", s)
    if s.record_mode is None or (s.record_mode == "none" and not replays(s, cassettes)):
        return inner
    mode = cast("RecordMode", s.record_mode)
    return RecordingPolicy(inner, cassettes, mode, on_write_failure=on_write_failure)


def _litellm_policy(model: str, source: str, settings: OsmosisSettings) -> Any:
    """A LiteLLM policy, refused up front when LiteLLM finds no credentials for the model;
    ``--osmosis-force-litellm`` keeps every call on LiteLLM."""
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
    return LiteLLMPolicy(
        model,
        force_litellm=settings.force_litellm,
        max_connections=settings.concurrency or DEFAULT_CONCURRENCY,
    )
