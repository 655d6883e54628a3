"""A self-contained HTML report: summary, histograms, baseline, and a table of rows to explore.

Inline CSS, SVG histograms (reward, latency, tokens) and a little JavaScript that sorts,
searches and filters the rows (by outcome, error type, baseline change); a content security
policy forbids every request. A collapsed row says why it failed (the error or the grader's
reason) beside the answer and the label; it opens (click, Enter or Space) to its attempts'
tracebacks, output and conversations, read from their ATIF trajectory files.
``report.html#row-<key>`` opens a row.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

from osmosis_rollout.runs.gating import RegressionTest, percent
from osmosis_rollout.runs.journal import read_json_object
from osmosis_rollout.runs.report_text import (
    baseline_counts,
    format_cost,
    interval_text,
    ungraded_line,
)
from osmosis_rollout.runs.run_verdict import failed_parts

MAX_MESSAGE_CHARS = 4000
"""A conversation message longer than this is cut in the report (the trajectory has it all)."""
MAX_SEARCH_CHARS = 20_000
"""What a row's search covers of its prompts, messages and tool calls: the page stays small."""
MAX_WHY_CHARS = 240
"""How much of a reason, an answer or a label the collapsed row shows (the row opens to all)."""

OUTCOMES = ("passed", "failed", "errored", "skipped")
OUTCOME_WORDS = {"failed": "below threshold"}
"""The page's word for a ``failed`` row that did not error (the "failed" card counts both)."""

_HEADS = ("row", "outcome", "reward", "pass@k", "vs baseline", "why", "latency s", "tokens", "cost")
"""The table's column heads; ``pass@k``, ``vs baseline`` and ``cost`` only when a row has one."""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
"""Nothing is fetched: ``html.css`` and ``html.js`` are inlined, the images are inline SVG."""


def _asset(name: str) -> str:
    return files("osmosis_rollout.runs").joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _clipped(text: str) -> str:
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... [{len(text) - MAX_MESSAGE_CHARS} more chars]"
    return _e(text)


def _short(text: str) -> str:
    """``text`` on one line, escaped, cut at :data:`MAX_WHY_CHARS`."""
    text = " ".join(text.split())
    return _e(text if len(text) <= MAX_WHY_CHARS else text[: MAX_WHY_CHARS - 1] + "\u2026")


def _div(css: str, body: str) -> str:
    return f'<div class="{css}">{body}</div>'


def _folded(summary: str, text: str, *, opened: bool = False) -> str:
    head = "<details open>" if opened else "<details>"
    return f'{head}<summary>{summary}</summary><pre class="tb">{_clipped(text)}</pre></details>'


def _td(sort_value: Any, text: str, css: str = "num") -> str:
    """A table cell sorted by ``sort_value`` (None sorts as the lowest)."""
    return f'<td class="{css}" data-v="{_e(sort_value)}">{text}</td>'


def _num(value: Any) -> float | None:
    """``value`` as a finite number, else None (a missing reward, a NaN, a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _numbers(attempts: list[dict[str, Any]], key: str) -> list[float]:
    return [value for a in attempts if (value := _num(a.get(key))) is not None]


def _g(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _estimated(summary: dict[str, Any], what: str) -> str:
    return " (estimated)" if summary.get(f"{what}_estimated") else ""


def row_outcome(verdict: str, attempts: list[dict[str, Any]]) -> str:
    """``passed``, ``skipped``, ``errored`` (failed because a rollout errored) or ``failed``."""
    errored = verdict == "failed" and any(a.get("status") == "failed" for a in attempts)
    return "errored" if errored else verdict


def _histogram(
    title: str, values: list[float], *, unit: str = "", fixed: tuple[float, float] | None = None
) -> str:
    """One inline SVG histogram of ``values`` in ten bins."""
    head = f'<div class="chart"><h3>{_e(title)}</h3>'
    if not values:
        return head + "<p class=meta>No values.</p></div>"
    lo, hi = min(values), max(values)
    if fixed is not None and fixed[0] <= lo and hi <= fixed[1]:
        lo, hi = fixed  # the usual range: fixed bins read the same across runs
    width = (hi - lo) / 10 if hi > lo else 1.0
    counts = Counter(min(int((value - lo) / width), 9) for value in values)
    peak = max(counts.values())
    bars = []
    for i in range(10):
        h = 110 * counts[i] / peak
        x = 6 + i * 34
        label = f"{lo + i * width:.3g}-{lo + (i + 1) * width:.3g}" if hi > lo else f"{lo:.3g}"
        bars.append(
            f'<rect x="{x}" y="{122 - h:.1f}" width="30" height="{h:.1f}"><title>{counts[i]} '
            f'from {_e(label + unit)}</title></rect><text x="{x + 15}" y="{118 - h:.1f}" '
            f'text-anchor="middle">{counts[i] or ""}</text>'
        )
    return (
        f'{head}<svg class="histogram" width="350" height="142" role="img" '
        f'aria-label="{_e(title)} histogram">{"".join(bars)}'
        f'<text x="6" y="138">{_e(f"{lo:.3g}{unit}")}</text>'
        f'<text x="346" y="138" text-anchor="end">{_e(f"{hi:.3g}{unit}")}</text>'
        "</svg></div>"
    )


def _osmosis(document: dict[str, Any] | None) -> dict[str, Any]:
    """What the trajectory records of the row: its ``label`` and the grader's ``reward``."""
    return ((document or {}).get("extra") or {}).get("osmosis") or {}


