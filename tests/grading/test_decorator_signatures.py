"""Every signature the official decorators accept is accepted here, with the same result.

Written from the official SDK's last ``osmosis_reward`` / ``osmosis_rubric`` (``osmosis_ai``
before 0.3, when the decorators left the package): a function whose first parameter is
``solution_str`` is checked (at least three parameters: ``solution_str: str``,
``ground_truth``, ``extra_info``; further ones free), any other function is accepted
unchecked; ``async def`` is awaited; a ``data_source=`` keyword the function cannot take is
dropped. The reward's ``extra_info`` is a ``dict`` with a default; the rubric's
``ground_truth`` may be ``str | None`` and its ``extra_info`` needs no default but must be
passed. What the official refuses we refuse too (``RewardSignatureError``, a ``TypeError``),
listing every problem. One deliberate superset: an ``int`` score is returned as a ``float``
where the official raises.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

import pytest

from osmosis_rollout import osmosis_reward, osmosis_rubric
from osmosis_rollout.errors import RewardReturnError, RewardSignatureError


def _define(source: str) -> Any:
    namespace: dict[str, Any] = {}
    exec("from typing import Any, Optional\n" + textwrap.dedent(source), namespace)
    return namespace["r"]


async def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    value = fn(*args, **kwargs)
    return await value if inspect.isawaitable(value) else value


# (source, call args, call kwargs, expected result)
REWARD_ACCEPTED = {
    "classic": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict = None) -> float:\n"
        "    return float(solution_str == ground_truth)",
        ("42", "42"),
        {},
        1.0,
    ),
    "kwargs-keeps-data-source": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict = None, **kwargs) -> float:\n"
        "    return float(kwargs['data_source'] == 'gsm8k')",
        ("42", "42"),
        {"data_source": "gsm8k"},
        1.0,
    ),
    "data-source-dropped": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict = None) -> float:\n"
        "    return 0.5",
        ("42", "42", {"k": 1}),
        {"data_source": "gsm8k"},
        0.5,
    ),
    "data-source-parameter": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict = None,\n"
        "      data_source: str = '') -> float:\n"
        "    return float(data_source == 'math')",
        ("a", "b"),
        {"data_source": "math"},
        1.0,
    ),
    "async": (
        "async def r(solution_str: str, ground_truth: str, extra_info: dict = None) -> float:\n"
        "    return 0.25",
        ("a", "b"),
        {},
        0.25,
    ),
    "no-return-annotation": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict = {}):\n    return 0.75",
        ("a", "b"),
        {},
        0.75,
    ),
    "keyword-extra-info": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict = None) -> float:\n"
        "    return float(extra_info['w'])",
        (),
        {"solution_str": "a", "ground_truth": "b", "extra_info": {"w": 2}},
        2.0,
    ),
    "not-a-scoring-function": (
        "def r(response, reference):\n    return 'unchecked'",
        ("a", "b"),
        {},
        "unchecked",
    ),
}

REWARD_REFUSED = {
    "two-parameters": (
        "def r(solution_str: str, ground_truth: str) -> float: return 1.0",
        "parameter 3 'extra_info' is missing",
    ),
    "extra-info-without-default": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict) -> float: return 1.0",
        "'extra_info' needs a default",
    ),
    "solution-not-str": (
        "def r(solution_str: int, ground_truth: str, extra_info: dict = None) -> float: return 1.0",
        "'solution_str' is annotated 'int'; expected 'str'",
    ),
    "second-misnamed": (
        "def r(solution_str: str, answer: str, extra_info: dict = None) -> float: return 1.0",
        "parameter 2 is named 'answer'; expected 'ground_truth'",
    ),
    "optional-ground-truth": (
        "def r(solution_str: str, ground_truth: Optional[str], extra_info: dict = None)"
        " -> float: return 1.0",
        "'ground_truth' is annotated 'Optional[str]'; expected 'str'",
    ),
    "kwargs-instead-of-extra-info": (
        "def r(solution_str: str, ground_truth: str, **kwargs) -> float: return 1.0",
        "parameter 3 is '**kwargs'; expected 'extra_info'",
    ),
}

RUBRIC_ACCEPTED = {
    "documented": (
        "def r(solution_str: str, ground_truth: str | None, extra_info: dict) -> float:\n"
        "    return 1.0 if ground_truth is None else 0.0",
        ("a", None, {}),
        {},
        1.0,
    ),
    "optional": (
        "def r(solution_str: str, ground_truth: Optional[str], extra_info: dict) -> float:\n"
        "    return 0.5",
        ("a", "b", {}),
        {},
        0.5,
    ),
    "plain-str-and-unannotated-extra-info": (
        "def r(solution_str: str, ground_truth: str, extra_info) -> float:\n    return 0.5",
        ("a", "b", None),
        {},
        0.5,
    ),
    "async-with-kwargs": (
        "async def r(solution_str: str, ground_truth: str | None, extra_info: dict,\n"
        "            **kwargs) -> float:\n"
        "    return float(kwargs.get('data_source') == 'x')",
        ("a", "b", {}),
        {"data_source": "x"},
        1.0,
    ),
    "data-source-dropped": (
        "def r(solution_str: str, ground_truth: str, extra_info: dict) -> float:\n    return 0.5",
        ("a", "b", {}),
        {"data_source": "x"},
        0.5,
    ),
    "not-a-scoring-function": (
        "def r(prompt):\n    return [prompt]",
        ("a",),
        {},
        ["a"],
    ),
}

RUBRIC_REFUSED = {
    "two-parameters": (
        "def r(solution_str: str, ground_truth: str) -> float: return 1.0",
        "parameter 3 'extra_info' is missing",
    ),
    "ground-truth-not-str": (
        "def r(solution_str: str, ground_truth: int, extra_info: dict) -> float: return 1.0",
        "'ground_truth' is annotated 'int'; expected 'str | None'",
    ),
    "third-misnamed": (
        "def r(solution_str: str, ground_truth: str, info: dict) -> float: return 1.0",
        "parameter 3 is named 'info'; expected 'extra_info'",
    ),
}


@pytest.mark.parametrize("case", sorted(REWARD_ACCEPTED))
async def test_osmosis_reward_accepts_what_the_official_accepts(case: str) -> None:
    source, args, kwargs, expected = REWARD_ACCEPTED[case]
    assert await _call(osmosis_reward(_define(source)), *args, **kwargs) == expected


@pytest.mark.parametrize("case", sorted(RUBRIC_ACCEPTED))
async def test_osmosis_rubric_accepts_what_the_official_accepts(case: str) -> None:
    source, args, kwargs, expected = RUBRIC_ACCEPTED[case]
    assert await _call(osmosis_rubric(_define(source)), *args, **kwargs) == expected


@pytest.mark.parametrize("case", sorted(REWARD_REFUSED))
def test_osmosis_reward_refuses_what_the_official_refuses(case: str) -> None:
    source, problem = REWARD_REFUSED[case]
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_reward(_define(source))
    assert problem in str(caught.value)
    assert "expected: [async] def r(solution_str: str, ground_truth: str," in str(caught.value)


@pytest.mark.parametrize("case", sorted(RUBRIC_REFUSED))
def test_osmosis_rubric_refuses_what_the_official_refuses(case: str) -> None:
    source, problem = RUBRIC_REFUSED[case]
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_rubric(_define(source))
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ((1, "b", {}), "'solution_str' must be a str, got int"),
        (("a", 5, {}), "'ground_truth' must be a str or None, got int"),
        (("a", "b"), "the 'extra_info' argument is required"),
    ],
    ids=["solution", "ground-truth", "extra-info"],
)
def test_a_rubric_checks_its_arguments_on_every_call(args: tuple[Any, ...], problem: str) -> None:
    fn = osmosis_rubric(
        _define(
            "def r(solution_str: str, ground_truth: str | None, extra_info: dict) -> float: return 1.0"
        )
    )
    with pytest.raises(TypeError, match=problem):
        fn(*args)


@pytest.mark.parametrize("decorator", [osmosis_reward, osmosis_rubric])
def test_a_score_that_is_not_a_number_is_refused_on_the_call(decorator: Any) -> None:
    fn = decorator(
        _define("def r(solution_str: str, ground_truth: str, extra_info: dict = None): return 'x'")
    )
    with pytest.raises(RewardReturnError, match="returned str 'x'"):
        fn("a", "b", {})


def test_an_int_score_is_returned_as_a_float_where_the_official_raises() -> None:
    fn = osmosis_reward(
        _define("def r(solution_str: str, ground_truth: str, extra_info: dict = None): return 1")
    )
    result = fn("a", "b")
    assert (result, type(result)) == (1.0, float)
