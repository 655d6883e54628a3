"""LocalBackend: construction, error categories, return coercion, grading conditions, health."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    ConcurrencyConfig,
    ExecutionRequest,
    Grader,
    GraderConfig,
    GraderContext,
    LocalBackend,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
    SampleSource,
    get_rollout_context,
)
from osmosis_rollout.backend.local import categorize_exception

PROMPT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
REPLY = [*PROMPT, {"role": "assistant", "content": "hello"}]


class Echo(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        return AgentWorkflowOutput(messages=[*ctx.prompt, {"role": "assistant", "content": "ok"}])


class OneReward(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(1.0)


def _raising(exc: BaseException) -> type[AgentWorkflow[Any]]:
    class Raises(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            raise exc

    return Raises


def _request(**overrides: Any) -> ExecutionRequest:
    fields: dict[str, Any] = {"id": "r-1", "prompt": PROMPT, "label": "x"}
    fields.update(overrides)
    return ExecutionRequest(**fields)


@pytest.mark.parametrize(
    ("exc", "category"),
    [
        (TimeoutError("upstream gave up"), RolloutErrorCategory.TIMEOUT),
        (ValueError("bad value"), RolloutErrorCategory.VALIDATION_ERROR),
        (TypeError("bad type"), RolloutErrorCategory.VALIDATION_ERROR),
        (AssertionError("bad assumption"), RolloutErrorCategory.VALIDATION_ERROR),
        (RuntimeError("anything else"), RolloutErrorCategory.AGENT_ERROR),
    ],
    ids=["timeout", "value_error", "type_error", "assertion_error", "generic"],
)
async def test_workflow_exceptions_map_to_their_error_category(
    exc: Exception, category: RolloutErrorCategory
) -> None:
    result = (await LocalBackend(workflow=_raising(exc)).execute(_request())).result
    assert result.status is RolloutStatus.FAILURE
    assert result.err_category is category
    assert result.err_message == str(exc)


async def test_a_pydantic_validation_error_in_the_workflow_is_a_validation_error() -> None:
    class BuildsBadConfig(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            ConcurrencyConfig(max_concurrent=0)

    result = (await LocalBackend(workflow=BuildsBadConfig).execute(_request())).result
    assert result.err_category is RolloutErrorCategory.VALIDATION_ERROR


def test_sandbox_provider_errors_are_http_errors_by_class_name() -> None:
    class SandboxConnectionException(Exception):
        pass

    class PoolLost(SandboxConnectionException):
        pass

    class SandboxApiException(Exception):
        def __init__(self, status_code: object) -> None:
            super().__init__("sandbox api")
            self.status_code = status_code

    assert categorize_exception(PoolLost()) is RolloutErrorCategory.HTTP_ERROR
    assert categorize_exception(SandboxApiException(503)) is RolloutErrorCategory.HTTP_ERROR
    assert categorize_exception(SandboxApiException(404)) is RolloutErrorCategory.AGENT_ERROR
    assert categorize_exception(SandboxApiException("503")) is RolloutErrorCategory.AGENT_ERROR
    assert categorize_exception(SandboxApiException(None)) is RolloutErrorCategory.AGENT_ERROR


async def test_a_message_less_exception_reports_its_type_name() -> None:
    result = (await LocalBackend(workflow=_raising(RuntimeError())).execute(_request())).result
    assert result.err_message == "RuntimeError"


async def test_explicit_output_wins_over_a_registered_sample_source() -> None:
    class Source(SampleSource):
        async def get_sample(self) -> RolloutSample:
            return RolloutSample(messages=[{"role": "assistant", "content": "from source"}])

    class RegistersAndReturns(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
            rollout = get_rollout_context()
            assert rollout is not None
            rollout.set_sample_source(Source())
            return AgentWorkflowOutput(messages=REPLY, metrics={"turns": 1.0})

    backend = LocalBackend(workflow=RegistersAndReturns)
    result = (await backend.execute(_request(grade=False))).result
    assert result.sample is not None
    assert list(result.sample.messages) == REPLY
    assert result.sample.label == "x"
    assert result.sample.metrics == {"turns": 1.0}


async def test_returning_none_takes_the_sample_from_the_registered_source_without_a_label() -> None:
    class Source(SampleSource):
        async def get_sample(self) -> RolloutSample:
            return RolloutSample(messages=REPLY)

    class Registers(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            rollout = get_rollout_context()
            assert rollout is not None
            rollout.set_sample_source(Source())

    outcome = await LocalBackend(workflow=Registers).execute(_request(grade=False))
    assert outcome.result.sample is not None
    assert list(outcome.result.sample.messages) == REPLY
    assert outcome.result.sample.label is None


async def test_returning_none_without_a_source_succeeds_with_no_sample() -> None:
    class Nothing(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            return None

    outcome = await LocalBackend(workflow=Nothing).execute(_request(grade=False))
    assert outcome.result.status is RolloutStatus.SUCCESS
    assert outcome.result.sample is None


async def test_a_bare_message_list_is_accepted_as_the_sample() -> None:
    class ReturnsList(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            return REPLY

    result = (await LocalBackend(workflow=ReturnsList).execute(_request(grade=False))).result
    assert result.sample is not None
    assert list(result.sample.messages) == REPLY
    assert result.sample.label == "x"


async def test_any_other_return_type_is_a_validation_error() -> None:
    class ReturnsString(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> str:
            return "hello"

    result = (await LocalBackend(workflow=ReturnsString).execute(_request())).result
    assert result.err_category is RolloutErrorCategory.VALIDATION_ERROR
    assert "got str" in (result.err_message or "")


async def test_metrics_mutated_to_non_finite_after_construction_fail_validation() -> None:
    class MutatesMetrics(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
            output = AgentWorkflowOutput(messages=REPLY, metrics={"score": 1.0})
            output.metrics["score"] = math.nan
            return output

    result = (await LocalBackend(workflow=MutatesMetrics).execute(_request())).result
    assert result.status is RolloutStatus.FAILURE
    assert result.err_category is RolloutErrorCategory.VALIDATION_ERROR


async def test_output_info_is_dropped_from_the_sample() -> None:
    class WithInfo(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
            return AgentWorkflowOutput(messages=REPLY, info={"debug": "only for me"})

    result = (await LocalBackend(workflow=WithInfo).execute(_request(grade=False))).result
    assert result.sample is not None
    dumped = result.sample.model_dump()
    assert "only for me" not in repr(dumped)


async def test_the_prompt_reaches_the_workflow_unchanged() -> None:
    seen: list[list[dict[str, Any]]] = []

    class Records(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            seen.append(ctx.prompt)

    await LocalBackend(workflow=Records).execute(_request())
    assert seen == [PROMPT]


async def test_metadata_reaches_both_the_workflow_and_the_grader() -> None:
    seen: dict[str, Any] = {}

    class SeesMetadata(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            seen["workflow"] = ctx.metadata
            return REPLY

    class GraderSeesMetadata(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            seen["grader"] = ctx.metadata
            ctx.set_reward(0.0)

    backend = LocalBackend(workflow=SeesMetadata, grader=GraderSeesMetadata)
    await backend.execute(_request(metadata={"difficulty": "hard"}))
    assert seen == {"workflow": {"difficulty": "hard"}, "grader": {"difficulty": "hard"}}


async def test_the_grader_runs_with_metadata_only() -> None:
    backend = LocalBackend(workflow=Echo, grader=OneReward)
    result = (await backend.execute(_request(label=None, metadata={}))).result
    assert result.status is RolloutStatus.SUCCESS
    assert result.sample is not None and result.sample.reward == 1.0


async def test_the_grader_runs_with_label_only() -> None:
    backend = LocalBackend(workflow=Echo, grader=OneReward)
    result = (await backend.execute(_request(label="x", metadata=None))).result
    assert result.status is RolloutStatus.SUCCESS
    assert result.sample is not None and result.sample.reward == 1.0


async def test_the_grader_sees_the_label_and_the_workflow_sample() -> None:
    seen: list[tuple[str | None, list[Any]]] = []

    class Inspects(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            assert ctx.sample is not None
            seen.append((ctx.label, list(ctx.sample.messages)))
            ctx.set_reward(0.25)

    await LocalBackend(workflow=Echo, grader=Inspects).execute(_request(label="gold"))
    assert seen == [("gold", [*PROMPT, {"role": "assistant", "content": "ok"}])]


async def test_each_rollout_gets_its_own_copy_of_the_workflow_config() -> None:
    class Cfg(AgentWorkflowConfig):
        seen: list[str] = []

    class Mutates(AgentWorkflow[Cfg]):
        async def run(self, ctx: AgentWorkflowContext[Cfg]) -> None:
            assert ctx.config is not None and self.config is ctx.config
            ctx.config.seen.append("touched")

    config = Cfg(name="c")
    backend = LocalBackend(workflow=Mutates, workflow_config=config)
    await backend.execute(_request(id="a"))
    await backend.execute(_request(id="b"))
    assert config.seen == []


async def test_the_grader_is_built_with_the_grader_config() -> None:
    configs: list[GraderConfig | None] = []

    class Remembers(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            configs.append(self.config)
            ctx.set_reward(1.0)

    config = GraderConfig(name="g")
    backend = LocalBackend(workflow=Echo, grader=Remembers, grader_config=config)
    await backend.execute(_request())
    assert configs == [config]


async def test_string_references_resolve_workflow_grader_and_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_rollout_mod.py").write_text(
        textwrap.dedent(
            """
            from osmosis_rollout import (
                AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig, Grader, GraderConfig,
            )

            class Flow(AgentWorkflow):
                async def run(self, ctx):
                    return [{"role": "assistant", "content": self.config.name}]

            class Judge(Grader):
                async def grade(self, ctx):
                    ctx.set_reward(0.5 if self.config.name == "judge" else 0.0)

            CONFIG = AgentWorkflowConfig(name="flow", concurrency=ConcurrencyConfig(max_concurrent=3))
            GRADER_CONFIG = GraderConfig(name="judge")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = LocalBackend(
        workflow="my_rollout_mod:Flow",
        workflow_config="my_rollout_mod:CONFIG",
        grader="my_rollout_mod:Judge",
        grader_config="my_rollout_mod:GRADER_CONFIG",
    )
    assert backend.limiter.max_concurrent == 3
    result = (await backend.execute(_request())).result
    assert result.status is RolloutStatus.SUCCESS
    assert result.sample is not None
    assert result.sample.messages[-1]["content"] == "flow"
    assert result.sample.reward == 0.5


