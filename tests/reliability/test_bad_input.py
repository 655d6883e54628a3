"""Bad input: schemathesis against our server's OpenAPI schema, over real HTTP on loopback.

Every operation gets a bounded number of generated requests (valid and invalid bodies,
headers, path parameters). The server must never answer 5xx, and every rejection must be
a 4xx carrying a message (``{"detail": ...}`` with something in it).

Dataset files get the same treatment by hypothesis in ``tests/dataset/test_properties.py``
(bad JSON lines, wrong types, missing columns, CSV quoting, empty files, huge cells): not
repeated here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from reliability_support import ExactGrader, uvicorn_thread
from schemathesis import GenerationMode

from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, LocalBackend
from osmosis_rollout.server import create_rollout_server

MAX_EXAMPLES = 50


class Echo(AgentWorkflow[Any]):
    """Accepts any prompt; answers with a fixed message."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        return [{"role": "assistant", "content": "ok"}]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    app = create_rollout_server(
        backend=LocalBackend(workflow=Echo, grader=ExactGrader),
        configure_logging=False,
        result_wait_timeout_sec=0.2,
        polling_lease_timeout_sec=5.0,
        result_retention_sec=60.0,
    )
    with uvicorn_thread(app) as url:
        yield url


OPERATIONS = [
    ("POST", "/rollout"),
    ("GET", "/rollout/{rollout_id}/result"),
    ("POST", "/rollout/cancel"),
    ("GET", "/health"),
]


@pytest.fixture(scope="module")
def loaded_schema(server_url: str) -> Any:
    return schemathesis.openapi.from_url(server_url + "/openapi.json")


def _detail(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail) if detail else ""


def test_schema_covers_every_endpoint(loaded_schema: Any) -> None:
    operations = {
        (op.ok().method.upper(), op.ok().path) for op in loaded_schema.get_all_operations()
    }
    assert set(OPERATIONS) == operations


@pytest.mark.parametrize(
    ("method", "path", "mode"),
    [
        (method, path, mode)
        for method, path in OPERATIONS
        for mode in GenerationMode
        # /health takes no input at all, so there is nothing invalid to send it.
        if not (path == "/health" and mode is GenerationMode.NEGATIVE)
    ],
)
def test_no_request_gets_a_5xx_and_every_rejection_says_why(
    loaded_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = loaded_schema[path][method]
    seen: list[int] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        response = case.call(timeout=10)
        seen.append(response.status_code)
        assert response.status_code < 500, (case.method, case.path, response.text)
        if 400 <= response.status_code < 500:
            assert _detail(response), (case.path, response.status_code, response.text)

    check()
    assert seen, "no request was generated"
