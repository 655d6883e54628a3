"""Starter rollouts: what ``osmosis-rollout template apply`` / ``init`` write, and the examples.

One source for every file. The files shared by several templates are kept once under
``_shared/``; a template's folder holds only what is its own (``main.py.tmpl`` and its
``README.md.tmpl``, and for ``judge`` its policy and dataset). A template writes the
official workspace layout::

    rollouts/<name>/main.py          workflow + grader + server app       <folder>/main.py.tmpl
    rollouts/<name>/policy.py        deterministic reference policy       _shared/multiply/ or own
    rollouts/<name>/pyproject.toml   the rollout's own dependencies       _shared/
    configs/eval/<name>.toml         eval config                          _shared/
    configs/training/<name>.toml     training config                      _shared/
    data/<dataset>.jsonl             sample dataset ([experiment].dataset) _shared/multiply/ or own

Placeholders: ``{{name}}`` (the rollout), ``{{dataset}}``, ``{{extra}}``, ``{{description}}``,
``{{run}}`` (the exact offline command, the same one ``init`` prints) and, in READMEs,
``{{layout}}``. The repository's ``example_rollouts/<example>/`` are :func:`render_example`
outputs (adding a workspace ``pyproject.toml`` and a ``README.md``); ``python -m
osmosis_rollout.templates example_rollouts`` rewrites them and the test suite checks the
committed tree equals a fresh render.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath

__all__ = [
    "EXAMPLES",
    "NAME_PATTERN",
    "PYTEST_SECTION",
    "TEMPLATES",
    "Example",
    "Template",
    "dataset_path",
    "get_template",
    "is_template_name",
    "render_example",
    "render_template",
    "render_workspace_pyproject",
    "run_command",
    "template_targets",
    "validate_rollout_name",
]

#: A rollout name: one path segment of lowercase letters, digits, ``-`` and ``_``.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

_SHARED = "_shared"
_MULTIPLY_POLICY = f"{_SHARED}/multiply/policy.py.tmpl"
_MULTIPLY_DATA = f"{_SHARED}/multiply/data.jsonl"

#: What each written file is, for the README's layout block.
_DESCRIPTIONS = {
    "main.py": "workflow + grader + `app = create_rollout_server(...)`",
    "policy.py": "deterministic reference policy (no model, no key)",
    "pyproject.toml": "the rollout's own dependencies",
    "eval": "eval config (local defaults; `osmosis eval submit`)",
    "training": "training config (`osmosis train submit`)",
}


@dataclass(frozen=True)
class Template:
    """A starter rollout: its official name, our older aliases, and where its files come from."""

    name: str
    folder: str
    description: str
    extra: str
    dataset: str
    aliases: tuple[str, ...] = ()
    policy: str = _MULTIPLY_POLICY
    data: str = _MULTIPLY_DATA
    #: (source, target) files only the example workspace carries.
    example_files: tuple[tuple[str, str], ...] = ()

    def sources(self, rollout_name: str, dataset: str) -> list[tuple[str, PurePosixPath]]:
        """(package source, workspace target) of every file the template writes, in order."""
        rollout = f"rollouts/{rollout_name}"
        pairs = [
            (f"{self.folder}/main.py.tmpl", f"{rollout}/main.py"),
            (self.policy, f"{rollout}/policy.py"),
            (f"{_SHARED}/rollout_pyproject.toml.tmpl", f"{rollout}/pyproject.toml"),
            (f"{_SHARED}/eval.toml.tmpl", f"configs/eval/{rollout_name}.toml"),
            (f"{_SHARED}/training.toml.tmpl", f"configs/training/{rollout_name}.toml"),
            (self.data, dataset_path(dataset)),
        ]
        return [(source, PurePosixPath(target)) for source, target in pairs]


@dataclass(frozen=True)
class Example:
    """A committed example workspace: a template rendered under a fixed name and dataset."""

    name: str
    template: str
    dataset: str = "test"


def _read(source: str) -> str:
    return resources.files(__name__).joinpath(source).read_text("utf-8")


TEMPLATES: dict[str, Template] = {
    template.name: template
    for template in (
        Template(
            "multiply-local-openai",
            "multiply_openai",
            "OpenAI Agents SDK agent with a multiply tool; exact-answer grader",
            "openai-agents",
            "multiply",
            aliases=("multiply-openai",),
            example_files=(("multiply_openai/hard.jsonl", "data/hard.jsonl"),),
        ),
        Template(
            "multiply-local-strands",
            "multiply_strands",
            "Strands agent with a multiply tool; @osmosis_reward grader",
            "strands",
            "multiply",
            aliases=("multiply-strands",),
        ),
        Template(
            "plain",
            "plain",
            "no framework: RolloutChatClient tool loop over the chat endpoint",
            "server",
            "multiply",
        ),
        Template(
            "judge",
            "judge",
            "LLM-as-judge rubric grader (a deterministic judge offline)",
            "litellm",
            "temperature",
            policy="judge/policy.py.tmpl",
            data="judge/data.jsonl",
        ),
    )
}

_BY_ALIAS = {alias: t for t in TEMPLATES.values() for alias in t.aliases}

#: The repository's ``example_rollouts/<name>`` workspaces and what renders each.
EXAMPLES: dict[str, Example] = {
    example.name: example
    for example in (
        Example("multiply-openai", "multiply-local-openai"),
        Example("multiply-strands", "multiply-local-strands"),
        Example("plain-chat", "plain"),
        Example("judge", "judge"),
    )
}


def get_template(name: str) -> Template:
    """The template called ``name`` (or one of its aliases); ``ValueError`` listing the choices."""
    template = TEMPLATES.get(name) or _BY_ALIAS.get(name)
    if template is None:
        choices = ", ".join(TEMPLATES)
        raise ValueError(f"unknown template {name!r}; choose one of: {choices}")
    return template


def is_template_name(name: str) -> bool:
    """True when ``name`` is a template's name or alias."""
    return name in TEMPLATES or name in _BY_ALIAS


