"""``@osmosis_reward``: a scoring function, checked, and the one line that makes it a Grader.

A reward function is the portable unit of grading Osmosis training runtimes call::

    @osmosis_reward
    def exact_match(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0 if solution_str.strip() == ground_truth.strip() else 0.0

    ExactMatchGrader = exact_match.as_grader()          # a Grader subclass, ready for LocalBackend

The signatures accepted (the official SDK's, ``async def`` and extra parameters such as
``data_source`` or ``**kwargs`` included) and the checks are in
:mod:`osmosis_rollout.grading.signatures`. The decorated object is called like the function: a
``data_source=`` keyword the function cannot take is dropped (trainers pass one), and a
scoring function's result is checked (an ``int`` becomes a ``float``; a ``bool``, a
non-number, NaN or infinity raises :class:`~osmosis_rollout.errors.RewardReturnError`).

As a Grader, the solution is ``last_assistant_text(sample)`` unless ``solution=`` picks another
text, ``ground_truth`` is the row's label (``""`` when the row has none), and ``extra_info`` is
``{"metadata": ..., "messages": ..., "extra_fields": ...}`` unless ``extra_info=`` builds it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import update_wrapper
from typing import Any, ClassVar, cast, overload

from osmosis_rollout.context import GraderContext
from osmosis_rollout.errors import RewardSignatureError
from osmosis_rollout.grader import Grader
from osmosis_rollout.grading.signatures import (
    REWARD_RULE,
    SignatureRule,
    check_signature,
    checked_score,
    is_async_callable,
    raise_problems,
    read_signature,
    signature_problems,
)
from osmosis_rollout.sample_text import last_assistant_text
from osmosis_rollout.types import RolloutSample

__all__ = [
    "AsyncRewardFunction",
    "AsyncRewardGrader",
    "RewardFunction",
    "RewardGrader",
    "SignatureRule",
    "check_signature",
    "checked_score",
    "default_extra_info",
    "osmosis_reward",
    "reward_grader",
    "wrap_scoring",
]

#: Picks the solution text out of a sample (default: :func:`last_assistant_text`).
SolutionFn = Callable[[RolloutSample], str]
#: Builds the ``extra_info`` dict handed to the reward function from the grader context.
ExtraInfoFn = Callable[[GraderContext], dict[str, Any]]


def default_extra_info(ctx: GraderContext) -> dict[str, Any]:
    """The ``extra_info`` a reward grader passes: row metadata, the sample's messages and extras."""
    sample = ctx.sample
    return {
        "metadata": dict(ctx.metadata or {}),
        "messages": [dict(message) for message in sample.messages] if sample else [],
        "extra_fields": dict(sample.extra_fields) if sample else {},
    }


