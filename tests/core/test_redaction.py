"""The redactor: which values are secrets, how they are replaced, and logging through it."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from osmosis_rollout import ExecutionResult, RolloutSample, RolloutStatus
from osmosis_rollout.redaction import RedactingFormatter, Redactor, redact_handler
from osmosis_rollout.trajectory import write_trajectory

KEY = "sk-proj-0123456789abcdef"


def test_credential_named_environment_values_become_named_markers() -> None:
    env = {
        "OPENAI_API_KEY": KEY,
        "OSMOSIS_ROLLOUT_API_KEY": "inbound-abcdefgh",
        "HF_TOKEN": "hf_zzzzzzzzzzzz",
        "AWS_SECRET_ACCESS_KEY": "aws/secret+value",
        "HOME": "/home/someone-long",
        "MONKEY": "not-a-secret-value",
    }
    redactor = Redactor.from_environment(env)
    text = f"{KEY} inbound-abcdefgh hf_zzzzzzzzzzzz aws/secret+value /home/someone-long not-a-secret-value"
    assert redactor.redact(text) == (
        "[REDACTED:OPENAI_API_KEY] [REDACTED:OSMOSIS_ROLLOUT_API_KEY] [REDACTED:HF_TOKEN] "
        "[REDACTED:AWS_SECRET_ACCESS_KEY] /home/someone-long not-a-secret-value"
    )
    assert redactor.names == [
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "OSMOSIS_ROLLOUT_API_KEY",
    ]


def test_short_values_are_not_treated_as_secrets() -> None:
    redactor = Redactor.from_environment({"GH_TOKEN": "1", "X_SECRET": "abc"})
    assert not redactor
    assert redactor.redact("1 abc 10") == "1 abc 10"


def test_a_key_containing_another_is_replaced_whole() -> None:
    redactor = Redactor({"SHORT_TOKEN": "abcdefgh", "LONG_TOKEN": "abcdefgh-ijklmnop"})
    assert redactor.redact("abcdefgh-ijklmnop abcdefgh") == (
        "[REDACTED:LONG_TOKEN] [REDACTED:SHORT_TOKEN]"
    )


def test_extra_and_added_values_are_redacted_under_their_names() -> None:
    redactor = Redactor.from_environment(
        {}, extra={"POLICY_API_KEY": "policy-key-123456", "X": None}
    )
    redactor.add("SERVER_KEY", "server-key-abcdef")
    redactor.add("IGNORED", "")
    assert redactor.redact("policy-key-123456 / server-key-abcdef") == (
        "[REDACTED:POLICY_API_KEY] / [REDACTED:SERVER_KEY]"
    )


def test_values_with_regex_characters_are_matched_literally() -> None:
    redactor = Redactor({"A_TOKEN": "a.b*c+d?e(f)"})
    assert redactor.redact("a.b*c+d?e(f) axbbcdde(f)") == "[REDACTED:A_TOKEN] axbbcdde(f)"


def test_json_like_values_are_redacted_everywhere_keys_included() -> None:
    redactor = Redactor({"OPENAI_API_KEY": KEY})
    value = {
        "message": f"401: key {KEY} rejected",
        KEY: [f"x{KEY}", ("t", KEY), 3, None, 1.5, True],
        "nested": {"deep": [{"k": KEY}]},
    }
    marker = "[REDACTED:OPENAI_API_KEY]"
    assert redactor.redact_value(value) == {
        "message": f"401: key {marker} rejected",
        marker: [f"x{marker}", ["t", marker], 3, None, 1.5, True],
        "nested": {"deep": [{"k": marker}]},
    }
    # The original is untouched.
    assert value["message"] == f"401: key {KEY} rejected"


def test_redact_shared_copies_only_the_parts_that_held_a_secret() -> None:
    redactor = Redactor({"API_KEY": "sk-live-0123456789"})
    clean = {"rows": [{"answer": "x" * 100}], "pair": ["a", "b"]}
    assert redactor.redact_shared(clean) is clean
    dirty = {"rows": [{"answer": "key sk-live-0123456789"}, {"answer": "fine"}], "ok": ["a"]}
    redacted = redactor.redact_shared(dirty)
    assert redacted == {
        "rows": [{"answer": "key [REDACTED:API_KEY]"}, {"answer": "fine"}],
        "ok": ["a"],
    }
    assert redacted["rows"][1] is dirty["rows"][1]
    assert redacted["ok"] is dirty["ok"]
    assert dirty["rows"][0]["answer"] == "key sk-live-0123456789"  # the input is not changed


def test_an_empty_redactor_returns_values_unchanged() -> None:
    value = {"a": ["b"]}
    assert Redactor().redact_value(value) is value
    assert Redactor().redact("text") == "text"


def test_a_log_handler_writes_messages_and_tracebacks_redacted(tmp_path: Path) -> None:
    redactor = Redactor({"OPENAI_API_KEY": KEY})
    path = tmp_path / "run.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    redact_handler(handler, redactor)
    redact_handler(handler, redactor)  # idempotent: one wrapper, not two
    assert isinstance(handler.formatter, RedactingFormatter)
    assert not isinstance(handler.formatter.inner, RedactingFormatter)
    logger = logging.getLogger("test_redaction.handler")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("calling with %s", KEY)
        try:
            raise ValueError(f"grader saw {KEY}")
        except ValueError:
            logger.exception("grader failed")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert "WARNING calling with [REDACTED:OPENAI_API_KEY]" in text
    assert "ValueError: grader saw [REDACTED:OPENAI_API_KEY]" in text


def test_adding_a_secret_while_another_thread_redacts_is_safe() -> None:
    redactor = Redactor({"A_TOKEN": "aaaaaaaa-0"})
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                out = redactor.redact("aaaaaaaa-0 bbbbbbbb-1")
                assert out.startswith("[REDACTED:A_TOKEN] ")
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(200):
        redactor.add(f"B{i}_TOKEN", f"bbbbbbbb-{i}")
    stop.set()
    reader.join(10)
    assert not errors
    assert redactor.redact("bbbbbbbb-1") == "[REDACTED:B1_TOKEN]"


def test_saved_trajectories_and_diagnostics_hold_no_environment_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    sample = RolloutSample(
        messages=[
            {"role": "user", "content": "what is your key?"},
            {"role": "assistant", "content": f"my key is {KEY}"},
        ]
    )
    failed = ExecutionResult(
        status=RolloutStatus.FAILURE,
        sample=sample,
        err_message=f"grader raised: bad key {KEY}",
        extra_fields={"traceback": f"ValueError: {KEY}"},
    )
    path = write_trajectory(tmp_path, "r1", failed, metadata={"k": KEY})
    assert path is not None
    written = [p for p in (tmp_path / "r1").iterdir()]
    assert {p.name for p in written} == {"trajectory.json", "diagnostics.json"}
    for p in written:
        text = p.read_text(encoding="utf-8")
        assert KEY not in text
        assert "[REDACTED:OPENAI_API_KEY]" in text


def test_reading_the_environment_survives_another_thread_changing_it() -> None:
    # pytest sets and deletes PYTEST_CURRENT_TEST on its main thread while rollouts build
    # their redactors on the scheduler thread (a 10,000-row run lost 9 rows to a KeyError).
    import os
    import threading

    from osmosis_rollout.redaction import Redactor

    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            os.environ["OSMOSIS_TEST_CHURN"] = "x"
            del os.environ["OSMOSIS_TEST_CHURN"]

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        for _ in range(20_000):
            Redactor.from_environment()
    finally:
        stop.set()
        thread.join(timeout=10)
        os.environ.pop("OSMOSIS_TEST_CHURN", None)


def test_the_environment_redactor_follows_secrets_set_changed_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from osmosis_rollout.redaction import environment_redactor

    first, second = "first-secret-value-1", "second-secret-value-2"
    monkeypatch.delenv("MIDRUN_API_KEY", raising=False)
    assert environment_redactor().redact(first) == first

    monkeypatch.setenv("MIDRUN_API_KEY", first)
    assert environment_redactor().redact(first) == "[REDACTED:MIDRUN_API_KEY]"
    # A variable whose name is not a credential's changes nothing redacted.
    monkeypatch.setenv("MIDRUN_NOT_SECRET", "x")
    assert environment_redactor().redact(first) == "[REDACTED:MIDRUN_API_KEY]"

    monkeypatch.setenv("MIDRUN_API_KEY", second)
    redactor = environment_redactor()
    assert redactor.redact(f"{first} {second}") == f"{first} [REDACTED:MIDRUN_API_KEY]"

    monkeypatch.delenv("MIDRUN_API_KEY")
    assert environment_redactor().redact(second) == second


def test_the_environment_redactor_takes_extra_secrets_and_is_read_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from osmosis_rollout.redaction import environment_redactor

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    plain = environment_redactor()
    with_key = environment_redactor(extra={"POLICY_API_KEY": "policy-key-0123"})
    assert with_key.redact(f"{KEY} policy-key-0123") == (
        "[REDACTED:OPENAI_API_KEY] [REDACTED:POLICY_API_KEY]"
    )
    assert plain.redact("policy-key-0123") == "policy-key-0123"
    assert (
        environment_redactor(extra={"POLICY_API_KEY": "other-key-4567"}).redact(
            "policy-key-0123 other-key-4567"
        )
        == "policy-key-0123 [REDACTED:POLICY_API_KEY]"
    )
    with pytest.raises(TypeError, match="read-only"):
        plain.add("MINE_TOKEN", "my-own-secret-1")
    assert environment_redactor().redact("my-own-secret-1") == "my-own-secret-1"


def test_a_text_that_is_exactly_the_shortest_secret_is_redacted_and_foreign_values_walked() -> None:
    from collections import OrderedDict
    from types import MappingProxyType

    class Name(str):
        pass

    redactor = Redactor({"SHORT_TOKEN": "12345678", "LONG_API_KEY": "a-much-longer-secret"})
    assert redactor.redact("12345678") == "[REDACTED:SHORT_TOKEN]"
    assert redactor.redact("1234567") == "1234567"
    redactor.add("SHORTER_TOKEN", "abcdefgh")
    assert redactor.redact("abcdefgh") == "[REDACTED:SHORTER_TOKEN]"
    value = {
        "tuple": ("12345678", 1, 2.5, None, True),
        "ordered": OrderedDict(k=Name("x 12345678")),
        "proxy": MappingProxyType({"12345678": [Name("ok")]}),
        "number": 12345678,
    }
    assert redactor.redact_value(value) == {
        "tuple": ["[REDACTED:SHORT_TOKEN]", 1, 2.5, None, True],
        "ordered": {"k": "x [REDACTED:SHORT_TOKEN]"},
        "proxy": {"[REDACTED:SHORT_TOKEN]": ["ok"]},
        "number": 12345678,
    }


def test_the_shared_redactor_matches_the_secret_it_is_cached_under_while_another_thread_changes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A redactor cached for one value of a key must redact that value, whatever another
    thread set in between (the cache key and the redactor come from one read)."""
    from osmosis_rollout.redaction import environment_redactor

    first, second = "sk-" + "X" * 24, "sk-" + "Y" * 24
    monkeypatch.setenv("RACE_API_KEY", first)
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            os.environ["RACE_API_KEY"] = second
            os.environ["RACE_API_KEY"] = first

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    misses = checks = 0
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            thread = threading.Thread(target=toggle)
            thread.start()
            for _ in range(50):
                environment_redactor()
            stop.set()
            thread.join(5)
            stop.clear()
            os.environ["RACE_API_KEY"] = first
            checks += 1
            misses += first in environment_redactor().redact(f"key={first}")
    finally:
        sys.setswitchinterval(interval)
    assert checks and misses == 0


