"""Every ``--osmosis-*`` option, its ini twin, and the frozen settings resolved from them.

Precedence for each value: command line, then the ini file (``osmosis_*``), then the eval
TOML given by ``--osmosis-config`` (its ``[evaluation]`` values are defaults), then the
built-in default. Values are validated here, early, with ``pytest.UsageError`` naming the
bad value and what would be accepted. Settings stay primitive so pytest-xdist workers,
which parse the same command line, resolve the same values.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

RECORD_MODES = ("none", "once", "new_episodes", "all")
GATE_UNDECIDED = ("fail", "pass")
PROGRESS_MODES = ("off", "auto", "line", "bar")
DEFAULT_CONCURRENCY = 32
"""Rollouts in flight when neither the flag nor the workflow config says."""
ROW_PASS_HELP = "all|any|majority|at_least:K|rate:R"


def _flag_of(stem: str) -> str:
    return "--osmosis-" + stem.replace("_", "-")


@dataclass(frozen=True)
class OptionSpec:
    """One option: ``--osmosis-<stem>`` on the command line, ``osmosis_<stem>`` in the ini.

    Without a ``metavar`` it is an on/off flag; a :data:`REPEATABLE` one collects a list.
    """

    stem: str
    help: str
    metavar: str | None
    group: str

    @property
    def kind(self) -> Literal["str", "list", "flag"]:
        if self.metavar is None:
            return "flag"
        return "list" if self.stem in REPEATABLE else "str"

    @property
    def flag(self) -> str:
        return _flag_of(self.stem)

    @property
    def dest(self) -> str:
        return "osmosis_" + self.stem


OPTION_HELP: dict[tuple[str, str], dict[str, str]] = {
    ("selection", "which rows run, and how many times"): {
        "dataset PATH": "dataset file (.jsonl, .csv, .parquet); repeatable (default: the eval "
        "config's [experiment].dataset, else no rows)",
        "rows SPEC": "only these dataset rows, e.g. 3,7,10-20 (default: every row)",
        "limit N": "only the first N rows, N >= 1 (default: every row)",
        "n N|auto": "attempts per row, each an independent rollout (default 1); auto: one each, "
        "then more to the least measured rows while the confidence gate is undecided",
        "max_n K": "with --osmosis-n auto: at most K attempts per row (default 8)",
        "resume RUN_DIR": "continue the run in RUN_DIR: run the rows its rows.jsonl lacks, "
        "errored rows and rows whose fingerprint (row, rollout file, policy, threshold, rule, "
        "attempts) changed (default: a fresh run)",
        "resume_keep_errors": "with --osmosis-resume: keep journaled rows whose rollouts errored "
        "instead of running them again (default: off)",
        "preflight_only": "run only the preflight checks (dataset, entrypoint, eval config) "
        "(default: off)",
    },
    ("running", "what runs them, where, and how fast"): {
        "rollout ENTRYPOINT": "rollout entrypoint, FILE_OR_MODULE[:ATTR] (default: the eval "
        "config's, else the one rollouts/*/main.py)",
        "config PATH": "eval TOML (configs/eval/NAME.toml); its values are defaults (default: "
        "configs/eval/<rollout name>.toml when it exists)",
        "concurrency N": "rollouts in flight at once (default: workflow config, else 32)",
        "agent_timeout S": "agent deadline per rollout, seconds (default: the eval config's "
        "agent_workflow_timeout_s, else none)",
        "grader_timeout S": "grader deadline per rollout, seconds (default: the eval config's "
        "grader_timeout_s, else none)",
        "ray ADDRESS": "run the rows on a Ray cluster: auto, local (start one), HOST:PORT or "
        "ray://HOST:PORT (default: in this process)",
        "progress MODE": "live progress while rows run: off|auto|line|bar (default auto: bar on "
        "a terminal, else a plain line per interval)",
        "progress_interval S": "seconds between plain progress lines (default 30)",
    },
    ("policy", "the model that answers the rollouts' calls"): {
        "policy REF": "scripted policy MODULE_OR_FILE:CALLABLE serving the model calls (default: "
        "none; one of --osmosis-policy, --osmosis-model, cassettes or the eval config's model "
        "is needed)",
        "model LITELLM_ID": "real model through LiteLLM, e.g. openai/gpt-5-mini (default: the "
        "eval config's model_path, when no cassettes are recorded)",
        "force_litellm": "send every --osmosis-model call through LiteLLM, also to an "
        "OpenAI-compatible server of your own (default: off, such a server is called through "
        "the openai SDK)",
        "record_mode MODE": "record/replay model calls: none|once|new_episodes|all (default: "
        "replay cassettes when recorded, else call the policy)",
        "cassette_dir DIR": "where cassettes live (default: cassettes/ beside the dataset)",
        "policy_host HOST": "address the policy endpoint binds and gives rollouts (default "
        "127.0.0.1); with a remote --osmosis-ray cluster, this machine's address as the "
        "cluster reaches it",
        "price_in USD": "cost: US dollars per million prompt tokens (default: the eval "
        "config's, else no cost)",
        "price_out USD": "cost: US dollars per million completion tokens (default: the eval "
        "config's, else no cost)",
    },
    ("gating", "when a row, and the run, passes"): {
        "pass_threshold X": "a row passes when reward >= X, X between 0 and 1 (default: the eval "
        "config's, else 1.0)",
        "row_pass RULE": f"a row's verdict over its attempts: {ROW_PASS_HELP} (default all)",
        "min_pass_rate R": "suite gate: pass when the row pass rate is >= R (default: no gate, "
        "every row must pass)",
        "confidence C": "confidence of the intervals shown beside rates (default 0.95)",
        "gate_confidence C": "decide the pass-rate gate and the regression test at confidence "
        "C: pass when the interval clears --osmosis-min-pass-rate, fail when below it, else "
        "undecided (default: off, the gate compares the observed rate)",
        "gate_undecided MODE": "what an undecided gate does to the run: fail (default) or pass",
        "baseline REPORT": "compare with a previous JSON report, row by row (default: no "
        "comparison)",
        "allow_partial_baseline": "accept a baseline report of an incomplete run (interrupted, "
        "-x, --maxfail) (default: off)",
        "fail_on_regression": "fail the run when a row regressed against the baseline (default: "
        "off)",
        "regression_margin M": "with --osmosis-gate-confidence: the regression test calls a "
        "drop significant only when it is larger than M (a non-inferiority margin, e.g. 0.02; "
        "default 0)",
        "require_grader": "fail the run when a row ran ungraded (no Grader, or no "
        "ground_truth/metadata) (default: off)",
    },
    ("outputs", "the files a run writes"): {
        "output DIR": "where trajectories, artifacts and the report go (default "
        ".osmosis/runs/<run>)",
        "report PATH": "also write the JSON report here (default: only <output>/report.json)",
        "html PATH": "write a self-contained HTML report here (default: none)",
        "markdown PATH": "also write the run's markdown summary here (verdict, gates, worst "
        "rows, baseline changes; appended to $GITHUB_STEP_SUMMARY when that is set) (default: "
        "none)",
        "overwrite": "replace a report, HTML, markdown file or run folder an earlier run wrote "
        "(refused otherwise, exit 4) (default: off)",
    },
    ("server", "driving rollout servers instead of running in-process"): {
        "server URL": "drive this rollout server URL instead of running in-process; repeatable "
        "(default: in-process)",
        "serve": "start the workspace entrypoint's server as a subprocess and drive it "
        "(default: off)",
    },
}
"""Each option's ``stem METAVAR`` (an on/off flag has no metavar) and help, by help group
(``osmosis: <name> (<about>)``), in the order ``pytest --help`` lists them."""
REPEATABLE = frozenset({"dataset", "server"})
ALIASES = {
    "report": "--osmosis-json-report",
    "html": "--osmosis-html-report",
    "server": "--osmosis-server-url",
    "serve": "--osmosis-start-server",
}
"""Clearer names some options are also known by, listed first in the help (the stem's flag and
its ini twin keep working)."""

OPTIONS = tuple(
    OptionSpec(stem, help, metavar or None, group)
    for (group, _), helps in OPTION_HELP.items()
    for usage, help in helps.items()
    for stem, _, metavar in [usage.partition(" ")]
)
"""Every option, in the order ``pytest --help`` lists them."""
BY_FLAG = {name: spec for spec in OPTIONS for name in (spec.flag, ALIASES.get(spec.stem)) if name}
"""Each option by the names it takes on the command line: its flag and its alias."""


_KINDS: dict[str, tuple[str, Literal["string", "args", "bool"], Any]] = {
    "str": ("store", "string", ""),
    "list": ("append", "args", []),
    "flag": ("store_true", "bool", None),
}
"""Per kind: the argparse action, and the ini twin's type and default."""


