"""Which endpoints may serve a request, in which order: OpenRouter's
`provider` object (`only`, `ignore`, `order`, `allow_fallbacks`,
`require_parameters`, `quantizations`, `sort`, `max_price`) plus capability
filters (context length, image input). Pure functions of data."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fleet.scenario import EndpointSpec, ModelSpec

KNOWN_PARAMETERS: frozenset[str] = frozenset(
    {
        "temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty",
        "repetition_penalty", "min_p", "top_a", "seed", "max_tokens", "logit_bias",
        "logprobs", "top_logprobs", "response_format", "stop", "tools", "tool_choice",
        "reasoning", "include_reasoning", "parallel_tool_calls", "verbosity",
    }
)  # fmt: skip


class MaxPrice(BaseModel):
    model_config = ConfigDict(extra="allow")
    prompt: float | None = None
    completion: float | None = None


class ProviderPrefs(BaseModel):
    """The request's `provider` object (unknown keys are ignored, as upstream)."""

    model_config = ConfigDict(extra="allow")
    order: list[str] | None = None
    only: list[str] | None = None
    ignore: list[str] | None = None
    allow_fallbacks: bool = True
    require_parameters: bool = False
    quantizations: list[str] | None = None
    sort: Literal["price", "throughput", "latency"] | None = None
    max_price: MaxPrice | None = None
    data_collection: Literal["allow", "deny"] | None = None


@dataclass(frozen=True)
class NoCandidate:
    status: int
    message: str
    error_type: str
    metadata: dict[str, Any] | None = None


@lru_cache(maxsize=4096)
def _names(tag: str, provider_name: str) -> frozenset[str]:
    return frozenset({tag.lower(), tag.split("/", 1)[0].lower(), provider_name.lower()})


def matches(endpoint: EndpointSpec, slug: str) -> bool:
    """A base slug matches every endpoint of the provider; a full slug one endpoint."""
    return slug.strip().lower() in _names(endpoint.tag, endpoint.provider_name)


def used_parameters(body: dict[str, Any]) -> set[str]:
    return {k for k in body if k in KNOWN_PARAMETERS and body[k] is not None}


def supports(endpoint: EndpointSpec, parameter: str) -> bool:
    params = set(endpoint.supported_parameters)
    if parameter == "response_format":
        return bool(params & {"response_format", "structured_outputs"})
    return parameter in params


def _price(endpoint: EndpointSpec) -> float:
    return _price_of(endpoint.pricing.prompt, endpoint.pricing.completion)


@lru_cache(maxsize=4096)
def _price_of(prompt: str, completion: str) -> float:
    return float(prompt) + float(completion)


def _default_order(endpoints: list[EndpointSpec], sort: str | None) -> list[EndpointSpec]:
    if sort == "throughput":
        return sorted(endpoints, key=lambda e: -e.timing.tokens_per_s)
    if sort == "latency":
        return sorted(endpoints, key=lambda e: e.timing.ttft_s)
    return sorted(endpoints, key=_price)


def candidates(
    model: ModelSpec,
    prefs: ProviderPrefs,
    body: dict[str, Any],
    prompt_tokens: int,
    has_images: bool,
) -> list[EndpointSpec] | NoCandidate:
    """Endpoints to try, in order; or why there is none."""
    if has_images and "image" not in model.input_modalities:
        return NoCandidate(404, "No endpoints found that support image input", "not_found")
    pool = list(model.endpoints)
    if prefs.only is not None:
        pool = [e for e in pool if any(matches(e, s) for s in prefs.only)]
    if prefs.ignore:
        pool = [e for e in pool if not any(matches(e, s) for s in prefs.ignore)]
    if prefs.quantizations:
        wanted = {q.lower() for q in prefs.quantizations}
        pool = [e for e in pool if (e.quantization or "unknown").lower() in wanted]
    if prefs.max_price is not None:
        mp = prefs.max_price
        pool = [
            e
            for e in pool
            if (mp.prompt is None or float(e.pricing.prompt) * 1e6 <= mp.prompt)
            and (mp.completion is None or float(e.pricing.completion) * 1e6 <= mp.completion)
        ]
    if prefs.require_parameters:
        needed = used_parameters(body)
        pool = [e for e in pool if all(supports(e, p) for p in needed)]
    ordered = _default_order(pool, prefs.sort)
    if prefs.order:
        head: list[EndpointSpec] = []
        for slug in prefs.order:
            head.extend(e for e in ordered if matches(e, slug) and e not in head)
        tail = [e for e in ordered if e not in head] if prefs.allow_fallbacks else []
        ordered = head + tail
    if not ordered:
        return NoCandidate(
            404, "No allowed providers are available for the selected model", "not_found"
        )
    fitting = [e for e in ordered if prompt_tokens <= (e.context_length or model.context_length)]
    if not fitting:
        limit = max(e.context_length or model.context_length for e in ordered)
        return NoCandidate(
            400,
            f"This endpoint's maximum context length is {limit} tokens. However, you requested about {prompt_tokens} tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
        )
    return fitting


def balanced(ordered: list[EndpointSpec], rng: random.Random) -> list[EndpointSpec]:
    """OpenRouter's default load balancing over `ordered` (cheapest first): the first one
    drawn with weight 1 / price^2 (a free endpoint counts as the cheapest priced one), the
    others after it in their order, as fallbacks."""
    if len(ordered) < 2:
        return ordered
    prices = [_price(e) for e in ordered]
    positive = [p for p in prices if p > 0]
    low = min(positive) if positive else 1.0
    weights = [1.0 / max(p, low) ** 2 for p in prices]
    first = rng.choices(range(len(ordered)), weights=weights)[0]
    return [ordered[first], *(e for i, e in enumerate(ordered) if i != first)]
