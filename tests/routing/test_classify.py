"""The one failure classifier (SPEC R2), backoff (R5) and the deadline budget (R4): pure tests."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.types import ErrorInfo
from routing.backoff import full_jitter_delay
from routing.classify import MAPPED_EXCEPTIONS, Rejection, classify
from routing.deadline import Allowances, Deadline
from routing.errors import ERROR_FOR_CLASS, FailureClass, RoutingError
from routing.upstream import MalformedStream
from wire.retry_after import parse_retry_after

F = FailureClass


def _instance(exc_type: type[BaseException]) -> BaseException:
    request = httpx.Request("POST", "http://127.0.0.1/x")
    if issubclass(exc_type, httpx.HTTPStatusError):
        return exc_type("boom", request=request, response=httpx.Response(503, request=request))
    if issubclass(exc_type, httpx.StreamError | httpx.InvalidURL | httpx.CookieConflict):
        try:
            return exc_type()  # type: ignore[call-arg]
        except TypeError:
            return exc_type("boom")  # type: ignore[call-arg]
    return exc_type("boom")  # type: ignore[call-arg]


HTTPX_EXCEPTIONS = sorted(
    (obj for obj in vars(httpx).values() if inspect.isclass(obj) and issubclass(obj, Exception)),
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("exc_type", HTTPX_EXCEPTIONS, ids=lambda c: c.__name__)
def test_r2_every_httpx_exception_maps_to_exactly_one_class(exc_type: type[BaseException]) -> None:
    """Walks every exception class httpx exports: each one classifies (before and after output) (R2)."""
    exc = _instance(exc_type)
    for started in (False, True):
        result = classify(exc, output_started=started)
        assert isinstance(result.failure_class, FailureClass)
        assert result.failure_class in ERROR_FOR_CLASS


@pytest.mark.parametrize("exc_type", HTTPX_EXCEPTIONS, ids=lambda c: c.__name__)
def test_r2_every_httpx_exception_has_its_own_row_in_the_table(
    exc_type: type[BaseException],
) -> None:
    """Each exception class httpx exports is in the classifier's table by exact type, so a new httpx subclass cannot be classified silently by a catch-all parent row (R2)."""
    assert exc_type in MAPPED_EXCEPTIONS


def test_r2_an_unknown_exception_type_is_an_error_not_a_guess() -> None:
    """A failure type nobody mapped raises instead of silently picking a class (R2)."""
    with pytest.raises(TypeError, match="unclassified"):
        classify(KeyError("x"))


@pytest.mark.parametrize(
    ("exc", "started", "expected", "early"),
    [
        (httpx.ConnectError("refused"), False, F.TRANSIENT, True),
        (httpx.ConnectTimeout("slow"), False, F.TRANSIENT, True),
        (httpx.ReadTimeout("slow"), False, F.TRANSIENT, False),
        (httpx.RemoteProtocolError("reset"), False, F.TRANSIENT, False),
        (httpx.RemoteProtocolError("cut"), True, F.AMBIGUOUS, False),
        (httpx.ReadError("cut"), True, F.AMBIGUOUS, False),
        (TimeoutError(), True, F.AMBIGUOUS, False),
        (TimeoutError(), False, F.TRANSIENT, False),
        (MalformedStream("x"), True, F.INVALID_RESPONSE, False),
        (httpx.LocalProtocolError("ours"), False, F.PERMANENT, True),
    ],
)
def test_r2_transport_failures_split_by_whether_output_started(
    exc: BaseException, started: bool, expected: FailureClass, early: bool
) -> None:
    """Before output a broken connection is transient; after output it is ambiguous; only connect failures are early (R2, R5)."""
    result = classify(exc, output_started=started)
    assert (result.failure_class, result.early) == (expected, early)


