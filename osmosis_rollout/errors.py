"""Every error osmosis_rollout raises on purpose, in one place.

    OsmosisError
    ├── UsageError                  a user mistake: fix the input and rerun
    │   ├── DatasetError            a bad dataset file, row or column
    │   ├── ConfigError             a bad eval TOML or option value
    │   ├── EntrypointError         a rollout entrypoint that cannot be imported or resolved
    │   ├── MissingExtraError       an optional dependency is not installed (also ModuleNotFoundError)
    │   ├── RayClusterError         no Ray cluster at the address, or its rollout actors cannot start
    │   ├── RewardSignatureError    a reward/rubric function with the wrong signature (TypeError)
    │   ├── RewardReturnError       a reward that is not a finite float (TypeError, ValueError)
    │   ├── NonFiniteRewardError    a grader set a NaN or infinite reward (pydantic ValidationError)
    │   ├── MissingAPIKeyError      no API key for a judge's provider (also RuntimeError)
    │   ├── RunFolderError          a run folder in use by another run, or holding foreign files
    │   └── PlatformOnlyError       a feature only the official SDK runs (also ImportError)
    └── RuntimeFailure              something failed while running
        ├── RolloutProtocolError    a rollout server answered outside the protocol (also RuntimeError)
        ├── RolloutAdmissionTimeoutError  admission did not finish in time (also TimeoutError)
        ├── RolloutAdmissionUnknownError  a failed POST may or may not have admitted the rollout
        ├── PolicyError             the policy behind the chat endpoint failed
        │   ├── CassetteMissError   replay found no recording for a request
        │   └── CassetteFileError   a cassette file that cannot be read or breaks the format
        └── ProviderRequestError    a judge's provider call failed (also RuntimeError)
            ├── ModelNotFoundError  the provider does not know the judge model
            └── JudgeError          an LLM judge's reply held no usable verdict

``MissingAPIKeyError``, ``ProviderRequestError`` and ``ModelNotFoundError`` are the official
SDK's rubric errors (``osmosis_ai``), with the same constructor and attributes.

Workflow and grader exceptions are not wrapped: they become error categories on the result.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError


class OsmosisError(Exception):
    """Base of every error raised on purpose by osmosis_rollout."""


class UsageError(OsmosisError):
    """A user mistake; the message names the file, row or field and the fix."""


class DatasetError(UsageError, ValueError):
    """A dataset file, row or column breaks the dataset contract."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        row: int | None = None,
        column: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path, self.row, self.column, self.fix = path, row, column, fix
        at_row = f"row {row}" if row is not None else None
        where = ", ".join(p for p in (path, at_row, f"column {column!r}" if column else None) if p)
        text = f"{where}: {message}" if where else message
        if fix:
            text += f"\n  fix: {fix}"
        super().__init__(text)


class ConfigError(UsageError, ValueError):
    """An eval TOML or option value is invalid."""


class EntrypointError(UsageError):
    """A rollout entrypoint cannot be imported, or holds no (or several) rollouts."""


class MissingExtraError(UsageError, ModuleNotFoundError):
    """An optional dependency is missing; the message carries the exact install command.

    A ``ModuleNotFoundError`` whose ``name`` is the missing module, as the official SDK raises.
    """


class RayClusterError(UsageError):
    """No Ray cluster answers at the address given, or the rollout actors cannot start on it.

    The message names the address tried and how to start or reach a cluster.
    """


class RewardSignatureError(UsageError, TypeError):
    """A function decorated as a reward or rubric does not have the required signature.

    Raised at decoration time; the message lists every problem and the expected signature.
    """


class RewardReturnError(UsageError, TypeError, ValueError):
    """A reward or rubric function returned a bool, a non-number, or a non-finite number."""


