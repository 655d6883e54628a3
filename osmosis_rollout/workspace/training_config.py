"""The training TOML (``configs/training/*.toml``), checked with the official sections.

``osmosis train submit`` reads ``[experiment]`` (as in the eval TOML), ``[training]``,
``[sampling]``, ``[checkpoints]``, ``[advanced]``, ``[env]`` and an optional ``[secrets]``.
The platform owns the values of ``[training]``, ``[sampling]`` and ``[checkpoints]``, so
only their keys are checked here (an unknown key suggests the nearest one), exactly as
the official CLI does. Nothing here runs a training job: this package checks the file so
that ``osmosis-rollout validate`` catches a typo before the official CLI submits it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from osmosis_rollout.workspace.eval_config import ExperimentConfig, check_document, read_toml

__all__ = [
    "CheckpointsSection",
    "SamplingSection",
    "TrainingConfig",
    "TrainingSection",
    "load_training_config",
]


class _PlatformSection(BaseModel):
    """A section whose values the platform validates: only its keys are checked here."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)


class TrainingSection(_PlatformSection):
    """``[training]``."""

    lr: Any = None
    total_epochs: Any = None
    n_samples_per_prompt: Any = None
    rollout_batch_size: Any = None
    max_prompt_length: Any = None
    max_response_length: Any = None
    agent_workflow_timeout_s: Any = None
    grader_timeout_s: Any = None


class SamplingSection(_PlatformSection):
    """``[sampling]``."""

    rollout_temperature: Any = None
    rollout_top_p: Any = None


class CheckpointsSection(_PlatformSection):
    """``[checkpoints]``."""

    eval_interval: Any = None
    checkpoint_save_freq: Any = None


class _TrainingFile(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    experiment: ExperimentConfig
    training: TrainingSection = Field(default_factory=TrainingSection)
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    checkpoints: CheckpointsSection = Field(default_factory=CheckpointsSection)
    advanced: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)


class TrainingConfig(BaseModel):
    """A checked training TOML; ``warnings`` holds non-fatal notes."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)

    path: str
    experiment: ExperimentConfig
    training: TrainingSection = Field(default_factory=TrainingSection)
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    checkpoints: CheckpointsSection = Field(default_factory=CheckpointsSection)
    advanced: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def load_training_config(path: str | Path) -> TrainingConfig:
    """Read and check a training TOML, or raise :class:`~osmosis_rollout.errors.ConfigError`."""
    raw = read_toml(path, "training")
    fields = check_document(raw, _TrainingFile, "training", str(path), secrets=False)
    return TrainingConfig(**fields)
