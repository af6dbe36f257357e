"""Mid-stream continuation (SPEC R15), its decisions as pure functions of data.

A stream the gateway already released to its client that then fails in its transport (a
cut, a stall, garbage: `continuable`, a function of the failure's classification, whatever
exception or end signalled it) is continued on another route of the workload that accepts
an assistant prefill (`Route.prefill`): the conversation is sent again with the text the
client already has as the last, assistant, message (`prefilled`), and only what follows
goes out (`PrefixStrip` drops a repeat of the text already sent). The whole stitched reply
is accepted as one (`stitched`). `why_not` says why a failed stream may not be continued
(the workload's `midstream: error`, a failure of the content rather than the transport,
nothing sent yet, a tool call under way); the router then ends the stream with the in-band
error of the original cause, as it does when no prefill-capable route is left or the one
tried refused the prefill.

    why_not(contract, failure, reason, sent, completion) -> None | why
    prefill_routes(pool, refused) -> the routes that take a prefill (less those whose upstream
                                  refused one lately)
    refused_prefill(failure) -> a continuation attempt's failure says its route refused it
    prefilled(body, sent) -> the upstream body of a continuation
    PrefixStrip(sent).feed(piece) / .end() -> the continuation without a repeated prefix
    stitched(text, completion) -> the whole reply of a continued stream
    continuation_reason(cause) / continued_cause(fallback_reason)
                                  the fallback reason a continuation attempt is recorded
                                  with (`midstream_continue:<cause>`), and its cause back
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from routing.contracts import Contract
from routing.errors import FailureClass
from routing.response import Completion
from routing.routes import Route

F = FailureClass

# the fallback reason of a continuation attempt: PREFIX + the cause of the cut it took over
CONTINUE_PREFIX = "midstream_continue:"


def continuation_reason(cause: str) -> str:
    """The fallback reason a continuation of a stream cut by `cause` is recorded with."""
    return f"{CONTINUE_PREFIX}{cause}"


def continued_cause(fallback_reason: str | None) -> str | None:
    """The cause of the cut a mid-stream continuation took over (`stream_cut` of
    `midstream_continue:stream_cut`); None for an attempt that is not a continuation."""
    if fallback_reason is None or not fallback_reason.startswith(CONTINUE_PREFIX):
        return None
    return fallback_reason.removeprefix(CONTINUE_PREFIX) or "unknown"


# invalid responses that are the transport's failure: what came was good, the rest garbage
_GARBLED = frozenset({"malformed_stream", "decoding_error"})


def continuable(failure: FailureClass | None, reason: str) -> bool:
    """Whether a released stream's failure is one a continuation can rescue: its transport
    broke after output (an ambiguous end: a cut, a reset, a stall, a read timeout) or turned
    to garbage; not a rejection of what it said, nor the request's deadline."""
    if failure is F.AMBIGUOUS:
        return True
    return failure is F.INVALID_RESPONSE and reason in _GARBLED


def why_not(
    contract: Contract,
    failure: FailureClass | None,
    reason: str,
    sent: str,
    completion: Completion,
) -> str | None:
    """Why the released stream that failed with (`failure`, `reason`) after the client got
    `sent` may not be continued; None when it may (a route is still to be found)."""
    if not contract.continues_midstream:
        return "workload_midstream_error"
    if not continuable(failure, reason):
        return "not_a_transport_failure"
    if not sent.strip():
        return "nothing_sent"
    if completion.tool_calls:
        return "tool_call_under_way"
    return None


def prefill_routes(pool: list[Route], refused: Collection[str] = ()) -> list[Route]:
    """The routes of `pool` that declare they accept an assistant prefill, less the ids in
    `refused` (routes whose upstream refused one lately: `refused_prefill`)."""
    return [r for r in pool if r.prefill is True and r.id not in refused]


def refused_prefill(failure: FailureClass | None) -> bool:
    """Whether a continuation attempt's failure says its route refused the prefill: the
    upstream refused the request itself (a 400 or 422: `permanent_request`), which differs
    from the one it served only by the prefill."""
    return failure is F.PERMANENT


def prefilled(body: dict[str, Any], sent: str) -> dict[str, Any]:
    """The upstream body of a continuation: `body` with `sent` as the last, assistant,
    message (a prefill the model continues from)."""
    messages = list(body.get("messages") or [])
    return {**body, "messages": [*messages, {"role": "assistant", "content": sent}]}


class PrefixStrip:
    """A continuation's text without a repeat of `sent`: held while it agrees with `sent` so
    far, the repeat dropped once it repeated all of `sent`, released whole once it goes its
    own way (a continuation that ends while agreeing with a part of `sent` is released)."""

    def __init__(self, sent: str) -> None:
        self.sent = sent
        self.held = ""
        self.deciding = bool(sent)
        self.repeated = False  # the continuation began with all of `sent` (dropped)

    def feed(self, piece: str) -> str:
        if not self.deciding:
            return piece
        self.held += piece
        if len(self.held) >= len(self.sent):
            self.deciding = False
            if self.held.startswith(self.sent):
                self.repeated = True
                return self.held[len(self.sent) :]
            return self.held
        if self.sent.startswith(self.held):
            return ""
        self.deciding = False
        return self.held

    def end(self) -> str:
        """What is still held when the continuation ended."""
        if not self.deciding:
            return ""
        self.deciding = False
        return self.held


def stitched(text: str, completion: Completion) -> Completion:
    """The whole reply of a continued stream: `text`, what the client got of every attempt
    (each part once), with the continuation's end (finish reason, [DONE], in-band error,
    usage: the cut attempt reported none)."""
    return replace(completion, content=text, tool_calls=list(completion.tool_calls))
