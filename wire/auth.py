"""Bearer keys, written once for every server of ours (the gateway, the fleet).

    token = bearer_token(request.headers.get("authorization"))
    if not key_matches(token, keys): ...  # 401 (None, no token, never matches)

`bearer_token(value)` is the token of an `Authorization: Bearer <token>` header value, or
None when there is none. It is as tolerant as the two copies it replaces (the fleet's chat
handler and the gateway's `authorised`, which parsed alike): the scheme in any case, any
whitespace between it and the token, surrounding whitespace dropped. Exactly one space
must follow the six letters (`Bearer\\t...` and `Bearer` alone give None), and an empty
token is None, never "".

`key_matches(given, keys)` compares the token with *every* accepted key through
`hmac.compare_digest`, never stopping at the first match, so the time it takes tells
neither which key matched nor how much of one did. An empty key never matches.

Pure: no I/O; never logs a token. Non-ASCII tokens (a header is decoded as Latin-1) are
compared as their UTF-8 bytes, since `compare_digest` refuses non-ASCII strings.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

_SCHEME = "bearer "


def bearer_token(header_value: str | None) -> str | None:
    """The bearer token in an `Authorization` header value, None when there is none."""
    if header_value is None or header_value[: len(_SCHEME)].lower() != _SCHEME:
        return None
    return header_value[len(_SCHEME) :].strip() or None


def key_matches(given: str | None, keys: Iterable[str]) -> bool:
    """Whether `given` is one of `keys`, in time that does not depend on which one."""
    if not given:
        return False
    token = given.encode()
    matched = False
    for key in keys:
        # `&` and `|` without short-circuit: every key is compared, whatever came before
        matched |= bool(key) & hmac.compare_digest(token, key.encode())
    return matched
