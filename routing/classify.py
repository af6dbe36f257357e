"""One pure classifier (SPEC R2): every failure signal maps to exactly one class.

Signals:
  - an error envelope (`wire.errors.ErrorInfo`): an HTTP status with its envelope, or an
    in-band error chunk after HTTP 200, in OpenRouter's dialect (the kind in
    `metadata.error_type`) or the OpenAI-compatible one (the kind in `error.code`, its
    family in `error.type`), both read through one table (`ERROR_KINDS`);
  - an exception raised while talking to the upstream (our transport errors,
    `routing.errors.UpstreamError`'s tree, into which `routing.upstream` translates its client
    library's; `MalformedStream`; asyncio's timeout);
  - an acceptance rejection (`Rejection`) of an HTTP-successful response.

`early=True` marks a failure that could not have produced billable output
(the connection was never established), the only case the default policy
retries on the same route.

A transport error's reason is its `TransportCode` (`ReadError` -> "connection_reset"), the
vocabulary the canary's probe client shares; any other exception's reason is its class name
in snake case (`MalformedStream` -> "malformed_stream", `TimeoutError` -> "timeout_error").
Pure: no I/O, no clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from routing.errors import (
    ConnectError,
    ConnectTimeout,
    DecodingError,
    FailureClass,
    InvalidURL,
    MalformedStream,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    SlowFirstToken,
    StreamStalled,
    UnsupportedProtocol,
    UpstreamError,
)
from wire.errors import ErrorInfo

F = FailureClass


@dataclass(frozen=True, slots=True)
class Rejection:
    """An acceptance-pipeline verdict against a response (R7)."""

    reason: str  # short code, e.g. "schema_invalid", "finish_length", "unknown_tool"
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Classification:
    failure_class: FailureClass
    reason: str
    early: bool = False  # nothing billable can have happened
    retry_after_s: float | None = None
    # client generation parameters that may have caused this failure (routing/attribution.py):
    # when set, the failure is not counted against the route's circuit
    client_params: tuple[str, ...] = ()
    refusal: bool = False  # a provider's policy refusal (`ErrorKind.refusal`)
    detail: str = ""  # a refusal's reason as the provider gave it (scrubbed, bounded)


@dataclass(frozen=True, slots=True)
class ErrorKind:
    """What an error kind means, whichever dialect named it: its class, the reason it is
    known by (synonyms share one, so a move reads one name: `next_move` raises the context
    the next route needs on `context_length_exceeded`), and whether it is a provider's policy
    refusal (its message is the reason the client is told, and the workload's `on_refusal`
    decides whether another route may try)."""

    failure_class: FailureClass
    reason: str | None = None  # None: the kind's own name
    refusal: bool = False


_REFUSAL = ErrorKind(F.INCOMPATIBLE, refusal=True)

# THE table of error kinds, both dialects: OpenRouter's `metadata.error_type` and the
# OpenAI-compatible `error.code` (a string) / `error.type`. A kind's meaning is more specific
# than its status code; `classify_error` reads `error.code` first (the specific kind, when
# `type` only names its family), then the type. An exhaustive test walks every row in each
# dialect (tests/routing/test_error_dialects.py).
ERROR_KINDS: dict[str, ErrorKind] = {
    "context_length_exceeded": ErrorKind(F.INCOMPATIBLE),
    "context_window_exceeded": ErrorKind(F.INCOMPATIBLE, "context_length_exceeded"),
    "max_tokens_exceeded": ErrorKind(F.INCOMPATIBLE),
    "payload_too_large": ErrorKind(F.INCOMPATIBLE),
    "request_too_large": ErrorKind(F.INCOMPATIBLE, "payload_too_large"),
    "unsupported_modality": ErrorKind(F.INCOMPATIBLE),
    "model_not_found": ErrorKind(F.INCOMPATIBLE),  # the model is unknown on this route
    "not_found_error": ErrorKind(F.INCOMPATIBLE, "model_not_found"),
    "invalid_request": ErrorKind(F.PERMANENT),
    "invalid_request_error": ErrorKind(F.PERMANENT, "invalid_request"),
    "unprocessable": ErrorKind(F.PERMANENT),
    # our own key / credits: the operator's problem, the same on every route
    "authentication": ErrorKind(F.UPSTREAM_CONFIG),
    "authentication_error": ErrorKind(F.UPSTREAM_CONFIG, "authentication"),
    "invalid_api_key": ErrorKind(F.UPSTREAM_CONFIG, "authentication"),
    "payment_required": ErrorKind(F.UPSTREAM_CONFIG),
    "insufficient_quota": ErrorKind(F.UPSTREAM_CONFIG, "payment_required"),
    "billing_hard_limit_reached": ErrorKind(F.UPSTREAM_CONFIG, "payment_required"),
    # a provider's moderation / policy refusal: that route's policy, another may serve (and
    # the canary exists to catch such routes); not counted against a circuit, since a
    # client's prompt could be refused everywhere
    "permission_denied": _REFUSAL,
    "content_policy_violation": _REFUSAL,
    "content_filter": ErrorKind(F.INCOMPATIBLE, "content_policy_violation", refusal=True),
    "refusal": _REFUSAL,
    "permission_error": ErrorKind(F.INCOMPATIBLE),  # this key may not use this model here
    "rate_limit_exceeded": ErrorKind(F.CAPACITY),
    "rate_limit_error": ErrorKind(F.CAPACITY, "rate_limit_exceeded"),
    "provider_overloaded": ErrorKind(F.CAPACITY),
    "overloaded_error": ErrorKind(F.CAPACITY, "provider_overloaded"),
    "provider_unavailable": ErrorKind(F.CAPACITY),
    "service_unavailable": ErrorKind(F.CAPACITY, "provider_unavailable"),
    "server": ErrorKind(F.CAPACITY),
    "server_error": ErrorKind(F.CAPACITY, "server"),
    "api_error": ErrorKind(F.CAPACITY, "server"),
    "timeout": ErrorKind(F.TRANSIENT),
}

REFUSAL_TEXT_CHARS = 300  # the most of a provider's refusal text a client's error quotes

_STATUSES: dict[int, FailureClass] = {
    400: F.PERMANENT,
    401: F.UPSTREAM_CONFIG,
    402: F.UPSTREAM_CONFIG,
    403: F.INCOMPATIBLE,  # moderation / guardrail of this provider
    404: F.INCOMPATIBLE,  # model unknown here / no allowed provider / modality unsupported
    408: F.TRANSIENT,
    413: F.INCOMPATIBLE,
    422: F.PERMANENT,
    429: F.CAPACITY,
    500: F.CAPACITY,
    502: F.CAPACITY,
    503: F.CAPACITY,
    504: F.TRANSIENT,
}

# Exceptions, most specific first; `None` = depends on whether output had started. The
# upstream's transport failures arrive in our own vocabulary (`routing.errors`' tree, into
# which `routing.upstream` translates its client library's). A test walks every
# `UpstreamError` class and fails unless each one has its own row (by exact type: a
# catch-all parent row would silently classify a new subclass).
_EXCEPTIONS: tuple[tuple[type[BaseException], FailureClass | None, bool], ...] = (
    (ConnectTimeout, F.TRANSIENT, True),
    (ConnectError, F.TRANSIENT, True),
    (UnsupportedProtocol, F.PERMANENT, True),
    (InvalidURL, F.PERMANENT, True),
    (ReadTimeout, None, False),
    (ReadError, None, False),
    (RemoteProtocolError, None, False),
    (DecodingError, F.INVALID_RESPONSE, False),
    (UpstreamError, None, False),
    (MalformedStream, F.INVALID_RESPONSE, False),
    (SlowFirstToken, F.SLOW_FIRST_TOKEN, False),  # our first-token cut: the route's (R13)
    (StreamStalled, None, False),  # our stall cut (after output: ambiguous)
    (TimeoutError, None, False),  # asyncio.timeout() cut the attempt to the budget
    (asyncio.IncompleteReadError, None, False),
    (ConnectionError, None, False),
    (OSError, F.TRANSIENT, False),  # DNS / socket errors that escaped the translation
)


MAPPED_EXCEPTIONS: frozenset[type[BaseException]] = frozenset(t for t, _, _ in _EXCEPTIONS)


def classify_error(info: ErrorInfo) -> Classification:
    """An error envelope (HTTP status or in-band chunk), either dialect -> its class: the
    first of its kinds (`error.code`, then the type) that `ERROR_KINDS` knows, else its
    status."""
    named = [k.lower() for k in (info.error_code, info.error_type) if k]
    known = [k for k in named if k in ERROR_KINDS]
    kind = ERROR_KINDS[known[0]] if known else None
    if kind is not None:
        cls, reason = kind.failure_class, kind.reason or known[0]
    else:
        code = info.code
        cls = _by_status(info)
        reason = named[0] if named else f"http_{code}" if code is not None else "error"
    if info.in_band and cls in (F.PERMANENT, F.INCOMPATIBLE):
        # the request was accepted and started generating; the failure is the route's
        cls = F.INVALID_RESPONSE
    refusal = kind is not None and kind.refusal
    return Classification(
        cls, reason, early=False, retry_after_s=info.retry_after_s, refusal=refusal,
        detail=_bounded(info.message) if refusal else "",
    )  # fmt: skip


def _by_status(info: ErrorInfo) -> FailureClass:
    """The class of an error whose kind the table does not know: by its status."""
    code = info.code
    if code in _STATUSES:
        return _STATUSES[code]
    if code is not None and 400 <= code < 500:
        return F.PERMANENT
    if code is not None and code >= 500:
        return F.CAPACITY
    if info.in_band:
        return F.CAPACITY  # provider died mid-generation without a code
    return F.INVALID_RESPONSE


def _bounded(text: str) -> str:
    """A provider's text (scrubbed already, `wire.errors.parse_error`) at most
    `REFUSAL_TEXT_CHARS` long, a cut one marked as cut."""
    text = " ".join(text.split())
    if len(text) <= REFUSAL_TEXT_CHARS:
        return text
    return text[: REFUSAL_TEXT_CHARS - 1].rstrip() + "…"


def provider_said(c: Classification) -> str:
    """What a client's error adds of the provider's own words: a refusal's reason."""
    return f"; the provider said: {c.detail}" if c.detail else ""


