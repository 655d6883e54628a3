"""A self-contained HTML report: summary, histograms, baseline, and a table of rows to explore.

Everything is rendered into one file at write time: inline CSS, inline SVG histograms (reward,
latency, tokens) and a little inline JavaScript that sorts, searches and filters the rows
(by outcome, by error type, by baseline change). A content security policy forbids every
request, so the page opens from disk and never reaches the network.

Each collapsed row says why it failed (the error, or the grader's reason) beside the answer and
the label, so "which rows fail and why" reads from the table itself. A row opens (click, Enter
or Space; it takes keyboard focus) to its attempts' tracebacks, what they printed, and their
conversations, read from their ATIF trajectory files, with tool calls and their results shown
as calls and answers. Every row has an anchor (``report.html#row-<key>`` opens it).
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from osmosis_rollout.runs.gating import RegressionTest, percent
from osmosis_rollout.runs.run_verdict import failed_parts
from pytest_osmosis.results.report import (
    format_cost,
    interval_text,
    ungraded_line,
)

MAX_MESSAGE_CHARS = 4000
"""A conversation message longer than this is cut in the report (the trajectory has it all)."""

OUTCOMES = ("passed", "failed", "errored", "skipped")
OUTCOME_WORDS = {"failed": "below threshold"}
"""What a row's outcome is called on the page: a ``failed`` row that did not error scored
below the threshold; "failed" is the card that counts both, as the terminal summary does."""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_CSS = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--soft:#f6f8fa;--blue:#0969da;--green:#1a7f37;--red:#cf222e;--amber:#9a6700;--purple:#8250df}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:var(--fg);background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}.sub{color:var(--muted);margin:0 0 14px}
.cards{display:flex;gap:10px;flex-wrap:wrap}.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 14px;min-width:86px}
.card b{display:block;font-size:19px}.card small{color:var(--muted)}
.passed{color:var(--green)}.failed,.errored{color:var(--red)}.skipped{color:var(--amber)}
.banner{padding:8px 12px;border-radius:6px;margin:10px 0;font-weight:600}.banner.bad{background:#ffebe9;color:var(--red)}.banner.good{background:#dafbe1;color:var(--green)}
.charts{display:flex;gap:16px;flex-wrap:wrap}.chart{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px}
.chart h3{font-size:13px;margin:0 0 4px;color:var(--muted);font-weight:600}
.controls{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin:0 0 8px}
.controls input,.controls select{padding:5px 8px;border:1px solid var(--line);border-radius:6px;font:inherit}
.controls input{min-width:260px}.count{color:var(--muted)}
.filters button{margin-right:4px;padding:4px 10px;border:1px solid var(--line);border-radius:6px;background:#fff;cursor:pointer;font:inherit}
.filters button.on{background:var(--blue);border-color:var(--blue);color:#fff}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
td,th{border-bottom:1px solid #eaeef2;padding:6px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);position:sticky;top:0;white-space:nowrap}th.sortable{cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
tr.row{cursor:pointer}tr.row:hover{background:var(--soft)}tr.detail{display:none;background:var(--soft)}tbody.open tr.detail{display:table-row}
.err{font-family:ui-monospace,monospace;font-size:12px;color:var(--red);max-width:420px;overflow-wrap:anywhere}
.tag{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;font-weight:600;margin-left:4px}
.tag.regressed{background:#ffebe9;color:var(--red)}.tag.improved{background:#dafbe1;color:var(--green)}.tag.new{background:#ddf4ff;color:var(--blue)}
.attempt{margin:8px 0 14px}.attempt h4{margin:0 0 6px;font-size:13px}
.step{margin:6px 0;padding:8px 10px;border-radius:6px;background:#fff;border:1px solid #eaeef2;white-space:pre-wrap;overflow-wrap:anywhere}
.step.user{border-left:3px solid var(--blue)}.step.agent{border-left:3px solid var(--purple)}.step.system{border-left:3px solid var(--muted)}
.who{font-weight:600;font-size:11px;text-transform:uppercase;color:var(--muted);letter-spacing:.04em}
.call{font-family:ui-monospace,monospace;font-size:12px;margin:6px 0 0;padding:6px 8px;background:#fff8c5;border-radius:4px;white-space:pre-wrap}
.result{font-family:ui-monospace,monospace;font-size:12px;margin:4px 0 0 16px;padding:6px 8px;background:#eef6ff;border-radius:4px}
.meta{color:var(--muted);font-size:12px}
pre{margin:2px 0 0;white-space:pre-wrap}
.reason{margin:6px 0;padding:8px 10px;border-radius:6px;background:#fff8f0;border:1px solid #f0d9b5}
tbody.group{scroll-margin-top:36px}tr.row:focus{outline:2px solid var(--blue);outline-offset:-2px}
a.anchor{color:var(--muted);text-decoration:none;margin-right:4px}a.anchor:hover{color:var(--blue)}
.why{max-width:520px;overflow-wrap:anywhere}.why .said{font-size:13px}.why .meta{margin-top:2px}
details{margin:6px 0}summary{cursor:pointer;color:var(--muted);font-size:12px}
pre.tb{font-family:ui-monospace,monospace;font-size:12px;background:#fff;border:1px solid #eaeef2;border-radius:4px;padding:6px 8px}
.banner .estimand{font-weight:400;font-size:12px;margin-top:2px}
.beside{display:flex;gap:10px;margin:8px 0}.beside>div{flex:1;padding:8px 10px;border-radius:6px;background:#fff;border:1px solid #eaeef2;white-space:pre-wrap;overflow-wrap:anywhere}
"""

