"""The errors of the router and of its edges, drawn as trees in the manner of httpx.

The failure classes of the router (SPEC R2):

    RoutingError                     every explicit failure the router returns
     ├── PermanentRequestError       bad key, bad parameters, unsupported feature: stop at once
     ├── RouteIncompatibleError      context too large, image unsupported, schema mode missing:
     │                               only a compatible route may be tried
     ├── TransientTransportError     connection reset, DNS, timeout: retry within the budget
     │    └── SlowFirstTokenError    no content within the attempt's first-token budget (R13):
     │                               a route-level outcome, falls back
     ├── CapacityError               429, overloaded, selected 5xx: honour Retry-After or fall back
 │    └── QuarantineNotLoadedError  no provider.ignore list of the route's model yet (R14):
 │                               refused (503), never routed without the quarantine
     ├── InvalidResponseError        HTTP success that fails acceptance (malformed JSON, unknown
     │                               tool, missing field, truncation): reject, then fall back
     ├── AmbiguousCompletionError    connection lost after the provider may have accepted:
     │                               deduplicate (workload policy) before any replay
     ├── DeadlineExhaustedError      no attempt fits the remaining end-to-end deadline
     ├── NoCompatibleRouteError      the contract filter left no route
     │    └── CircuitOpenError       every compatible route is suppressed by an open circuit
     ├── UpstreamMisconfiguredError  the upstream refused OUR key or credits (401, 402)
     ├── ToolFailedError             a tool ran and reported failure (stored, never re-run)
     └── ExecutionPendingError       another caller runs this tool execution (routing/tools.py)

`FailureClass` names the same classes as data (what the pure classifier returns,
what events and metrics carry). Each exception knows its class, an HTTP status
for the gateway's OpenAI-shaped error, and the operation id it belongs to. A class
*owns* its failure class when it declares `failure_class` itself: `ERROR_FOR_CLASS`
(the exception the router raises for a classified failure) holds exactly one owner per
`FailureClass`. The tool errors declare none: they are raised by the tool store
(`routing/tools.py`), never built from a classification, and carry their base's class.

The upstream's transport failures (`routing/upstream.py` translates aiohttp's into these at
its boundary, so `routing.classify` never sees a client library's exception):

    UpstreamError                 a transport failure talking to the upstream
     ├── ConnectError             refused, DNS, TLS: nothing was sent
     ├── ConnectTimeout           no connection within the connect budget (pool wait included)
     ├── ReadTimeout              no byte within the read timeout
     ├── ReadError                the connection broke while sending or reading
     ├── RemoteProtocolError      the upstream broke HTTP: a malformed or oversized head, a
     │                            disconnect before the head, a body short of its framing
     ├── DecodingError            a body that does not decode under its Content-Encoding
     ├── InvalidURL               the configured base URL cannot be requested
     └── UnsupportedProtocol      the base URL is not http(s)
    MalformedStream               an SSE line that is not JSON, a line or reply over its cap:
                                  an invalid successful response, not a transport failure
    SlowFirstToken                our cut: no content within the attempt's first-token
                                  budget (R13): the route's slow first token
    StreamStalled                 our cut: the stream started, then no byte within the stall
                                  timeout, before anything was released (R13)

Each transport error carries its `wire.transport.TransportCode` (`code`), the vocabulary
the canary's probe client shares; the code's value is the failure's reason
(`ReadError` -> "connection_reset"). A `MalformedStream`'s reason is "malformed_stream", a
`SlowFirstToken`'s "slow_first_token", a `StreamStalled`'s "stream_stalled".

A client's request body the gateway refuses (`routing/gateway.py` maps each to a status):

    BodyTooLarge                  over the gateway's body limit (413)
    BodyTooSlow                   not fully arrived within the body timeout (408)

Every class here derives from `ground.errors.CanaryError`; `ContractError` (a contract,
schema or route file that cannot be loaded) too. Pure: nothing here does I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from ground.errors import CanaryError
from wire.transport import TransportCode


class FailureClass(StrEnum):
    PERMANENT = "permanent_request"
    INCOMPATIBLE = "route_incompatible"
    TRANSIENT = "transient_transport"
    CAPACITY = "capacity"
    INVALID_RESPONSE = "invalid_response"
    AMBIGUOUS = "ambiguous_completion"
    DEADLINE = "deadline_exhausted"
    NO_ROUTE = "no_compatible_route"
    CIRCUIT_OPEN = "circuit_open"
    UPSTREAM_CONFIG = "upstream_misconfigured"  # our upstream key / credits (401, 402)
    SLOW_FIRST_TOKEN = "slow_first_token"  # no content within the first-token budget (R13)

    @property
    def counts_against_route(self) -> bool:
        """Only the route's own faults feed circuit breakers (never a client's bad request)."""
        return self in _ROUTE_FAULTS


_ROUTE_FAULTS = frozenset(
    {
        FailureClass.TRANSIENT,
        FailureClass.CAPACITY,
        FailureClass.INVALID_RESPONSE,
        FailureClass.AMBIGUOUS,
        FailureClass.SLOW_FIRST_TOKEN,
    }
)


class RoutingError(CanaryError):
    """Base of every explicit router failure."""

    failure_class: FailureClass = FailureClass.PERMANENT
    http_status: int = 502

    def __init__(
        self,
        message: str,
        *,
        operation_id: str | None = None,
        status_code: int | None = None,
        reason: str | None = None,
        attempts: int = 0,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.operation_id = operation_id
        self.status_code = status_code  # upstream status, when there was one
        self.reason = reason  # short machine-readable cause, e.g. "context_length_exceeded"
        self.attempts = attempts
        self.param = param  # the client's parameter at fault (OpenAI's `param`), when one is
        self.attempt_events: list[Any] = []  # the router's AttemptEvents, for callers and tests


class PermanentRequestError(RoutingError):
    failure_class = FailureClass.PERMANENT
    http_status = 400


class RouteIncompatibleError(RoutingError):
    failure_class = FailureClass.INCOMPATIBLE
    http_status = 422


class TransientTransportError(RoutingError):
    failure_class = FailureClass.TRANSIENT
    http_status = 502


class SlowFirstTokenError(TransientTransportError):
    """No content within the attempt's first-token budget (R13); the provider is not named
    (nothing came), so the route answers for it."""

    failure_class = FailureClass.SLOW_FIRST_TOKEN
    http_status = 504


class CapacityError(RoutingError):
    failure_class = FailureClass.CAPACITY
    http_status = 503


class QuarantineNotLoadedError(CapacityError):
    """The gateway holds no provider.ignore list of the route's model yet (never fetched,
    nothing persisted; routing/exclusions.py): the request is refused (503, reason
    `quarantine_not_loaded`) rather than routed without the canary's suspensions and the
    operator's runtime exclusions (R14, Q7). Nothing was attempted."""

    http_status = 503


