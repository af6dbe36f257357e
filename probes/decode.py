"""Provider bytes into the probes' types (pure: no I/O, no clock): the endpoints listing
(`parse_endpoints`) and stream chunks folded into a `Transcript` under construction
(`StreamRecorder`). The protocol itself (envelopes, Retry-After, SSE, usage, key
scrubbing) is `wire/`; the client (probes/client.py) is the thin I/O shell.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from probes.tool_deltas import ToolDeltas
from probes.types import Endpoint, Pricing, Transcript
from wire import jsonio
from wire.chunks import provider_of, usage_of
from wire.errors import parse_error
from wire.text import NO_SECRET, Scrubber, upstream_text, valid_unicode


def _float(value: Any) -> float:
    if value is None or value == "":
        return 0.0
    if isinstance(value, str) and len(value) > 64:
        raise ValueError("a price longer than 64 characters")
    return float(value)


def _status(value: Any) -> int:
    """The endpoint's `status`: an integer (0 when absent); NaN, infinities and 20-digit
    numbers are refused (ValueError)."""
    if value is None:
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"status {value!r} is not a number")
    number = int(value)
    if abs(number) > 1_000_000:
        raise ValueError("status out of range")
    return number


def parse_endpoints(payload: Any, model: str, *, scrub: Scrubber = NO_SECRET) -> list[Endpoint]:
    """`GET /models/{id}/endpoints` body → Endpoints. Raises ValueError naming what is wrong.

    Negative `status` values are kept (degraded endpoints are still listed and probed).
    Every string kept passes through `wire.text` (key scrubbed, cut).
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
        raise ValueError('expected an object with a "data" object')
    data = payload["data"]
    rows = data.get("endpoints")
    if not isinstance(rows, list):
        raise ValueError('"data.endpoints" is missing or not a list')
    model_id = upstream_text(data.get("id") or model, scrub, 200)
    out: list[Endpoint] = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"endpoints[{index}] is not an object")
        try:
            out.append(_endpoint(row, model_id, scrub))
        except KeyError as exc:
            raise ValueError(f"endpoints[{index}] lacks {exc.args[0]!r}") from exc
        except (TypeError, ValidationError, ValueError, AttributeError, OverflowError) as exc:
            first = upstream_text((str(exc).splitlines() or [type(exc).__name__])[0], scrub, 200)
            raise ValueError(
                f"endpoints[{index}] ({upstream_text(row.get('tag'), scrub, 80)!r}): {first}"
            ) from None
    return out


def _endpoint(row: dict[str, Any], model_id: str, scrub: Scrubber) -> Endpoint:
    """One row of the listing; raises KeyError / ValueError / TypeError for a bad one."""

    def text(value: Any, limit: int = 200) -> str:
        return upstream_text(value, scrub, limit)

    tag = row["tag"]
    provider_name = row["provider_name"]
    if not isinstance(tag, str) or not tag or not isinstance(provider_name, str):
        raise ValueError("tag and provider_name must be non-empty strings")
    pricing_raw = row.get("pricing") or {}
    latency = row.get("latency_last_30m") or {}
    params = row.get("supported_parameters") or []
    if not isinstance(params, list):
        raise ValueError("supported_parameters must be a list")
    quantization = row.get("quantization")
    throughput = row.get("throughput_last_30m")
    return Endpoint(
        model_id=text(row.get("model_id") or model_id),
        tag=text(tag),
        provider_name=text(provider_name),
        name=text(row.get("name") or ""),
        quantization=text(quantization, 50) if isinstance(quantization, str) else quantization,
        status=_status(row.get("status", 0)),
        context_length=row.get("context_length"),
        max_completion_tokens=row.get("max_completion_tokens"),
        max_prompt_tokens=row.get("max_prompt_tokens"),
        supported_parameters=tuple(text(p, 100) for p in params[:200]),
        pricing=Pricing(
            prompt=_float(pricing_raw.get("prompt")),
            completion=_float(pricing_raw.get("completion")),
            request=_float(pricing_raw.get("request")),
            image=_float(pricing_raw.get("image")),
        ),
        uptime_last_30m=row.get("uptime_last_30m"),
        latency_p50_ms=latency.get("p50") if isinstance(latency, dict) else None,
        throughput_p50_tps=_p50(throughput),
        tool_choices=_tool_choices(row.get("supports_tool_choice")),
    )


def _p50(value: Any) -> float | None:
    """`p50` of a percentile object when it is a finite number (the listing may say null)."""
    p50 = value.get("p50") if isinstance(value, dict) else None
    if isinstance(p50, bool) or not isinstance(p50, int | float) or not math.isfinite(p50):
        return None
    return float(p50)


_TOOL_CHOICES = ("auto", "none", "required", "function")


def _tool_choices(value: Any) -> tuple[str, ...] | None:
    """The `tool_choice` values `supports_tool_choice` marks true; None when it is absent
    or not an object (then nothing is known and every value is tried)."""
    if not isinstance(value, dict):
        return None
    return tuple(c for c in _TOOL_CHOICES if value.get(c) is True)


