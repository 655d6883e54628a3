"""@osmosis_reward: the signature checked at decoration, the score checked at every call."""

from __future__ import annotations

import math
import textwrap
from fractions import Fraction
from typing import Any

import pytest

from osmosis_rollout.errors import RewardReturnError, RewardSignatureError, UsageError
from osmosis_rollout.rewards import AsyncRewardFunction, RewardFunction, osmosis_reward

EXPECTED = (
    "expected: [async] def {name}(solution_str: str, ground_truth: str, "
    "extra_info: dict | None = None, **kwargs) -> float"
)


def _define(source: str, *, future: bool = False) -> Any:
    """Define the function ``f`` from ``source`` (optionally under postponed annotations)."""
    header = "from __future__ import annotations\n" if future else ""
    namespace: dict[str, Any] = {}
    exec(header + "from typing import Any, Dict, Optional\n" + textwrap.dedent(source), namespace)
    return namespace["f"]


def _problems(source: str) -> str:
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_reward(_define(source))
    return str(caught.value)


@pytest.mark.parametrize("future", [False, True], ids=["eager", "postponed"])
@pytest.mark.parametrize(
    "extra_info",
    [
        "dict | None = None",
        "dict[str, Any] | None = None",
        "Optional[dict] = None",
        "Optional[Dict[str, Any]] = None",
        "Dict[str, Any] = None",
        "dict = None",
    ],
)
def test_every_spelling_of_an_optional_dict_is_accepted(extra_info: str, future: bool) -> None:
    fn = _define(
        f"""
        def f(solution_str: str, ground_truth: str, extra_info: {extra_info}) -> float:
            return 0.5
        """,
        future=future,
    )
    assert osmosis_reward(fn)("a", "b") == 0.5


