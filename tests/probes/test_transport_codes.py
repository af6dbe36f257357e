"""One vocabulary for transport failures (`wire.transport.TransportCode`): the probe client
translates httpx's exceptions through one table (`probes.client._HTTPX`), and the test
below fails when httpx exports an exception class without a row of its own."""

from __future__ import annotations

import httpx
import pytest

from probes import client
from probes.transport import classify_transport
from probes.types import Contract, OutcomeStatus, Transcript
from wire.transport import TransportCode

EXPORTED = sorted(
    (
        getattr(httpx, name)
        for name in httpx.__all__
        if isinstance(getattr(httpx, name), type)
        and issubclass(getattr(httpx, name), BaseException)
    ),
    key=lambda t: t.__name__,
)


def test_httpx_exports_exceptions() -> None:
    """The walk below sees httpx's tree (a rename upstream cannot make it vacuous)."""
    assert {httpx.ConnectTimeout, httpx.ReadError, httpx.RemoteProtocolError} <= set(EXPORTED)


@pytest.mark.parametrize("exc_type", EXPORTED, ids=lambda t: t.__name__)
def test_every_httpx_exception_has_its_own_row(exc_type: type[BaseException]) -> None:
    """By exact type: a parent's row would silently classify a new subclass."""
    assert exc_type in client._HTTPX, f"httpx.{exc_type.__name__} has no row in probes.client"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx.ConnectTimeout("t"), TransportCode.CONNECT_TIMEOUT),
        (httpx.ReadTimeout("t"), TransportCode.READ_TIMEOUT),
        (httpx.PoolTimeout("t"), TransportCode.TIMEOUT),
        (httpx.ConnectError("refused"), TransportCode.CONNECT_ERROR),
        (httpx.ReadError("reset"), TransportCode.CONNECTION_RESET),
        (httpx.RemoteProtocolError("peer closed"), TransportCode.REMOTE_PROTOCOL_ERROR),
        (httpx.DecodingError("gzip"), TransportCode.DECODING_ERROR),
        (httpx.UnsupportedProtocol("ftp"), TransportCode.UNSUPPORTED_PROTOCOL),
        (KeyError("not httpx"), None),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_translation_is_most_specific_first(exc: BaseException, code: TransportCode) -> None:
    assert client.transport_code(exc) is code


def test_a_subclass_without_a_row_takes_its_nearest_ancestor_s() -> None:
    """A class httpx might add later is classified by its parent until it gets a row."""

    class NewReadTimeout(httpx.ReadTimeout):
        pass

    assert client.transport_code(NewReadTimeout("t")) is TransportCode.READ_TIMEOUT


@pytest.mark.parametrize("code", list(TransportCode), ids=str)
def test_every_code_freezes_the_probe(code: TransportCode) -> None:
    """Whatever cut a probe off, it is transport (Q1), never a quality verdict; the reason
    is the code's value."""
    t = Transcript(
        request_id="r",
        model_id="a/m",
        tag="p/fp8",
        pinned_provider="P",
        contract=Contract.LANGUAGE,
        http_status=200,
        served_by="P",
        text="Olá, tudo bem?",
        transport_error=code,
    )
    judged = classify_transport(t)
    assert judged is not None and judged.status is OutcomeStatus.TRANSPORT
    assert judged.reason == code.value and judged.evidence["transport_error"] == code.value


def test_a_connection_failure_wins_over_the_status_it_never_sent() -> None:
    """A connection that broke says nothing trustworthy, not even its HTTP status; a reply
    our bounds cut keeps its status (an HTTP 500 is still the provider's 5xx)."""
    base = {
        "request_id": "r",
        "model_id": "a/m",
        "tag": "p/fp8",
        "pinned_provider": "P",
        "contract": Contract.LANGUAGE,
        "http_status": 500,
    }
    reset = classify_transport(Transcript(**base, transport_error=TransportCode.CONNECTION_RESET))
    cut = classify_transport(Transcript(**base, transport_error=TransportCode.STREAM_CUT))
    assert reset is not None and reset.reason == "connection_reset"
    assert cut is not None and cut.reason == "http_500"
