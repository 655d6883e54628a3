"""A rollout's cost: configured prices, the provider's reported cost, and estimated tokens."""

from __future__ import annotations

import pytest

from osmosis_rollout.policy import CallRecord, Cost, RolloutCallLog, TokenPrices, Usage


def _log(*usages: Usage) -> RolloutCallLog:
    log = RolloutCallLog("r1")
    for usage in usages:
        log.add(CallRecord(request={}, reply=None, latency_s=0.1, usage=usage))
    return log


def test_prices_are_per_million_tokens_in_and_out() -> None:
    prices = TokenPrices(input_per_million=0.25, output_per_million=2.0)
    assert prices.cost(1_000_000, 0) == pytest.approx(0.25)
    assert prices.cost(2000, 500) == pytest.approx(0.0005 + 0.001)


def test_no_cost_without_prices_or_a_reported_cost() -> None:
    assert _log(Usage(10, 5)).cost() is None
    assert _log().cost() is None


def test_the_providers_reported_costs_add_up() -> None:
    log = _log(Usage(10, 5, cost=0.001), Usage(20, 5), Usage(30, 5, cost=0.002))
    assert log.reported_cost == pytest.approx(0.003)
    assert log.cost() == Cost(pytest.approx(0.003), "provider", estimated=False)  # type: ignore[arg-type]


def test_configured_prices_win_over_the_reported_cost() -> None:
    log = _log(Usage(1000, 100, cost=99.0))
    cost = log.cost(TokenPrices(1.0, 10.0))
    assert cost is not None
    assert cost.source == "prices"
    assert cost.usd == pytest.approx(0.001 + 0.001)


def test_a_cost_from_estimated_tokens_says_so() -> None:
    log = _log(Usage(400, 100, estimated=True))
    cost = log.cost(TokenPrices(1.0, 1.0))
    assert cost is not None and cost.estimated


def test_a_snapshot_keeps_the_reported_cost() -> None:
    log = _log(Usage(1, 1, cost=0.5))
    assert log.copy().reported_cost == 0.5
    assert log.to_dict()["reported_cost"] == 0.5


def test_the_cost_stays_out_of_the_cassette_form_of_usage() -> None:
    assert "cost" not in Usage(1, 2, cost=0.1).to_dict()


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1.0", True])
def test_prices_must_be_finite_non_negative_numbers(bad: object) -> None:
    with pytest.raises(ValueError, match="input_per_million"):
        TokenPrices(bad, 1.0)  # type: ignore[arg-type]
