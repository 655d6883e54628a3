"""Reward functions with a strict signature, and the one line that turns one into a Grader.

A reward function is the portable unit of grading Osmosis training runtimes call::

    @osmosis_reward
    def exact_match(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0 if solution_str.strip() == ground_truth.strip() else 0.0

    ExactMatchGrader = exact_match.as_grader()          # a Grader subclass, ready for LocalBackend

Rules, checked when the decorator runs (a :class:`~osmosis_rollout.errors.RewardSignatureError`,
also a ``TypeError``, lists every problem next to the expected signature):

- exactly the parameters ``solution_str``, ``ground_truth``, ``extra_info``, in this order, as
  plain positional-or-keyword parameters (no ``*args``/``**kwargs``);
- ``solution_str: str``, ``ground_truth: str``; ``extra_info`` annotated ``dict``, ``dict[...]``,
  ``Dict[...]`` or any of those ``| None`` / ``Optional[...]``, and defaulting to ``None``;
- the return annotated ``-> float``;
- a plain ``def``: rewards are pure computation that trainers call synchronously. A judge that
  needs I/O belongs in :func:`osmosis_rollout.rubric.osmosis_rubric`, which accepts ``async def``.

Each call checks the value returned: an ``int`` is accepted and converted to ``float``; a ``bool``
(usually a predicate whose scale was never chosen), a non-number, NaN or infinity raises
:class:`~osmosis_rollout.errors.RewardReturnError` (also ``TypeError`` and ``ValueError``).

As a Grader, the solution is ``last_assistant_text(sample)`` unless ``solution=`` picks another
text, ``ground_truth`` is the row's label (``""`` when the row has none), and ``extra_info`` is
``{"metadata": ..., "messages": ..., "extra_fields": ...}`` unless ``extra_info=`` builds it.
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import update_wrapper
from typing import Any, ClassVar, cast, overload

from osmosis_rollout.context import GraderContext
from osmosis_rollout.errors import RewardReturnError, RewardSignatureError
from osmosis_rollout.grader import Grader
from osmosis_rollout.sample_text import last_assistant_text
from osmosis_rollout.types import RolloutSample

__all__ = [
    "AsyncRewardFunction",
    "AsyncRewardGrader",
    "RewardFunction",
    "RewardGrader",
    "default_extra_info",
    "osmosis_reward",
    "reward_grader",
]

#: Picks the solution text out of a sample (default: :func:`last_assistant_text`).
SolutionFn = Callable[[RolloutSample], str]
#: Builds the ``extra_info`` dict handed to the reward function from the grader context.
ExtraInfoFn = Callable[[GraderContext], dict[str, Any]]

_PARAMETER_NAMES = ("solution_str", "ground_truth", "extra_info")


@dataclass(frozen=True)
class SignatureRule:
    """What a decorator demands of the functions it wraps (shared by reward and rubric)."""

    decorator: str
    ground_truth: str  # the annotation shown in the expected signature
    ground_truth_may_be_none: bool
    allow_async: bool
    async_hint: str = ""

    def expected(self, name: str) -> str:
        """The expected signature, spelled for a function called ``name``."""
        prefix = "[async] def" if self.allow_async else "def"
        return (
            f"{prefix} {name}(solution_str: str, ground_truth: {self.ground_truth}, "
            "extra_info: dict | None = None) -> float"
        )


REWARD_RULE = SignatureRule(
    decorator="@osmosis_reward",
    ground_truth="str",
    ground_truth_may_be_none=False,
    allow_async=False,
    async_hint=(
        "reward functions must be a plain 'def' (trainers call them synchronously); "
        "for a judge that awaits I/O use @osmosis_rubric, which accepts 'async def'"
    ),
)


def check_signature(fn: Callable[..., Any], rule: SignatureRule) -> None:
    """Raise :class:`RewardSignatureError` listing every way ``fn`` breaks ``rule``."""
    name = getattr(fn, "__name__", type(fn).__name__)
    if not callable(fn):
        raise RewardSignatureError(
            f"{rule.decorator} decorates a function, got {type(fn).__name__} {fn!r}\n"
            f"  expected: {rule.expected('my_reward')}"
        )
    problems: list[str] = []
    if _is_async(fn) and not rule.allow_async:
        problems.append(f"it is 'async def': {rule.async_hint}")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        problems.append("it is a generator (uses 'yield'); return the score instead")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise RewardSignatureError(
            f"{rule.decorator}: cannot read the signature of {name}: {exc}\n"
            f"  expected: {rule.expected(name)}"
        ) from exc
    hints = _resolved_hints(fn)
    problems.extend(_parameter_problems(signature))
    params = signature.parameters
    checks: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
        ("solution_str", _is_str, "str"),
        (
            "ground_truth",
            (lambda t: _is_str(t) or _is_optional(t, _is_str))
            if rule.ground_truth_may_be_none
            else _is_str,
            rule.ground_truth,
        ),
        ("extra_info", lambda t: _is_dict(t) or _is_optional(t, _is_dict), "dict | None"),
    )
    for param_name, accepts, expected in checks:
        param = params.get(param_name)
        if param is None:
            continue
        if param.annotation is inspect.Parameter.empty:
            problems.append(f"'{param_name}' has no annotation; expected '{expected}'")
        elif not accepts(hints.get(param_name, param.annotation)):
            problems.append(
                f"'{param_name}' is annotated '{_show(param.annotation)}'; expected '{expected}'"
            )
    extra = params.get("extra_info")
    if extra is not None and extra.default is not None:
        shown = "no default" if extra.default is inspect.Parameter.empty else repr(extra.default)
        problems.append(f"'extra_info' must default to None (has {shown})")
    if signature.return_annotation is inspect.Signature.empty:
        problems.append("the return has no annotation; expected '-> float'")
    elif hints.get("return", signature.return_annotation) is not float:
        problems.append(
            f"the return is annotated '{_show(signature.return_annotation)}'; expected 'float'"
        )
    if problems:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        raise RewardSignatureError(
            f"{rule.decorator}: {name}{_show_signature(signature)} does not have the required "
            f"signature:\n"
            f"{listed}\n  expected: {rule.expected(name)}"
        )


def checked_score(value: Any, where: str) -> float:
    """``value`` as a finite float, or :class:`RewardReturnError` saying what ``where`` returned."""
    if isinstance(value, bool):
        raise RewardReturnError(
            f"{where} returned the bool {value}; return a float, e.g. '1.0 if ok else 0.0'"
        )
    if not isinstance(value, numbers.Real):
        raise RewardReturnError(
            f"{where} returned {type(value).__name__} {_short(value)}; it must return a float"
        )
    score = float(value)
    if not math.isfinite(score):
        raise RewardReturnError(f"{where} returned {score}; a reward must be a finite float")
    return score


def default_extra_info(ctx: GraderContext) -> dict[str, Any]:
    """The ``extra_info`` a reward grader passes: row metadata, the sample's messages and extras."""
    sample = ctx.sample
    return {
        "metadata": dict(ctx.metadata or {}),
        "messages": [dict(message) for message in sample.messages] if sample else [],
        "extra_fields": dict(sample.extra_fields) if sample else {},
    }


