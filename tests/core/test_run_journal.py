"""The run journal (rows.jsonl + run.json) and the report rebuilt from it."""

from __future__ import annotations

import html
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
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
from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord


def attempt(run_index: int = 0, *, reward: float = 1.0, **extra: Any) -> AttemptRecord:
    return AttemptRecord(
        run_index=run_index,
        status="success",
        reward=reward,
        passed=reward >= 1.0,
        tokens=5,
        duration_ms=100.0,
        started_at=1000.0 + run_index,
        **extra,
    )


def row(nodeid: str, *attempts: AttemptRecord, verdict: str = "passed", **stats: Any) -> RowRecord:
    row_key = nodeid.rsplit("::", 1)[-1]
    for a in attempts or [attempt()]:
        a.row_key, a.row_index = row_key, int(row_key.split("-")[-1])
    return RowRecord(
        nodeid=nodeid,
        dataset="data/test.jsonl",
        row_key=row_key,
        verdict=verdict,
        attempts=list(attempts) or [attempt(0)],
        stats={"attempts": len(attempts) or 1, **stats},
    )


def ids(n: int) -> list[str]:
    return [f"data/test.jsonl::row-{i}" for i in range(n)]


def test_each_row_is_on_disk_when_write_row_returns(tmp_path: Path) -> None:
    journal = RowJournal(tmp_path / "run" / "rows.jsonl", fresh=True)
    assert not (tmp_path / "run").exists(), "nothing is created before the first row"
    journal.write_row(row(ids(1)[0]))
    # Read through another descriptor while the journal is still open: no buffering.
    lines = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["verdict"] == "passed"
    journal.close()
    assert not journal.write_row(row(ids(2)[1]))
    assert len((tmp_path / "run" / "rows.jsonl").read_text().splitlines()) == 1


def test_a_fresh_journal_truncates_and_a_resumed_one_appends(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(row(ids(1)[0]).model_dump_json() + "\n")
    resumed = RowJournal(path, fresh=False)
    resumed.write_row(row(ids(2)[1]))
    resumed.close()
    assert len(path.read_text().splitlines()) == 2
    fresh = RowJournal(path, fresh=True)
    fresh.write_row(row(ids(3)[2]))
    fresh.close()
    assert [json.loads(x)["nodeid"] for x in path.read_text().splitlines()] == [ids(3)[2]]


def test_rows_written_by_a_process_survive_its_sigkill(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from osmosis_rollout.runs.journal import RowJournal
        from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord
        journal = RowJournal(Path({str(tmp_path / "rows.jsonl")!r}), fresh=True)
        for i in range(5):
            attempt = AttemptRecord(status="success", reward=1.0)
            journal.write_row(RowRecord(nodeid=f"d::row-{{i}}", verdict="passed", attempts=[attempt]))
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
            journal.write_row(row(f"d::row-{worker * 100 + i}", attempt(last_assistant=big)))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    journal.close()
    rows, bad = read_journal(tmp_path / "rows.jsonl")
    assert bad == 0
    assert len(rows) == 200


def test_the_last_line_of_a_row_wins_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    journal = RowJournal(path, fresh=True)
    a, b = ids(2)
    journal.write_row(row(a, attempt(0), attempt(1, reward=0.0), verdict="failed"))
    journal.write_row(row(b))
    # A resumed run ran row a again, and it passed.
    journal.write_row(row(a, attempt(0), attempt(1), verdict="passed"))
    journal.close()
    with path.open("a") as fh:
        fh.write('{"nodeid": "data/test.jsonl::row-9", "verd')
    rows, bad = read_journal(path)
    assert bad == 1
    assert [(r.nodeid, r.verdict, len(r.attempts)) for r in rows] == [
        (b, "passed", 1),
        (a, "passed", 2),
    ]


def test_a_journal_of_an_earlier_release_is_refused_with_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One line per attempt, as releases before the one-line rows wrote it.
    run = tmp_path / "run"
    write_run_file(run, config={"pass_threshold": 1.0}, selected=ids(1), finished=None)
    old = {"nodeid": ids(1)[0], "run_index": 0, "status": "success", "row_verdict": "passed"}
    (run / "rows.jsonl").write_text(json.dumps(old) + "\n")
    assert cli_main(["report", "rebuild", str(run)]) == 2
    err = capsys.readouterr().err
    assert "written by an earlier pytest-osmosis (one line per attempt)" in err
    assert "Rebuild that run's report with the release that wrote it" in err


def test_the_journal_is_redacted(tmp_path: Path) -> None:
    secret = "sk-secret-0123456789"
    journal = RowJournal(
        tmp_path / "rows.jsonl", fresh=True, redactor=Redactor({"OPENAI_API_KEY": secret})
    )
    journal.write_row(row(ids(1)[0], attempt(err_message=f"401 for key {secret}")))
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
            row(nodeid, attempt(reward=reward), verdict="passed" if reward >= 1 else "failed")
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
_secret_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(alphabet='ab-k"\\\n\u00e9\x7f', max_size=6),
    st.sampled_from(list(_SECRETS.values())).map(lambda s: f"key {s}!"),
)


@settings(max_examples=200, deadline=None)
@given(
    metrics=st.dictionaries(
        st.text(alphabet="abk-", max_size=4),
        st.recursive(
            _secret_leaves,
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(alphabet="abk-", max_size=4), inner, max_size=3)
            ),
            max_leaves=8,
        ),
    ),
    text=st.sampled_from([None, *(f"said {s}" for s in _SECRETS.values())]),
)
def test_a_journal_line_holds_no_secret_and_reads_back_redacted(
    tmp_path_factory: pytest.TempPathFactory, metrics: dict[str, Any], text: str | None
) -> None:
    # Lines with no secret are written as the model encodes them; the others are redacted.
    redactor = Redactor(_SECRETS)
    path = tmp_path_factory.mktemp("journal") / "rows.jsonl"
    journal = RowJournal(path, fresh=True, redactor=redactor)
    record = row(ids(1)[0], attempt(last_assistant=text), metrics=metrics)
    expected = redactor.redact_value(record.model_dump(mode="json"))
    journal.write_row(record)
    journal.close()
    data = path.read_bytes()
    assert not any(s.encode() in data for s in _SECRETS.values())
    (read,), bad = read_journal(path)
    assert bad == 0
    assert read.model_dump(mode="json") == {**expected, "run_id": None}