def _text(value: Any) -> str:
    """A message's content (a string or text parts) as text; anything else as JSON."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        return "\n".join(_text(p.get("text") if isinstance(p, dict) else p) for p in value)
    return json.dumps(value, ensure_ascii=False, indent=2)


def _call_text(name: str, arguments: Any) -> str:
    """``multiply({"a": 6, "b": 7})`` on one line when short, else the arguments indented below."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{name}({arguments})"
    compact = json.dumps(arguments, ensure_ascii=False)
    if len(compact) <= 100:
        return f"{name}({compact})"
    return f"{name}(\n{json.dumps(arguments, ensure_ascii=False, indent=2)}\n)"


def _tool_result(result: dict[str, Any]) -> str:
    return _div("result", "&larr; " + _clipped(_text(result.get("content"))))


def _conversation(document: dict[str, Any] | None, words: list[str]) -> str:
    """A trajectory's steps: who spoke, what they said, the tools they called and the answers.

    ``words`` gets what the row's search covers: each message and each tool call.
    """
    if document is None:
        return "<p class=meta>No trajectory was written for this attempt.</p>"
    parts = []
    for step in document.get("steps") or []:
        if not isinstance(step, dict):
            continue
        who = str(step.get("source") or step.get("role") or "step")
        body = [_div("who", _e(who))]
        if message := _text(step.get("message")):
            words.append(message)
            body.append(f"<div>{_clipped(message)}</div>")
        observed = (step.get("observation") or {}).get("results") or []
        results = {r.get("source_call_id"): r for r in observed if isinstance(r, dict)}
        for call in step.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            name = call.get("function_name") or call.get("name") or "tool"
            words.append(called := _call_text(str(name), call.get("arguments")))
            body.append(_div("call", "&rarr; " + _clipped(called)))
            if (result := results.pop(call.get("tool_call_id"), None)) is not None:
                body.append(_tool_result(result))
        body.extend(_tool_result(result) for result in results.values())
        css = who if who in ("user", "agent", "system") else ""
        parts.append(_div(f"step {css}", "".join(body)))
    osmosis = _osmosis(document)
    graded = [
        f"{name}: {_clipped(_text(osmosis[key]))}"
        for name, key in (("label", "label"), ("grader reward", "reward"))
        if osmosis.get(key) is not None
    ]
    if graded:
        parts.append(f'<p class="meta">{" &middot; ".join(graded)}</p>')
    return "".join(parts) or "<p class=meta>The trajectory has no steps.</p>"


