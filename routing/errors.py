"""Failure classes of the router (SPEC R2), drawn as a tree in the manner of httpx:

    RoutingError                     every explicit failure the router returns
     ├── PermanentRequestError       bad key, bad parameters, unsupported feature: stop at once
     ├── RouteIncompatibleError      context too large, image unsupported, schema mode missing:
     │                               only a compatible route may be tried
     ├── TransientTransportError     connection reset, DNS, timeout: retry within the budget
     ├── CapacityError               429, overloaded, selected 5xx: honour Retry-After or fall back
     ├── InvalidResponseError        HTTP success that fails acceptance (malformed JSON, unknown
     │                               tool, missing field, truncation): reject, then fall back
     ├── AmbiguousCompletionError    connection lost after the provider may have accepted:
     │                               deduplicate (workload policy) before any replay
     ├── DeadlineExhaustedError      no attempt fits the remaining end-to-end deadline
     └── NoCompatibleRouteError      the contract filter left no route
          └── CircuitOpenError       every compatible route is suppressed by an open circuit

`FailureClass` names the same classes as data (what the pure classifier returns,
what events and metrics carry). Each exception knows its class, an HTTP status
for the gateway's OpenAI-shaped error, and the operation id it belongs to.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ground.errors import CanaryError


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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.operation_id = operation_id
        self.status_code = status_code  # upstream status, when there was one
        self.reason = reason  # short machine-readable cause, e.g. "context_length_exceeded"
        self.attempts = attempts
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


class CapacityError(RoutingError):
    failure_class = FailureClass.CAPACITY
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


def _concrete_errors() -> dict[FailureClass, type[RoutingError]]:
    """Each failure class's exception, read off the classes themselves (one per class)."""
    found: dict[FailureClass, type[RoutingError]] = {}
    todo: list[type[RoutingError]] = [RoutingError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls is not RoutingError:
            if cls.failure_class in found:
                raise TypeError(
                    f"two errors for {cls.failure_class}: {found[cls.failure_class]}, {cls}"
                )
            found[cls.failure_class] = cls
    return found


ERROR_FOR_CLASS: dict[FailureClass, type[RoutingError]] = _concrete_errors()


class ContractError(CanaryError, ValueError):
    """A contract, schema or route file that cannot be loaded; names file and field."""