class _ScoringFunction:
    """What the decorators return: the function, its checks, and :meth:`as_grader`.

    ``scoring`` says whether the function is a scoring function (first parameter
    ``solution_str``): only then are its arguments (for a rubric) and result checked, as the
    official decorators do.
    """

    #: Whether the wrapped function must be ``async def`` (else a plain ``def``).
    is_async: ClassVar[bool] = False

    def __init__(self, fn: Callable[..., Any], rule: SignatureRule = REWARD_RULE) -> None:
        if isinstance(fn, _ScoringFunction):
            fn = fn.__wrapped__
        self.rule = rule
        self.scoring = check_signature(fn, rule)
        if is_async_callable(fn) != self.is_async:
            kind = "an async def" if self.is_async else "a plain def"
            raise RewardSignatureError(f"{type(self).__name__} wraps {kind}, got {fn!r}")
        self.signature = read_signature(fn, rule)
        params = self.signature.parameters.values()
        # Trainers pass data_source=; drop it unless the function can take it.
        self.drops_data_source = "data_source" not in self.signature.parameters and not any(
            param.kind is inspect.Parameter.VAR_KEYWORD for param in params
        )
        self.__wrapped__ = fn
        update_wrapper(cast(Any, self), fn)

    def __repr__(self) -> str:
        return f"<{self.rule.decorator} {getattr(self, '__qualname__', self.__wrapped__)!r}>"

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.drops_data_source:
            kwargs.pop("data_source", None)
        if self.scoring and self.rule.ground_truth_may_be_none:
            self._check_rubric_arguments(args, kwargs)
        return kwargs

    def _check_rubric_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        bound = self.signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()
        where = f"{self.rule.decorator} {self.__wrapped__.__qualname__}"
        for name in ("solution_str", "ground_truth", "extra_info"):
            if name not in bound.arguments:
                raise TypeError(f"{where}: the {name!r} argument is required")
        solution = bound.arguments["solution_str"]
        if not isinstance(solution, str):
            raise TypeError(f"{where}: 'solution_str' must be a str, got {type(solution).__name__}")
        truth = bound.arguments["ground_truth"]
        if truth is not None and not isinstance(truth, str):
            raise TypeError(
                f"{where}: 'ground_truth' must be a str or None, got {type(truth).__name__}"
            )

    def _result(self, value: Any) -> float:
        if not self.scoring:
            return cast(float, value)
        return checked_score(value, f"{self.rule.decorator} {self.__wrapped__.__qualname__}")

    def grader_call(
        self, solution_str: str, ground_truth: str | None, extra_info: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments that pass these three values to the function."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        values = (solution_str, ground_truth, extra_info)
        for param, value in zip(self.signature.parameters.values(), values, strict=False):
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                kwargs[param.name] = value
            else:
                args.append(value)
        return tuple(args), kwargs

    def as_grader(
        self,
        solution: SolutionFn = last_assistant_text,
        *,
        name: str | None = None,
        extra_info: ExtraInfoFn = default_extra_info,
    ) -> type[_ScoringGrader]:
        """A :class:`~osmosis_rollout.grader.Grader` subclass that rewards with this function.

        ``solution`` picks the text judged (default: the last assistant text, for every message
        shape); ``name`` is the class name (default ``<CamelCaseFunctionName>Grader``). The class
        is created in the function's module, so entrypoint discovery finds it there. Raises
        :class:`~osmosis_rollout.errors.RewardSignatureError` for a function that is not a
        scoring function, or whose extra parameters have no default (nothing would fill them).
        """
        fn = self.__wrapped__
        problems = [] if self.scoring else signature_problems(fn, self.signature, self.rule)
        problems += [
            f"parameter '{param.name}' has no default; as_grader() passes only "
            "solution_str, ground_truth and extra_info"
            for param in list(self.signature.parameters.values())[3:]
            if param.default is inspect.Parameter.empty
            and param.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ]
        if problems:
            raise_problems(fn, self.signature, self.rule, problems)
        fn_name = str(getattr(self, "__name__", "reward"))
        class_name = name or _camel(fn_name) + "Grader"
        spec = GraderSpec(function=self, solution=solution, extra_info=extra_info)
        namespace = {
            "__module__": getattr(self, "__module__", __name__),
            "__qualname__": class_name,
            "__doc__": f"Grades with {self.rule.decorator} {fn_name}.",
            "spec": spec,
        }
        base = AsyncRewardGrader if self.is_async else RewardGrader
        return cast(type[_ScoringGrader], type(class_name, (base,), namespace))


class RewardFunction(_ScoringFunction):
    """A checked plain-``def`` scoring function; calling it checks the returned score."""

    def __call__(self, *args: Any, **kwargs: Any) -> float:
        """Call the wrapped function; a scoring function's score comes back as a finite float."""
        kwargs = self._arguments(args, kwargs)
        return self._result(self.__wrapped__(*args, **kwargs))


class AsyncRewardFunction(_ScoringFunction):
    """A checked ``async def`` scoring function."""

    is_async: ClassVar[bool] = True

    async def __call__(self, *args: Any, **kwargs: Any) -> float:
        """Await the wrapped function; a scoring function's score comes back as a finite float."""
        kwargs = self._arguments(args, kwargs)
        return self._result(await self.__wrapped__(*args, **kwargs))


@dataclass(frozen=True)
class GraderSpec:
    """What a generated grader class calls (kept in a dataclass so nothing binds as a method)."""

    function: _ScoringFunction
    solution: SolutionFn
    extra_info: ExtraInfoFn

    def arguments(self, ctx: GraderContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call arguments (``solution_str``, ``ground_truth``, ``extra_info``) for ``ctx``."""
        if ctx.sample is None:
            raise ValueError("GraderContext has no sample to grade")
        solution = self.solution(ctx.sample)
        if not isinstance(solution, str):
            raise TypeError(
                f"solution={getattr(self.solution, '__qualname__', self.solution)!r} returned "
                f"{type(solution).__name__}; it must return the solution text as a str"
            )
        label = ctx.label
        if label is None and not self.function.rule.ground_truth_may_be_none:
            label = ""  # the official reward signature takes a str
        return self.function.grader_call(solution, label, self.extra_info(ctx))


class _ScoringGrader(Grader):
    spec: ClassVar[GraderSpec]


class RewardGrader(_ScoringGrader):
    """Base of the graders :meth:`RewardFunction.as_grader` builds; ``grade`` runs in a thread."""

    def grade(self, ctx: GraderContext) -> None:
        """Score the sample with the reward function and set the reward."""
        spec = type(self).spec
        function = cast(RewardFunction, spec.function)
        args, kwargs = spec.arguments(ctx)
        ctx.set_reward(function(*args, **kwargs))


class AsyncRewardGrader(_ScoringGrader):
    """Base of the graders :meth:`AsyncRewardFunction.as_grader` builds."""

    async def grade(self, ctx: GraderContext) -> None:
        """Score the sample with the async function and set the reward."""
        spec = type(self).spec
        function = cast(AsyncRewardFunction, spec.function)
        args, kwargs = spec.arguments(ctx)
        ctx.set_reward(await function(*args, **kwargs))


@overload
def osmosis_reward(fn: Callable[..., Coroutine[Any, Any, Any]], /) -> AsyncRewardFunction: ...
@overload
def osmosis_reward(fn: Callable[..., Any], /) -> RewardFunction: ...
@overload
def osmosis_reward(
    fn: None = None, /
) -> Callable[[Callable[..., Any]], RewardFunction | AsyncRewardFunction]: ...
def osmosis_reward(
    fn: Callable[..., Any] | None = None, /
) -> (
    RewardFunction
    | AsyncRewardFunction
    | Callable[[Callable[..., Any]], RewardFunction | AsyncRewardFunction]
):
    """Check ``fn`` as a reward function and return it wrapped (``@osmosis_reward``).

    ``[async] def f(solution_str: str, ground_truth: str, extra_info: dict | None = None,
    **kwargs) -> float``; see :mod:`osmosis_rollout.grading.signatures` for the rules.
    ``@osmosis_reward()`` works too.
    """
    return wrap_scoring if fn is None else wrap_scoring(fn)


def wrap_scoring(
    fn: Callable[..., Any], rule: SignatureRule = REWARD_RULE
) -> RewardFunction | AsyncRewardFunction:
    """``fn`` checked against ``rule`` and wrapped, async or not as ``fn`` is."""
    # Also true of an already-wrapped AsyncRewardFunction, whose __call__ is async.
    return AsyncRewardFunction(fn, rule) if is_async_callable(fn) else RewardFunction(fn, rule)


def reward_grader(
    fn: Callable[..., Any] | RewardFunction | AsyncRewardFunction,
    solution: SolutionFn = last_assistant_text,
    *,
    name: str | None = None,
    extra_info: ExtraInfoFn = default_extra_info,
) -> type[_ScoringGrader]:
    """``osmosis_reward(fn).as_grader(...)``: a Grader subclass from a reward function."""
    function = fn if isinstance(fn, _ScoringFunction) else wrap_scoring(fn)
    return function.as_grader(solution, name=name, extra_info=extra_info)


def _camel(name: str) -> str:
    parts = [part for part in re.split(r"[_\W]+", name) if part]
    return "".join(part[:1].upper() + part[1:] for part in parts) or "Reward"