def add_options(parser: pytest.Parser) -> None:
    """Register every option in its ``osmosis: <group>`` help group, each with its ini twin."""
    groups = {
        name: parser.getgroup(f"osmosis: {name}", f"osmosis: {name} ({about})")
        for name, about in OPTION_HELP
    }
    for spec in OPTIONS:
        action, ini_type, ini_default = _KINDS[spec.kind]
        names = (ALIASES[spec.stem], spec.flag) if spec.stem in ALIASES else (spec.flag,)
        takes = {} if spec.metavar is None else {"metavar": spec.metavar}  # a flag takes none
        groups[spec.group].addoption(
            *names, action=action, default=None, dest=spec.dest, help=spec.help, **takes
        )
        parser.addini(
            spec.dest, f"{spec.help} (ini twin of {spec.flag})", type=ini_type, default=ini_default
        )


PATH_STEMS = frozenset(
    {"dataset", "config", "output", "report", "cassette_dir", "baseline", "html", "markdown"}
)
"""Options naming a file or directory: from the ini file, relative to the ini file's directory."""
REF_STEMS = frozenset({"policy", "rollout"})
"""Options naming ``FILE.py[:ATTR]`` or a module: a file from the ini file is relative to it."""


def _from_ini(config: pytest.Config, stem: str, value: Any) -> Any:
    """Anchor an ini value's relative paths at the ini file, as pytest does for its own paths."""
    if config.inipath is None or stem not in PATH_STEMS | REF_STEMS:
        return value
    base = config.inipath.parent

    def anchored(text: str) -> str:
        if stem in REF_STEMS:
            target, sep, attr = text.partition(":")
            if not target.endswith(".py") or Path(target).is_absolute():
                return text  # a module name, or already absolute
            return str(base / target) + sep + attr
        path = Path(text).expanduser()
        return text if path.is_absolute() else str(base / path)

    # Only string and list (repeatable) options name paths.
    return [anchored(v) for v in value] if isinstance(value, list) else anchored(value)