def test_a_subclass_that_redacts_each_text_its_own_way_is_not_skipped(tmp_path: Path) -> None:
    """The no-secret fast paths (trajectory text, journal line) hand a subclass the value."""
    import re

    from osmosis_rollout.runs.journal import RowJournal
    from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord

    class MaskKeyShapes(Redactor):
        shape = re.compile(r"sk-[A-Za-z0-9]{20,}")

        def redact(self, text: str) -> str:
            return self.shape.sub("[REDACTED:KEY_SHAPE]", super().redact(text))

    unconfigured = "sk-" + "A" * 24
    redactor = MaskKeyShapes({"OPENAI_API_KEY": KEY})
    sample = RolloutSample(
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": f"use {unconfigured}"},
        ]
    )
    path = write_trajectory(
        tmp_path,
        "r1",
        ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample),
        redactor=redactor,
    )
    assert path is not None
    assert unconfigured not in path.read_text(encoding="utf-8")
    journal = RowJournal(tmp_path / "rows.jsonl", fresh=True, redactor=redactor)
    attempt = AttemptRecord(
        row_key="r", rollout_id="r.0", status="failed", err_message=f"bad {unconfigured}"
    )
    assert journal.write_row(RowRecord(nodeid="n", verdict="failed", attempts=[attempt]))
    journal.close()
    line = (tmp_path / "rows.jsonl").read_bytes()
    assert unconfigured.encode() not in line
    assert b"KEY_SHAPE" in line


