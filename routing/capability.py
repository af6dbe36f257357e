"""Capability fallback (SPEC R6): filter routes by the contract and the request,
then rank the survivors by health, latency and cost. Pure.

    candidates = routes
      .filter(modalities)  .filter(context >= estimated input + output)
      .filter(tools)       .filter(schema mode)   .filter(model class)
      .filter(estimated cost <= remaining cost budget)
      .filter(not suppressed: open circuit)
    ranked = sort by (-health, latency, cost)

The quarantine's `provider.ignore` is not a route filter: it is passed on
every upstream request (the aggregator skips those endpoints).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from routing.contracts import Contract
from routing.routes import Route

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 800
DEFAULT_OUTPUT_TOKENS = 512


@dataclass(frozen=True)
class Needs:
    """What one request needs from a route, derived from contract + request body."""

    modalities: frozenset[str]
    input_tokens: int
    output_tokens: int
    tools: bool
    schema_mode: str | None
    min_context: int = 0  # raised after a route reported context_length_exceeded


def estimate_needs(contract: Contract, body: dict[str, Any]) -> Needs:
    """Estimate input tokens (chars/4 + a flat count per image) and required capabilities."""
    chars = 0
    images = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "image_url":
                    images += 1
                elif isinstance(part.get("text"), str):
                    chars += len(part["text"])
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    modalities = {"text"} | ({"image"} if images else set())
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    output = (
        int(max_tokens) if isinstance(max_tokens, int) and max_tokens > 0 else DEFAULT_OUTPUT_TOKENS
    )
    return Needs(
        modalities=frozenset(modalities),
        input_tokens=chars // CHARS_PER_TOKEN + 1 + images * IMAGE_TOKENS,
        output_tokens=output,
        tools=contract.requires_tools or bool(body.get("tools")),
        schema_mode="json_schema" if contract.structured_output.required else None,
    )


def contract_misfit(contract: Contract, needs: Needs) -> str | None:
    """Why the request itself is outside the contract (a permanent request failure, never
    a route's): input modalities the workload does not accept, or too much input."""
    extra = needs.modalities - set(contract.modalities)
    if extra:
        return (
            f"modality: the request carries {sorted(extra)} but workload {contract.workload!r}"
            f" accepts only {sorted(contract.modalities)}"
        )
    if needs.input_tokens > contract.max_input_tokens:
        return (
            f"input_exceeds_contract: estimated input of {needs.input_tokens} tokens exceeds"
            f" the contract's {contract.max_input_tokens}"
        )
    return None


@dataclass(frozen=True)
class RouteHealth:
    success_rate: float = 1.0
    latency_ms: float | None = None


@dataclass
class Selection:
    ranked: list[Route]
    dropped: dict[str, str] = field(default_factory=dict)  # route id -> why


def _why_not(
    route: Route, contract: Contract, needs: Needs, remaining_cost_usd: float
) -> str | None:
    if not needs.modalities <= set(route.modalities):
        return "modality"
    if needs.input_tokens > contract.max_input_tokens:
        return "input_exceeds_contract"
    if route.context_length < needs.input_tokens + min(
        needs.output_tokens, route.max_output_tokens
    ):
        return "context_too_small"
    if route.context_length <= needs.min_context:
        return "context_too_small"
    if needs.tools and not route.tools:
        return "no_tools"
    if needs.schema_mode and needs.schema_mode not in route.schema_modes:
        return "no_schema_mode"
    if route.model_class not in contract.allowed_model_classes:
        return "model_class"
    wanted = contract.constraints.regions
    if wanted and not set(wanted) & set(route.regions):
        return "region"
    if route.estimate_cost(needs.input_tokens, needs.output_tokens) > remaining_cost_usd:
        return "cost"
    return None


def select_routes(
    routes: list[Route],
    contract: Contract,
    needs: Needs,
    *,
    remaining_cost_usd: float,
    suppressed: frozenset[str] = frozenset(),
    health: dict[str, RouteHealth] | None = None,
) -> Selection:
    """Filter by capability, then rank by (health desc, latency asc, cost asc)."""
    health = health or {}
    kept: list[Route] = []
    dropped: dict[str, str] = {}
    for route in routes:
        why = _why_not(route, contract, needs, remaining_cost_usd)
        if why is None and route.id in suppressed:
            why = "circuit_open"
        if why is None:
            kept.append(route)
        else:
            dropped[route.id] = why

    def key(route: Route) -> tuple[float, float, float]:
        h = health.get(route.id, RouteHealth())
        latency = h.latency_ms if h.latency_ms is not None else route.latency_p50_ms
        return (
            -round(h.success_rate, 1),
            latency,
            route.estimate_cost(needs.input_tokens, needs.output_tokens),
        )

    kept.sort(key=key)
    return Selection(ranked=kept, dropped=dropped)