def raw_value(config: pytest.Config, stem: str) -> Any:
    """The command-line value, else the ini value, else ``None`` (never a default).

    Relative paths on the command line are relative to where pytest runs; in the ini file,
    relative to the ini file (``cd data && pytest`` finds the same dataset).
    """
    dest = "osmosis_" + stem
    value = config.getoption(dest, default=None)
    if value not in (None, [], ""):
        return value
    ini = config.getini(dest)
    return None if ini in (None, [], "") else _from_ini(config, stem, ini)


@dataclass(frozen=True)
class RowPassRule:
    """How a row's attempts turn into one verdict."""

    kind: Literal["all", "any", "majority", "at_least", "rate"]
    value: float = 0.0

    def passes(self, passed: int, total: int) -> bool:
        """True when ``passed`` of ``total`` attempts satisfy the rule."""
        if total == 0:
            return False
        return {
            "all": passed == total,
            "any": passed >= 1,
            "majority": passed * 2 > total,
            "at_least": passed >= self.value,
            "rate": passed / total >= self.value,
        }[self.kind]

    def describe(self) -> str:
        """The rule as the user wrote it."""
        if self.kind == "at_least":
            return f"at_least:{int(self.value)}"
        if self.kind == "rate":
            return f"rate:{self.value:g}"
        return self.kind


def parse_row_pass(text: str) -> RowPassRule:
    """Parse ``all|any|majority|at_least:K|rate:R``; raise ``pytest.UsageError`` otherwise."""
    kind, _, arg = _word(text).partition(":")
    if kind in ("all", "any", "majority") and not arg:
        return RowPassRule(kind)  # type: ignore[arg-type]
    try:
        number = float(arg)
    except ValueError:
        number = math.nan
    if kind == "at_least" and number.is_integer() and number >= 1:
        return RowPassRule("at_least", number)
    if kind == "rate" and 0.0 <= number <= 1.0:
        return RowPassRule("rate", number)
    raise pytest.UsageError(
        f"--osmosis-row-pass: invalid rule {text!r}; expected one of {ROW_PASS_HELP} "
        "(K a whole number >= 1, R between 0 and 1)"
    )