@pytest.mark.parametrize(
    ("reference", "error", "message"),
    [
        ("no_colon_here", ValueError, "expected 'module:Attr'"),
        ("osmosis_rollout:NoSuchThing", ImportError, "has no attribute"),
        ("osmosis_rollout_no_such_module:Flow", ImportError, "cannot import module"),
    ],
)
def test_a_bad_string_reference_names_what_is_wrong_as_the_official_error(
    reference: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        LocalBackend(workflow=reference)


async def test_a_backend_without_a_workflow_is_built_and_its_rollouts_fail_as_the_officials() -> (
    None
):
    # The official backend accepts workflow=None and fails each rollout instead.
    outcome = await LocalBackend(workflow=None).execute(_request())  # type: ignore[arg-type]
    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.VALIDATION_ERROR


def test_a_workflow_that_is_not_an_agent_workflow_class_is_rejected() -> None:
    with pytest.raises(TypeError, match="AgentWorkflow subclass"):
        LocalBackend(workflow="osmosis_rollout:RolloutSample")
    with pytest.raises(TypeError, match="Grader subclass"):
        LocalBackend(workflow=Echo, grader=Echo)  # type: ignore[arg-type]


def test_health_reports_status_and_the_limiter() -> None:
    assert LocalBackend(workflow=Echo).health() == {
        "status": "ok",
        "concurrency": {"max_concurrent": 4, "queued": 0, "running": 0},
    }
    unbounded = LocalBackend(workflow=Echo, workflow_config=AgentWorkflowConfig(name="u"))
    assert unbounded.health()["concurrency"]["max_concurrent"] is None


async def test_the_backend_hooks_keep_their_protocol_defaults() -> None:
    backend = LocalBackend(workflow=Echo)
    assert backend.has_capacity() is True
    assert backend.rollout_status("r-1") is None
    assert backend.cancel_rollouts(["r-1"]) == {}
    assert backend.cancel_rollouts(ids=["r-1"], prefix=None, all=False) == {}
    await backend.shutdown()


async def test_a_backend_keeps_working_after_shutdown() -> None:
    class Blocking(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            return REPLY

    backend = LocalBackend(workflow=Blocking)
    assert (await backend.execute(_request(grade=False))).result.status is RolloutStatus.SUCCESS
    await backend.shutdown()
    assert (await backend.execute(_request(grade=False))).result.status is RolloutStatus.SUCCESS
    await backend.shutdown()


def test_resolve_reference_passes_objects_through_and_follows_dotted_attributes() -> None:
    from osmosis_rollout._internal.imports import resolve_reference

    assert resolve_reference(Echo) is Echo
    assert resolve_reference(None) is None
    assert resolve_reference("osmosis_rollout:RolloutStatus.SUCCESS") is RolloutStatus.SUCCESS
    assert resolve_reference("osmosis_rollout.backend.local:LocalBackend") is LocalBackend


async def test_run_workflow_and_run_grader_are_callable_with_the_official_signatures() -> None:
    backend = LocalBackend(workflow=Echo, grader=OneReward)
    result = await backend.run_workflow(_request(), queued_sec=0.0)
    assert result.status is RolloutStatus.SUCCESS and result.sample is not None
    graded = await backend.run_grader(_request(), result)
    assert graded.status is RolloutStatus.SUCCESS
    assert graded.sample is not None and graded.sample.reward == 1.0


async def test_run_grader_without_a_grader_returns_the_result_unchanged() -> None:
    backend = LocalBackend(workflow=Echo)
    result = await backend.run_workflow(_request())
    assert await backend.run_grader(_request(), result) is result


async def test_a_subclass_overriding_run_grader_and_run_workflow_is_what_execute_runs() -> None:
    calls: list[str] = []

    class Custom(LocalBackend):
        async def run_workflow(self, request: ExecutionRequest, *, queued_sec: float = 0.0) -> Any:
            calls.append("workflow")
            return await super().run_workflow(request, queued_sec=queued_sec)

        async def run_grader(self, request: ExecutionRequest, result: Any) -> Any:
            calls.append("grader")
            graded = await super().run_grader(request, result)
            graded.sample.reward = 0.25
            return graded

    outcome = await Custom(workflow=Echo, grader=OneReward).execute(_request())
    assert calls == ["workflow", "grader"]
    assert outcome.result.sample is not None and outcome.result.sample.reward == 0.25


async def test_the_grader_gets_the_workflows_artifacts_folder_and_makes_one_when_called_alone(
    tmp_path: Path,
) -> None:
    seen: dict[str, Path | None] = {}

    class Writes(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            seen["workflow"] = ctx.artifacts_dir
            return REPLY

    class Looks(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            seen["grader"] = ctx.artifacts_dir
            ctx.set_reward(1.0)

    backend = LocalBackend(workflow=Writes, grader=Looks, artifact_root=tmp_path)
    await backend.execute(_request(id="r-1"))
    assert seen["grader"] == seen["workflow"] == tmp_path / "r-1" / "artifacts"
    done = await LocalBackend(workflow=Writes, artifact_root=tmp_path).run_workflow(_request())
    await backend.run_grader(_request(id="graded-alone"), done)
    assert seen["grader"] == tmp_path / "graded-alone" / "artifacts"
    assert seen["grader"].is_dir()