@pytest.mark.parametrize(
    "secret",
    ["aws/secret+value/with/slashes", "caf\u00e9-secret-value", "del\x7f-secret-value"],
)
def test_a_secret_spelled_with_json_escapes_is_not_taken_for_absent(secret: str) -> None:
    """``\\/`` and ``\\uXXXX`` can spell a secret's characters: such a text is not vouched for."""
    import json

    redactor = Redactor({"SOME_API_KEY": secret})
    ascii_text = json.dumps({"error": f"got {secret}"})
    slashed = json.dumps({"error": f"got {secret}"}, ensure_ascii=False).replace("/", "\\/")
    for text in (ascii_text, slashed):
        if secret in text:
            continue  # written verbatim: found by the search itself
        assert json.loads(text)["error"] == f"got {secret}"
        assert not redactor.absent_from_json(text), text
    assert redactor.absent_from_json(json.dumps({"error": "nothing here"}))


def test_environment_names_ending_in_key_are_secrets_beside_tokens_and_passwords() -> None:
    env = {
        "AZURE_OPENAI_KEY": "azure-0123456789",
        "DB_PASSWORD": "password-0123456",
        "KEYBOARD_LAYOUT": "dvorak-programmer",
        "MONKEY": "not-a-secret-value",
    }
    redactor = Redactor.from_environment(env)
    assert redactor.names == ["AZURE_OPENAI_KEY", "DB_PASSWORD"]
    assert redactor.redact("azure-0123456789 dvorak-programmer") == (
        "[REDACTED:AZURE_OPENAI_KEY] dvorak-programmer"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "--osmosis-server http://user:pass@host:8000/x",
            "--osmosis-server http://***@host:8000/x",
        ),
        ("token only https://ghp_abcdef@github.com", "token only https://***@github.com"),
        ('{"url": "postgres://a:b@db/x"}', '{"url": "postgres://***@db/x"}'),
        ("http://***@host stays", "http://***@host stays"),
        (
            "no credentials http://host/path?mail=a@b.c",
            "no credentials http://host/path?mail=a@b.c",
        ),
        ("mail a@b.c and ftp://host", "mail a@b.c and ftp://host"),
    ],
)
def test_credentials_in_any_url_become_stars_even_without_a_known_secret(
    text: str, expected: str
) -> None:
    from osmosis_rollout.redaction import redact_url

    assert redact_url(text) == expected
    assert Redactor().redact(text) == expected
    document = {"servers": [text]}
    assert Redactor().redact_value(document) == {"servers": [expected]}
    assert Redactor().absent_from_json(json.dumps(document)) is (text == expected)