_Check = tuple[Callable[[float], bool], str]
"""A test a number option's value must pass, and the error (after the flag) when it fails."""
_POSITIVE: _Check = (lambda x: x > 0, "must be > 0, got {value!r}")
_AT_LEAST_ONE: _Check = (lambda x: x >= 1, "must be >= 1, got {value!r}")
_NOT_NEGATIVE: _Check = (lambda x: x >= 0, "must be >= 0, got {value!r}")
_BELOW_ONE = "must be between 0 and 1 (exclusive), e.g. 0.95, got {value!r}"
_CONFIDENCE: tuple[_Check, ...] = (_POSITIVE, (lambda x: x < 1, _BELOW_ONE))
_LIMIT = (
    "must be >= 1, got {value!r}; drop --osmosis-limit to run every row, or select rows with "
    "--osmosis-rows"
)
_THRESHOLD = (
    "must be between 0 and 1, got {value!r}; a row passes when its reward is >= the threshold, "
    "and rewards run from 0 to 1 (e.g. 0.5)"
)
_MARGIN = "a drop in pass rate, between 0 and 1 (exclusive), e.g. 0.02 for 2 points, got {value!r}"
WHOLE_NUMBERS = frozenset({"limit", "n", "max_n", "concurrency"})
NUMBERS: dict[str, tuple[_Check, ...]] = {
    "limit": ((lambda x: x >= 1, _LIMIT),),
    "n": (_AT_LEAST_ONE,),
    "max_n": (_AT_LEAST_ONE,),
    "concurrency": (_AT_LEAST_ONE,),
    "agent_timeout": (_POSITIVE,),
    "grader_timeout": (_POSITIVE,),
    "progress_interval": (_POSITIVE,),
    "price_in": (_NOT_NEGATIVE,),
    "price_out": (_NOT_NEGATIVE,),
    "pass_threshold": ((lambda x: 0 <= x <= 1, _THRESHOLD),),
    "min_pass_rate": (_NOT_NEGATIVE, (lambda x: x <= 1, "must be between 0 and 1, got {value!r}")),
    "confidence": _CONFIDENCE,
    "gate_confidence": _CONFIDENCE,
    "regression_margin": (_NOT_NEGATIVE, (lambda x: x < 1, _MARGIN)),
}
"""The number options and their checks, in order; the settings field has the stem's name."""


def _number(stem: str, value: Any) -> float:
    """``value`` as the number option ``stem`` takes (an ``int`` when whole), or a usage error."""
    flag, whole = _flag_of(stem), stem in WHOLE_NUMBERS
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        kind = "a whole number" if whole else "a number"
        raise pytest.UsageError(f"{flag}: expected {kind}, got {value!r}") from None
    if not math.isfinite(number):
        raise pytest.UsageError(f"{flag}: expected a finite number, got {value!r}")
    if whole and not number.is_integer():
        raise pytest.UsageError(f"{flag}: expected a whole number, got {value!r}")
    for holds, error in NUMBERS[stem]:
        if not holds(number):
            raise pytest.UsageError(f"{flag}: " + error.format(value=value))
    return int(number) if whole else number


def _word(value: Any) -> str:
    """``value`` read as a word an option defines (a mode, a rule, ``auto``): trimmed and
    lower-cased, so ``ONCE`` on the command line or in the ini file is ``once``.

    The one rule for every such word; what names something of the user's (a path, a URL, a
    host, a module) is never passed here and keeps its case.
    """
    return str(value).strip().lower()


CHOICES: dict[str, tuple[str, ...]] = {
    "record_mode": RECORD_MODES,
    "gate_undecided": GATE_UNDECIDED,
    "progress": PROGRESS_MODES,
}
"""The options whose value is one of a fixed list of modes; the settings field has the stem's
name."""


def _choice(stem: str, value: Any) -> str:
    """``value`` as the :func:`_word` it is in ``CHOICES[stem]``, or a usage error."""
    choices = CHOICES[stem]
    if (text := _word(value)) not in choices:
        raise pytest.UsageError(
            f"{_flag_of(stem)}: invalid mode {value!r}; choose one of {', '.join(choices)}"
        )
    return text


