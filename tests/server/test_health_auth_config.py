"""GET /health, the inbound api_key, construction parameters, logging setup, /metrics."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from server_support import (
    EchoWorkflow,
    ExactGrader,
    Gate,
    GatedWorkflow,
    admit,
    eventually,
    make_app,
    poll_until_terminal,
    serving,
    until_running,
)

from osmosis_rollout import LocalBackend
from osmosis_rollout.server import ControllerAuth, create_rollout_server
from osmosis_rollout.server.app import INSTANCE_ID_ENV

KEY = "s3cret-key"


# -- health ------------------------------------------------------------------------------


async def test_health_exposes_identity_lifecycle_and_preserves_backend_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(INSTANCE_ID_ENV, raising=False)
    async with serving(make_app()) as client:
        body = (await client.get("/health")).json()
    assert body["status"] == "ok"
    assert body["concurrency"] == {"max_concurrent": 4, "queued": 0, "running": 0}
    assert body["instance_id"] == body["process_id"]
    assert body["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}


async def test_health_instance_id_is_captured_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INSTANCE_ID_ENV, "inst-1")
    app = make_app()
    monkeypatch.setenv(INSTANCE_ID_ENV, "inst-2")
    async with serving(app) as client:
        body = (await client.get("/health")).json()
    assert body["instance_id"] == "inst-1"
    assert body["process_id"] != "inst-1"


def test_each_server_gets_a_fresh_process_id() -> None:
    first = make_app().state.osmosis_server.process_id
    second = make_app().state.osmosis_server.process_id
    assert first != second


async def test_server_keys_override_backend_keys_of_the_same_name() -> None:
    class Backend(LocalBackend):
        def health(self) -> dict[str, object]:
            return {"status": "ok", "process_id": "backend", "lifecycle": "backend", "x": 1}

    app = create_rollout_server(backend=Backend(workflow=EchoWorkflow), configure_logging=False)
    async with serving(app) as client:
        body = (await client.get("/health")).json()
    assert body["x"] == 1
    assert body["process_id"] != "backend"
    assert body["lifecycle"]["accepting_rollouts"] is True


async def test_health_counts_active_rollouts() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None)
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "g"}, grade=False)
        await until_running(app, "r-1")
        busy = (await client.get("/health")).json()["lifecycle"]["active_rollouts"]
        Gate.get("g").set()
        await poll_until_terminal(client, "r-1", token)
        idle = (await client.get("/health")).json()["lifecycle"]["active_rollouts"]
    assert (busy, idle) == (1, 0)


# -- inbound api key ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "json"),
    [
        ("GET", "/health", None),
        ("POST", "/rollout", {"nonsense": True}),
        ("GET", "/rollout/x/result", None),
        ("POST", "/rollout/cancel", {}),
        ("GET", "/no/such/path", None),
        ("GET", "/metrics", None),
    ],
)
@pytest.mark.parametrize(
    "authorization",
    [None, f"bearer {KEY}", f"Bearer {KEY}x", KEY, f"Bearer  {KEY}", "Bearer "],
    ids=["absent", "lowercase-scheme", "wrong-key", "no-scheme", "double-space", "empty"],
)
async def test_every_route_answers_401_without_the_exact_bearer(
    method: str, path: str, json: object, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with serving(make_app(api_key=KEY, enable_metrics=True)) as client:
        response = await client.request(method, path, json=json, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"detail": "unauthorized"}


async def test_the_right_bearer_is_let_through_everywhere() -> None:
    auth = ControllerAuth(KEY)
    async with serving(
        make_app(api_key=KEY, enable_metrics=True), headers=auth.bearer_headers()
    ) as client:
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
        assert (await client.get("/no/such/path")).status_code == 404
        assert (await client.post("/rollout", json={})).status_code == 422
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"


async def test_without_an_api_key_no_authorization_is_needed() -> None:
    async with serving(make_app()) as client:
        assert (await client.get("/health")).status_code == 200


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_api_key_is_rejected_at_construction(blank: str) -> None:
    with pytest.raises(ValueError, match="api_key"):
        make_app(api_key=blank)


def test_controller_auth_repr_never_shows_the_key() -> None:
    assert KEY not in repr(ControllerAuth(KEY))
    assert repr(ControllerAuth(KEY)) == "ControllerAuth(api_key=***)"
    assert repr(ControllerAuth()) == "ControllerAuth(api_key=None)"


def test_controller_auth_bearer_headers() -> None:
    assert ControllerAuth(KEY).bearer_headers() == {"Authorization": f"Bearer {KEY}"}
    assert ControllerAuth().bearer_headers() == {}


def test_controller_auth_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_API_KEY", KEY)
    assert ControllerAuth.from_env().accepts(f"Bearer {KEY}")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_API_KEY", "")
    assert not ControllerAuth.from_env().enabled


# -- construction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"result_wait_timeout_sec": 0}, "result_wait_timeout_sec"),
        ({"result_wait_timeout_sec": -1}, "result_wait_timeout_sec"),
        ({"result_wait_timeout_sec": math.nan}, "result_wait_timeout_sec"),
        ({"result_wait_timeout_sec": math.inf}, "result_wait_timeout_sec"),
        ({"result_retention_sec": -1}, "result_retention_sec"),
        ({"result_retention_sec": math.inf}, "result_retention_sec"),
        ({"polling_lease_timeout_sec": math.inf}, "polling_lease_timeout_sec"),
        ({"polling_lease_timeout_sec": 0.5}, "must exceed"),
        ({"polling_lease_timeout_sec": 0.1}, "must exceed"),
    ],
)
def test_inconsistent_timings_are_rejected_at_construction(
    kwargs: dict[str, float], needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        make_app(**kwargs)


def test_zero_retention_is_allowed() -> None:
    make_app(result_retention_sec=0.0)


def test_an_app_without_a_backend_is_built_as_the_official_one_is() -> None:
    # The official create_rollout_server does not check its backend (issue 34).
    app = create_rollout_server(backend=None, configure_logging=False)  # type: ignore[arg-type]
    assert "/rollout" in app.openapi()["paths"]


def test_the_backend_is_kept_on_app_state() -> None:
    backend = LocalBackend(workflow=EchoWorkflow, grader=ExactGrader)
    app = create_rollout_server(backend=backend, configure_logging=False)
    assert app.state.osmosis_backend is backend


@contextmanager
def bare_root_logger() -> Iterator[logging.Logger]:
    """The root logger with no handlers (pytest's capture handlers set aside), restored after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers = []
    try:
        yield root
    finally:
        root.handlers, level = saved
        root.setLevel(level)


def test_installs_an_info_handler_when_the_process_has_none() -> None:
    with bare_root_logger() as root:
        create_rollout_server(backend=LocalBackend(workflow=EchoWorkflow))
        installed = root.handlers[:], root.level
    assert installed[0]
    assert installed[1] == logging.INFO


def test_leaves_an_already_configured_process_alone() -> None:
    handler = logging.NullHandler()
    with bare_root_logger() as root:
        root.addHandler(handler)
        create_rollout_server(backend=LocalBackend(workflow=EchoWorkflow))
        installed = root.handlers[:]
    assert installed == [handler]


def test_opting_out_installs_nothing() -> None:
    with bare_root_logger() as root:
        create_rollout_server(backend=LocalBackend(workflow=EchoWorkflow), configure_logging=False)
        installed = root.handlers[:]
    assert installed == []


# -- metrics -----------------------------------------------------------------------------


async def test_metrics_are_off_by_default() -> None:
    async with serving(make_app()) as client:
        assert (await client.get("/metrics")).status_code == 404


async def test_metrics_count_admissions_results_and_latency() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None, enable_metrics=True)
    async with serving(app) as client:
        ok = await admit(client, "ok", metadata={"gate": "open"}, grade=False)
        Gate.get("open").set()
        await poll_until_terminal(client, "ok", ok)
        bare = await admit(client, "bare", metadata={"gate": "open"})  # no grader: failure
        await poll_until_terminal(client, "bare", bare)
        await admit(client, "live", metadata={"gate": "never"}, grade=False)
        await until_running(app, "live")
        dup = await client.post(
            "/rollout",
            json={"initial_messages": [], "rollout_id": "live", "chat_completions_url": "x"},
        )
        response = await client.get("/metrics")
        Gate.get("never").set()
    assert dup.status_code == 409
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert "osmosis_rollouts_admitted_total 3" in text
    assert 'osmosis_rollouts_rejected_total{reason="duplicate"} 1' in text
    assert 'osmosis_rollouts_finished_total{status="success",category="none"} 1' in text
    assert 'osmosis_rollouts_finished_total{status="failure",category="none"} 1' in text
    assert "osmosis_rollouts_active 1" in text
    assert 'osmosis_rollouts_in_status{status="running"} 1' in text
    assert "osmosis_rollout_result_latency_seconds_count 2" in text
    assert 'osmosis_rollout_result_latency_seconds_bucket{le="+Inf"} 2' in text


async def test_metrics_count_lease_expiry_by_category() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        enable_metrics=True,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.1,
    )
    async with serving(app) as client:
        await admit(client, "r-1", metadata={"gate": "never"})
        registry = app.state.osmosis_server.registry
        await eventually(lambda: registry.entries["r-1"].finished)
        text = (await client.get("/metrics")).text
    assert 'osmosis_rollouts_finished_total{status="failure",category="lease_expired"} 1' in text
