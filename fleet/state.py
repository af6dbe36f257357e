"""What a running fleet remembers between requests, kept on the Starlette app's `state`.

One `FleetState` per app (`app.state.fleet`): the accepted key, the active scenario with
its per-endpoint RNGs and counters and the load balancer's RNG (reset whenever a scenario is
loaded), the generation
counter, and the request log (one entry per HTTP request, the newest `MAX_LOG_ENTRIES`,
served by `GET /_fleet/requests`). `log_entry` is the shape of one log entry.
"""

from __future__ import annotations

import random
import time
import zlib
from typing import Any

from fleet.behaviour import EndpointState, Plan
from fleet.scenario import Scenario

MAX_LOG_ENTRIES = 10_000


class FleetState:
    """The running scenario, per-endpoint RNGs/counters and the request log."""

    def __init__(self, scenario: Scenario, key: str) -> None:
        self.key = key
        self.log: list[dict[str, Any]] = []
        self.load(scenario)

    def load(self, scenario: Scenario) -> None:
        """Serve `scenario` from now on, with fresh RNGs and counters (the log is kept)."""
        self.scenario = scenario
        self.seq = 0
        self.balance_rng = random.Random(f"balance|{scenario.seed}")  # ModelSpec.load_balance
        self.endpoints = {
            (m.id, e.tag): EndpointState(scenario.seed, m.id, e.tag)
            for m in scenario.models
            for e in m.endpoints
        }

    def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append `entry` to the request log (a long demo must not grow it without bound);
        returns it, so the reply can fill in its outcome later."""
        self.log.append(entry)
        if len(self.log) > MAX_LOG_ENTRIES:
            del self.log[: len(self.log) - MAX_LOG_ENTRIES]
        return entry

    def next_generation_id(self, model_id: str, tag: str) -> str:
        """A generation id like OpenRouter's: a counter and a hash of the serving route."""
        self.seq += 1
        return f"gen-{self.seq:06d}-{zlib.crc32(f'{model_id}|{tag}'.encode()):08x}"

    def describe(self) -> dict[str, Any]:
        """The active scenario as JSON, with each endpoint's scripted TTFT scaled."""
        data = self.scenario.model_dump(mode="json")
        scale = self.scenario.time_scale
        for model, spec in zip(data["models"], self.scenario.models, strict=True):
            for ep, e in zip(model["endpoints"], spec.endpoints, strict=True):
                slow = [f.ttft_s for f in e.faults if f.kind == "slow_first_token"]
                ep["scripted_ttft_s"] = round(e.timing.ttft_s * scale, 6)
                ep["scripted_slow_ttft_s"] = round(slow[0] * scale, 6) if slow else None
        return data


def log_entry(
    body: Any,
    status: int,
    plan: Plan | None,
    stream: bool = False,
    attempts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One request-log entry; `outcome` is filled in when the reply ends."""
    return {
        "ts": time.time(),
        "model": body.get("model") if isinstance(body, dict) else None,
        "tag": plan.endpoint.tag if plan else None,
        "provider_name": plan.served_as if plan else None,
        "status": status,
        "stream": stream,
        "locale": plan.locale if plan else None,
        "scripted_ttft_s": round(plan.delay_s, 6) if plan else None,
        "fault": plan.fault if plan else None,
        "defect": plan.defect if plan else None,
        "attempts": attempts or [],
        "outcome": None,
        "body": body,
    }