def test_the_report_redacts_journal_lines_written_before_their_secret_was_known(
    tmp_path: Path,
) -> None:
    from pytest_osmosis.results.report import RunReport

    secret = "sk-secret-0123456789"
    texts = [f"key {secret}", f"line one\nkey {secret}", f"caf\u00e9 {secret}", "no secret here"]
    # Written by a resumed run's first half, which did not know the secret.
    early = RowJournal(tmp_path / "rows.jsonl", fresh=True)
    for i, text in enumerate(texts):
        early.write_row(row(f"data/test.jsonl::row-{i}", attempt(last_assistant=text), note=text))
    early.close()
    assert secret in (tmp_path / "rows.jsonl").read_text()
    report = RunReport(
        tmp_path, pass_threshold=1.0, settings={}, redactor=Redactor({"OPENAI_API_KEY": secret})
    )
    selected = [f"data/test.jsonl::row-{i}" for i in range(len(texts))]
    report.finish(selected=selected, finished={"stopped_by": None, "interrupted": False})
    document = report.document()
    report.write_json(tmp_path / "report.json")
    written = (tmp_path / "report.json").read_text()
    assert secret not in written
    assert json.loads(written) == document
    marker = "[REDACTED:OPENAI_API_KEY]"
    assert [row["last_assistant"] for row in document["rows"]] == [
        t.replace(secret, marker) for t in texts
    ]
    assert [row["note"] for row in document["row_verdicts"]] == [
        t.replace(secret, marker) for t in texts
    ]


def test_journal_lines_read_back_as_they_were_written(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    journal = RowJournal(path, fresh=True)
    journal.write_row(row("d::row-0", attempt(last_assistant="caf\u00e9 \U0001f600")))
    # A lone surrogate has no UTF-8 form: it is written as "?" rather than lose the row.
    journal.write_row(row("d::row-1", attempt(last_assistant="lone \ud800 surrogate")))
    journal.close()
    rows, bad = read_journal(path)
    assert bad == 0
    assert [r.attempts[0].last_assistant for r in rows] == [
        "caf\u00e9 \U0001f600",
        "lone ? surrogate",
    ]


def test_a_row_record_answers_to_outcome_as_the_fixture_result_did_before_records() -> None:
    from osmosis_rollout.runs.report_model import RowRecord

    assert RowRecord(nodeid="d::row-0", verdict="failed").outcome == "failed"


def test_report_rebuild_writes_the_html_page_of_a_killed_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path, finished=None, done=2, selected=5)
    page = tmp_path / "pages" / "report.html"
    assert cli_main(["report", "rebuild", str(run), "--html", str(page)]) == 0
    assert f"html: {page}" in capsys.readouterr().out
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert "INCOMPLETE" in text
    for nodeid in ids(2):
        assert html.escape(nodeid) in text
    # The same page the run itself would have written from the rebuilt report.
    assert json.loads((run / "report.json").read_text())["summary"]["complete"] is False