class StreamRecorder:
    """Folds decoded stream chunks (`data:` JSON objects) into a Transcript.

    Pure: the caller passes `elapsed_s` (monotonic seconds since the request was
    sent) with each chunk; the first non-empty content delta sets `ttft_s`, the last one
    `last_content_s`. Tool-call deltas are assembled per `index` (`probes.tool_deltas`);
    reasoning (`delta.reasoning`, `reasoning_details`) is counted, never content. The reply's
    `model` is kept as `served_model`.
    """

    def __init__(self, transcript: Transcript, *, scrub: Scrubber = NO_SECRET) -> None:
        self.t = transcript
        self.scrub = scrub
        self._parts: list[str] = []
        self._tools = ToolDeltas()

    @property
    def has_text(self) -> bool:
        return bool(self._parts)

    @property
    def has_output(self) -> bool:
        """Content, reasoning or a tool call arrived: the stream has started (C3)."""
        return self.first_output_s is not None

    @property
    def first_output_s(self) -> float | None:
        return self.t.first_token_s

    def data(self, payload: str, elapsed_s: float) -> None:
        """One SSE `data:` payload (a JSON chunk or `[DONE]`)."""
        if payload.strip() == "[DONE]":
            self.t.done = True
            return
        try:
            chunk = jsonio.loads(payload)
        except ValueError:
            self.t.malformed_lines += 1
            return
        if not isinstance(chunk, dict):
            self.t.malformed_lines += 1
            return
        self.chunk(chunk, elapsed_s)

    def chunk(self, chunk: dict[str, Any], elapsed_s: float) -> None:
        self._identity(chunk)
        if chunk.get("error"):
            self.t.error = parse_error(chunk, in_band=self.t.http_status == 200, scrub=self.scrub)
        usage = usage_of(chunk)
        if usage is not None:
            self.t.usage = self.scrub.deep(usage, limit=200, depth=3)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = choice.get("message")  # a non-streaming body
        if isinstance(delta, dict):
            self._delta(delta, elapsed_s, streamed=isinstance(choice.get("delta"), dict))
        self._finish(choice)

    def _identity(self, chunk: dict[str, Any]) -> None:
        """Who served (`provider`), the generation id and the model named (C2, C12)."""
        provider = provider_of(chunk, self.scrub)
        if provider is not None and (
            self.t.served_by is None or self.t.served_by == self.t.pinned_provider
        ):
            self.t.served_by = provider  # keep the first one that disagrees with the pin
        if self.t.generation_id is None and isinstance(chunk.get("id"), str):
            self.t.generation_id = upstream_text(chunk["id"], self.scrub, 200)  # scrub, then cut
        model = chunk.get("model")
        if self.t.served_model is None and isinstance(model, str) and model:
            self.t.served_model = upstream_text(model, self.scrub, 200)

    def _delta(self, delta: dict[str, Any], elapsed_s: float, *, streamed: bool) -> None:
        content = delta.get("content")
        if isinstance(content, str) and content:
            if not self._parts:
                self.t.ttft_s = elapsed_s
                self.t.first_chunk_chars = len(content)
            self._parts.append(content)
            self.t.last_content_s = elapsed_s
            self.t.content_chunks += 1
        reasoning = reasoning_chars(delta)
        if reasoning:
            self.t.reasoning_chars += reasoning
            if self.t.first_reasoning_s is None:
                self.t.first_reasoning_s = elapsed_s
        calls = delta.get("tool_calls")
        if calls is not None:
            if self.t.first_tool_s is None:
                self.t.first_tool_s = elapsed_s
            self._tools.feed(calls, streamed=streamed)

    def _finish(self, choice: dict[str, Any]) -> None:
        if choice.get("finish_reason") is not None:
            self.t.finish_reason = upstream_text(choice["finish_reason"], self.scrub, 64)
        if choice.get("native_finish_reason") is not None:
            self.t.native_finish_reason = upstream_text(
                choice["native_finish_reason"], self.scrub, 64
            )
        if choice.get("error") and self.t.error is None:
            self.t.error = parse_error(
                {"error": choice["error"]}, in_band=self.t.http_status == 200, scrub=self.scrub
            )

    def finish(self) -> Transcript:
        self.t.text = valid_unicode(self.scrub("".join(self._parts)))  # no lone surrogates
        self.t.tool_calls, self.t.tool_delta_problems = self._tools.assembled(self.scrub)
        return self.t


def reasoning_chars(delta: dict[str, Any]) -> int:
    """Characters of reasoning in one delta: `reasoning` (a string) and the text or summary
    of each `reasoning_details` entry (encrypted entries carry `data`: counted as 1)."""
    total = 0
    reasoning = delta.get("reasoning")
    if isinstance(reasoning, str):
        total += len(reasoning)
    details = delta.get("reasoning_details")
    if isinstance(details, list):
        for item in details[:64]:
            if not isinstance(item, dict):
                continue
            text = item.get("text") or item.get("summary")
            if isinstance(text, str) and text:
                total += 0 if isinstance(reasoning, str) and reasoning else len(text)
            elif item.get("data"):
                total += 1
    return total