def test_a_live_redactor_holds_each_rollouts_key_until_released_and_retires_it_later() -> None:
    from osmosis_rollout.redaction import LiveRedactor

    redactor = LiveRedactor({"OPENAI_API_KEY": KEY})
    redactor.retained = 2
    keys = [f"rollout-key-{i:04d}-abcdefgh" for i in range(4)]
    for key in keys:
        redactor.hold("POLICY_API_KEY", key)
    redactor.hold("POLICY_API_KEY", keys[0])  # two rollouts handed the same key
    text = f"a {keys[0]}, b x{keys[1]}y, c {KEY} d {keys[3]}"
    assert redactor.redact(text) == (
        "a [REDACTED:POLICY_API_KEY], b x[REDACTED:POLICY_API_KEY]y, "
        "c [REDACTED:OPENAI_API_KEY] d [REDACTED:POLICY_API_KEY]"
    )
    assert redactor.held == 4
    redactor.release(keys[0])
    assert redactor.redact(keys[0]) == "[REDACTED:POLICY_API_KEY]"  # still held once
    for key in keys:
        redactor.release(key)
    assert redactor.held == 0
    # The last two released stay redacted; older ones are forgotten.
    assert redactor.redact(keys[3]) == "[REDACTED:POLICY_API_KEY]"
    assert redactor.redact(keys[2]) == "[REDACTED:POLICY_API_KEY]"
    assert redactor.redact(keys[1]) == keys[1]
    assert redactor.redact_value({"k": [keys[3]]}) == {"k": ["[REDACTED:POLICY_API_KEY]"]}


def test_a_redacting_stream_sees_a_secret_written_in_pieces_and_flushes_the_rest() -> None:
    import io

    from osmosis_rollout.redaction import RedactingStream

    inner = io.StringIO()
    stream = RedactingStream(inner, Redactor({"OPENAI_API_KEY": KEY}))
    stream.write("key: " + KEY[:5])
    stream.flush()  # print(..., end="", flush=True): the line is still not complete
    assert inner.getvalue() == ""  # held until the line ends
    stream.write(KEY[5:] + "\nnext " + KEY)
    assert inner.getvalue() == "key: [REDACTED:OPENAI_API_KEY]\n"
    stream.close()
    assert inner.getvalue() == "key: [REDACTED:OPENAI_API_KEY]\nnext [REDACTED:OPENAI_API_KEY]"