def validate_rollout_name(name: str) -> str:
    """``name`` when it is a valid rollout name; ``ValueError`` saying why otherwise."""
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"invalid rollout name {name!r}: use one path segment of lowercase letters, "
            "digits, '-' and '_' (starting with a letter or digit), e.g. 'my-rollout'"
        )
    return name


def dataset_path(dataset: str) -> str:
    """The workspace-relative file of a local dataset name: ``data/<dataset>.jsonl``."""
    return f"data/{dataset}.jsonl"


def run_command(rollout_name: str, dataset: str) -> str:
    """The offline command that runs a rendered rollout, from the workspace root.

    Written into the rollout's ``main.py`` and eval config and printed by ``init``, so what
    the files say and what the CLI says are one string.
    """
    return (
        f"pytest --osmosis-config configs/eval/{rollout_name}.toml "
        f"--osmosis-dataset {dataset_path(dataset)} "
        f"--osmosis-policy rollouts/{rollout_name}/policy.py:policy"
    )


def template_targets(
    rollout_name: str, template: str | Template | None = None
) -> list[PurePosixPath]:
    """The workspace-relative paths a template writes for ``rollout_name``, in order."""
    chosen = _chosen(template or next(iter(TEMPLATES)))
    return [target for _, target in chosen.sources(rollout_name, chosen.dataset)]


def _chosen(template: str | Template) -> Template:
    return template if isinstance(template, Template) else get_template(template)


def _substitute(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def _values(template: Template, rollout_name: str, dataset: str) -> dict[str, str]:
    return {
        "name": rollout_name,
        "dataset": dataset,
        "extra": template.extra,
        "description": template.description,
        "run": run_command(rollout_name, dataset),
    }


def render_template(
    template: str | Template, rollout_name: str, *, dataset: str | None = None
) -> dict[PurePosixPath, str]:
    """Every file of ``template`` for ``rollout_name``: workspace-relative path -> text.

    ``dataset`` names the local dataset (``data/<dataset>.jsonl``, also the eval config's
    ``[experiment].dataset``); it defaults to the template's own.
    """
    chosen = _chosen(template)
    validate_rollout_name(rollout_name)
    dataset = dataset or chosen.dataset
    values = _values(chosen, rollout_name, dataset)
    return {
        target: _substitute(_read(source), values)
        for source, target in chosen.sources(rollout_name, dataset)
    }


def _layout(files: dict[PurePosixPath, str]) -> str:
    """The README's aligned list of the workspace's files and what each is."""

    def describe(path: PurePosixPath, text: str) -> str:
        if path.parts[0] == "configs":
            return _DESCRIPTIONS[path.parts[1]]
        if path.parts[0] == "data":
            rows = sum(1 for line in text.splitlines() if line.strip())
            return f"{rows} rows: user_prompt, ground_truth"
        return _DESCRIPTIONS[path.name]

    # The workspace's own pyproject.toml and README are described by the README's text.
    shown = {p: t for p, t in files.items() if str(p) not in ("pyproject.toml", "README.md")}
    width = max(len(str(path)) for path in shown)
    return "\n".join(f"{path!s:<{width}}  {describe(path, text)}" for path, text in shown.items())


PYTEST_SECTION = "[tool.pytest.ini_options]"
"""Where a workspace's ``pyproject.toml`` configures pytest."""


def render_workspace_pyproject(
    template: str | Template, rollout_name: str, *, dataset: str | None = None
) -> str:
    """The workspace's ``pyproject.toml``: its dependencies and the pytest configuration
    (``osmosis_config``, ``osmosis_dataset``, ``osmosis_policy``) that makes a bare ``pytest``
    in the workspace run the rollout's rows offline."""
    chosen = _chosen(template)
    values = _values(chosen, rollout_name, dataset or chosen.dataset)
    return _substitute(_read(f"{_SHARED}/workspace_pyproject.toml.tmpl"), values)


def render_example(name: str) -> dict[PurePosixPath, str]:
    """Every file of the example workspace ``example_rollouts/<name>``: path -> text."""
    example = EXAMPLES[name]
    template = get_template(example.template)
    files = render_template(template, example.name, dataset=example.dataset)
    for source, target in template.example_files:
        files[PurePosixPath(target)] = _read(source)
    values = _values(template, example.name, example.dataset)
    files[PurePosixPath("pyproject.toml")] = render_workspace_pyproject(
        template, example.name, dataset=example.dataset
    )
    readme = _substitute(_read(f"{template.folder}/README.md.tmpl"), values)
    files[PurePosixPath("README.md")] = readme.replace("{{layout}}", _layout(files))
    return files