def _attempt_block(
    attempt: dict[str, Any], repeated: bool, words: list[str], document: dict[str, Any] | None
) -> str:
    """One attempt, opened: its outcome, error, traceback and output, what the grader said,
    and its conversation."""
    status = attempt.get("status")
    if status == "failed":
        outcome = f"errored [{_e(attempt.get('error_type'))}]"
    elif status == "skipped":
        outcome = "skipped (sample removed)"
    else:
        outcome = f"reward {_g(_num(attempt.get('reward')))}"
    title = f"attempt {attempt.get('run_index', 0)}" if repeated else "conversation"
    parts = [f"<h4>{title} &middot; {outcome}</h4>"]
    if attempt.get("err_message"):
        parts.append(_div("err", _clipped(str(attempt["err_message"]))))
    if traceback := attempt.get("error_traceback"):
        parts.append(_folded("traceback", str(traceback), opened=True))
    for name, key in (("printed", "printed"), ("logged", "workflow_log")):
        if text := attempt.get(key):
            parts.append(_folded(f"{name} ({len(str(text)):,} chars)", str(text)))
    # An errored rollout may have no trajectory: its prompt and diagnostics say what ran.
    if status == "failed" and (prompt := attempt.get("prompt")):
        parts.append(_div("step user", _div("who", "prompt") + _clipped(str(prompt))))
    if status == "failed" and (diagnostics := attempt.get("diagnostics_path")):
        parts.append(_div("meta", f"diagnostics: {_e(diagnostics)}"))
    said = attempt.get("grader") or {}
    reason = f"<pre>{_clipped(str(said['reason']))}</pre>" if said.get("reason") else ""
    if said.get("metrics"):
        reason += _div("meta", f"metrics: {_clipped(json.dumps(said['metrics'], default=str))}")
    if reason:
        parts.append(_div("reason", f"<b>grader said</b>{reason}"))
    where = attempt.get("trajectory_filename")
    meta = [f"rollout {_e(attempt.get('rollout_id'))}", *([_e(where)] if where else [])]
    parts += [_conversation(document, words), _div("meta", " &middot; ".join(meta))]
    return _div("attempt", "".join(parts))


def _anchor(key: str, taken: set[str]) -> str:
    """The row's ``id``: ``row-<key>``, made safe for a URL, and unique on the page."""
    base = "row-" + re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    anchor, n = base, 1
    while anchor in taken:
        n += 1
        anchor = f"{base}-{n}"
    taken.add(anchor)
    return anchor


def _why_cell(attempts: list[dict[str, Any]], errors: list[str], labels: list[str]) -> str:
    """Why the row ended as it did, without opening it: the error or the grader's reason, then
    the answer and the label. Sorted by error type, then by the reason."""
    failures = Counter(
        f"{a.get('error_type')}: {a.get('err_message') or ''}"
        + (f" (at {a['error_where']})" if a.get("error_where") else "")
        for a in attempts
        if a.get("status") == "failed"
    )
    # Attempts that failed the same way are said once, with how many did.
    error_text = "; ".join(
        text + (f" (\u00d7{count})" if count > 1 else "") for text, count in failures.items()
    )
    missed = [a for a in attempts if a.get("passed") is not True] or attempts
    reason = next((str(r) for a in missed if (r := (a.get("grader") or {}).get("reason"))), "")
    answer = next((str(a["last_assistant"]) for a in missed if a.get("last_assistant")), "")
    label = labels[0] if labels else ""
    parts = [_div(c, _short(t)) for c, t in (("err", error_text), ("said", reason)) if t]
    said = [f"{k}: {_short(v)}" for k, v in (("answer", answer), ("label", label)) if v]
    if said:
        parts.append(_div("meta", " &middot; ".join(said)))
    return _td(" ".join(errors) or reason, "".join(parts), "why")


_BEFORE = {"regressed": "passed before", "improved": "failed before"}
"""What the vs-baseline cell says of a row whose outcome changed."""


