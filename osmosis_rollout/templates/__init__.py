"""Starter rollouts that ``osmosis-rollout init`` writes into a workspace.

Each template is a folder of files beside this module, shipped as package data::

    main.py.tmpl     -> rollouts/<name>/main.py        workflow + grader + server app
    policy.py.tmpl   -> rollouts/<name>/policy.py      deterministic reference policy
    eval.toml.tmpl   -> configs/eval/<name>.toml       eval config (spec II.8.1)
    data.jsonl       -> data/<name>.jsonl              sample dataset

``{{name}}`` in a file is replaced by the rollout's name. The runnable workspaces under the
repository's ``example_rollouts/`` are these templates rendered with the example's name
(the test suite checks they stay identical), so the examples are what ``init`` writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath

__all__ = [
    "NAME_PATTERN",
    "TEMPLATES",
    "Template",
    "get_template",
    "render_template",
    "template_targets",
    "validate_rollout_name",
]

#: A rollout name: one path segment of lowercase letters, digits, ``-`` and ``_``.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

_PLACEHOLDER = "{{name}}"

#: Template file -> workspace path, with ``{name}`` standing for the rollout name.
_LAYOUT: tuple[tuple[str, str], ...] = (
    ("main.py.tmpl", "rollouts/{name}/main.py"),
    ("policy.py.tmpl", "rollouts/{name}/policy.py"),
    ("eval.toml.tmpl", "configs/eval/{name}.toml"),
    ("data.jsonl", "data/{name}.jsonl"),
)


@dataclass(frozen=True)
class Template:
    """A starter rollout: its name, the folder holding its files, and one line about it."""

    name: str
    folder: str
    description: str
    extra: str

    def read(self, filename: str) -> str:
        """The raw text of one of the template's files (placeholders not substituted)."""
        return resources.files(__name__).joinpath(self.folder, filename).read_text("utf-8")


TEMPLATES: dict[str, Template] = {
    template.name: template
    for template in (
        Template(
            "multiply-openai",
            "multiply_openai",
            "OpenAI Agents SDK agent with a multiply tool; exact-answer grader",
            "openai-agents",
        ),
        Template(
            "multiply-strands",
            "multiply_strands",
            "Strands agent with a multiply tool; @osmosis_reward grader",
            "strands",
        ),
        Template(
            "plain",
            "plain",
            "no framework: RolloutChatClient tool loop over the chat endpoint",
            "server",
        ),
        Template(
            "judge",
            "judge",
            "LLM-as-judge rubric grader (a deterministic judge offline)",
            "litellm",
        ),
    )
}


def get_template(name: str) -> Template:
    """The template called ``name``; ``ValueError`` listing the choices otherwise."""
    try:
        return TEMPLATES[name]
    except KeyError:
        choices = ", ".join(TEMPLATES)
        raise ValueError(f"unknown template {name!r}; choose one of: {choices}") from None


def validate_rollout_name(name: str) -> str:
    """``name`` when it is a valid rollout name; ``ValueError`` saying why otherwise."""
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"invalid rollout name {name!r}: use one path segment of lowercase letters, "
            "digits, '-' and '_' (starting with a letter or digit), e.g. 'my-rollout'"
        )
    return name


def template_targets(rollout_name: str) -> list[PurePosixPath]:
    """The workspace-relative paths a template writes for ``rollout_name``, in order."""
    return [PurePosixPath(target.format(name=rollout_name)) for _, target in _LAYOUT]


def render_template(template: str | Template, rollout_name: str) -> dict[PurePosixPath, str]:
    """Every file of ``template`` for ``rollout_name``: workspace-relative path -> text."""
    chosen = template if isinstance(template, Template) else get_template(template)
    validate_rollout_name(rollout_name)
    return {
        PurePosixPath(target.format(name=rollout_name)): chosen.read(source).replace(
            _PLACEHOLDER, rollout_name
        )
        for source, target in _LAYOUT
    }
