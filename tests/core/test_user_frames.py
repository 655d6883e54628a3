"""The user's part of a traceback: their innermost frame and their frames only, bounded."""

from __future__ import annotations

import json

import pytest

from osmosis_rollout._internal.user_frames import (
    MAX_USER_FRAMES,
    is_user_file,
    user_error_fields,
    user_traceback,
)


def _deep(n: int) -> None:
    if n == 0:
        raise RuntimeError("at the bottom")
    _deep(n - 1)


def test_the_innermost_user_frame_is_named_and_library_frames_are_left_out() -> None:
    try:
        json.loads("{not json")  # raised inside the standard library, called from here
    except ValueError as exc:
        seen = user_traceback(exc)
    assert seen.where is not None
    assert seen.where.startswith("tests/core/test_user_frames.py:")
    assert seen.where.endswith(
        "in test_the_innermost_user_frame_is_named_and_library_frames_are_left_out"
    )
    assert "json/decoder.py" not in seen.text and "json/__init__.py" not in seen.text
    assert seen.text.splitlines()[-1].startswith("JSONDecodeError: Expecting property name")


def test_a_deep_traceback_keeps_the_innermost_user_frames_and_says_how_many_it_left_out() -> None:
    with pytest.raises(RuntimeError) as info:
        _deep(10)
    lines = user_traceback(info.value).text.splitlines()
    frames = [line for line in lines if line.startswith('  File "')]
    assert len(frames) == MAX_USER_FRAMES
    assert lines[1] == f"  ... {12 - MAX_USER_FRAMES} earlier user frames left out"
    assert lines[-1] == "RuntimeError: at the bottom"


def test_an_error_with_no_user_frame_has_no_where_but_keeps_its_line() -> None:
    error = KeyError("answer")  # never raised: no traceback at all
    assert user_error_fields(error) == {"traceback": "KeyError: 'answer'"}


def test_installed_packages_the_standard_library_and_ours_are_not_user_code() -> None:
    import pydantic

    import osmosis_rollout

    assert not is_user_file(json.__file__)
    assert not is_user_file(str(pydantic.__file__))
    assert not is_user_file(str(osmosis_rollout.__file__))
    assert not is_user_file("<frozen importlib._bootstrap>")
    assert is_user_file(__file__)