@dataclass(frozen=True)
class OsmosisSettings:
    """Resolved, validated settings of one pytest session (primitives only)."""

    datasets: tuple[str, ...] = ()
    rollout: str | None = None
    policy: str | None = None
    model: str | None = None
    force_litellm: bool = False
    pass_threshold: float = 1.0
    #: The user (flag, ini or eval config) set the threshold: ungraded rows then fail.
    pass_threshold_set: bool = False
    concurrency: int | None = None
    rows: str | None = None
    limit: int | None = None
    agent_timeout: float | None = None
    grader_timeout: float | None = None
    output: str | None = None
    report: str | None = None
    record_mode: str | None = None
    cassette_dir: str | None = None
    n: int = 1
    n_auto: bool = False
    """``--osmosis-n auto``: rows get further attempts while the gate is undecided."""
    max_n: int = 8
    row_pass: RowPassRule = field(default_factory=lambda: RowPassRule("all"))
    #: The user gave ``--osmosis-row-pass``: with repeats, the gate judges that rule's rate.
    row_pass_set: bool = False
    min_pass_rate: float | None = None
    confidence: float = 0.95
    gate_confidence: float | None = None
    gate_undecided: str = "fail"
    baseline: str | None = None
    allow_partial_baseline: bool = False
    resume: str | None = None
    resume_keep_errors: bool = False
    fail_on_regression: bool = False
    regression_margin: float = 0.0
    require_grader: bool = False
    servers: tuple[str, ...] = ()
    serve: bool = False
    ray: str | None = None
    policy_host: str = "127.0.0.1"
    preflight_only: bool = False
    html: str | None = None
    toml_model: str | None = None
    price_in: float | None = None
    price_out: float | None = None
    progress: str = "auto"
    progress_interval: float = 30.0
    markdown: str | None = None
    overwrite: bool = False

    @property
    def active(self) -> bool:
        """True when the session has dataset rows to run."""
        return bool(self.datasets)


PLAIN_STEMS = ("output", "report", "cassette_dir", "baseline", "resume", "html", "markdown")
"""Options whose settings field (of the same name) is the value as given."""