def _row_group(
    verdict: dict[str, Any],
    attempts: list[dict[str, Any]],
    baseline: dict[str, Any],
    columns: list[str],
    anchors: set[str],
) -> str:
    """A row's ``<tbody>``: the collapsed row (one cell per column) and its opened detail."""
    nodeid = verdict["nodeid"]
    anchor = _anchor(str(verdict.get("row_key") or nodeid), anchors)
    # Each attempt's ATIF trajectory: None when it was not written or cannot be read.
    documents = [
        read_json_object(Path(a["trajectory_filename"])) if a.get("trajectory_filename") else None
        for a in attempts
    ]
    labels = [label for d in documents if (label := _text(_osmosis(d).get("label")))]
    outcome = row_outcome(verdict["verdict"], attempts)
    failed = [a for a in attempts if a.get("status") == "failed"]
    errors = sorted({str(a["error_type"]) for a in failed})
    changes = [c for c in ("regressed", "improved", "new") if nodeid in baseline.get(c, ())]
    key = _e(verdict["row_key"])
    tags = "".join(f'<span class="tag {c}">{c}</span>' for c in changes)
    rank = OUTCOMES.index(outcome) if outcome in OUTCOMES else 9
    rewards = _numbers(attempts, "reward")
    mean_reward = sum(rewards) / len(rewards) if rewards else None
    each_reward = ", ".join(_g(_num(a.get("reward"))) or "-" for a in attempts)
    pass_at_k = verdict.get("pass_at_k") or {}
    at_k = " ".join(f"@{k} {float(v):.2f}" for k, v in pass_at_k.items())
    passed = f"{verdict.get('passed_attempts', 0)}/{verdict.get('scored_attempts', 0)} {at_k}"
    delta = _num((baseline.get("reward_deltas") or {}).get(nodeid))
    moved = [] if delta is None else [f"{delta:+.3g}"]
    moved += [_BEFORE[c] for c in changes if c in _BEFORE]
    moved_css = "num passed" if (delta or 0) > 0 else "num failed"
    durations = _numbers(attempts, "duration_ms")
    latency = sum(durations) / len(durations) / 1000 if durations else None
    tokens = sum(int(a.get("tokens") or 0) for a in attempts)
    cost = sum(costs) if (costs := _numbers(attempts, "cost_usd")) else None
    cells = {
        "row": f'<td data-v="{key}"><a class="anchor" href="#{anchor}" '
        f'title="link to this row">#</a>{key}{tags}</td>',
        "outcome": _td(rank, OUTCOME_WORDS.get(outcome, outcome), outcome),
        "reward": _td(mean_reward, _e(each_reward)),
        "pass@k": _td(_num(pass_at_k.get("1")), _e(passed)),
        "vs baseline": _td(delta, _e(" ".join(moved)), moved_css),
        "why": _why_cell(attempts, errors, labels),
        "latency s": _td(latency, _g(latency)),
        "tokens": _td(tokens, f"{tokens:,}" if tokens else ""),
        "cost": _td(cost, "" if cost is None else format_cost(cost)),
    }
    words: list[str] = []
    detail = "".join(
        _attempt_block(a, len(attempts) > 1, words, d)
        for a, d in zip(attempts, documents, strict=True)
    ) or ("<p class=meta>No attempt was recorded for this row.</p>")
    answer = next((str(a["last_assistant"]) for a in attempts if a.get("last_assistant")), "")
    before = (baseline.get("regressed_answers") or {}).get(nodeid)
    if "regressed" in changes and before is not None:
        detail = (
            '<div class="beside">'
            f'<div><div class="who">baseline answer</div>{_clipped(str(before))}</div>'
            f'<div><div class="who">this run\'s answer</div>{_clipped(answer)}</div></div>'
        ) + detail
    search_text = " ".join(
        [
            str(verdict["row_key"]),
            nodeid,
            outcome,
            "; ".join(f"{a.get('error_type')}: {a.get('err_message') or ''}" for a in failed),
            *(str(a.get(field) or "") for field in ("last_assistant", "prompt") for a in attempts),
            *labels,
            *(str((a.get("grader") or {}).get("reason") or "") for a in attempts),
            *(" ".join(a.get("tool_calls") or []) for a in attempts),
            *words,
        ]
    ).lower()[:MAX_SEARCH_CHARS]
    return (
        f'<tbody class="group" id="{anchor}" data-text="{_e(search_text)}">'
        f'<tr class="row" tabindex="0" aria-expanded="false" data-outcome="{outcome}" '
        f'data-errors="{_e(" ".join(errors))}" data-change="{" ".join(changes)}">'
        f"{''.join(cells[c] for c in columns)}</tr>"
        f'<tr class="detail"><td colspan="{len(columns)}">{detail}</td></tr></tbody>'
    )