_JS = """
(function(){
const table=document.getElementById('rows');if(!table)return;
const groups=Array.from(table.querySelectorAll('tbody.group'));
const search=document.getElementById('search'),errSel=document.getElementById('errtype'),count=document.getElementById('count');
let kind='all';
function apply(){const q=search.value.trim().toLowerCase(),et=errSel.value;let shown=0;
 groups.forEach(g=>{const r=g.rows[0];let ok=kind==='all'||r.dataset.outcome===kind||(' '+r.dataset.change+' ').indexOf(' '+kind+' ')>=0;
  if(ok&&et)ok=(' '+r.dataset.errors+' ').indexOf(' '+et+' ')>=0;
  if(ok&&q)ok=g.dataset.text.indexOf(q)>=0;
  g.hidden=!ok;if(ok)shown++;});
 count.textContent='showing '+shown+' of '+groups.length+' rows';}
function setKind(k){kind=k;document.querySelectorAll('.filters button').forEach(x=>x.classList.toggle('on',x.dataset.kind===k));apply();}
function toggle(g,open){g.classList.toggle('open',open);g.rows[0].setAttribute('aria-expanded',String(g.classList.contains('open')));
 if(g.classList.contains('open'))history.replaceState(null,'','#'+g.id);}
document.querySelectorAll('.filters button').forEach(b=>b.addEventListener('click',()=>setKind(b.dataset.kind)));
search.addEventListener('input',apply);errSel.addEventListener('change',apply);
groups.forEach(g=>{const r=g.rows[0];
 r.addEventListener('click',e=>{if(e.target.closest('a'))return;toggle(g);});
 r.addEventListener('keydown',e=>{
  if(e.key==='Enter'||e.key===' '){e.preventDefault();toggle(g);return;}
  if(e.key!=='ArrowDown'&&e.key!=='ArrowUp')return;
  e.preventDefault();const shown=Array.from(table.querySelectorAll('tbody.group:not([hidden])'));
  const next=shown[shown.indexOf(g)+(e.key==='ArrowDown'?1:-1)];if(next)next.rows[0].focus();});});
// A missing value (an errored row's reward) sorts as the lowest: first ascending, last descending.
table.querySelectorAll('th.sortable').forEach(th=>th.addEventListener('click',()=>{
 const col=Number(th.dataset.col),numeric=th.dataset.type==='num';
 const dir=th.getAttribute('aria-sort')==='ascending'?-1:1;
 table.querySelectorAll('th.sortable').forEach(x=>x.removeAttribute('aria-sort'));
 th.setAttribute('aria-sort',dir===1?'ascending':'descending');
 const key=g=>g.rows[0].cells[col].dataset.v||'';
 const sorted=groups.slice().sort((a,b)=>{const x=key(a),y=key(b);
  if(numeric){const fx=x===''?NaN:Number(x),fy=y===''?NaN:Number(y);
   if(isNaN(fx)&&isNaN(fy))return 0;if(isNaN(fx))return -dir;if(isNaN(fy))return dir;return dir*(fx-fy);}
  return dir*x.localeCompare(y,undefined,{numeric:true});});
 sorted.forEach(g=>table.appendChild(g));}));
function follow(){const id=decodeURIComponent(location.hash.slice(1));const g=id&&document.getElementById(id);
 if(!g||!g.classList.contains('group'))return;
 if(g.hidden){search.value='';errSel.value='';setKind('all');}
 toggle(g,true);g.rows[0].focus({preventScroll:true});g.scrollIntoView({block:'start'});}
window.addEventListener('hashchange',follow);
// On load too: the browser's own jump to the fragment takes the focus back to the page.
window.addEventListener('load',follow);
apply();follow();
})();
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _g(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _cost_text(value: float | None) -> str:
    return "" if value is None else format_cost(value)


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
    bins = 10
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for value in values:
        index = min(int((value - lo) / width), bins - 1) if hi > lo else 0
        counts[index] += 1
    peak = max(counts) or 1
    parts = []
    for i, count in enumerate(counts):
        h = 110 * count / peak
        x = 6 + i * 34
        start, end = lo + i * width, lo + (i + 1) * width
        label = f"{start:.3g}-{end:.3g}{unit}" if hi > lo else f"{lo:.3g}{unit}"
        parts.append(
            f'<rect x="{x}" y="{122 - h:.1f}" width="30" height="{h:.1f}" fill="#0969da">'
            f"<title>{count} from {_e(label)}</title></rect>"
            f'<text x="{x + 15}" y="{118 - h:.1f}" font-size="10" text-anchor="middle">{count or ""}</text>'
        )
    axis = (
        f'<text x="6" y="138" font-size="10">{_e(f"{lo:.3g}{unit}")}</text>'
        f'<text x="346" y="138" font-size="10" text-anchor="end">{_e(f"{hi:.3g}{unit}")}</text>'
    )
    return (
        head + f'<svg class="histogram" width="350" height="142" role="img" '
        f'aria-label="{_e(title)} histogram">{"".join(parts)}{axis}</svg></div>'
    )


def _read_trajectory(path: str | None) -> dict[str, Any] | None:
    if not path or not os.path.isfile(path):
        return None
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _clip(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return text[:MAX_MESSAGE_CHARS] + f"... [{len(text) - MAX_MESSAGE_CHARS} more chars]"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            _text(part.get("text") if isinstance(part, dict) else part) for part in value
        )
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


def _label(document: dict[str, Any] | None) -> str | None:
    """The row's label as the trajectory recorded it (the report's rows do not carry it)."""
    if document is None:
        return None
    label = ((document.get("extra") or {}).get("osmosis") or {}).get("label")
    return None if label is None else _text(label)


def _conversation(document: dict[str, Any] | None, words: list[str] | None = None) -> str:
    """A trajectory's steps: who spoke, what they said, the tools they called and the answers.

    ``words`` gets what the row's search covers: each message and each tool call.
    """
    words = [] if words is None else words
    if document is None:
        return "<p class=meta>No trajectory was written for this attempt.</p>"
    parts = []
    for step in document.get("steps") or []:
        if not isinstance(step, dict):
            continue
        who = str(step.get("source") or step.get("role") or "step")
        body = [f'<div class="who">{_e(who)}</div>']
        message = _text(step.get("message"))
        if message:
            words.append(message)
            body.append(f"<div>{_e(_clip(message))}</div>")
        results = {
            r.get("source_call_id"): r
            for r in ((step.get("observation") or {}).get("results") or [])
            if isinstance(r, dict)
        }
        for call in step.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            name = call.get("function_name") or call.get("name") or "tool"
            words.append(_call_text(str(name), call.get("arguments")))
            body.append(
                f'<div class="call">&rarr; {_e(_clip(_call_text(str(name), call.get("arguments"))))}</div>'
            )
            result = results.pop(call.get("tool_call_id"), None)
            if result is not None:
                body.append(
                    f'<div class="result">&larr; {_e(_clip(_text(result.get("content"))))}</div>'
                )
        for result in results.values():
            body.append(
                f'<div class="result">&larr; {_e(_clip(_text(result.get("content"))))}</div>'
            )
        css = who if who in ("user", "agent", "system") else ""
        parts.append(f'<div class="step {css}">{"".join(body)}</div>')
    osmosis = (document.get("extra") or {}).get("osmosis") or {}
    graded = [
        f"{name}: {_e(_clip(_text(osmosis[key])))}"
        for name, key in (("label", "label"), ("grader reward", "reward"))
        if osmosis.get(key) is not None
    ]
    if graded:
        parts.append(f'<p class="meta">{" &middot; ".join(graded)}</p>')
    return "".join(parts) or "<p class=meta>The trajectory has no steps.</p>"


def _captured(attempt: dict[str, Any]) -> str:
    """The attempt's traceback (open) and what it printed and logged (folded)."""
    parts = []
    if attempt.get("error_traceback"):
        parts.append(
            "<details open><summary>traceback</summary>"
            f'<pre class="tb">{_e(_clip(str(attempt["error_traceback"])))}</pre></details>'
        )
    for name, key in (("printed", "printed"), ("logged", "workflow_log")):
        text = attempt.get(key)
        if text:
            parts.append(
                f"<details><summary>{name} ({len(str(text)):,} chars)</summary>"
                f'<pre class="tb">{_e(_clip(str(text)))}</pre></details>'
            )
    return "".join(parts)