class _ScoringFunction:
    """What the decorators return: the checked function plus :meth:`as_grader`."""

    #: Whether the wrapped function must be ``async def`` (else a plain ``def``).
    is_async: ClassVar[bool] = False

    def __init__(self, fn: Callable[..., Any], rule: SignatureRule = REWARD_RULE) -> None:
        if isinstance(fn, _ScoringFunction):
            fn = fn.__wrapped__
        self.rule = rule
        check_signature(fn, rule)
        if _is_async(fn) != self.is_async:
            kind = "an async def" if self.is_async else "a plain def"
            raise RewardSignatureError(f"{type(self).__name__} wraps {kind}, got {fn!r}")
        self.__wrapped__ = fn
        update_wrapper(cast(Any, self), fn)

    def _grader_base(self) -> type[_ScoringGrader]:
        return AsyncRewardGrader if self.is_async else RewardGrader

    @property
    def ground_truth_may_be_none(self) -> bool:
        """Whether a row without a label is passed as ``None`` (else as ``""``)."""
        return self.rule.ground_truth_may_be_none

    def __repr__(self) -> str:
        return f"<{self.rule.decorator} {getattr(self, '__qualname__', self.__wrapped__)!r}>"

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
        is created in the function's module, so entrypoint discovery finds it there.
        """
        fn_name = str(getattr(self, "__name__", "reward"))
        class_name = name or _camel(fn_name) + "Grader"
        spec = GraderSpec(function=self, solution=solution, extra_info=extra_info)
        namespace = {
            "__module__": getattr(self, "__module__", __name__),
            "__qualname__": class_name,
            "__doc__": f"Grades with {self.rule.decorator} {fn_name}.",
            "spec": spec,
        }
        return cast(type[_ScoringGrader], type(class_name, (self._grader_base(),), namespace))


class RewardFunction(_ScoringFunction):
    """A checked plain-``def`` reward function; calling it checks the returned score."""

    def __call__(
        self,
        solution_str: str,
        ground_truth: str | None,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        """Call the wrapped function and return its score as a finite float."""
        value = self.__wrapped__(solution_str, ground_truth, extra_info)
        return checked_score(value, f"{self.rule.decorator} {self.__wrapped__.__qualname__}")


class AsyncRewardFunction(_ScoringFunction):
    """A checked ``async def`` scoring function (allowed for rubric judges)."""

    is_async: ClassVar[bool] = True

    async def __call__(
        self,
        solution_str: str,
        ground_truth: str | None,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        """Await the wrapped function and return its score as a finite float."""
        value = await self.__wrapped__(solution_str, ground_truth, extra_info)
        return checked_score(value, f"{self.rule.decorator} {self.__wrapped__.__qualname__}")


@dataclass(frozen=True)
class GraderSpec:
    """What a generated grader class calls (kept in a dataclass so nothing binds as a method)."""

    function: _ScoringFunction
    solution: SolutionFn
    extra_info: ExtraInfoFn

    def arguments(self, ctx: GraderContext) -> tuple[str, str | None, dict[str, Any]]:
        """``(solution_str, ground_truth, extra_info)`` for the sample in ``ctx``."""
        if ctx.sample is None:
            raise ValueError("GraderContext has no sample to grade")
        solution = self.solution(ctx.sample)
        if not isinstance(solution, str):
            raise TypeError(
                f"solution={getattr(self.solution, '__qualname__', self.solution)!r} returned "
                f"{type(solution).__name__}; it must return the solution text as a str"
            )
        label = ctx.label
        if label is None and not self.function.ground_truth_may_be_none:
            label = ""
        return solution, label, self.extra_info(ctx)


class _ScoringGrader(Grader):
    spec: ClassVar[GraderSpec]


class RewardGrader(_ScoringGrader):
    """Base of the graders :meth:`RewardFunction.as_grader` builds; ``grade`` runs in a thread."""

    def grade(self, ctx: GraderContext) -> None:
        """Score the sample with the reward function and set the reward."""
        spec = type(self).spec
        function = cast(RewardFunction, spec.function)
        ctx.set_reward(function(*spec.arguments(ctx)))


class AsyncRewardGrader(_ScoringGrader):
    """Base of the graders :meth:`AsyncRewardFunction.as_grader` builds."""

    async def grade(self, ctx: GraderContext) -> None:
        """Score the sample with the async function and set the reward."""
        spec = type(self).spec
        function = cast(AsyncRewardFunction, spec.function)
        ctx.set_reward(await function(*spec.arguments(ctx)))


@overload
def osmosis_reward(fn: Callable[..., float], /) -> RewardFunction: ...
@overload
def osmosis_reward(fn: None = None, /) -> Callable[[Callable[..., float]], RewardFunction]: ...
def osmosis_reward(
    fn: Callable[..., float] | None = None, /
) -> RewardFunction | Callable[[Callable[..., float]], RewardFunction]:
    """Check ``fn`` against the reward signature and return it wrapped (``@osmosis_reward``).

    ``def f(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float``;
    see the module docstring for the rules. ``@osmosis_reward()`` works too.
    """
    if fn is None:
        return RewardFunction
    return RewardFunction(fn)


def reward_grader(
    fn: Callable[..., float] | RewardFunction,
    solution: SolutionFn = last_assistant_text,
    *,
    name: str | None = None,
    extra_info: ExtraInfoFn = default_extra_info,
) -> type[_ScoringGrader]:
    """``osmosis_reward(fn).as_grader(...)``: a Grader subclass from a reward function."""
    function = fn if isinstance(fn, RewardFunction) else RewardFunction(fn)
    return function.as_grader(solution, name=name, extra_info=extra_info)


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable instances with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _parameter_problems(signature: inspect.Signature) -> list[str]:
    problems: list[str] = []
    params = list(signature.parameters.values())
    for param in params:
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            problems.append(f"'*{param.name}' is not allowed")
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            problems.append(f"'**{param.name}' is not allowed")
        elif param.kind is not param.POSITIONAL_OR_KEYWORD and param.name in _PARAMETER_NAMES:
            problems.append(
                f"'{param.name}' must be a plain parameter (not positional-only or keyword-only)"
            )
    named = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for index, expected in enumerate(_PARAMETER_NAMES):
        if index >= len(named):
            problems.append(f"parameter {index + 1} '{expected}' is missing")
        elif named[index] != expected:
            problems.append(
                f"parameter {index + 1} is named '{named[index]}'; expected '{expected}'"
            )
    for extra in named[len(_PARAMETER_NAMES) :]:
        problems.append(f"unexpected parameter '{extra}'")
    return problems


#: Names an annotation string may use even when only imported under TYPE_CHECKING.
_FALLBACK_NAMESPACE: dict[str, Any] = {
    "Any": Any,
    "Dict": typing.Dict,  # noqa: UP006 - annotations written with the old alias must resolve
    "Optional": typing.Optional,
    "Union": typing.Union,
    "typing": typing,
}


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    try:
        return typing.get_type_hints(target)
    except Exception:
        pass
    hints: dict[str, Any] = {}
    for key, value in getattr(target, "__annotations__", {}).items():
        if isinstance(value, str):
            try:
                value = eval(value, dict(_FALLBACK_NAMESPACE))
            except Exception:
                pass  # left as the string: reported as a wrong annotation
        hints[key] = value
    return hints


def _is_none(tp: Any) -> bool:
    return tp is None or tp is type(None)


def _is_str(tp: Any) -> bool:
    return tp is str


def _is_dict(tp: Any) -> bool:
    return tp is dict or tp is typing.Dict or typing.get_origin(tp) is dict  # noqa: UP006


def _is_optional(tp: Any, inner: Callable[[Any], bool]) -> bool:
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return False
    args = typing.get_args(tp)
    return (
        len(args) == 2
        and any(_is_none(arg) for arg in args)
        and all(_is_none(arg) or inner(arg) for arg in args)
    )


def _show(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


class _Shown:
    """Formats as the given text in ``inspect.Signature`` output (no quotes round strings)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _show_signature(signature: inspect.Signature) -> str:
    empty = inspect.Parameter.empty
    params = [
        param.replace(annotation=_Shown(_show(param.annotation)))
        if param.annotation is not empty
        else param
        for param in signature.parameters.values()
    ]
    ret = signature.return_annotation
    shown = _Shown(_show(ret)) if ret is not inspect.Signature.empty else ret
    return str(signature.replace(parameters=params, return_annotation=shown))


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _camel(name: str) -> str:
    parts = [part for part in re.split(r"[_\W]+", name) if part]
    return "".join(part[:1].upper() + part[1:] for part in parts) or "Reward"