class InvalidResponseError(RoutingError):
    failure_class = FailureClass.INVALID_RESPONSE
    http_status = 502


class AmbiguousCompletionError(RoutingError):
    failure_class = FailureClass.AMBIGUOUS
    http_status = 502


class DeadlineExhaustedError(RoutingError):
    failure_class = FailureClass.DEADLINE
    http_status = 504


class NoCompatibleRouteError(RoutingError):
    failure_class = FailureClass.NO_ROUTE
    http_status = 422


class CircuitOpenError(NoCompatibleRouteError):
    failure_class = FailureClass.CIRCUIT_OPEN
    http_status = 503


class UpstreamMisconfiguredError(RoutingError):
    """The upstream rejected OUR credentials or credits: an operator problem, the same for
    every route (never counted against one), reported as a bad gateway, not a bad request."""

    failure_class = FailureClass.UPSTREAM_CONFIG
    http_status = 502


class ToolFailedError(RoutingError):
    """The tool ran and reported failure; the stored failure is returned, never re-run."""


class ExecutionPendingError(RoutingError):
    """Another caller is running this execution and did not finish within the wait."""


def _concrete_errors() -> dict[FailureClass, type[RoutingError]]:
    """Each failure class's exception, read off the classes themselves: the class below
    `RoutingError` that declares the failure class (see the module docstring). Raises when
    two classes declare one, or a failure class has no exception."""
    found: dict[FailureClass, type[RoutingError]] = {}
    todo: list[type[RoutingError]] = [RoutingError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls is RoutingError or "failure_class" not in vars(cls):
            continue
        if cls.failure_class in found:
            raise TypeError(
                f"two errors for {cls.failure_class}: {found[cls.failure_class]}, {cls}"
            )
        found[cls.failure_class] = cls
    missing = set(FailureClass) - set(found)
    if missing:
        raise TypeError(f"no error declares {sorted(missing)}")
    return found


ERROR_FOR_CLASS: dict[FailureClass, type[RoutingError]] = _concrete_errors()


class ContractError(CanaryError, ValueError):
    """A contract, schema or route file that cannot be loaded; names file and field."""


# ---- the upstream's transport failures ----------------------------------------------------


class UpstreamError(CanaryError):
    """A transport failure talking to the upstream; the message is scrubbed of the key."""

    code: ClassVar[TransportCode] = TransportCode.NETWORK_ERROR  # no translation raises the base


class ConnectError(UpstreamError):
    """The connection could not be established (refused, DNS, TLS): nothing was sent."""

    code = TransportCode.CONNECT_ERROR


class ConnectTimeout(UpstreamError):
    """No connection within the connect budget (the wait for a pooled one included)."""

    code = TransportCode.CONNECT_TIMEOUT


class ReadTimeout(UpstreamError):
    """No byte arrived within the read timeout."""

    code = TransportCode.READ_TIMEOUT


class ReadError(UpstreamError):
    """The connection broke while the request was sent or the reply read."""

    code = TransportCode.CONNECTION_RESET


class RemoteProtocolError(UpstreamError):
    """The upstream broke HTTP: a malformed or oversized head, a disconnect before the head,
    a body cut short of its Content-Length or chunking."""

    code = TransportCode.REMOTE_PROTOCOL_ERROR


class DecodingError(UpstreamError):
    """A body that does not decode under its Content-Encoding."""

    code = TransportCode.DECODING_ERROR


class InvalidURL(UpstreamError):
    """The configured base URL cannot be requested."""

    code = TransportCode.INVALID_URL


class UnsupportedProtocol(UpstreamError):
    """The configured base URL is not http or https."""

    code = TransportCode.UNSUPPORTED_PROTOCOL


class MalformedStream(CanaryError):
    """An SSE data line that is not JSON, or a line or reply over its cap: an invalid
    successful response."""


class SlowFirstToken(CanaryError):
    """Our cut: no content (text or a tool call) within the attempt's first-token budget."""


class StreamStalled(CanaryError):
    """Our cut: the stream had started, then no byte arrived within the stall timeout,
    before anything was released to a client."""


# ---- a client's request body ----------------------------------------------------------------


class BodyTooLarge(CanaryError):
    """A client's request body over the gateway's limit (declared or as read)."""


class BodyTooSlow(CanaryError):
    """A client's request body that did not fully arrive within the body timeout."""
