"""Bearer-token authentication, once for every server of ours (the gateway, the fleet).

    token = bearer_token(request.headers.get("authorization"))
    if token is None or not key_matches(token, keys): ...  # 401

`bearer_token` reads `Authorization: Bearer <token>` (the scheme in any case, the token
stripped); `key_matches` compares in constant time, so how much of a key a caller guessed
right does not show in the time of the answer. Pure: no I/O; never logs a token.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

_SCHEME = "bearer "


def bearer_token(header_value: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None when the header is
    missing, of another scheme, or carries an empty token."""
    if not header_value or not header_value.lower().startswith(_SCHEME):
        return None
    return header_value[len(_SCHEME) :].strip() or None


def key_matches(given: str, keys: Iterable[str]) -> bool:
    """Whether `given` is one of `keys`, each compared in constant time (an empty key
    never matches)."""
    token = given.encode()
    return any(key and hmac.compare_digest(token, key.encode()) for key in keys)