def classify_exception(exc: BaseException, *, output_started: bool) -> Classification:
    """An exception from the upstream call -> its class.

    A read failure before any output byte is transient (the provider never
    answered); the same failure after output started is ambiguous: the
    provider may have completed and billed the generation.
    """
    for exc_type, cls, early in _EXCEPTIONS:
        if isinstance(exc, exc_type):
            reason = exc.code.value if isinstance(exc, UpstreamError) else _reason_name(exc)
            if cls is None:
                cls = F.AMBIGUOUS if output_started else F.TRANSIENT
            return Classification(cls, reason, early=early and not output_started)
    raise TypeError(f"unclassified failure type {type(exc).__name__}; add it to routing.classify")


# read timeouts: we stopped waiting for a reply the upstream may have accepted
_READ_TIMEOUTS = frozenset({"read_timeout", "timeout_error", "slow_first_token", "stream_stalled"})


def with_side_effects(c: Classification) -> Classification:
    """`c` on a workload whose tools have side effects (`ToolSpec.side_effect`): a read
    timeout after the request was sent (not early: the upstream may have accepted it) is an
    ambiguous completion there, never replayed without the tool store's dedupe (R2, R8);
    elsewhere it stays what it was."""
    if c.early or c.reason not in _READ_TIMEOUTS:
        return c
    if c.failure_class not in (F.TRANSIENT, F.SLOW_FIRST_TOKEN):
        return c
    return Classification(F.AMBIGUOUS, c.reason, retry_after_s=c.retry_after_s)


def classify_rejection(rejection: Rejection) -> Classification:
    """An acceptance rejection is always an invalid successful response."""
    return Classification(F.INVALID_RESPONSE, rejection.reason)


def classify(
    signal: ErrorInfo | BaseException | Rejection, *, output_started: bool = False
) -> Classification:
    """The one entry point: any failure signal -> exactly one `Classification`."""
    if isinstance(signal, ErrorInfo):
        return classify_error(signal)
    if isinstance(signal, Rejection):
        return classify_rejection(signal)
    return classify_exception(signal, output_started=output_started)


def _reason_name(exc: BaseException) -> str:
    name = type(exc).__name__
    out = [name[0].lower()]
    for ch in name[1:]:
        out.append(f"_{ch.lower()}" if ch.isupper() else ch)
    return "".join(out)