class NonFiniteRewardError(UsageError, ValidationError):
    """``GraderContext.set_reward`` was given NaN or an infinity.

    A pydantic ``ValidationError`` (so a ``ValueError``) with one ``finite_number`` error at
    ``reward``, as the official SDK raises from the sample's validated assignment; its text is
    the one line saying what the grader did. Build it with :meth:`for_reward`.
    """

    def __str__(self) -> str:
        return "; ".join(str(error["msg"]) for error in self.errors())

    @classmethod
    def for_reward(cls, reward: float) -> NonFiniteRewardError:
        """The error for the non-finite ``reward`` a grader set."""
        detail = InitErrorDetails(
            type=PydanticCustomError(
                "finite_number",
                "the grader set reward={reward}; a reward must be a finite number",
                {"reward": repr(reward)},
            ),
            loc=("reward",),
            input=reward,
        )
        return cls.from_exception_data("RolloutSample", [detail])


class RunFolderError(UsageError):
    """A run's output folder that this run may not use: another run holds it, or it holds
    files no run of ours created (the message names the holder or the files)."""


class RuntimeFailure(OsmosisError):
    """Something failed while running (not a user mistake)."""


class RolloutProtocolError(RuntimeFailure, RuntimeError):
    """A rollout server answered outside the protocol (an unexpected status or body).

    The official client's signature, ``RolloutProtocolError(message, *, status_code)``, and
    also a ``RuntimeError`` as its is, so ``except RuntimeError`` matches.
    """

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code

    def __reduce__(self) -> Any:
        # Pickled by its keyword (Ray ships errors between processes).
        return (_protocol_error, (str(self), self.status_code))


def _protocol_error(message: str, status_code: int) -> RolloutProtocolError:
    return RolloutProtocolError(message, status_code=status_code)


class RolloutAdmissionTimeoutError(RuntimeFailure, TimeoutError):
    """Admission did not finish before its deadline; the lease will clean up a late admit."""


class RolloutAdmissionUnknownError(RuntimeFailure):
    """An admission POST failed after it may have reached the server, and a re-POST could not
    settle it: the rollout may be running there under a lease this client never received
    (the server ends it when that lease lapses). ``rollout_id`` names it."""

    def __init__(self, message: str, *, rollout_id: str) -> None:
        super().__init__(message)
        self.rollout_id = rollout_id


class PolicyError(RuntimeFailure):
    """The policy serving chat completions failed."""


class CassetteMissError(PolicyError):
    """Replay found no recording matching a request; the message shows the first difference."""


class CassetteFileError(PolicyError):
    """A cassette file cannot be read or breaks the format; the message names the file and
    each bad field."""


class MissingAPIKeyError(UsageError, RuntimeError):
    """A judge's provider needs an API key that neither ``api_key=`` nor the environment gave."""


class PlatformOnlyError(UsageError, ImportError):
    """A feature this package does not run: the message names the official tool and the doc."""


class ProviderRequestError(RuntimeFailure, RuntimeError):
    """A judge's provider call failed; ``provider``, ``model`` and ``detail`` say where and why."""

    def __init__(self, provider: str, model: str, detail: str) -> None:
        self.provider = provider
        self.model = model
        self.detail = detail.strip() or "the provider request failed with no detail"
        super().__init__(f"Provider {provider!r} request for model {model!r} failed. {self.detail}")


class ModelNotFoundError(ProviderRequestError):
    """The provider reports that the judge model does not exist or is not available."""


class JudgeError(ProviderRequestError):
    """An LLM judge answered without a usable verdict.

    A :class:`ProviderRequestError` (the official SDK raises that for an unusable reply), read
    the same: ``detail`` is the official's reason (``"Model response was not valid JSON..."``).
    ``raw`` is the judge's last reply, ``attempts`` how many calls were made.
    """

    def __init__(
        self, provider: str, model: str, detail: str, *, raw: str = "", attempts: int = 1
    ) -> None:
        super().__init__(provider, model, detail)
        self.raw = raw
        self.attempts = attempts


def missing_extra(extra: str, package: str, *, module: str | None = None) -> MissingExtraError:
    """The one error for a missing optional dependency, with the command that fixes it.

    ``module`` is the import name that was not found (its ``name``); default ``package``.
    """
    return MissingExtraError(
        f"{package} is not installed; this feature needs the '{extra}' extra: "
        f'pip install "pytest-osmosis[{extra}]"',
        name=module or package,
    )
