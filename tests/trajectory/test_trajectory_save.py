"""write_trajectory: which files appear where, and that saving never raises."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.trajectory import build_atif, format_atif, write_trajectory
from osmosis_rollout.types import ExecutionResult, RolloutSample, RolloutStatus

CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def result(sample: RolloutSample | None = None, **kwargs: Any) -> ExecutionResult:
    return ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample, **kwargs)


def test_save_writes_trajectory_next_to_artifacts(tmp_path: Path) -> None:
    s = RolloutSample(messages=CHAT, reward=1.0)
    path = write_trajectory(tmp_path, "r1", result(s))
    assert path == tmp_path / "r1" / "trajectory.json"
    assert path.read_text(encoding="utf-8") == format_atif(build_atif("r1", s)) + "\n"
    assert not (tmp_path / "r1" / "diagnostics.json").exists()


def test_save_passes_request_context_into_the_document(tmp_path: Path) -> None:
    path = write_trajectory(
        tmp_path,
        "r1",
        result(RolloutSample(messages=CHAT)),
        label="L",
        metadata={"m": 1},
        extra_fields={"e": 2},
    )
    assert path is not None
    osmosis = json.loads(path.read_text())["extra"]["osmosis"]
    assert osmosis == {
        "rollout_id": "r1",
        "label": "L",
        "request_metadata": {"m": 1},
        "request_extra_fields": {"e": 2},
    }


def test_save_without_sample_writes_nothing(tmp_path: Path) -> None:
    assert write_trajectory(tmp_path, "r1", result(None)) is None
    assert not (tmp_path / "r1").exists()


def test_save_skips_sample_without_trajectory_messages_and_says_so_as_the_official(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = RolloutSample(messages=CHAT, trajectory_messages=None)
    with caplog.at_level(logging.INFO, logger="osmosis_rollout.trajectory.save"):
        assert write_trajectory(tmp_path, "r1", result(s)) is None
    assert not (tmp_path / "r1" / "trajectory.json").exists()
    assert "Skipping trajectory for rollout r1: no trajectory messages" in caplog.text


def test_save_writes_a_placeholder_document_for_an_empty_conversation(tmp_path: Path) -> None:
    path = write_trajectory(tmp_path, "r1", result(RolloutSample(messages=[])))
    assert path is not None
    assert json.loads(path.read_text())["final_metrics"] == {"total_steps": 1}


def test_sample_less_failure_writes_diagnostics_sidecar(tmp_path: Path) -> None:
    failed = ExecutionResult(status=RolloutStatus.FAILURE, extra_fields={"traceback": "boom"})
    assert write_trajectory(tmp_path, "r1", failed) is None
    diagnostics = json.loads((tmp_path / "r1" / "diagnostics.json").read_text())
    assert diagnostics == {"traceback": "boom"}


def test_diagnostics_override_wins_over_result_extra_fields(tmp_path: Path) -> None:
    write_trajectory(tmp_path, "r1", result(extra_fields={"from": "result"}), diagnostics={"a": 1})
    assert json.loads((tmp_path / "r1" / "diagnostics.json").read_text()) == {"a": 1}


def test_diagnostics_live_in_sidecar_not_trajectory(tmp_path: Path) -> None:
    path = write_trajectory(
        tmp_path, "r1", result(RolloutSample(messages=CHAT), extra_fields={"secret_trace": 1})
    )
    assert path is not None
    assert "secret_trace" not in path.read_text()
    assert (tmp_path / "r1" / "diagnostics.json").exists()


def test_diagnostics_with_odd_values_are_still_valid_json(tmp_path: Path) -> None:
    diagnostics: dict[Any, Any] = {"nan": float("nan"), 3: "int key", "obj": object(), "ok": "é"}
    write_trajectory(tmp_path, "r1", result(), diagnostics=diagnostics)
    written = json.loads((tmp_path / "r1" / "diagnostics.json").read_text(encoding="utf-8"))
    assert written["ok"] == "é"
    assert "nan" not in written


def test_save_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the root should be")
    with caplog.at_level(logging.WARNING):
        path = write_trajectory(
            blocker, "r1", result(RolloutSample(messages=CHAT), extra_fields={"x": 1})
        )
    assert path is None
    assert "Failed to save the trajectory for rollout r1 (best-effort)" in caplog.text


def test_save_never_raises_on_a_result_of_the_wrong_type(tmp_path: Path) -> None:
    assert write_trajectory(tmp_path, "r1", object()) is None  # type: ignore[arg-type]


def test_save_refuses_a_rollout_id_that_escapes_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for bad in ("../escape", "a/b", "..", ""):
        assert write_trajectory(root, bad, result(RolloutSample(messages=CHAT))) is None
    assert not (tmp_path / "escape").exists()
    assert not root.exists()


def test_save_replaces_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    write_trajectory(tmp_path, "r1", result(RolloutSample(messages=CHAT)), diagnostics={"n": 1})
    path = write_trajectory(
        tmp_path,
        "r1",
        result(RolloutSample(messages=[{"role": "user", "content": "second"}])),
        diagnostics={"n": 2},
    )
    assert path is not None
    assert json.loads(path.read_text())["steps"][0]["message"] == "second"
    assert sorted(p.name for p in (tmp_path / "r1").iterdir()) == [
        "diagnostics.json",
        "trajectory.json",
    ]


def test_unencodable_message_values_are_dropped_instead_of_losing_the_trajectory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c", "function": {"name": "f", "arguments": {"x": float("nan")}}}
            ],
        }
    ]
    with caplog.at_level(logging.WARNING):
        path = write_trajectory(tmp_path, "r1", result(RolloutSample(messages=messages)))
    assert path is not None
    step = json.loads(path.read_text())["steps"][0]
    assert step["tool_calls"][0]["arguments"] == {}
    assert "dropped values with no JSON form" in caplog.text


def test_lone_surrogates_are_written_as_valid_json_escapes(tmp_path: Path) -> None:
    s = RolloutSample(messages=[{"role": "user", "content": "bad \ud800 text"}])
    path = write_trajectory(tmp_path, "r1", result(s))
    assert path is not None
    assert json.loads(path.read_bytes().decode("utf-8"))["steps"][0]["message"] == "bad \ud800 text"


def test_non_ascii_text_is_written_as_readable_utf8(tmp_path: Path) -> None:
    path = write_trajectory(
        tmp_path, "r1", result(RolloutSample(messages=[{"role": "user", "content": "naïve"}]))
    )
    assert path is not None
    assert "naïve" in path.read_text(encoding="utf-8")


def test_save_resolves_the_default_root_when_none(_artifact_root: Path) -> None:
    path = write_trajectory(None, "r1", result(RolloutSample(messages=CHAT)))
    assert path == _artifact_root / "r1" / "trajectory.json"
    assert path.exists()


def test_trajectory_package_imports_no_web_framework() -> None:
    code = (
        "import sys, osmosis_rollout.trajectory\n"
        "loaded = {'fastapi', 'starlette', 'uvicorn', 'litellm', 'pyarrow', 'pytest'} & set(sys.modules)\n"
        "print(sorted(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def _written_as_redacted_first(tmp_path: Path, sample: RolloutSample, redactor: Any) -> str:
    """The trajectory as redacting the document before formatting it writes it."""
    expected = format_atif(redactor.redact_value(build_atif("r1", sample))) + "\n"
    path = write_trajectory(tmp_path, "r1", result(sample), redactor=redactor)
    assert path is not None
    written = path.read_text(encoding="utf-8")
    assert written == expected
    return written


@pytest.mark.parametrize(
    "secret",
    ["plain-secret-1234", 'with "quote" inside', "back\\slash-secret", "tab\tinside-secret"],
)
def test_a_secret_anywhere_in_a_trajectory_is_redacted_whatever_its_characters(
    tmp_path: Path, secret: str
) -> None:
    from osmosis_rollout.redaction import Redactor

    redactor = Redactor({"MY_TOKEN": secret})
    sample = RolloutSample(
        messages=[
            {"role": "user", "content": f"key: {secret}!"},
            {"role": "assistant", "content": "ok", secret: "as a key"},
        ],
        metrics={"note": secret},
    )
    written = _written_as_redacted_first(tmp_path, sample, redactor)
    assert secret not in json.loads(written)["steps"][0]["message"]
    assert "[REDACTED:MY_TOKEN]" in json.loads(written)["steps"][0]["message"]
    assert json.dumps(secret, ensure_ascii=False)[1:-1] not in written


def test_a_secret_that_only_looks_like_a_number_in_the_trajectory_leaves_the_number(
    tmp_path: Path,
) -> None:
    from osmosis_rollout.redaction import Redactor

    redactor = Redactor({"PIN_TOKEN": "12345678"})
    sample = RolloutSample(messages=CHAT, metrics={"big": 9123456789})
    written = _written_as_redacted_first(tmp_path, sample, redactor)
    assert "9123456789" in written


def test_a_trajectory_with_no_secret_is_written_as_it_is_formatted(tmp_path: Path) -> None:
    from osmosis_rollout.redaction import Redactor

    sample = RolloutSample(messages=CHAT, reward=1.0)
    written = _written_as_redacted_first(tmp_path, sample, Redactor({"K_TOKEN": "never-there"}))
    assert written == format_atif(build_atif("r1", sample)) + "\n"


def test_a_redactor_subclass_sees_the_whole_trajectory_document(tmp_path: Path) -> None:
    from osmosis_rollout.redaction import Redactor

    class Uppercase(Redactor):
        def redact_value(self, value: Any) -> Any:
            if isinstance(value, str):
                return value.upper()
            if isinstance(value, dict):
                return {k: self.redact_value(v) for k, v in value.items()}
            if isinstance(value, list):
                return [self.redact_value(v) for v in value]
            return value

    path = write_trajectory(
        tmp_path, "r1", result(RolloutSample(messages=CHAT)), redactor=Uppercase({"K": "absent!!"})
    )
    assert path is not None
    assert '"HELLO"' in path.read_text(encoding="utf-8")