def _cards(summary: dict[str, Any], outcomes: Counter[str]) -> str:
    """The summary's cards: the rows' counts, pass rate, mean reward, tokens, cost, time."""
    rows = summary.get("rows", {})
    stats = summary.get("reward_stats") or {}
    failed = outcomes["failed"] + outcomes["errored"]
    left_out = stats.get("errored_left_out")
    cards: dict[str, Any] = {
        "rows": rows.get("total"),
        "passed": outcomes["passed"],
        # The words and the sets of the terminal's rows line: failed = errored + below threshold.
        "failed": f"{failed} ({failed_parts(failed, outcomes['errored'])})" if failed else "0",
        "skipped": outcomes["skipped"],
        "pass rate": f"{float(rows.get('pass_rate') or 0):.1%}"
        + interval_text(rows.get("pass_rate_interval")),
        "threshold": summary.get("pass_threshold"),
        "mean reward": _g(_num(stats.get("mean")))
        + interval_text(stats.get("mean_interval"), "{:.3g}")
        + (f" ({left_out} errored attempts left out)" if left_out else ""),
    }
    if tokens := summary.get("tokens_used"):
        cards["tokens" + _estimated(summary, "tokens")] = f"{int(tokens):,}"
    if (cost := _num(summary.get("cost_usd"))) is not None:
        cards["cost" + _estimated(summary, "cost")] = format_cost(cost)
    if (wall := _num(summary.get("rollouts_wall_s"))) is not None:
        cards["wall time"] = f"{wall:.1f}s"
    for k, v in (summary.get("pass_at_k") or {}).items():
        if str(k) != "1":
            cards[f"pass@{k}"] = f"{float(v):.3f}"
    css = {"passed": "passed", "failed": "failed" if failed else "", "skipped": "skipped"}
    return "".join(
        f'<div class="card"><small>{_e(k)}</small><b class="{css.get(k, "")}">{_e(v)}</b></div>'
        for k, v in cards.items()
    )


def _banners(head: dict[str, Any]) -> str:
    """The run's verdict (as the exit status and JUnit hold it), then whether the run is
    incomplete or ungraded, then a gate's line in a report without a verdict."""
    summary, verdict = head["summary"], head.get("verdict")
    parts = []
    if verdict:
        # Each reason that is not a plain pass: the verdict holds every gate's line.
        outcome = verdict["outcome"]
        lines = "".join(
            f"<br>{_e(r['line'])}"
            for r in verdict["reasons"]
            if r["outcome"] != "passed" or r["kind"] == "gate"
        )
        if estimand := (head.get("gate") or {}).get("estimand"):
            lines += _div("estimand", f"gate judges {_e(estimand)}")  # as the terminal says
        parts.append(
            f'<div class="banner {"good" if outcome == "passed" else "bad"}" '
            f'data-verdict="{outcome}">Verdict: {outcome.upper()} '
            f"(exit status {verdict['exit_status']}){lines}</div>"
        )
    if summary.get("complete") is False:
        not_run = summary.get("not_run")
        count = not_run.get("count") if isinstance(not_run, dict) else not_run
        reason = summary.get("stopped_by") or summary.get("interrupted") or "stopped early"
        shown = _e(count if count is not None else "some")
        parts.append(_div("banner bad", f"Incomplete run ({_e(reason)}): {shown} row(s) not run"))
    if ungraded := ungraded_line(summary, (head.get("config") or {}).get("entrypoint")):
        parts.append(_div("banner bad", _e(ungraded)))
    if (gate := head.get("gate")) and not verdict:
        parts.append(_gate_banner(gate))
    return "".join(parts)


def _gate_banner(gate: dict[str, Any]) -> str:
    """The gate's line and what it judges (``gate.estimand``)."""
    ok = bool(gate.get("passed"))
    word = "passed" if ok else "failed"
    if isinstance(gate.get("interval"), dict):
        # Decided at a stated confidence (--osmosis-gate-confidence): its interval and outcome.
        estimate = f"{float(gate.get('estimate') or 0):.1%}{_e(interval_text(gate['interval']))}"
        decided = f" ({word})" if gate.get("outcome") == "undecided" else ""
        line = (
            f"{_e(gate.get('measure'))} {estimate} vs {float(gate.get('min_pass_rate') or 0):.1%}: "
            f"{_e(gate.get('outcome'))}{decided}"
        )
    else:
        rate, need = _num(gate.get("pass_rate")) or 0, _num(gate.get("min_pass_rate")) or 0
        line = (
            f"{_e(gate.get('measure', 'pass rate'))} {rate:.1%} {'&gt;=' if ok else '&lt;'} "
            f"{need:.1%}: {word}"
        )
    if gate.get("estimand"):
        line += _div("estimand", f"judges {_e(gate['estimand'])}")
    return _div(f"banner {'good' if ok else 'bad'}", f"gate: {line}")


def _baseline_section(baseline: dict[str, Any]) -> str:
    """What changed against the baseline: the counts, the paired test, the rows by change."""
    if not baseline:
        return ""
    where = f"(against {_e(baseline.get('path'))})"
    parts = [f"<h2>Baseline</h2><p>{baseline_counts(baseline)} {where}</p>"]
    if test := baseline.get("test"):
        how = f"{_e(test['method'])}, {_e(percent(test['confidence']))}"
        parts.append(f"<p><b>{_e(RegressionTest(**test).describe())}</b> ({how})</p>")
    for name in ("regressed", "improved", "gone"):
        if keys := baseline.get(name) or []:
            shown = ", ".join(_e(k) for k in keys[:50]) + (" ..." if len(keys) > 50 else "")
            parts.append(f"<p><b>{name}</b>: {shown}</p>")
    return "".join(parts)


