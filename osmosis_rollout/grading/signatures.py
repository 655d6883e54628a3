"""What ``@osmosis_reward`` and ``@osmosis_rubric`` accept, and the score check on every call.

The rules are the official SDK's, with clearer messages. A function whose first parameter is
named ``solution_str`` is a *scoring function* and its signature is checked when the
decorator runs; any other function is accepted unchecked (the official decorators do the
same), and only :meth:`~osmosis_rollout.rewards.RewardFunction.as_grader`, which must know
how to call it, refuses it, listing what a scoring function needs.

A scoring function has at least three parameters, named ``solution_str``, ``ground_truth``,
``extra_info`` in that order; more may follow (``data_source``, ``**kwargs``, ...). Plain or
``async def``; the return annotation is not checked, the returned value is.

- ``@osmosis_reward``: ``solution_str: str``, ``ground_truth: str``, ``extra_info`` annotated
  ``dict`` (``dict[...]``, ``Dict[...]``, optionally ``| None``) and given a default;
- ``@osmosis_rubric``: ``solution_str: str``, ``ground_truth: str`` or ``str | None``,
  ``extra_info`` with any annotation and no default needed (callers must pass it).

A :class:`~osmosis_rollout.errors.RewardSignatureError` (also a ``TypeError``) lists every
problem next to the expected signature. Scores: an ``int`` or other real number is accepted
as a ``float``; a ``bool``, a non-number, NaN or infinity raises
:class:`~osmosis_rollout.errors.RewardReturnError`.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from osmosis_rollout.errors import RewardReturnError, RewardSignatureError

__all__ = [
    "PARAMETER_NAMES",
    "REWARD_RULE",
    "RUBRIC_RULE",
    "SignatureRule",
    "check_signature",
    "checked_score",
    "is_async_callable",
    "is_scoring_function",
    "signature_problems",
]

PARAMETER_NAMES = ("solution_str", "ground_truth", "extra_info")


@dataclass(frozen=True)
class SignatureRule:
    """What a decorator demands of the scoring functions it wraps."""

    decorator: str
    ground_truth: str  # the annotation shown in the expected signature
    ground_truth_may_be_none: bool
    extra_info_is_dict_with_default: bool

    def expected(self, name: str) -> str:
        """The expected signature, spelled for a function called ``name``."""
        extra = (
            "extra_info: dict | None = None"
            if self.extra_info_is_dict_with_default
            else ("extra_info: dict")
        )
        return (
            f"[async] def {name}(solution_str: str, ground_truth: {self.ground_truth}, "
            f"{extra}, **kwargs) -> float"
        )


REWARD_RULE = SignatureRule(
    decorator="@osmosis_reward",
    ground_truth="str",
    ground_truth_may_be_none=False,
    extra_info_is_dict_with_default=True,
)
RUBRIC_RULE = SignatureRule(
    decorator="@osmosis_rubric",
    ground_truth="str | None",
    ground_truth_may_be_none=True,
    extra_info_is_dict_with_default=False,
)


def is_scoring_function(signature: inspect.Signature) -> bool:
    """Whether the signature opts into the checks: its first parameter is ``solution_str``."""
    params = list(signature.parameters.values())
    return bool(params) and params[0].name == PARAMETER_NAMES[0]


def read_signature(fn: Callable[..., Any], rule: SignatureRule) -> inspect.Signature:
    """``fn``'s signature, or :class:`RewardSignatureError` when it is not a readable callable."""
    if not callable(fn):
        raise RewardSignatureError(
            f"{rule.decorator} decorates a function, got {type(fn).__name__} {fn!r}\n"
            f"  expected: {rule.expected('my_reward')}"
        )
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise RewardSignatureError(
            f"{rule.decorator}: cannot read the signature of {name}: {exc}\n"
            f"  expected: {rule.expected(name)}"
        ) from exc


def check_signature(fn: Callable[..., Any], rule: SignatureRule) -> bool:
    """Check ``fn`` at decoration; return whether it is a scoring function (and so was checked).

    Raises :class:`RewardSignatureError` listing every way a scoring function breaks ``rule``.
    """
    signature = read_signature(fn, rule)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        # Accepting it would only defer the failure to every call.
        raise_problems(fn, signature, rule, ["it is a generator (uses 'yield'); return the score"])
    if not is_scoring_function(signature):
        return False
    problems = signature_problems(fn, signature, rule)
    if problems:
        raise_problems(fn, signature, rule, problems)
    return True


def raise_problems(
    fn: Callable[..., Any], signature: inspect.Signature, rule: SignatureRule, problems: list[str]
) -> typing.NoReturn:
    """Raise the one :class:`RewardSignatureError` format: signature, problems, expected."""
    name = getattr(fn, "__name__", type(fn).__name__)
    listed = "\n".join(f"  - {problem}" for problem in problems)
    raise RewardSignatureError(
        f"{rule.decorator}: {name}{_show_signature(signature)} does not have the required "
        f"signature:\n{listed}\n  expected: {rule.expected(name)}"
    )


def signature_problems(
    fn: Callable[..., Any], signature: inspect.Signature, rule: SignatureRule
) -> list[str]:
    """Every way ``signature`` breaks ``rule`` as a scoring function (empty when it complies)."""
    problems: list[str] = []
    params = list(signature.parameters.values())
    for index, expected in enumerate(PARAMETER_NAMES):
        if index >= len(params):
            problems.append(f"parameter {index + 1} '{expected}' is missing")
        elif params[index].name != expected:
            problems.append(
                f"parameter {index + 1} is {_show_param(params[index])}; expected '{expected}'"
                + (" (put extra parameters after it)" if index == 2 else "")
            )
    hints = _resolved_hints(fn)
    checks: list[tuple[str, Callable[[Any], bool], str]] = [
        ("solution_str", _is_str, "str"),
        (
            "ground_truth",
            (lambda t: _is_str(t) or _is_optional(t, _is_str))
            if rule.ground_truth_may_be_none
            else _is_str,
            rule.ground_truth,
        ),
    ]
    if rule.extra_info_is_dict_with_default:
        checks.append(
            ("extra_info", lambda t: _is_dict(t) or _is_optional(t, _is_dict), "dict | None")
        )
    named = {param.name: param for param in params[:3]}
    for param_name, accepts, expected in checks:
        param = named.get(param_name)
        if param is None:
            continue
        if param.annotation is inspect.Parameter.empty:
            problems.append(f"'{param_name}' has no annotation; expected '{expected}'")
        elif not accepts(hints.get(param_name, param.annotation)):
            problems.append(
                f"'{param_name}' is annotated '{_show(param.annotation)}'; expected '{expected}'"
            )
    extra = named.get("extra_info")
    if (
        rule.extra_info_is_dict_with_default
        and extra is not None
        and extra.default is inspect.Parameter.empty
    ):
        problems.append("'extra_info' needs a default ('= None'): trainers may omit it")
    return problems


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


def is_async_callable(fn: Any) -> bool:
    """``async def`` functions and instances with an ``async def __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable instances with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


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
    with contextlib.suppress(Exception):
        return typing.get_type_hints(target)
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


def _show_param(param: inspect.Parameter) -> str:
    if param.kind is inspect.Parameter.VAR_POSITIONAL:
        return f"'*{param.name}'"
    if param.kind is inspect.Parameter.VAR_KEYWORD:
        return f"'**{param.name}'"
    return f"named '{param.name}'"


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
