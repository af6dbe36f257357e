"""What each probe costs (SPEC C13), pure: `usage.cost` first, else the listing's prices times
the reported tokens, else the request's estimate (marked estimated)."""

from __future__ import annotations

import pytest

from probes.cost import (
    CostSource,
    probe_cost,
    prompt_tokens_estimate,
    round_bill,
)
from probes.types import Contract, Pricing, Transcript

PRICES = Pricing(prompt=0.0000003, completion=0.0000005, request=0.0001)


def _t(usage: dict | None, contract: Contract = Contract.LANGUAGE) -> Transcript:
    return Transcript(
        request_id="r", model_id="m/x", tag="a/fp8", pinned_provider="A", contract=contract,
        locale="en", usage=usage, http_status=200,
    )  # fmt: skip


def test_c13_usage_cost_is_the_probes_cost() -> None:
    """A reply that carries `usage.cost` costs that, with its tokens."""
    cost = probe_cost(_t({"prompt_tokens": 100, "completion_tokens": 50, "cost": 0.5}), PRICES, 300)
    assert (cost.usd, cost.prompt_tokens, cost.completion_tokens) == (0.5, 100, 50)
    assert cost.source is CostSource.USAGE and not cost.estimated


def test_c13_without_usage_cost_the_listing_prices_times_the_tokens() -> None:
    """Without `usage.cost`: prompt and completion tokens at the listing's prices, plus the
    price per request."""
    cost = probe_cost(_t({"prompt_tokens": 100, "completion_tokens": 50}), PRICES, 300)
    assert cost.usd == pytest.approx(100 * 0.0000003 + 50 * 0.0000005 + 0.0001)
    assert cost.source is CostSource.LISTING and not cost.estimated


def test_c13_a_probe_without_usage_is_priced_by_its_requests_estimate_and_marked() -> None:
    """No usage at all (cut, reset, an error before the first token): the prompt's
    characters / 4 and max_tokens of completion, marked estimated."""
    prompt = prompt_tokens_estimate(Contract.REFUSAL, "en")
    assert 50 < prompt < 500
    cost = probe_cost(_t(None, Contract.REFUSAL), PRICES, 300)
    assert cost.estimated and cost.source is CostSource.ESTIMATE
    assert (cost.prompt_tokens, cost.completion_tokens) == (prompt, 300)
    assert cost.usd == pytest.approx(prompt * 0.0000003 + 300 * 0.0000005 + 0.0001)


def test_c13_a_hostile_usage_cost_falls_back_to_the_listing() -> None:
    """A negative or non-numeric `usage.cost` is not trusted: the listing prices it."""
    for bad in (-1.0, "0.5", float("nan")):
        cost = probe_cost(
            _t({"prompt_tokens": 10, "completion_tokens": 10, "cost": bad}), PRICES, 300
        )
        assert cost.source is CostSource.LISTING


def test_c13_a_rounds_bill_per_endpoint_and_in_total() -> None:
    """Requests, tokens and cost per endpoint, the estimated part apart, and the total."""
    bill = round_bill(
        {
            "a/fp8": [_t({"prompt_tokens": 10, "completion_tokens": 20, "cost": 0.01})] * 3,
            "b/fp8": [_t({"prompt_tokens": 10, "completion_tokens": 20, "cost": 0.02}), _t(None)],
        },
        {"a/fp8": PRICES, "b/fp8": PRICES},
        300,
    )
    a, b, total = bill.endpoints["a/fp8"], bill.endpoints["b/fp8"], bill.total
    assert (a.requests, a.tokens, a.usd, a.estimated_requests) == (3, 90, pytest.approx(0.03), 0)
    assert b.requests == 2 and b.estimated_requests == 1 and b.tokens == 30  # reported only
    assert b.usd == pytest.approx(0.02 + b.estimated_usd) and b.estimated_usd > 0
    assert total.requests == 5 and total.usd == pytest.approx(a.usd + b.usd)