def render(document: dict[str, Any]) -> str:
    """The whole report as one HTML string."""
    return "".join(render_parts(document))


def render_parts(head: dict[str, Any]) -> Iterator[str]:
    """The report's HTML in pieces, from the report document ``head``."""
    attempts_of: dict[str, list[dict[str, Any]]] = {}
    for attempt in head.get("rows", []):
        attempts_of.setdefault(attempt["nodeid"], []).append(attempt)
    groups = [(v, attempts_of.get(v["nodeid"], [])) for v in head.get("row_verdicts", [])]
    every = [a for _, attempts in groups for a in attempts]
    summary = head["summary"]
    baseline = head.get("baseline") or {}
    outcomes = Counter(row_outcome(v["verdict"], attempts) for v, attempts in groups)
    error_types = Counter(str(a["error_type"]) for a in every if a.get("status") == "failed")
    shown = {
        "pass@k": any(v.get("pass_at_k") for v, _ in groups),
        "vs baseline": bool(baseline),
        "cost": bool(_numbers(every, "cost_usd")),
    }
    columns = [c for c in _HEADS if shown.get(c, True)]
    latencies = [ms / 1000 for ms in _numbers(every, "duration_ms")]
    tokens = _numbers(every, "tokens")
    charts = (
        _histogram("reward", _numbers(every, "reward"), fixed=(0.0, 1.0))
        + _histogram("latency per attempt (s)", latencies, unit="s")
        + _histogram("tokens per attempt" + _estimated(summary, "tokens"), tokens)
    )
    kinds = ["all", *OUTCOMES] + (["regressed", "improved"] if baseline else [])
    buttons = "".join(
        f'<button type="button" data-kind="{k}" class="{"on" if k == "all" else ""}">'
        f"{OUTCOME_WORDS.get(k, k)}</button>"
        for k in kinds
    )
    options = "".join(
        f'<option value="{_e(k)}">{_e(k)} ({v})</option>' for k, v in error_types.most_common()
    )
    # The row and why columns sort as text, the others as numbers.
    head_cells = "".join(
        f'<th class="sortable" data-col="{i}" data-type="{"text" if c in ("row", "why") else "num"}">'
        f"{_e(c)}</th>"
        for i, c in enumerate(columns)
    )
    config = head.get("config") or {}
    sub = ", ".join(
        f"{k} {_e(config[k])}"
        for k in ("mode", "entrypoint", "policy", "n", "concurrency")
        if config.get(k) not in (None, "", [])
    )
    errors = ", ".join(f"{_e(k)} &times;{v}" for k, v in error_types.most_common())
    yield (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>pytest-osmosis report</title><style>{_asset('html.css')}</style></head><body>"
        f'<h1>pytest-osmosis report</h1><p class="sub">{sub}</p>{_banners(head)}'
        f'<div class="cards">{_cards(summary, outcomes)}</div>'
        f'<h2>Distributions</h2><div class="charts">{charts}</div>{_baseline_section(baseline)}'
        + (f"<h2>Errors by type</h2><p>{errors}</p>" if errors else "")
        + '<h2>Rows</h2><div class="controls"><input id="search" type="search" placeholder="search '
        'rows, prompts, messages, tool calls, errors" aria-label="search rows">'
        f'<span class="filters">{buttons}</span><select id="errtype" aria-label="error type">'
        f'<option value="">every error type</option>{options}</select>'
        '<span id="count" class="count"></span></div>'
        f'<table id="rows"><thead><tr>{head_cells}</tr></thead>'
    )
    anchors: set[str] = set()
    for verdict, attempts in groups:
        yield _row_group(verdict, attempts, baseline, columns, anchors)
    yield f"</table><script>{_asset('html.js')}</script></body></html>\n"


def write_html(path: Path, document: dict[str, Any]) -> None:
    """Write the report ``document`` (as ``report.json`` holds it) to ``path`` atomically."""
    from osmosis_rollout._internal.atomic import atomic_file

    with atomic_file(path) as handle:
        handle.writelines(render_parts(document))
