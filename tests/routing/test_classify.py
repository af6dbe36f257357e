"""The one failure classifier (SPEC R2), backoff (R5) and the deadline budget (R4): pure tests."""

from __future__ import annotations

import gc
import inspect
from datetime import UTC, datetime
from email.utils import format_datetime

import aiohttp
import pytest
from aiohttp import http_exceptions
from aiohttp.client_reqrep import ConnectionKey, RequestInfo
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from probes.types import ErrorInfo
from routing import upstream
from routing.backoff import full_jitter_delay
from routing.classify import MAPPED_EXCEPTIONS, Rejection, classify
from routing.deadline import Allowances, Deadline
from routing.errors import (
    ERROR_FOR_CLASS,
    ConnectError,
    ConnectTimeout,
    DecodingError,
    ExecutionPendingError,
    FailureClass,
    InvalidURL,
    MalformedStream,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    RoutingError,
    ToolFailedError,
    UnsupportedProtocol,
    UpstreamError,
    _concrete_errors,
)
from wire.retry_after import parse_retry_after
from wire.text import Scrubber
from wire.transport import TransportCode

F = FailureClass


def _upstream_errors() -> list[type[UpstreamError]]:
    """`UpstreamError` and every class below it, wherever it is defined."""
    found: list[type[UpstreamError]] = []
    todo = [UpstreamError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__name__)


UPSTREAM_ERRORS = _upstream_errors()

# each transport error -> (its class before output, after output, early before output); a
# new class without a row here fails `test_r2_every_upstream_error_classifies_as_written`
EXPECTED: dict[type[UpstreamError], tuple[FailureClass, FailureClass, bool]] = {
    UpstreamError: (F.TRANSIENT, F.AMBIGUOUS, False),
    ConnectError: (F.TRANSIENT, F.TRANSIENT, True),
    ConnectTimeout: (F.TRANSIENT, F.TRANSIENT, True),
    ReadTimeout: (F.TRANSIENT, F.AMBIGUOUS, False),
    ReadError: (F.TRANSIENT, F.AMBIGUOUS, False),
    RemoteProtocolError: (F.TRANSIENT, F.AMBIGUOUS, False),
    DecodingError: (F.INVALID_RESPONSE, F.INVALID_RESPONSE, False),
    InvalidURL: (F.PERMANENT, F.PERMANENT, True),
    UnsupportedProtocol: (F.PERMANENT, F.PERMANENT, True),
}


@pytest.mark.parametrize("exc_type", UPSTREAM_ERRORS, ids=lambda c: c.__name__)
def test_r2_every_upstream_error_classifies_as_written(exc_type: type[UpstreamError]) -> None:
    """Walks every transport error of the upstream's vocabulary: each one lands in the class
    written down for it, before and after output, and its reason is its transport code (R2)."""
    before, after, early = EXPECTED[exc_type]
    first = classify(exc_type("boom"), output_started=False)
    late = classify(exc_type("boom"), output_started=True)
    assert (first.failure_class, late.failure_class) == (before, after)
    assert (first.early, late.early) == (early, False)
    assert first.reason == late.reason == exc_type.code.value


def test_r2_each_transport_code_names_one_upstream_error() -> None:
    """The codes are the probe client's vocabulary: no two upstream errors share one, and a
    read that broke is `connection_reset` (the httpx client's word for it) (R2)."""
    codes = [cls.code for cls in UPSTREAM_ERRORS]
    assert len(set(codes)) == len(codes)
    assert ReadError.code is TransportCode.CONNECTION_RESET
    assert classify(ReadError("reset")).reason == "connection_reset"
    assert classify(MalformedStream("x")).reason == "malformed_stream"


@pytest.mark.parametrize("exc_type", UPSTREAM_ERRORS, ids=lambda c: c.__name__)
def test_r2_every_upstream_error_has_its_own_row_in_the_table(
    exc_type: type[BaseException],
) -> None:
    """Each class of the upstream's vocabulary is in the classifier's table by exact type, so a new subclass cannot be classified silently by a catch-all parent row (R2)."""
    assert exc_type in MAPPED_EXCEPTIONS


def _aiohttp_instance(exc_type: type[BaseException]) -> BaseException:
    """An instance of an aiohttp exception class, built the way aiohttp builds it."""
    key = ConnectionKey("127.0.0.1", 1, False, True, None, None, None)
    url = URL("http://127.0.0.1:1/chat/completions")
    info = RequestInfo(url, "POST", CIMultiDictProxy(CIMultiDict()), url)
    if issubclass(exc_type, aiohttp.ClientConnectorError):
        return exc_type(key, OSError(111, "refused"))
    if issubclass(exc_type, aiohttp.ClientResponseError):
        return exc_type(info, (), status=400, message="bad head")
    if issubclass(exc_type, aiohttp.ServerFingerprintMismatch):
        return exc_type(b"x", b"y", "127.0.0.1", 1)
    if issubclass(exc_type, aiohttp.InvalidURL):
        return exc_type(url)
    if issubclass(exc_type, http_exceptions.HttpProcessingError):
        return exc_type(message="bad")
    return exc_type("boom")


AIOHTTP_EXCEPTIONS = sorted(
    (
        obj
        for module in (aiohttp, http_exceptions)
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Exception)
    ),
    key=lambda c: (c.__module__, c.__name__),
)