def _attempt_block(
    attempt: dict[str, Any],
    repeated: bool,
    words: list[str] | None = None,
    document: dict[str, Any] | None = None,
) -> str:
    reward = _num(attempt.get("reward"))
    status = attempt.get("status")
    head = [f"attempt {attempt.get('run_index', 0)}" if repeated else "conversation"]
    if status == "failed":
        head.append(f"errored [{_e(attempt.get('error_type'))}]")
    elif status == "skipped":
        head.append("skipped (sample removed)")
    else:
        head.append(f"reward {_g(reward)}")
    error = ""
    if attempt.get("err_message"):
        error = f'<div class="err">{_e(_clip(str(attempt["err_message"])))}</div>'
    error += _captured(attempt)
    if status == "failed":
        # An errored rollout may have no trajectory: its prompt and diagnostics say what ran.
        if attempt.get("prompt"):
            error += (
                f'<div class="step user"><div class="who">prompt</div>'
                f"{_e(_clip(str(attempt['prompt'])))}</div>"
            )
        if attempt.get("diagnostics_path"):
            error += f'<div class="meta">diagnostics: {_e(attempt["diagnostics_path"])}</div>'
    said = attempt.get("grader") or {}
    if said.get("reason") or said.get("metrics"):
        metrics = (
            f'<div class="meta">metrics: {_e(_clip(json.dumps(said["metrics"], default=str)))}</div>'
            if said.get("metrics")
            else ""
        )
        reason = f"<pre>{_e(_clip(str(said['reason'])))}</pre>" if said.get("reason") else ""
        error += f'<div class="reason"><b>grader said</b>{reason}{metrics}</div>'
    where = attempt.get("trajectory_filename")
    meta = f'<div class="meta">rollout {_e(attempt.get("rollout_id"))}' + (
        f" &middot; {_e(where)}</div>" if where else "</div>"
    )
    return (
        f'<div class="attempt"><h4>{" &middot; ".join(head)}</h4>{error}'
        f"{_conversation(document, words)}{meta}</div>"
    )