def test_the_decorated_function_keeps_its_name_doc_and_original() -> None:
    @osmosis_reward
    def exact_match(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        """1.0 on an exact match."""
        return float(solution_str == ground_truth)

    assert isinstance(exact_match, RewardFunction)
    assert exact_match.__name__ == "exact_match"
    assert exact_match.__doc__ == "1.0 on an exact match."
    assert exact_match.__wrapped__("x", "x") == 1.0
    assert exact_match("x", "x", {"metadata": {}}) == 1.0
    assert exact_match(solution_str="x", ground_truth="y") == 0.0


def test_the_decorator_also_works_with_parentheses() -> None:
    @osmosis_reward()
    def f(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0

    assert f("", "") == 1.0


def test_a_function_that_is_not_a_scoring_function_is_accepted_but_cannot_be_a_grader() -> None:
    # The official decorator checks only functions whose first parameter is solution_str.
    fn = osmosis_reward(
        _define("def f(answer: str, reference: str, extra_info: dict | None = None): return 'x'")
    )
    assert fn("a", "b") == "x"  # unchecked, as in the official SDK
    with pytest.raises(RewardSignatureError) as caught:
        fn.as_grader()
    message = str(caught.value)
    assert "@osmosis_reward: f(answer: str, reference: str," in message
    assert "parameter 1 is named 'answer'; expected 'solution_str'" in message
    assert "parameter 2 is named 'reference'; expected 'ground_truth'" in message
    assert EXPECTED.format(name="f") in message


def test_missing_parameters_are_refused() -> None:
    assert "parameter 3 'extra_info' is missing" in _problems(
        "def f(solution_str: str, ground_truth: str) -> float: return 1.0"
    )


def test_kwargs_in_place_of_extra_info_is_refused_saying_where_it_goes() -> None:
    message = _problems(
        "def f(solution_str: str, ground_truth: str, **kwargs) -> float: return 1.0"
    )
    assert "parameter 3 is '**kwargs'; expected 'extra_info' (put extra parameters after it)" in (
        message
    )


def test_parameters_after_extra_info_are_accepted_and_passed_through() -> None:
    fn = osmosis_reward(
        _define(
            """
            def f(solution_str: str, ground_truth: str, extra_info: dict = None,
                  weight: float = 1.0, *args: Any, **kwargs: Any) -> float:
                return weight * len(kwargs)
            """
        )
    )
    assert fn("a", "b", None, 2.0, x=1, y=2) == 4.0


@pytest.mark.parametrize("future", [False, True], ids=["eager", "postponed"])
def test_missing_parameter_annotations_are_each_reported(future: bool) -> None:
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_reward(
            _define("def f(solution_str, ground_truth, extra_info=None): return 1.0", future=future)
        )
    message = str(caught.value)
    assert "'solution_str' has no annotation; expected 'str'" in message
    assert "'ground_truth' has no annotation; expected 'str'" in message
    assert "'extra_info' has no annotation; expected 'dict | None'" in message


@pytest.mark.parametrize("future", [False, True], ids=["eager", "postponed"])
def test_wrong_annotations_are_shown_next_to_the_expected_ones(future: bool) -> None:
    with pytest.raises(RewardSignatureError) as caught:
        osmosis_reward(
            _define(
                "def f(solution_str: bytes, ground_truth: Optional[str], extra_info: list = None)"
                " -> int: return 1",
                future=future,
            )
        )
    message = str(caught.value)
    assert "'solution_str' is annotated 'bytes'; expected 'str'" in message
    assert "'ground_truth' is annotated 'Optional[str]'; expected 'str'" in message
    assert "'extra_info' is annotated 'list'; expected 'dict | None'" in message
    assert "return" not in message.split("expected:")[0].split("signature:")[1]


def test_the_return_annotation_is_not_checked_but_the_returned_value_is() -> None:
    fn = osmosis_reward(
        _define("def f(solution_str: str, ground_truth: str, extra_info: dict = None): return 1")
    )
    assert fn("a", "b") == 1.0
    with pytest.raises(RewardReturnError):
        osmosis_reward(
            _define(
                "def f(solution_str: str, ground_truth: str, extra_info: dict = None) -> float: return 'x'"
            )
        )("a", "b")


def test_extra_info_needs_a_default_of_any_value() -> None:
    assert "'extra_info' needs a default" in _problems(
        "def f(solution_str: str, ground_truth: str, extra_info: dict | None) -> float: return 1.0"
    )
    fn = osmosis_reward(
        _define(
            "def f(solution_str: str, ground_truth: str, extra_info: dict = {}) -> float: return 1.0"
        )
    )
    assert fn("a", "b") == 1.0


async def test_an_async_reward_is_accepted_and_awaited() -> None:
    fn = osmosis_reward(
        _define(
            """
            async def f(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
                return 1
            """
        )
    )
    assert isinstance(fn, AsyncRewardFunction)
    assert await fn("a", "b") == 1.0


def test_a_generator_is_refused() -> None:
    assert "it is a generator" in _problems(
        "def f(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:"
        " yield 1.0"
    )


def test_signature_errors_are_type_errors_and_usage_errors() -> None:
    with pytest.raises(TypeError) as caught:
        osmosis_reward(_define("def f(solution_str): return 1.0"))
    assert isinstance(caught.value, UsageError)


def test_decorating_something_that_is_not_callable_says_so() -> None:
    with pytest.raises(RewardSignatureError, match="decorates a function, got str"):
        osmosis_reward("not a function")  # type: ignore[arg-type]


def _returning(value: Any) -> RewardFunction:
    @osmosis_reward
    def returns(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return value  # type: ignore[no-any-return]

    return returns


@pytest.mark.parametrize(
    ("value", "expected"), [(1, 1.0), (0, 0.0), (0.25, 0.25), (Fraction(1, 4), 0.25)]
)
def test_ints_and_other_real_numbers_are_returned_as_floats(value: Any, expected: float) -> None:
    score = _returning(value)("a", "b")
    assert type(score) is float
    assert score == expected


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "returned the bool True; return a float"),
        (False, "returned the bool False"),
        ("0.5", "returned str '0.5'; it must return a float"),
        (None, "returned NoneType None"),
        ([1.0], "returned list [1.0]"),
        (math.nan, "returned nan; a reward must be a finite float"),
        (-math.inf, "returned -inf"),
    ],
    ids=["true", "false", "str", "none", "list", "nan", "-inf"],
)
def test_a_non_float_or_non_finite_return_raises_a_return_error(value: Any, shown: str) -> None:
    with pytest.raises(RewardReturnError) as caught:
        _returning(value)("a", "b")
    assert "@osmosis_reward" in str(caught.value)
    assert "_returning.<locals>.returns" in str(caught.value)
    assert shown in str(caught.value)
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, ValueError)