@pytest.mark.parametrize("exc_type", AIOHTTP_EXCEPTIONS, ids=lambda c: c.__name__)
def test_r2_every_aiohttp_exception_is_translated_or_named_as_not_ours(
    exc_type: type[BaseException],
) -> None:
    """Walks every exception class aiohttp exports: each one has its own row in the upstream's translation (one of our transport errors, or explicitly none: not raised by a request of ours), and a translated one classifies with a scrubbed message (R2, R10)."""
    walked = [t for t in exc_type.__mro__ if t in upstream._AIOHTTP]
    assert walked, f"aiohttp.{exc_type.__name__} has no row in routing.upstream._AIOHTTP"
    if exc_type.__module__.endswith("http_exceptions"):
        return  # the parser's own: each reaches us wrapped, or through its base's row
    assert walked[0] is exc_type
    if upstream._AIOHTTP[exc_type] is None:
        bare = exc_type.__new__(exc_type)
        assert upstream.translate(bare, Scrubber(None)) is bare  # left to classify_unforeseen
        return
    secret = "sk-or-v1-0123456789abcdef"
    exc = _aiohttp_instance(exc_type)
    exc.args = (*exc.args, f"echo {secret}")
    ours = upstream._AIOHTTP[exc_type]
    assert ours is not None
    mine = upstream.translate(exc, Scrubber(secret))
    assert type(mine) is ours
    assert "0123456789abcdef" not in str(mine)
    assert classify(mine).reason == ours.code.value


def test_r2_a_body_that_does_not_decode_is_an_invalid_response() -> None:
    """A payload error caused by a broken Content-Encoding is a DecodingError (invalid response); a payload cut short is a RemoteProtocolError (R2)."""
    broken = aiohttp.ClientPayloadError("cannot decode")
    broken.__cause__ = http_exceptions.ContentEncodingError("bad gzip")
    cut = aiohttp.ClientPayloadError("not completed")
    cut.__cause__ = http_exceptions.TransferEncodingError("cut")
    assert type(upstream.translate(broken, Scrubber(None))) is DecodingError
    assert type(upstream.translate(cut, Scrubber(None))) is RemoteProtocolError
    c = classify(upstream.translate(broken, Scrubber(None)))
    assert c.failure_class is F.INVALID_RESPONSE and c.reason == "decoding_error"


def test_r2_an_unknown_exception_type_is_an_error_not_a_guess() -> None:
    """A failure type nobody mapped raises instead of silently picking a class (R2)."""
    with pytest.raises(TypeError, match="unclassified"):
        classify(KeyError("x"))


@pytest.mark.parametrize(
    ("exc", "started", "expected", "early"),
    [
        (ConnectError("refused"), False, F.TRANSIENT, True),
        (ConnectTimeout("slow"), False, F.TRANSIENT, True),
        (ReadTimeout("slow"), False, F.TRANSIENT, False),
        (RemoteProtocolError("reset"), False, F.TRANSIENT, False),
        (RemoteProtocolError("cut"), True, F.AMBIGUOUS, False),
        (ReadError("cut"), True, F.AMBIGUOUS, False),
        (TimeoutError(), True, F.AMBIGUOUS, False),
        (TimeoutError(), False, F.TRANSIENT, False),
        (MalformedStream("x"), True, F.INVALID_RESPONSE, False),
        (InvalidURL("ours"), False, F.PERMANENT, True),
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
        assert issubclass(exc_type, RoutingError) and vars(exc_type)["failure_class"] is cls
    assert not F.PERMANENT.counts_against_route and not F.INCOMPATIBLE.counts_against_route
    assert F.CAPACITY.counts_against_route


def test_r2_the_mapping_sees_every_error_of_the_router() -> None:
    """Recomputed once every routing module is loaded (the tool store's errors included), the
    mapping is the one the router uses: no class declared later owns a failure class, and
    the tool errors declare none (R2, R8)."""
    import routing.tools  # noqa: F401  (its errors live in routing.errors)

    assert _concrete_errors() == ERROR_FOR_CLASS
    assert ToolFailedError not in ERROR_FOR_CLASS.values()
    assert ExecutionPendingError not in ERROR_FOR_CLASS.values()


def test_r2_two_owners_of_one_failure_class_are_refused() -> None:
    """A second class declaring a failure class makes the mapping fail loudly (R2)."""

    class SecondCapacityError(RoutingError):
        failure_class = FailureClass.CAPACITY

    try:
        with pytest.raises(TypeError, match="two errors"):
            _concrete_errors()
    finally:
        del SecondCapacityError
        gc.collect()


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
    allow = Allowances(connect_s=0.2, generation_s=0.5, validation_s=0.1, reserve_s=0.0)
    d = Deadline.starting(100.0, 2000, allow)
    assert d.may_start(100.0) and d.may_start(101.19)
    assert not d.may_start(101.21)
    assert not d.may_start(100.0, wait_s=1.3)
    assert d.attempt_budget(101.0).total_s == pytest.approx(0.9)
    assert d.attempt_budget(103.0).total_s == 0.0
    with pytest.raises(ValueError):
        Deadline.starting(0.0, 0, allow)


def test_r13_the_gateway_reserve_is_never_given_to_an_attempt() -> None:
    """The reserve is kept besides the allowances: an attempt needs both to start, and its
    budget leaves both the reserve and its validation allowance (R4, R13)."""
    allow = Allowances(connect_s=0.2, generation_s=0.5, validation_s=0.1, reserve_s=0.25)
    d = Deadline.starting(100.0, 2000, allow)
    assert d.needed_s == pytest.approx(1.05)
    assert d.may_start(100.94) and not d.may_start(100.96)
    assert d.attempt_budget(101.0).total_s == pytest.approx(0.65)
