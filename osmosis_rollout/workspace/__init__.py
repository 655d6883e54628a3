"""The workspace: its layout, configs, preflight checks, and the user's code it imports."""

from osmosis_rollout.workspace.layout import (
    DATA_DIR,
    DATASET_SUFFIXES,
    ENTRYPOINT,
    EVAL_CONFIG_DIR,
    ROLLOUTS_DIR,
    TRAINING_CONFIG_DIR,
    config_workspace,
    dataset_candidates,
    eval_config_for,
    find_local_dataset,
    find_workspace,
    rollout_entrypoints,
    rollout_name,
    workspace_files,
    workspace_of_config,
)

__all__ = [
    "DATASET_SUFFIXES",
    "DATA_DIR",
    "ENTRYPOINT",
    "EVAL_CONFIG_DIR",
    "ROLLOUTS_DIR",
    "TRAINING_CONFIG_DIR",
    "config_workspace",
    "dataset_candidates",
    "eval_config_for",
    "find_local_dataset",
    "find_workspace",
    "rollout_entrypoints",
    "rollout_name",
    "workspace_files",
    "workspace_of_config",
]