MAX_SEARCH_CHARS = 20_000
"""What a row's search covers of its prompts, messages and tool calls: the page stays small."""
MAX_WHY_CHARS = 240
"""How much of a reason, an answer or a label the collapsed row shows (the row opens to all)."""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_WHY_CHARS else text[: MAX_WHY_CHARS - 1] + "\u2026"


class Anchors:
    """Each row's ``id``: ``row-<key>``, made safe for a URL, and unique on the page."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, key: str) -> str:
        base = "row-" + re.sub(r"[^A-Za-z0-9_.-]", "_", key)
        anchor, n = base, 1
        while anchor in self.taken:
            n += 1
            anchor = f"{base}-{n}"
        self.taken.add(anchor)
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
    parts = []
    if error_text:
        parts.append(f'<div class="err">{_e(_short(error_text))}</div>')
    if reason:
        parts.append(f'<div class="said">{_e(_short(reason))}</div>')
    said = [
        f"{name}: {_e(_short(text))}"
        for name, text in (("answer", answer), ("label", labels[0] if labels else ""))
        if text
    ]
    if said:
        parts.append(f'<div class="meta">{" &middot; ".join(said)}</div>')
    sort_key = " ".join(errors) or reason
    return f'<td class="why" data-v="{_e(sort_key)}">{"".join(parts)}</td>'


def _row_group(
    verdict: dict[str, Any],
    attempts: list[dict[str, Any]],
    baseline: dict[str, Any],
    columns: dict[str, bool],
    anchors: Anchors | None = None,
) -> str:
    nodeid = verdict["nodeid"]
    anchor = (anchors or Anchors())(str(verdict.get("row_key") or nodeid))
    documents = [_read_trajectory(a.get("trajectory_filename")) for a in attempts]
    labels = [label for d in documents if (label := _label(d))]
    outcome = row_outcome(verdict["verdict"], attempts)
    rewards = [r for r in (_num(a.get("reward")) for a in attempts) if r is not None]
    mean_reward = sum(rewards) / len(rewards) if rewards else None
    durations = [d for d in (_num(a.get("duration_ms")) for a in attempts) if d is not None]
    latency = sum(durations) / len(durations) / 1000 if durations else None
    tokens = sum(int(a.get("tokens") or 0) for a in attempts)
    costs = [c for c in (_num(a.get("cost_usd")) for a in attempts) if c is not None]
    cost = sum(costs) if costs else None
    errors = sorted({str(a["error_type"]) for a in attempts if a.get("status") == "failed"})
    error_text = "; ".join(
        f"{a.get('error_type')}: {a.get('err_message') or ''}"
        for a in attempts
        if a.get("status") == "failed"
    )
    changes = [
        name for name in ("regressed", "improved", "new") if nodeid in baseline.get(name, ())
    ]
    delta = _num((baseline.get("reward_deltas") or {}).get(nodeid))

    reward_cell = ", ".join(
        "-" if _num(a.get("reward")) is None else _g(a["reward"]) for a in attempts
    )
    cells = [
        f'<td data-v="{_e(verdict["row_key"])}"><a class="anchor" href="#{anchor}" '
        f'title="link to this row">#</a>{_e(verdict["row_key"])}'
        + "".join(f'<span class="tag {c}">{c}</span>' for c in changes)
        + "</td>",
        f'<td class="{outcome}" data-v="{OUTCOMES.index(outcome) if outcome in OUTCOMES else 9}">{OUTCOME_WORDS.get(outcome, outcome)}</td>',
        f'<td class="num" data-v="{"" if mean_reward is None else mean_reward}">{_e(reward_cell)}</td>',
    ]
    if columns["pass_at_k"]:
        pak = verdict.get("pass_at_k") or {}
        first = _num(pak.get("1"))
        text = " ".join(f"@{k} {float(v):.2f}" for k, v in pak.items())
        passed = f"{verdict.get('passed_attempts', 0)}/{verdict.get('scored_attempts', 0)} "
        cells.append(
            f'<td class="num" data-v="{"" if first is None else first}">{_e(passed + text)}</td>'
        )
    if columns["baseline"]:
        delta_html = "" if delta is None else f"{delta:+.3g}"
        was = {"regressed": "passed before", "improved": "failed before"}
        moved = [was[c] for c in changes if c in was]
        if moved:
            delta_html = " ".join([delta_html, *moved]).strip()
        cells.append(
            f'<td class="num {"passed" if (delta or 0) > 0 else "failed"}" data-v="{"" if delta is None else delta}">'
            f"{_e(delta_html)}</td>"
        )
    cells.append(_why_cell(attempts, errors, labels))
    cells.append(
        f'<td class="num" data-v="{"" if latency is None else latency}">{_g(latency)}</td>'
    )
    cells.append(f'<td class="num" data-v="{tokens}">{f"{tokens:,}" if tokens else ""}</td>')
    if columns["cost"]:
        cells.append(
            f'<td class="num" data-v="{"" if cost is None else cost}">{_cost_text(cost)}</td>'
        )
    repeated = len(attempts) > 1
    words: list[str] = []
    detail = "".join(
        _attempt_block(a, repeated, words, d) for a, d in zip(attempts, documents, strict=True)
    ) or ("<p class=meta>No attempt was recorded for this row.</p>")
    before = (baseline.get("regressed_answers") or {}).get(nodeid)
    if "regressed" in changes and before is not None:
        now = next((str(a["last_assistant"]) for a in attempts if a.get("last_assistant")), "")
        detail = (
            '<div class="beside">'
            f'<div><div class="who">baseline answer</div>{_e(_clip(str(before)))}</div>'
            f'<div><div class="who">this run\'s answer</div>{_e(_clip(now))}</div></div>'
        ) + detail
    search_text = " ".join(
        [
            str(verdict["row_key"]),
            nodeid,
            outcome,
            error_text,
            *(str(a.get("last_assistant") or "") for a in attempts),
            *(str(a.get("prompt") or "") for a in attempts),
            *labels,
            *(str((a.get("grader") or {}).get("reason") or "") for a in attempts),
            *(" ".join(a.get("tool_calls") or []) for a in attempts),
            *words,
        ]
    ).lower()[:MAX_SEARCH_CHARS]
    return (
        f'<tbody class="group" id="{anchor}" data-text="{_e(search_text)}">'
        f'<tr class="row" tabindex="0" aria-expanded="false" data-outcome="{outcome}" '
        f'data-errors="{_e(" ".join(errors))}" data-change="{" ".join(changes)}">{"".join(cells)}</tr>'
        f'<tr class="detail"><td colspan="{len(cells)}">{detail}</td></tr></tbody>'
    )


def _cards(document: dict[str, Any], outcomes: Counter[str]) -> str:
    summary = document["summary"]
    rows = summary.get("rows", {})
    stats = summary.get("reward_stats") or {}
    tokens = summary.get("tokens_used")
    failed_rows = outcomes["failed"] + outcomes["errored"]
    # The words and the sets of the terminal's rows line: failed = errored + below threshold.
    failed = (
        f"{failed_rows} ({failed_parts(failed_rows, outcomes['errored'])})" if failed_rows else "0"
    )
    cards: list[tuple[str, Any, str]] = [
        ("rows", rows.get("total"), ""),
        ("passed", outcomes["passed"], "passed"),
        ("failed", failed, "failed" if failed_rows else ""),
        ("skipped", outcomes["skipped"], "skipped"),
        (
            "pass rate",
            f"{float(rows.get('pass_rate') or 0):.1%}"
            + interval_text(rows.get("pass_rate_interval")),
            "",
        ),
        ("threshold", summary.get("pass_threshold"), ""),
        (
            "mean reward",
            _g(_num(stats.get("mean")))
            + interval_text(stats.get("mean_interval"), "{:.3g}")
            + (
                f" ({left} errored attempts left out)"
                if (left := stats.get("errored_left_out"))
                else ""
            ),
            "",
        ),
    ]
    if tokens:
        cards.append(
            (
                "tokens" + (" (estimated)" if summary.get("tokens_estimated") else ""),
                f"{int(tokens):,}",
                "",
            )
        )
    cost = _num(summary.get("cost_usd"))
    if cost is not None:
        cards.append(
            (
                "cost" + (" (estimated)" if summary.get("cost_estimated") else ""),
                _cost_text(cost),
                "",
            )
        )
    wall = _num(summary.get("rollouts_wall_s"))
    if wall is not None:
        cards.append(("wall time", f"{wall:.1f}s", ""))
    for k, v in (summary.get("pass_at_k") or {}).items():
        if str(k) != "1":
            cards.append((f"pass@{k}", f"{float(v):.3f}", ""))
    return "".join(
        f'<div class="card"><small>{_e(k)}</small><b class="{css}">{_e(v)}</b></div>'
        for k, v, css in cards
    )


def _verdict_banner(verdict: dict[str, Any]) -> str:
    """The run's verdict (report.json's ``verdict``, as the exit status and JUnit hold it):
    its outcome, then each reason that is not a plain pass."""
    outcome = str(verdict.get("outcome"))
    reasons = [r for r in verdict.get("reasons") or [] if isinstance(r, dict)]
    shown = [r for r in reasons if r.get("outcome") != "passed" or r.get("kind") == "gate"]
    lines = "".join(f"<br>{_e(r.get('line'))}" for r in shown)
    css = "good" if outcome == "passed" else "bad"
    return (
        f'<div class="banner {css}" data-verdict="{_e(outcome)}">Verdict: {_e(outcome.upper())} '
        f"(exit status {_e(verdict.get('exit_status'))}){lines}</div>"
    )


def _banners(document: dict[str, Any]) -> str:
    summary = document["summary"]
    verdict = document.get("verdict")
    parts = [_verdict_banner(verdict)] if isinstance(verdict, dict) else []
    if summary.get("complete") is False:
        not_run = summary.get("not_run")
        count = not_run.get("count") if isinstance(not_run, dict) else not_run
        reason = summary.get("stopped_by") or summary.get("interrupted") or "stopped early"
        parts.append(
            f'<div class="banner bad">Incomplete run ({_e(reason)}): '
            f"{_e(count if count is not None else 'some')} row(s) not run</div>"
        )
    ungraded = ungraded_line(summary, (document.get("config") or {}).get("entrypoint"))
    if ungraded:
        parts.append(f'<div class="banner bad">{_e(ungraded)}</div>')
    gate = document.get("gate")
    if isinstance(verdict, dict):
        pass  # the verdict's banner holds every gate's line
    elif isinstance(gate, dict) and isinstance(gate.get("interval"), dict):
        # Decided at a stated confidence (--osmosis-gate-confidence): its interval and outcome.
        ok = bool(gate.get("passed"))
        interval = gate["interval"]
        parts.append(
            f'<div class="banner {"good" if ok else "bad"}">gate: {_e(gate.get("measure"))} '
            f"{float(gate.get('estimate') or 0):.1%}{_e(interval_text(interval))} vs "
            f"{float(gate.get('min_pass_rate') or 0):.1%}: {_e(gate.get('outcome'))}"
            f"{'' if gate.get('outcome') != 'undecided' else ' (' + ('passed' if ok else 'failed') + ')'}"
            f"{_estimand(gate)}</div>"
        )
    elif isinstance(gate, dict):
        ok = bool(gate.get("passed"))
        rate, need = _num(gate.get("pass_rate")), _num(gate.get("min_pass_rate"))
        relation = ">=" if ok else "<"
        parts.append(
            f'<div class="banner {"good" if ok else "bad"}">gate: {_e(gate.get("measure", "pass rate"))} '
            f"{(rate or 0):.1%} {_e(relation)} {(need or 0):.1%}: {'passed' if ok else 'failed'}"
            f"{_estimand(gate)}</div>"
        )
    return "".join(parts)


def _estimand(gate: dict[str, Any]) -> str:
    """The gate's sentence saying what it judges (``gate.estimand``), under its line."""
    if not gate.get("estimand"):
        return ""
    return f'<div class="estimand">judges {_e(gate["estimand"])}</div>'


