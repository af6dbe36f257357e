"""The model and endpoint listings in OpenRouter's shape (checked in tests against the
official SDK's `components.ListEndpointsResponse`).

`latency_last_30m` is in milliseconds (time to first token, from the endpoint's scripted
`timing.ttft_s`), `throughput_last_30m` in tokens per second (from `timing.tokens_per_s`:
p50 is the scripted rate, the higher percentiles slower, as OpenRouter reports them);
neither is scaled by the scenario's `time_scale`. `supports_tool_choice` follows
`supported_parameters`: every variant when both `tools` and `tool_choice` are there,
only `auto` with `tools` alone, none without `tools`."""

from __future__ import annotations

from typing import Any

from fleet.scenario import EndpointSpec, ModelSpec


def model_json(m: ModelSpec) -> dict[str, Any]:
    """One entry of `GET /models`."""
    cheapest = min(m.endpoints, key=lambda e: float(e.pricing.prompt) + float(e.pricing.completion))
    return {
        "id": m.id,
        "canonical_slug": m.id,
        "name": m.name or m.id,
        "created": m.created,
        "description": m.description,
        "context_length": m.context_length,
        "architecture": architecture(m),
        "pricing": cheapest.pricing.model_dump(),
        "top_provider": {
            "context_length": m.context_length,
            "max_completion_tokens": cheapest.max_completion_tokens,
            "is_moderated": False,
        },
        "supported_parameters": sorted({p for e in m.endpoints for p in e.supported_parameters}),
        "default_parameters": None,
        "per_request_limits": None,
        "supported_voices": None,
        "links": {"details": f"/api/v1/models/{m.id}/endpoints"},
    }


def models_json(models: list[ModelSpec]) -> dict[str, Any]:
    """The body of `GET /models`: every model, one page."""
    return {
        "data": [model_json(m) for m in models],
        "links": {"next": None},
        "total_count": len(models),
    }


def endpoints_json(m: ModelSpec) -> dict[str, Any]:
    """The body of `GET /models/{author}/{slug}/endpoints`."""
    return {
        "data": {
            "id": m.id,
            "name": m.name or m.id,
            "created": m.created,
            "description": m.description,
            "architecture": architecture(m),
            "endpoints": [endpoint_json(m, e) for e in m.endpoints],
        }
    }


def architecture(m: ModelSpec) -> dict[str, Any]:
    inputs = list(m.input_modalities)
    return {
        "input_modalities": inputs,
        "output_modalities": ["text"],
        "modality": "+".join(inputs) + "->text",
        "tokenizer": m.tokenizer,
        "instruct_type": None,
    }


def endpoint_json(m: ModelSpec, e: EndpointSpec) -> dict[str, Any]:
    t = e.timing
    tps = t.tokens_per_s
    return {
        "name": f"{e.provider_name} | {m.id}",
        "model_id": m.id,
        "model_name": m.name or m.id,
        "provider_name": e.provider_name,
        "tag": e.tag,
        "quantization": e.quantization,
        "status": e.status,
        "context_length": e.context_length,
        "max_completion_tokens": e.max_completion_tokens,
        "max_prompt_tokens": None,
        "pricing": e.pricing.model_dump(),
        "supported_parameters": list(e.supported_parameters),
        "uptime_last_5m": e.uptime_last_30m,
        "uptime_last_30m": e.uptime_last_30m,
        "uptime_last_1d": e.uptime_last_30m,
        "latency_last_30m": {
            "p50": round(t.ttft_s * 1000, 1),
            "p75": round(t.ttft_s * 1300, 1),
            "p90": round(t.ttft_s * 1800, 1),
            "p99": round(t.ttft_s * 3200, 1),
        },
        "throughput_last_30m": {
            "p50": tps,
            "p75": round(tps * 0.85, 1),
            "p90": round(tps * 0.65, 1),
            "p99": round(tps * 0.35, 1),
        },
        "supports_tool_choice": tool_choice_support(e),
        "native_tools": {},
        "service_tier": e.service_tier,
        "supports_implicit_caching": e.supports_implicit_caching,
        "supports_diarization": False,
    }


def tool_choice_support(e: EndpointSpec) -> dict[str, bool]:
    """Which `tool_choice` values the endpoint honours (OpenRouter's tested variants)."""
    params = set(e.supported_parameters)
    full = {"tools", "tool_choice"} <= params
    return {"auto": "tools" in params, "none": full, "required": full, "function": full}