@pytest.mark.parametrize(
    ("code", "etype", "expected"),
    [
        (400, "invalid_request", F.PERMANENT),
        (400, "context_length_exceeded", F.INCOMPATIBLE),
        (400, None, F.PERMANENT),
        (401, "authentication", F.UPSTREAM_CONFIG),
        (402, None, F.UPSTREAM_CONFIG),
        (402, "payment_required", F.UPSTREAM_CONFIG),
        (403, "permission_denied", F.INCOMPATIBLE),
        (403, None, F.INCOMPATIBLE),
        (400, "content_policy_violation", F.INCOMPATIBLE),
        (400, "refusal", F.INCOMPATIBLE),
        (404, "not_found", F.INCOMPATIBLE),
        (408, None, F.TRANSIENT),
        (413, None, F.INCOMPATIBLE),
        (422, None, F.PERMANENT),
        (429, "rate_limit_exceeded", F.CAPACITY),
        (500, None, F.CAPACITY),
        (502, "provider_unavailable", F.CAPACITY),
        (503, "provider_overloaded", F.CAPACITY),
        (504, None, F.TRANSIENT),
        (418, None, F.PERMANENT),
        (599, None, F.CAPACITY),
    ],
)
def test_r2_status_codes_and_error_types(
    code: int, etype: str | None, expected: FailureClass
) -> None:
    """Every HTTP status / OpenRouter error_type lands in its class (R2)."""
    assert classify(ErrorInfo(code=code, error_type=etype)).failure_class is expected


def test_r2_in_band_error_chunk_and_retry_hint() -> None:
    """An in-band error after 200 is the route's fault; Retry-After travels with a capacity class (R2, R5)."""
    in_band = classify(ErrorInfo(code=502, error_type="provider_unavailable", in_band=True))
    assert in_band.failure_class is F.CAPACITY
    assert classify(ErrorInfo(code=400, in_band=True)).failure_class is F.INVALID_RESPONSE
    assert classify(ErrorInfo(code=429, retry_after_s=3.0)).retry_after_s == 3.0
    assert classify(Rejection("missing_field")).failure_class is F.INVALID_RESPONSE


def test_r2_error_tree_matches_failure_classes() -> None:
    """Each failure class has exactly one exception in the documented tree, all under RoutingError (R2)."""
    assert set(ERROR_FOR_CLASS) == set(FailureClass)
    for cls, exc_type in ERROR_FOR_CLASS.items():
        assert issubclass(exc_type, RoutingError) and exc_type.failure_class is cls
    assert not F.PERMANENT.counts_against_route and not F.INCOMPATIBLE.counts_against_route
    assert F.CAPACITY.counts_against_route


@given(st.integers(0, 40), st.floats(0, 10), st.floats(0, 60), st.floats(0, 0.999999))
def test_r5_full_jitter_stays_within_bounds(
    retry_index: int, base: float, cap: float, u: float
) -> None:
    """delay = random(0, min(cap, base * 2**retry_index)) for every input (R5)."""
    delay = full_jitter_delay(retry_index, base_s=base, cap_s=cap, rand=lambda: u)
    assert 0 <= delay <= min(cap, base * 2.0**retry_index) + 1e-9


def test_r5_retry_after_seconds_and_http_date() -> None:
    """Retry-After parses as delta-seconds or an HTTP date relative to now; junk is ignored (R5)."""
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3", now) == 3.0
    assert parse_retry_after(" 1.5 ", now) == 1.5
    later = format_datetime(datetime(2026, 1, 1, 12, 0, 7, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(later, now) == pytest.approx(7.0)
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("nan", now) is None


def test_r4_no_attempt_starts_without_the_allowances() -> None:
    """An attempt may start only when connect + generation + validation fit; its budget keeps validation back (R4)."""
    allow = Allowances(connect_s=0.2, generation_s=0.5, validation_s=0.1)
    d = Deadline.starting(100.0, 2000, allow)
    assert d.may_start(100.0) and d.may_start(101.19)
    assert not d.may_start(101.21)
    assert not d.may_start(100.0, wait_s=1.3)
    assert d.attempt_budget(101.0).total_s == pytest.approx(0.9)
    assert d.attempt_budget(103.0).total_s == 0.0
    with pytest.raises(ValueError):
        Deadline.starting(0.0, 0, allow)
