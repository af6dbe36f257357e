"""The OpenRouter wire protocol, in one place for the probes, the router and the fleet.

    text         the one function where upstream bytes become strings of ours: the key is
                 scrubbed (whole, as a bearer header, or any 8+ character fragment), then the
                 string is cut
    jsonio       JSON decoding that is total and bounded (depth, size, big integers, NaN)
    errors       `ErrorInfo` and the error envelope `{"error": {code, message, metadata}}` in
                 both metadata dialects; building envelopes for servers of ours
    retry_after  `Retry-After` in delta-seconds or an HTTP date
    sse          Server-Sent Events framing: an incremental, bounded parser and the encoder
    chunks       the fields of a completion chunk or body: the provider field and usage
    auth         the bearer token of an Authorization header, compared in constant time

Pure: no I/O and no clock (`now` is a parameter). Imports only `ground`.
"""