def _baseline_section(baseline: dict[str, Any]) -> str:
    if not baseline:
        return ""

    def listing(name: str) -> str:
        keys = baseline.get(name) or []
        if not keys:
            return ""
        shown = ", ".join(_e(k) for k in keys[:50]) + (" ..." if len(keys) > 50 else "")
        return f"<p><b>{name}</b>: {shown}</p>"

    return (
        f"<h2>Baseline</h2><p>{len(baseline.get('regressed', []))} regressed, "
        f"{len(baseline.get('improved', []))} improved, {len(baseline.get('new', []))} new, "
        f"{len(baseline.get('gone', []))} gone (against {_e(baseline.get('path'))})</p>"
        + _regression_test(baseline.get("test"))
        + listing("regressed")
        + listing("improved")
        + listing("gone")
    )


def _regression_test(test: Any) -> str:
    """The paired test's line: ``regressions: 25 rows worse, 26 better: not significant ...``."""
    if not isinstance(test, dict):
        return ""
    try:
        line = RegressionTest(**test).describe()
    except TypeError:
        return ""
    return f"<p><b>{_e(line)}</b> ({_e(test.get('method'))}, {_e(percent(test['confidence']))})</p>"


"""Each row's ``row_verdicts`` entry and its attempts (the report's ``rows`` of that row), in
report order; called once per pass."""


