"""A self-contained HTML report: summary, reward histogram, rows with filters, conversations.

Everything is rendered into one file at write time (inline CSS, inline SVG, a few lines of
inline JavaScript for the filters), so it opens from disk in a browser with no network.
Conversations come from each row's ATIF trajectory file.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1b1f24;background:#fafbfc}
h1{font-size:20px;margin:0 0 12px} h2{font-size:16px;margin:24px 0 8px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:10px 14px}
.card b{display:block;font-size:20px}.passed{color:#1a7f37}.failed{color:#cf222e}.skipped{color:#9a6700}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border-bottom:1px solid #eaeef2;padding:6px 8px;text-align:left;vertical-align:top}
tr.row{cursor:pointer}tr.row:hover{background:#f6f8fa}.filters button{margin-right:6px;padding:4px 10px;border:1px solid #d0d7de;border-radius:6px;background:#fff;cursor:pointer}
.filters button.on{background:#0969da;color:#fff}.conv{display:none;background:#f6f8fa}.conv.open{display:table-row}
.step{margin:6px 0;padding:8px;border-radius:6px;background:#fff;border:1px solid #eaeef2;white-space:pre-wrap}
.step .who{font-weight:600;font-size:12px;text-transform:uppercase;color:#57606a}.tool{font-family:ui-monospace,monospace;font-size:12px}
.delta-pos{color:#1a7f37}.delta-neg{color:#cf222e}
"""