@pytest.mark.parametrize("name", ["run.json", "rows.jsonl"])
@pytest.mark.parametrize("flag", ["--output", "--html"])
def test_report_rebuild_refuses_to_write_over_its_own_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, name: str
) -> None:
    run = make_run(tmp_path, finished=None, done=2, selected=2)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert cli_main(["report", "rebuild", str(run), flag, str(run / name)]) == 2
    err = capsys.readouterr().err
    assert f"{flag} {run / name}" in err and "the run's own" in err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@pytest.mark.parametrize("what", ["dataset", "entrypoint", "policy", "eval_config"])
@pytest.mark.parametrize("flag", ["--output", "--html"])
def test_report_rebuild_refuses_to_write_over_a_file_the_run_read(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    what: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    files = {
        "dataset": tmp_path / "data" / "test.jsonl",
        "entrypoint": tmp_path / "rollouts" / "x" / "main.py",
        "policy": tmp_path / "rollouts" / "x" / "policy.py",
        "eval_config": tmp_path / "configs" / "eval" / "x.toml",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's file\n")
    run = tmp_path / "run"
    config = {
        "pass_threshold": 1.0,
        "n": 1,
        "entrypoint": str(files["entrypoint"]),
        "policy": f"{files['policy']}:policy",
        "eval_config": str(files["eval_config"]),
    }
    write_run_file(run, config=config, selected=ids(1), finished=None)
    journal = RowJournal(run / "rows.jsonl", fresh=True)
    record = row(ids(1)[0])
    record.dataset = str(files["dataset"])  # the journal keeps the dataset's absolute path
    journal.write_row(record)
    journal.close()

    target = files[what].relative_to(tmp_path)
    assert cli_main(["report", "rebuild", str(run), flag, str(target)]) == 2
    assert f"{flag} {target} is the run's" in capsys.readouterr().err
    assert all(path.read_text() == "the user's file\n" for path in files.values())


def test_report_rebuild_refuses_the_entrypoint_file_named_with_its_attribute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # run.json keeps the entrypoint as given: FILE:ATTR names the file FILE all the same.
    main = tmp_path / "rollouts" / "x" / "main.py"
    main.parent.mkdir(parents=True)
    main.write_text("the user's rollout\n")
    run = tmp_path / "run"
    config = {"pass_threshold": 1.0, "n": 1, "entrypoint": f"{main}:MyRollout"}
    write_run_file(run, config=config, selected=ids(1), finished=None)
    RowJournal(run / "rows.jsonl", fresh=True).close()
    assert cli_main(["report", "rebuild", str(run), "--html", str(main)]) == 2
    assert f"--html {main} is the run's rollout entrypoint" in capsys.readouterr().err
    assert main.read_text() == "the user's rollout\n"


@pytest.mark.parametrize("output", [None, "elsewhere.json"])
def test_report_rebuild_refuses_html_on_the_reports_own_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str | None
) -> None:
    # Written one after the other, the page would replace the report it renders.
    run = make_run(tmp_path, finished=None, done=2, selected=2)
    report = tmp_path / output if output else run / "report.json"
    args = ["--output", str(report)] if output else []
    assert cli_main(["report", "rebuild", str(run), *args, "--html", str(report)]) == 2
    assert f"--html {report} is where --output writes the report" in capsys.readouterr().err
    assert not report.exists()


@pytest.mark.parametrize("name", ["rollouts.log", "rollouts/row-0/attempt-0.json"])
def test_report_rebuild_refuses_to_write_over_the_runs_log_or_trajectories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # The page reads the trajectories it shows; the log is the run's only record of its output.
    run = make_run(tmp_path, finished=None, done=2, selected=2)
    target = run / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("the run's file\n")
    assert cli_main(["report", "rebuild", str(run), "--html", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"--html {target} is" in err and "the run's own" in err
    assert target.read_text() == "the run's file\n"