def render(document: dict[str, Any]) -> str:
    """The whole report as one HTML string."""
    return "".join(render_parts(document))


def _groups_of(document: dict[str, Any]) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    attempts_by_node: dict[str, list[dict[str, Any]]] = {}
    for attempt in document.get("rows", []):
        attempts_by_node.setdefault(attempt["nodeid"], []).append(attempt)
    for verdict in document.get("row_verdicts", []):
        yield verdict, attempts_by_node.get(verdict["nodeid"], [])


def render_parts(head: dict[str, Any]) -> Iterator[str]:
    """The report's HTML in pieces, from the report document ``head``."""
    groups = list(_groups_of(head))
    summary = head["summary"]
    baseline = head.get("baseline") or {}
    columns = {"pass_at_k": False, "baseline": bool(baseline), "cost": False}
    outcomes: Counter[str] = Counter()
    error_types: Counter[str] = Counter()
    rewards: list[float] = []
    latencies: list[float] = []
    tokens: list[float] = []
    for verdict, attempts in groups:
        columns["pass_at_k"] = columns["pass_at_k"] or bool(verdict.get("pass_at_k"))
        outcomes[row_outcome(verdict["verdict"], attempts)] += 1
        for a in attempts:
            columns["cost"] = columns["cost"] or _num(a.get("cost_usd")) is not None
            if a.get("status") == "failed":
                error_types[str(a["error_type"])] += 1
            reward = _num(a.get("reward"))
            if reward is not None:
                rewards.append(reward)
            duration = _num(a.get("duration_ms"))
            if duration is not None:
                latencies.append(duration / 1000)
            if _num(a.get("tokens")) is not None:
                tokens.append(float(a["tokens"]))
    charts = (
        '<div class="charts">'
        + _histogram("reward", rewards, fixed=(0.0, 1.0))
        + _histogram("latency per attempt (s)", latencies, unit="s")
        + _histogram(
            "tokens per attempt" + (" (estimated)" if summary.get("tokens_estimated") else ""),
            tokens,
        )
        + "</div>"
    )
    kinds = ["all", *OUTCOMES] + (["regressed", "improved"] if baseline else [])
    buttons = "".join(
        f'<button type="button" data-kind="{k}" class="{"on" if k == "all" else ""}">'
        f"{OUTCOME_WORDS.get(k, k)}</button>"
        for k in kinds
    )
    options = '<option value="">every error type</option>' + "".join(
        f'<option value="{_e(k)}">{_e(k)} ({v})</option>' for k, v in error_types.most_common()
    )
    headers: list[tuple[str, str]] = [("row", "text"), ("outcome", "num"), ("reward", "num")]
    if columns["pass_at_k"]:
        headers.append(("pass@k", "num"))
    if columns["baseline"]:
        headers.append(("vs baseline", "num"))
    headers += [("why", "text"), ("latency s", "num"), ("tokens", "num")]
    if columns["cost"]:
        headers.append(("cost", "num"))
    head_cells = "".join(
        f'<th class="sortable" data-col="{i}" data-type="{t}">{_e(name)}</th>'
        for i, (name, t) in enumerate(headers)
    )
    config = head.get("config") or {}
    sub = ", ".join(
        f"{k} {_e(config[k])}"
        for k in ("mode", "entrypoint", "policy", "n", "concurrency")
        if config.get(k) not in (None, "", [])
    )
    errors_html = ""
    if error_types:
        errors_html = (
            "<h2>Errors by type</h2><p>"
            + ", ".join(f"{_e(k)} &times;{v}" for k, v in error_types.most_common())
            + "</p>"
        )
    yield (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>pytest-osmosis report</title><style>{_CSS}</style></head><body>"
        f'<h1>pytest-osmosis report</h1><p class="sub">{sub}</p>{_banners(head)}'
        f'<div class="cards">{_cards(head, outcomes)}</div>'
        f"<h2>Distributions</h2>{charts}{_baseline_section(baseline)}{errors_html}"
        '<h2>Rows</h2><div class="controls">'
        '<input id="search" type="search" placeholder="search rows, prompts, messages, tool calls, errors" aria-label="search rows">'
        f'<span class="filters">{buttons}</span>'
        f'<select id="errtype" aria-label="error type">{options}</select>'
        '<span id="count" class="count"></span></div>'
        f'<table id="rows"><thead><tr>{head_cells}</tr></thead>'
    )
    anchors = Anchors()
    for verdict, attempts in groups:
        yield _row_group(verdict, attempts, baseline, columns, anchors)
    yield f"</table><script>{_JS}</script></body></html>\n"


def write_html(path: Path, document: dict[str, Any]) -> None:
    """Write the report ``document`` (as ``report.json`` holds it) to ``path`` atomically."""
    from osmosis_rollout._internal.atomic import atomic_file

    parts = render_parts(document)
    with atomic_file(path) as handle:
        for part in parts:
            handle.write(part)
