"""The fleet's load balancing (a small addition for issue 25): a model with
`load_balance: price` spreads requests that name no `order` / `sort` over its endpoints as
OpenRouter's default does (weight 1 / price^2), honours `provider.ignore`, and is
deterministic for a seed; `cheapest` (the default) keeps serving the cheapest one."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from fleet.scenario import EndpointSpec
from fleet.selection import balanced
from tests.fixtures.fleet import FleetHandle

MODEL = "acme/spread"
FAST = {"ttft_s": 0.0, "tokens_per_s": 100000.0, "jitter": 0.0}


def _scenario(prices: list[str], balance: str = "price") -> dict[str, Any]:
    endpoints = [
        {"tag": f"p{i}", "provider_name": f"P{i}", "timing": dict(FAST),
         "pricing": {"prompt": price, "completion": price}}
        for i, price in enumerate(prices)
    ]  # fmt: skip
    model = {"id": MODEL, "load_balance": balance, "endpoints": endpoints}
    return {"name": "balance", "seed": 3, "models": [model]}


def _served(fleet: FleetHandle, n: int, provider: dict[str, Any] | None = None) -> Counter[str]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "Hi."}]}
    if provider:
        body["provider"] = provider
    fleet.clear_requests()
    for _ in range(n):
        assert fleet.chat(body).status_code == 200
    return Counter(r["tag"] for r in fleet.requests())


def test_equal_prices_spread_evenly_and_ignore_is_honoured(fleet: FleetHandle) -> None:
    """Three endpoints at one price each serve about a third of 240 requests; with one of
    them ignored, the other two share every request."""
    fleet.load(_scenario(["0.000001"] * 3))
    counts = _served(fleet, 240)
    assert set(counts) == {"p0", "p1", "p2"}
    assert all(50 <= c <= 110 for c in counts.values()), counts
    counts = _served(fleet, 60, {"ignore": ["p1"], "allow_fallbacks": False})
    assert set(counts) == {"p0", "p2"} and sum(counts.values()) == 60


def test_cheapest_stays_the_default(fleet: FleetHandle) -> None:
    """Without `load_balance` the cheapest endpoint serves every request, as before."""
    fleet.load(_scenario(["0.000002", "0.000001", "0.000003"], balance="cheapest"))
    assert _served(fleet, 20) == Counter({"p1": 20})


def test_weight_is_inverse_square_of_price_and_seeded() -> None:
    """The pure draw: at prices 1 and 2 the cheap endpoint is first about 4 in 5 times; the
    same seed gives the same draws."""
    ends = [
        EndpointSpec.model_validate(
            {"tag": t, "provider_name": t.upper(), "pricing": {"prompt": p, "completion": p}}
        )
        for t, p in (("a", "0.000001"), ("b", "0.000002"))
    ]
    firsts = [balanced(ends, random.Random(f"s{i}"))[0].tag for i in range(2000)]
    assert 0.76 <= firsts.count("a") / 2000 <= 0.84
    rng1, rng2 = random.Random(7), random.Random(7)
    assert [balanced(ends, rng1)[0].tag for _ in range(50)] == [
        balanced(ends, rng2)[0].tag for _ in range(50)
    ]
    assert [e.tag for e in balanced(ends, random.Random(1))] in (["a", "b"], ["b", "a"])