_JS = """
function osmosisFilter(kind){document.querySelectorAll('.filters button').forEach(b=>b.classList.toggle('on',b.dataset.kind===kind));
document.querySelectorAll('tr.row').forEach(r=>{const show=kind==='all'||r.dataset.verdict===kind;r.style.display=show?'':'none';
const c=document.getElementById(r.dataset.conv);if(c&&!show)c.classList.remove('open');});}
function osmosisToggle(id){document.getElementById(id).classList.toggle('open');}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _histogram(rewards: list[float]) -> str:
    if not rewards:
        return "<p>No rewards.</p>"
    lo, hi = min(rewards), max(rewards)
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0  # the usual reward range: fixed bins read the same across runs
    bins = 10
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for r in rewards:
        index = min(int((r - lo) / width), bins - 1) if hi > lo else 0
        counts[index] += 1
    peak = max(counts) or 1
    bars = []
    for i, count in enumerate(counts):
        h = 120 * count / peak
        x = 10 + i * 44
        label = f"{lo + i * width:.2g}-{lo + (i + 1) * width:.2g}"
        bars.append(
            f'<rect x="{x}" y="{130 - h:.1f}" width="38" height="{h:.1f}" fill="#0969da"><title>{count} row(s) from {label}</title></rect>'
            f'<text x="{x + 19}" y="146" font-size="10" text-anchor="middle">{_e(label)}</text>'
            f'<text x="{x + 19}" y="{126 - h:.1f}" font-size="10" text-anchor="middle">{count or ""}</text>'
        )
    return f'<svg class="histogram" width="460" height="155" role="img" aria-label="reward histogram">{"".join(bars)}</svg>'


def _ms(value: Any) -> str:
    return f"{value:.0f}" if isinstance(value, int | float) else ""


def _conversation(path: str | None) -> str:
    if not path or not os.path.isfile(path):
        return "<p>No trajectory was written for this row.</p>"
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "<p>The trajectory could not be read.</p>"
    parts = []
    for step in document.get("steps", []):
        who = step.get("source") or step.get("role") or "step"
        body = [f'<div class="who">{_e(who)}</div><div>{_e(step.get("message", ""))}</div>']
        for call in step.get("tool_calls") or []:
            args = json.dumps(call.get("arguments"), ensure_ascii=False)
            body.append(
                f'<div class="tool">tool call {_e(call.get("function_name") or call.get("name"))}({_e(args)})</div>'
            )
        observation = step.get("observation") or {}
        for result in observation.get("results") or []:
            body.append(f'<div class="tool">tool result: {_e(result.get("content"))}</div>')
        parts.append(f'<div class="step">{"".join(body)}</div>')
    reward = (document.get("extra") or {}).get("osmosis", {}).get("reward")
    if reward is not None:
        parts.append(f'<div class="step"><div class="who">reward</div>{_e(reward)}</div>')
    return "".join(parts) or "<p>The trajectory has no steps.</p>"


def render(document: dict[str, Any]) -> str:
    """The whole report as one HTML string."""
    summary = document["summary"]
    rows = summary.get("rows", {})
    stats = summary.get("reward_stats") or {}
    cards = [
        ("rows", rows.get("total")),
        ("passed", rows.get("passed")),
        ("failed", rows.get("failed")),
        ("skipped", rows.get("skipped")),
        ("pass rate", f"{rows.get('pass_rate', 0):.1%}"),
        ("threshold", summary.get("pass_threshold")),
        ("mean reward", stats.get("mean")),
        ("tokens", summary.get("tokens_used")),
    ]
    card_html = "".join(f'<div class="card">{_e(k)}<b>{_e(v)}</b></div>' for k, v in cards)
    attempts_by_node: dict[str, list[dict[str, Any]]] = {}
    for attempt in document.get("rows", []):
        attempts_by_node.setdefault(attempt["nodeid"], []).append(attempt)
    deltas = (document.get("baseline") or {}).get("reward_deltas", {})
    regressed = set((document.get("baseline") or {}).get("regressed", []))
    body_rows = []
    for i, verdict in enumerate(document.get("row_verdicts", [])):
        attempts = attempts_by_node.get(verdict["nodeid"], [])
        last = attempts[-1] if attempts else {}
        rewards = ", ".join(
            "-" if a.get("reward") is None else f"{a['reward']:g}" for a in attempts
        )
        error = "; ".join(
            f"{a.get('error_type')}: {a.get('err_message')}"
            for a in attempts
            if a.get("status") == "failed"
        )
        delta = deltas.get(verdict["nodeid"])
        delta_html = (
            ""
            if delta is None
            else f'<span class="{"delta-pos" if delta > 0 else "delta-neg"}">{delta:+g}</span>'
        )
        if verdict["nodeid"] in regressed:
            delta_html += ' <b class="failed">regressed</b>'
        conv_id = f"conv-{i}"
        body_rows.append(
            f'<tr class="row" data-verdict="{_e(verdict["verdict"])}" data-conv="{conv_id}" onclick="osmosisToggle(\'{conv_id}\')">'
            f'<td>{_e(verdict["row_key"])}</td><td class="{_e(verdict["verdict"])}">{_e(verdict["verdict"])}</td>'
            f"<td>{_e(rewards)}</td><td>{delta_html}</td><td>{_e(error)}</td><td>{_e(_ms(last.get('duration_ms')))}</td></tr>"
            f'<tr class="conv" id="{conv_id}"><td colspan="6">{_conversation(last.get("trajectory_filename"))}</td></tr>'
        )
    rewards_all = [
        float(a["reward"]) for a in document.get("rows", []) if a.get("reward") is not None
    ]
    baseline = document.get("baseline")
    baseline_html = ""
    if baseline:
        baseline_html = (
            f"<h2>Baseline</h2><p>{len(baseline['regressed'])} regressed, {len(baseline['improved'])} improved, "
            f"{len(baseline['new'])} new, {len(baseline['gone'])} gone (against {_e(baseline.get('path'))})</p>"
        )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>pytest-osmosis report</title>"
        f"<style>{_CSS}</style></head><body><h1>pytest-osmosis report</h1>"
        f'<div class="cards">{card_html}</div><h2>Reward histogram</h2>{_histogram(rewards_all)}{baseline_html}'
        '<h2>Rows</h2><div class="filters">'
        + "".join(
            f'<button data-kind="{k}" class="{"on" if k == "all" else ""}" onclick="osmosisFilter(\'{k}\')">{k}</button>'
            for k in ("all", "passed", "failed", "skipped")
        )
        + "</div><table><thead><tr><th>row</th><th>verdict</th><th>reward</th><th>vs baseline</th><th>error</th>"
        "<th>ms</th></tr></thead><tbody>"
        + "".join(body_rows)
        + f"</tbody></table><script>{_JS}</script></body></html>\n"
    )


def write_html(path: Path, document: dict[str, Any]) -> None:
    """Write the report to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render(document), encoding="utf-8")
    os.replace(tmp, path)
