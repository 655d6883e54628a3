"""RolloutClient construction: URL, validation, auth header, redirects, owned httpx client."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx
import pytest
import respx

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.errors import RolloutProtocolError

if TYPE_CHECKING:
    from tests.controller.conftest import Wire

BASE_URL = "http://rollout.test"

MESSAGES = [{"role": "user", "content": "hi"}]


def test_trailing_slashes_are_stripped_from_the_url() -> None:
    assert RolloutClient("http://host:8000///").url == "http://host:8000"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_admission_timeout_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="admission_timeout_sec must be finite"):
        RolloutClient(BASE_URL, admission_timeout_sec=bad)


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_api_key_is_rejected(blank: str) -> None:
    with pytest.raises(ValueError, match="api_key"):
        RolloutClient(BASE_URL, api_key=blank)


async def test_api_key_is_sent_as_bearer_on_every_request(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    router.post("/rollout").mock(return_value=wire.admitted("r1"))
    router.get("/rollout/r1/result").mock(return_value=wire.result("r1"))
    router.post("/rollout/cancel").mock(
        return_value=httpx.Response(200, json={"dispositions": {"r1": "not_found"}})
    )
    router.get("/health").mock(return_value=wire.health())
    async with RolloutClient(BASE_URL, api_key="s3cret") as client:
        await client.run_rollout(MESSAGES, "http://policy/v1", "r1")
        await client.cancel_rollout("r1")
        await client.health()
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.01)
    assert len(router.calls) == 5
    for call in router.calls:
        assert call.request.headers["Authorization"] == "Bearer s3cret"


async def test_no_authorization_header_without_api_key(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/health").mock(return_value=wire.health())
    await client.health()
    assert "Authorization" not in router.calls.last.request.headers


async def test_redirects_are_never_followed(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.post("/rollout").mock(
        return_value=httpx.Response(307, headers={"Location": f"{BASE_URL}/elsewhere"})
    )
    elsewhere = router.post("/elsewhere").mock(return_value=wire.admitted("r1"))
    with pytest.raises(RolloutProtocolError) as caught:
        await client.run_rollout_async(MESSAGES, "http://policy/v1", "r1")
    assert caught.value.status_code == 307
    assert not elsewhere.called


async def test_client_closes_the_httpx_client_it_created() -> None:
    client = RolloutClient(BASE_URL)
    assert client.owns_http_client
    await client.aclose()
    assert client.http_client.is_closed


async def test_client_leaves_a_given_httpx_client_open() -> None:
    async with httpx.AsyncClient() as http:
        async with RolloutClient(BASE_URL, http_client=http) as client:
            assert client.http_client is http
        assert not http.is_closed


async def test_own_httpx_client_applies_a_five_second_timeout_to_admission(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.post("/rollout").mock(return_value=wire.admitted("r1", wait=0.2))
    router.get("/rollout/r1/result").mock(return_value=wire.result("r1"))
    await client.run_rollout(MESSAGES, "http://policy/v1", "r1")
    admission, poll = router.calls[0].request, router.calls[1].request
    assert admission.extensions["timeout"]["read"] == 5.0
    # Each long poll gets the server's wait plus the 10 s read grace.
    assert poll.extensions["timeout"]["read"] == pytest.approx(10.2)


def test_importing_the_controller_does_not_import_fastapi() -> None:
    code = (
        "import sys, osmosis_rollout.controller as c; c.RolloutClient; c.RolloutHandle; "
        "assert 'fastapi' not in sys.modules, 'fastapi imported'; "
        "assert c.PolicyServer.__name__ == 'PolicyServer'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_unknown_controller_attributes_raise_attribute_error() -> None:
    import osmosis_rollout.controller as controller

    with pytest.raises(AttributeError, match="NoSuchThing"):
        controller.NoSuchThing  # noqa: B018