def resolve_settings(
    config: pytest.Config, toml_defaults: dict[str, Any] | None = None
) -> OsmosisSettings:
    """Build :class:`OsmosisSettings` from the command line, the ini file and TOML defaults."""
    toml = toml_defaults or {}
    _refuse_empty_values(config)

    def pick(stem: str) -> Any:
        value = raw_value(config, stem)
        return toml.get(stem) if value is None else value

    choices: dict[str, Any] = {
        stem: _choice(stem, value) for stem in CHOICES if (value := pick(stem)) is not None
    }
    policy, model = _policy_or_model(config)
    n, max_n, rule_text, min_rate = (pick(s) for s in ("n", "max_n", "row_pass", "min_pass_rate"))
    auto = isinstance(n, str) and _word(n) == "auto"
    if max_n is not None and not auto:
        raise pytest.UsageError(
            f"--osmosis-max-n {max_n}: applies only with --osmosis-n auto (a fixed "
            "--osmosis-n N already says how many attempts each row gets)"
        )
    if auto and (raw_value(config, "resume") or config.getoption("numprocesses", None)):
        raise pytest.UsageError(
            "--osmosis-n auto decides each row's attempts from the whole run's results, on one "
            "process: it does not combine with --osmosis-resume or pytest-xdist's -n; give a "
            "fixed --osmosis-n N there"
        )
    if auto and rule_text is not None and min_rate is not None:
        raise pytest.UsageError(
            f"--osmosis-n auto with --osmosis-row-pass {rule_text}: the gate would judge the "
            "rate that rule defines, which changes with the number of attempts auto gives "
            "each row; drop --osmosis-row-pass (the gate then judges the attempt pass rate), "
            "or give a fixed --osmosis-n N"
        )
    ray, servers = raw_value(config, "ray"), raw_value(config, "server") or []
    if ray:
        ray = _ray_address(str(ray))
    if ray and (servers or raw_value(config, "serve")):
        raise pytest.UsageError(
            "--osmosis-ray runs the rows on a Ray cluster and --osmosis-server/--osmosis-serve "
            "drive rollout servers: choose one (a server can itself run on Ray: "
            "osmosis-rollout serve ... --backend ray)"
        )
    for url in servers:
        _check_server_url(str(url))
    policy_host = str(raw_value(config, "policy_host") or "127.0.0.1")
    if policy_host in ("0.0.0.0", "::", ""):
        raise pytest.UsageError(
            f"--osmosis-policy-host: {policy_host!r} is not an address rollouts can call; pass "
            "this machine's address as they reach it, e.g. its LAN IP (default 127.0.0.1)"
        )
    if not _is_host(policy_host):
        raise pytest.UsageError(
            f"--osmosis-policy-host: {policy_host!r} is not a host name or IP address; give "
            "the address rollouts reach this machine at, without scheme or port, e.g. "
            "192.168.1.20 (default 127.0.0.1)"
        )
    rows = raw_value(config, "rows")
    if rows is not None:
        from osmosis_rollout.dataset.selection import parse_ranges
        from osmosis_rollout.errors import DatasetError

        try:
            parse_ranges(rows)
        except DatasetError as exc:
            raise pytest.UsageError(f"--osmosis-rows: {exc}") from None
    if (pick("price_in") is None) != (pick("price_out") is None):
        raise pytest.UsageError(
            "--osmosis-price-in and --osmosis-price-out go together: give both, in US dollars "
            "per million prompt and completion tokens (e.g. 0.25 and 2.0)"
        )
    numbers: dict[str, Any] = {
        stem: _number(stem, value)
        for stem in NUMBERS
        if (value := pick(stem)) is not None and not (stem == "n" and auto)
    }
    if numbers.get("min_pass_rate") == 0:
        raise pytest.UsageError(
            f"--osmosis-min-pass-rate {min_rate}: a gate at 0 never fails a run; drop it (any "
            "missed row then fails the run) or give a rate above 0, e.g. 0.5 (1 means every "
            "row must pass)"
        )
    # A flag's ini twin is read as a bool by pytest (``getini`` parses yes/no, on/off, 1/0).
    flags: dict[str, Any] = {
        spec.stem: bool(raw_value(config, spec.stem)) for spec in OPTIONS if spec.kind == "flag"
    }
    return OsmosisSettings(
        # The eval config's own dataset counts when no --osmosis-dataset is given.
        datasets=tuple(str(p) for p in (raw_value(config, "dataset") or toml.get("dataset") or [])),
        rollout=pick("rollout"),
        policy=policy,
        model=model,
        toml_model=toml.get("model"),
        rows=rows,
        n_auto=auto,
        row_pass=RowPassRule("all") if rule_text is None else parse_row_pass(str(rule_text)),
        row_pass_set=rule_text is not None,
        pass_threshold_set="pass_threshold" in numbers,
        servers=tuple(servers),
        ray=ray,
        policy_host=policy_host,
        **choices,
        **numbers,
        **{stem: raw_value(config, stem) for stem in PLAIN_STEMS},
        **flags,
    )


def _refuse_empty_values(config: pytest.Config) -> None:
    """``--osmosis-rows ''`` and the like: an empty value given on purpose is a mistake (left
    alone it would read as "not given" and, for a selection, run every row)."""
    for spec in OPTIONS:
        value = config.getoption(spec.dest, default=None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):  # a flag's is True or None
            raise pytest.UsageError(
                f"{spec.flag}: empty value; expected {spec.metavar}: {spec.help}; "
                "or leave the option out"
            )


_HOST_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"{_HOST_LABEL}(\.{_HOST_LABEL})*\.?")


def _is_host(text: str) -> bool:
    """A host name or an IP address (IPv6 with or without brackets), nothing more."""
    import ipaddress

    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        if re.fullmatch(r"[0-9.]+", text):
            return False  # dotted digits that are no IPv4 address (10.0.0.999)
        return len(text) <= 253 and _HOSTNAME.fullmatch(text) is not None
    return True


