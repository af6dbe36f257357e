"""One vocabulary for transport failures: what went wrong between us and the upstream,
whichever client library we talked through.

The canary's probe client (httpx, `probes/client.py`) and the gateway's upstream client
(aiohttp, `routing/upstream.py`) each translate their library's exceptions into these codes
at their boundary, through one table each with an exhaustive test; nothing above them
compares a library's exception or a bare string. The values are what transcripts, the
ledger, events and metrics carry, so they never change meaning.

    a connection that never was (nothing was sent)
        CONNECT_ERROR         refused, DNS, TLS
        CONNECT_TIMEOUT       no connection within the connect bound (pool wait included)
        INVALID_URL           the configured base URL cannot be requested
        UNSUPPORTED_PROTOCOL  the configured base URL is not http(s)
    a connection that broke (the upstream may have accepted the request)
        READ_TIMEOUT          no byte within the read bound
        TIMEOUT               any other timeout of the client library (write, pool)
        CONNECTION_RESET      the connection broke while the request was sent or read
        REMOTE_PROTOCOL_ERROR the upstream broke HTTP: a malformed or oversized head, a
                              disconnect before the head, a body short of its framing
        PROTOCOL_ERROR        our side of HTTP failed (a local protocol state error)
        DECODING_ERROR        a body that does not decode under its Content-Encoding
        NETWORK_ERROR         any other failure of the client library
    a reply our bounds or framing cut (the canary's probe client)
        STREAM_CUT            the stream ended without `[DONE]` or a finish reason
        TIME_LIMIT            the reply ran past the probe's total time bound
        BYTE_LIMIT            the reply ran past the probe's byte bound
        INVALID_RESPONSE      a reply our readers could not take at all
"""

from __future__ import annotations

from enum import StrEnum


class TransportCode(StrEnum):
    CONNECT_ERROR = "connect_error"
    CONNECT_TIMEOUT = "connect_timeout"
    INVALID_URL = "invalid_url"
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    READ_TIMEOUT = "read_timeout"
    TIMEOUT = "timeout"
    CONNECTION_RESET = "connection_reset"
    REMOTE_PROTOCOL_ERROR = "remote_protocol_error"
    PROTOCOL_ERROR = "protocol_error"
    DECODING_ERROR = "decoding_error"
    NETWORK_ERROR = "network_error"
    STREAM_CUT = "stream_cut"
    TIME_LIMIT = "time_limit"
    BYTE_LIMIT = "byte_limit"
    INVALID_RESPONSE = "invalid_response"

    @property
    def before_send(self) -> bool:
        """Nothing can have reached the upstream: no connection was ever made."""
        return self in _BEFORE_SEND

    @property
    def connection_failed(self) -> bool:
        """The connection itself failed (not a reply our bounds or framing cut): nothing
        the upstream said, not even an HTTP status, can be trusted."""
        return self not in _REPLY_CUT


_BEFORE_SEND = frozenset(
    {
        TransportCode.CONNECT_ERROR,
        TransportCode.CONNECT_TIMEOUT,
        TransportCode.INVALID_URL,
        TransportCode.UNSUPPORTED_PROTOCOL,
    }
)

_REPLY_CUT = frozenset(
    {
        TransportCode.DECODING_ERROR,
        TransportCode.STREAM_CUT,
        TransportCode.TIME_LIMIT,
        TransportCode.BYTE_LIMIT,
        TransportCode.INVALID_RESPONSE,
    }
)
