"""The run journal (rows.jsonl + run.json) and the report rebuilt from it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from _support.json_values import json_like
from hypothesis import given, settings
from hypothesis import strategies as st

from osmosis_rollout.cli import main as cli_main
from osmosis_rollout.redaction import Redactor
from osmosis_rollout.runs.journal import (
    RowJournal,
    RunJournalError,
    read_journal,
    read_run_file,
    write_run_file,
)
from osmosis_rollout.runs.report import rebuild_report


def attempt(
    nodeid: str, run_index: int = 0, *, reward: float = 1.0, **extra: Any
) -> dict[str, Any]:
    row_key = nodeid.rsplit("::", 1)[-1]
    return {
        "nodeid": nodeid,
        "dataset": "data/test.jsonl",
        "row_key": row_key,
        "row_index": int(row_key.split("-")[-1]),
        "run_index": run_index,
        "status": "success",
        "reward": reward,
        "passed": reward >= 1.0,
        "error_type": None,
        "tokens": 5,
        "duration_ms": 100.0,
        "started_at": 1000.0 + run_index,
        **extra,
    }


def ids(n: int) -> list[str]:
    return [f"data/test.jsonl::row-{i}" for i in range(n)]


def test_each_row_is_on_disk_when_write_row_returns(tmp_path: Path) -> None:
    journal = RowJournal(tmp_path / "run" / "rows.jsonl", fresh=True)
    assert not (tmp_path / "run").exists(), "nothing is created before the first row"
    journal.write_row([attempt(ids(1)[0])], verdict="passed", stats={"attempts": 1})
    # Read through another descriptor while the journal is still open: no buffering.
    lines = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["row_verdict"] == "passed"
    journal.close()
    journal.write_row([attempt(ids(2)[1])], verdict="passed", stats={})
    assert len((tmp_path / "run" / "rows.jsonl").read_text().splitlines()) == 1


def test_a_fresh_journal_truncates_and_a_resumed_one_appends(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(attempt(ids(1)[0])) + "\n")
    resumed = RowJournal(path, fresh=False)
    resumed.write_row([attempt(ids(2)[1])], verdict="passed", stats={})
    resumed.close()
    assert len(path.read_text().splitlines()) == 2
    fresh = RowJournal(path, fresh=True)
    fresh.write_row([attempt(ids(3)[2])], verdict="passed", stats={})
    fresh.close()
    assert [json.loads(x)["nodeid"] for x in path.read_text().splitlines()] == [ids(3)[2]]


def test_rows_written_by_a_process_survive_its_sigkill(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from osmosis_rollout.runs.journal import RowJournal
        journal = RowJournal(Path({str(tmp_path / "rows.jsonl")!r}), fresh=True)
        for i in range(5):
            journal.write_row(
                [{{"nodeid": f"d::row-{{i}}", "run_index": 0, "status": "success", "reward": 1.0}}],
                verdict="passed", stats={{}},
            )
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert proc.returncode == -9
    rows, bad = read_journal(tmp_path / "rows.jsonl")
    assert [r.nodeid for r in rows] == [f"d::row-{i}" for i in range(5)]
    assert bad == 0


def test_threads_writing_at_once_never_interleave_lines(tmp_path: Path) -> None:
    journal = RowJournal(tmp_path / "rows.jsonl", fresh=True)
    big = "x" * 20_000

    def write(worker: int) -> None:
        for i in range(50):
            journal.write_row(
                [attempt(f"d::row-{worker * 100 + i}", last_assistant=big)],
                verdict="passed",
                stats={},
            )

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    journal.close()
    rows, bad = read_journal(tmp_path / "rows.jsonl")
    assert bad == 0
    assert len(rows) == 200


def test_the_last_line_of_an_attempt_wins_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    journal = RowJournal(path, fresh=True)
    a, b = ids(2)
    journal.write_row([attempt(a, 0), attempt(a, 1, reward=0.0)], verdict="failed", stats={"n": 2})
    journal.write_row([attempt(b)], verdict="passed", stats={})
    # Pytest reported row a later: a user hook made it pass.
    journal.write_row([attempt(a, 0), attempt(a, 1, reward=0.0)], verdict="passed", stats={"n": 2})
    journal.close()
    with path.open("a") as fh:
        fh.write('{"nodeid": "data/test.jsonl::row-9", "run_ind')
    rows, bad = read_journal(path)
    assert bad == 1
    assert [(r.nodeid, r.verdict, len(r.attempts)) for r in rows] == [
        (a, "passed", 2),
        (b, "passed", 1),
    ]
    assert all("row_verdict" not in x and "row_stats" not in x for r in rows for x in r.attempts)


def test_the_journal_is_redacted(tmp_path: Path) -> None:
    secret = "sk-secret-0123456789"
    journal = RowJournal(
        tmp_path / "rows.jsonl", fresh=True, redactor=Redactor({"OPENAI_API_KEY": secret})
    )
    journal.write_row(
        [attempt(ids(1)[0], err_message=f"401 for key {secret}")], verdict="failed", stats={}
    )
    journal.close()
    text = (tmp_path / "rows.jsonl").read_text()
    assert secret not in text
    assert "[REDACTED:OPENAI_API_KEY]" in text


def make_run(tmp_path: Path, *, finished: dict[str, Any] | None, done: int, selected: int) -> Path:
    run = tmp_path / "run"
    write_run_file(
        run, config={"pass_threshold": 1.0, "n": 1}, selected=ids(selected), finished=finished
    )
    journal = RowJournal(run / "rows.jsonl", fresh=True)
    # Finished out of order, as concurrent rollouts do.
    for nodeid in reversed(ids(done)):
        reward = 0.0 if nodeid.endswith("-1") else 1.0
        journal.write_row(
            [attempt(nodeid, reward=reward)],
            verdict="passed" if reward >= 1 else "failed",
            stats={"attempts": 1},
        )
    journal.close()
    return run


def test_a_killed_run_rebuilds_to_an_incomplete_report_naming_the_rows_not_run(
    tmp_path: Path,
) -> None:
    run = make_run(tmp_path, finished=None, done=4, selected=10)
    document, bad = rebuild_report(run)
    assert bad == 0
    summary = document["summary"]
    assert summary["complete"] is False
    assert summary["interrupted"] is True
    assert summary["stopped_by"] == "killed"
    assert summary["rows"]["pass_rate_interval"]["method"] == "wilson"
    assert {k: v for k, v in summary["rows"].items() if k != "pass_rate_interval"} == {
        "total": 4,
        "passed": 3,
        "failed": 1,
        "errored": 0,
        "below_threshold": 1,
        "ungraded": 0,
        "skipped": 0,
        "pass_rate": 0.75,
        "not_run": 6,
    }
    assert document["not_run"] == ids(10)[4:]
    # Rows in item order, not completion order.
    assert [r["nodeid"] for r in document["row_verdicts"]] == ids(4)
    assert [r["nodeid"] for r in document["rows"]] == ids(4)
    assert summary["total_samples"] == 4 and summary["tokens_used"] == 20


def test_a_finished_run_rebuilds_to_a_complete_report(tmp_path: Path) -> None:
    run = make_run(
        tmp_path, finished={"stopped_by": None, "interrupted": False}, done=3, selected=3
    )
    summary = rebuild_report(run)[0]["summary"]
    assert summary["complete"] is True
    assert summary["interrupted"] is False
    assert summary["stopped_by"] is None


def test_report_rebuild_command_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(
        tmp_path, finished={"stopped_by": "SIGINT", "interrupted": True}, done=2, selected=5
    )
    assert cli_main(["report", "rebuild", str(run)]) == 0
    out = capsys.readouterr().out
    assert "rows: 2  passed: 1  failed: 1  skipped: 0  not run: 3" in out
    assert "INCOMPLETE (stopped by SIGINT)" in out
    document = json.loads((run / "report.json").read_text())
    assert document["summary"]["complete"] is False
    assert document["not_run"] == ids(5)[2:]


def test_report_rebuild_refuses_a_directory_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["report", "rebuild", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'run.json'}: not found" in err
    assert "not a pytest-osmosis run directory" in err
    with pytest.raises(RunJournalError, match="not a pytest-osmosis run file"):
        (tmp_path / "run.json").write_text('{"schema": "other"}')
        read_run_file(tmp_path)


_SECRETS = {
    "OPENAI_API_KEY": "sk-secret-0123456789",
    "ODD_TOKEN": 'quo"te\\d\n-é-9',  # JSON escapes it
    "CAFE_PASSWORD": "caf\u00e9-\u00e9-0123",  # written as it is only without ensure_ascii
    "DEL_SECRET": "del\x7f-0123456",  # the same
}
_SECRET_SETS = [
    {name: _SECRETS[name] for name in names}
    for names in (
        ["OPENAI_API_KEY"],
        ["OPENAI_API_KEY", "CAFE_PASSWORD"],
        ["DEL_SECRET"],
        ["OPENAI_API_KEY", "ODD_TOKEN"],
    )
]
_secret_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(alphabet='ab-k"\\\n\u00e9\x7f', max_size=6),
    st.sampled_from(list(_SECRETS.values())).map(lambda s: f"key {s}!"),
    st.builds(Path, st.sampled_from(["a", "sk-secret-0123456789"])),  # written as its str
)


@settings(max_examples=300, deadline=None)
@given(
    fields=st.dictionaries(st.text(alphabet="abk-", max_size=4), json_like(_secret_leaves)),
    secrets=st.sampled_from(_SECRET_SETS),
)
def test_a_journal_line_has_the_bytes_of_its_values_redacted_then_encoded(
    fields: dict[str, Any], secrets: dict[str, str]
) -> None:
    # Lines with no secret skip the walk over their values; the bytes must not tell.
    redactor = Redactor(secrets)
    journal = RowJournal(Path("unused.jsonl"), fresh=True, redactor=redactor)
    line = {**fields, "row_verdict": "passed", "row_stats": {"attempts": 1}}
    try:
        expected = json.dumps(redactor.redact_value(line), sort_keys=True, default=str)
    except TypeError as exc:  # keys json cannot sort (an int beside None): the same error
        with pytest.raises(type(exc)):
            journal.encode_row([fields], verdict="passed", stats={"attempts": 1})
        return
    encoded = journal.encode_row([fields], verdict="passed", stats={"attempts": 1})
    assert encoded == (expected + "\n").encode("utf-8", errors="backslashreplace")


def test_the_report_redacts_journal_lines_written_before_their_secret_was_known(
    tmp_path: Path,
) -> None:
    from pytest_osmosis.results.report import RunReport

    secret = "sk-secret-0123456789"
    texts = [f"key {secret}", f"line one\nkey {secret}", f"caf\u00e9 {secret}", "no secret here"]
    # Written by a resumed run's first half, which did not know the secret.
    early = RowJournal(tmp_path / "rows.jsonl", fresh=True)
    for i, text in enumerate(texts):
        early.write_row(
            [attempt(f"data/test.jsonl::row-{i}", last_assistant=text)],
            verdict="passed",
            stats={"attempts": 1, "note": text},
        )
    early.close()
    assert secret in (tmp_path / "rows.jsonl").read_text()
    report = RunReport(
        tmp_path, pass_threshold=1.0, settings={}, redactor=Redactor({"OPENAI_API_KEY": secret})
    )
    selected = [f"data/test.jsonl::row-{i}" for i in range(len(texts))]
    report.finish(selected=selected, finished={"stopped_by": None, "interrupted": False})
    report.write_json(tmp_path / "report.json", report.head({}))
    written = (tmp_path / "report.json").read_text()
    assert secret not in written
    document = json.loads(written)
    marker = "[REDACTED:OPENAI_API_KEY]"
    assert [row["last_assistant"] for row in document["rows"]] == [
        t.replace(secret, marker) for t in texts
    ]
    assert [row["note"] for row in document["row_verdicts"]] == [
        t.replace(secret, marker) for t in texts
    ]
    groups = list(report.row_groups())
    assert secret not in json.dumps(groups)
    assert groups[3][1][0]["last_assistant"] == "no secret here"


def test_journal_lines_read_back_as_json_loads_reads_them(tmp_path: Path) -> None:
    lines = [
        {**attempt("d::row-0"), "last_assistant": "caf\u00e9 \U0001f600"},
        {**attempt("d::row-1"), "last_assistant": "lone \ud800 surrogate"},
    ]
    path = tmp_path / "rows.jsonl"
    with path.open("wb") as fh:
        fh.write(json.dumps(lines[0], ensure_ascii=False).encode("utf-8") + b"\n")
        fh.write(json.dumps(lines[1], ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
    rows, bad = read_journal(path)
    assert bad == 0
    assert [r.attempts[0]["last_assistant"] for r in rows] == [
        "caf\u00e9 \U0001f600",
        "lone \ud800 surrogate",
    ]