def _check_server_url(url: str) -> None:
    """An ``http(s)://HOST[:PORT]`` URL, checked before any server is called."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # a port that is no number raises
    except ValueError:
        ok = False
    if not ok:
        raise pytest.UsageError(
            f"--osmosis-server: {url!r} is not a URL of a rollout server; give "
            "http://HOST:PORT (e.g. http://127.0.0.1:8000), or --osmosis-start-server to start "
            "the workspace's own"
        )


def _ray_address(address: str) -> str:
    """``auto``, ``local``, ``HOST:PORT`` or ``ray://HOST:PORT``, checked before Ray is loaded."""
    if _word(address) in ("auto", "local"):
        return _word(address)
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if sep and _is_host(host) and port.isdigit() and 0 < int(port) < 65536:
        return address
    raise pytest.UsageError(
        f"--osmosis-ray: {address!r} is not a Ray address; give one of auto, local, HOST:PORT "
        "or ray://HOST:PORT (e.g. 10.0.0.5:6379 or ray://head:10001)"
    )


def _policy_or_model(config: pytest.Config) -> tuple[Any, Any]:
    """``(policy, model)``, at most one set: the two choose one policy, and the one given on
    the command line overrides the other's ini value (the command line beats the ini file)."""
    policy, model = raw_value(config, "policy"), raw_value(config, "model")
    on_cli = {stem for stem in ("policy", "model") if config.getoption("osmosis_" + stem, None)}
    if len(on_cli) == 1:
        policy, model = (policy, None) if "policy" in on_cli else (None, model)
    if policy and model:
        if on_cli:
            raise pytest.UsageError(
                "--osmosis-policy and --osmosis-model both given on the command line: choose "
                "the scripted policy or the real model"
            )
        raise pytest.UsageError(
            f"osmosis_policy and osmosis_model both set in {config.inipath}: keep one, or pass "
            "one of --osmosis-policy, --osmosis-model to override the ini file"
        )
    return policy, model


def resolve_path(config: pytest.Config, value: str) -> Path:
    """A user path relative to the invocation directory."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def check_ini_keys(config: pytest.Config) -> None:
    """An ``osmosis_*`` key in the ini file that no option has is an error naming the nearest.

    pytest only warns about an unknown key, and the run then goes on without it (a misspelled
    ``osmosis_dataset`` ends as "no tests ran").
    """
    import difflib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Config.inicfg is deprecated in pytest 9, not gone
        keys = sorted(config.inicfg)
    known = sorted(spec.dest for spec in OPTIONS)
    lines = [
        f"{config.inipath or 'the ini file'}: unknown option {key}"
        + "".join(f"; did you mean {near}?" for near in difflib.get_close_matches(key, known, 1))
        for key in keys
        if key.startswith("osmosis_") and key not in known
    ]
    if lines:
        lines.append("pytest-osmosis's ini options are listed as osmosis_* in pytest --help")
        raise pytest.UsageError("\n".join(lines))


def check_rootdir_kept(config: pytest.Config) -> None:
    """Refuse a run whose rootdir or ini file an ``--osmosis-*`` value moved.

    pytest finds its rootdir and ini file before plugins load, reading the value in
    ``--osmosis-dataset ../shared/ext.jsonl`` as a test path: that can move the rootdir and
    leave the workspace's ``pyproject.toml`` (its policy, its model) unread. pytest's rule is
    run again without such values; when it finds another rootdir or ini file, the run stops
    before anything is written, naming the ``--flag=value`` form, which pytest skips.
    """
    from _pytest.config.findpaths import determine_setup

    invocation = Path(config.invocation_params.dir)
    spaced = [
        (flag, value)
        for flag, value in itertools.pairwise(config.invocation_params.args)
        if flag in BY_FLAG
        and BY_FLAG[flag].kind != "flag"
        and (invocation / value.split("::")[0]).exists()
    ]
    if not spaced:
        return
    option = config.option
    try:
        rootpath, inipath, *_ = determine_setup(
            inifile=option.inifilename,
            override_ini=option.override_ini,
            args=[str(a) for a in option.file_or_dir or []],
            rootdir_cmd_arg=option.rootdir or None,
            invocation_dir=invocation,
        )
    except TypeError:  # pragma: no cover - another pytest's signature: nothing to compare
        return
    if rootpath == config.rootpath and inipath == config.inipath:
        return
    flag, value = spaced[0]
    moved = f"moved pytest's rootdir from {rootpath} to {config.rootpath}"
    if inipath != config.inipath:
        moved += f" and left {inipath} unread" if inipath else f" and loaded {config.inipath}"
    raise pytest.UsageError(
        f"pytest-osmosis: {flag} {value} {moved}: pytest reads an option's value given after "
        f"a space as a test path before the plugin loads; write {flag}={value}"
    )