async def test_a_redacting_stream_keeps_each_tasks_line_apart_from_the_others() -> None:
    import asyncio
    import io

    from osmosis_rollout.redaction import RedactingStream

    inner = io.StringIO()
    stream = RedactingStream(inner, Redactor({"OPENAI_API_KEY": KEY}))
    halfway = asyncio.Event()

    async def split_print() -> None:
        stream.write("a: " + KEY[:9])
        halfway.set()
        await asyncio.sleep(0.01)
        stream.write(KEY[9:] + "\n")
        stream.write("unfinished " + KEY[:4])

    async def whole_lines() -> None:
        await halfway.wait()
        stream.write("b: between the halves\n")

    await asyncio.gather(split_print(), whole_lines())
    await asyncio.sleep(0)  # the done callbacks of the tasks gather made
    lines = inner.getvalue().splitlines()
    assert lines == [
        "b: between the halves",
        "a: [REDACTED:OPENAI_API_KEY]",
        "unfinished " + KEY[:4],  # written when its task ended
    ]


def test_a_redacting_stream_keeps_each_threads_line_apart_from_the_others() -> None:
    import io

    from osmosis_rollout.redaction import RedactingStream

    inner = io.StringIO()
    stream = RedactingStream(inner, Redactor({"OPENAI_API_KEY": KEY}))
    stream.write("main: " + KEY[:6])
    thread = threading.Thread(target=stream.write, args=("thread line\n",))
    thread.start()
    thread.join()
    stream.write(KEY[6:] + "\n")
    assert inner.getvalue().splitlines() == ["thread line", "main: [REDACTED:OPENAI_API_KEY]"]


def test_a_held_key_is_redacted_base64_and_url_encoded_too() -> None:
    import base64
    from urllib.parse import quote, quote_plus

    from osmosis_rollout.redaction import LiveRedactor

    key = "rk-9f8e/7d6c+5b4a=3f2e?1d0c"
    redactor = LiveRedactor()
    redactor.hold("POLICY_API_KEY", key)
    marker = "[REDACTED:POLICY_API_KEY]"
    raw = key.encode()
    encoded = {
        "base64": base64.b64encode(raw).decode(),
        "base64 unpadded": base64.b64encode(raw).decode().rstrip("="),
        "urlsafe base64": base64.urlsafe_b64encode(raw).decode(),
        "url": quote(key, safe=""),
        "url plus": quote_plus(key),
    }
    for form, text in encoded.items():
        assert text != key
        assert redactor.redact(f"x {text} y") == f"x {marker} y", form
    # Inside a longer base64 text at every alignment (a Basic auth header, a JSON blob).
    for prefix in ("", "u:", "us:", "usr:"):
        blob = base64.b64encode(f"{prefix}{key}".encode()).decode()
        redacted = redactor.redact(f"Authorization: Basic {blob}")
        assert marker in redacted, prefix
        assert base64.b64encode(raw).decode()[4:-4] not in redacted
    redactor.release(key)
    for _ in range(LiveRedactor.retained):
        redactor.hold("POLICY_API_KEY", f"other-key-{_:08d}")
        redactor.release(f"other-key-{_:08d}")
    assert redactor.redact(encoded["base64"]) == encoded["base64"]  # forgotten with its key


def test_the_inbound_key_is_redacted_base64_and_url_encoded_by_a_live_redactor() -> None:
    import base64
    from urllib.parse import quote

    from osmosis_rollout.redaction import LiveRedactor

    inbound = "inbound/key+0123456789"
    redactor = LiveRedactor.from_environment({}, extra={"OSMOSIS_ROLLOUT_API_KEY": inbound})
    marker = "[REDACTED:OSMOSIS_ROLLOUT_API_KEY]"
    for text in (base64.b64encode(inbound.encode()).decode(), quote(inbound, safe="")):
        assert redactor.redact(f"({text})") == f"({marker})"


def test_a_key_family_redacts_the_prefix_and_every_key_derived_from_it_whole() -> None:
    redactor = Redactor({"OPENAI_API_KEY": KEY})
    redactor.add_family("POLICY_API_KEY", "policy-0123456789")
    text = "a policy-0123456789.tok_EN-1 b policy-0123456789, c " + KEY
    assert redactor.redact(text) == (
        "a [REDACTED:POLICY_API_KEY] b [REDACTED:POLICY_API_KEY], c [REDACTED:OPENAI_API_KEY]"
    )
    assert not redactor.absent_from_json(json.dumps({"k": "x policy-0123456789.abc"}))
    assert redactor.names == ["OPENAI_API_KEY", "POLICY_API_KEY"]
