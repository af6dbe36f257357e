"""Transport vs quality: the first question about any transcript (pure).

A transcript is *transport* when the provider could not be judged: no connection
or no response headers in time, a reset, HTTP 408 / 429 / 5xx, a stream cut
without `[DONE]` (including our own time and byte limits), or an in-band error
chunk with a 408/429/5xx code, or `finish_reason: "error"` with no error detail. HTTP 401/402 and the 404 "no allowed providers"
say nothing about the provider's quality either (our key, our credits, the
listing changed), so they are transport too. A `served_by` that differs from the
pinned provider is `misrouted` and takes precedence: its text is someone else's
evidence. A 200 with content but no `provider` field at all cannot be attributed to
the pinned endpoint either: it is `inconclusive` (`provider_unverified`), never a
pass and never a fail (C2: the serving provider is recorded and checked).
"""

from __future__ import annotations

from probes.types import Contract, Outcome, OutcomeStatus, Transcript

TRANSPORT_HTTP = frozenset({401, 402, 404, 408, 429})


def _is_transport_code(code: int | None) -> bool:
    return code is not None and (code in (408, 429) or code >= 500)


def _evidence(t: Transcript) -> dict[str, object]:
    ev: dict[str, object] = {"http_status": t.http_status, "request_id": t.request_id}
    if t.error is not None:
        ev["error_code"] = t.error.code
        ev["error_type"] = t.error.error_type
        ev["error_message"] = t.error.message[:200]
        if t.error.retry_after_s is not None:
            ev["retry_after_s"] = t.error.retry_after_s
    if t.transport_error:
        ev["transport_error"] = t.transport_error.value
    if t.served_by is not None:
        ev["served_by"] = t.served_by
    return ev


def outcome(
    t: Transcript, contract: Contract, status: OutcomeStatus, reason: str, **evidence: object
) -> Outcome:
    """An Outcome for transcript `t` carrying the transcript's identifying facts."""
    return Outcome(
        contract=contract,
        status=status,
        reason=reason,
        tag=t.tag,
        locale=t.locale,
        ttft_s=t.ttft_s,
        evidence={**_evidence(t), **evidence},
    )


def classify_transport(t: Transcript, contract: Contract | None = None) -> Outcome | None:
    """A misrouted or transport Outcome when `t` cannot be judged for quality, else None."""
    c = contract or t.contract
    if t.misrouted:
        return outcome(t, c, OutcomeStatus.MISROUTED, "misrouted", pinned=t.pinned_provider)
    if t.transport_error is not None and t.transport_error.connection_failed:
        return outcome(t, c, OutcomeStatus.TRANSPORT, t.transport_error.value)
    status = t.http_status
    if status is not None and status != 200:
        if status in TRANSPORT_HTTP or status >= 500:
            return outcome(t, c, OutcomeStatus.TRANSPORT, f"http_{status}")
        return None
    if t.error is not None and t.error.in_band and _is_transport_code(t.error.code):
        return outcome(t, c, OutcomeStatus.TRANSPORT, f"in_band_{t.error.code}")
    if t.error is None and (t.finish_reason or "").lower() == "error":
        return outcome(t, c, OutcomeStatus.TRANSPORT, "finish_error")  # an error with no detail
    if t.transport_error is not None:  # a reply cut: stream_cut, time_limit, byte_limit, ...
        return outcome(t, c, OutcomeStatus.TRANSPORT, t.transport_error.value)
    if status == 200 and not t.done and not t.gave_up_waiting and t.error is None:
        return outcome(t, c, OutcomeStatus.TRANSPORT, "stream_cut")
    if t.provider_unverified:
        return outcome(t, c, OutcomeStatus.INCONCLUSIVE, "provider_unverified")
    return None


def unjudgeable(t: Transcript, contract: Contract, silent: str) -> Outcome | None:
    """The outcome of a reply no contract can judge for quality, else None: transport or
    misrouted (`classify_transport`), nothing within the first-token bar (`silent`, the
    contract's name for it), any other HTTP status, an in-band error."""
    transport = classify_transport(t, contract)
    if transport is not None:
        return transport
    if t.gave_up_waiting:
        return outcome(t, contract, OutcomeStatus.INCONCLUSIVE, silent)
    if t.http_status != 200:
        return outcome(t, contract, OutcomeStatus.INCONCLUSIVE, f"http_{t.http_status}")
    if t.error is not None:
        return outcome(t, contract, OutcomeStatus.INCONCLUSIVE, "in_band_error")
    return None
