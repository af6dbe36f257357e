"""Bearer-token parsing and the constant-time key check, written once (wire/auth.py) for the
gateway and the fleet."""

from __future__ import annotations

import pytest

from wire.auth import bearer_token, key_matches


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer gw-key", "gw-key"),
        ("bearer  gw-key  ", "gw-key"),
        ("BEARER gw-key", "gw-key"),
        (None, None),
        ("", None),
        ("Bearer ", None),
        ("Bearer    ", None),
        ("Basic dXNlcjpwdw==", None),
        ("Bearergw-key", None),
        ("gw-key", None),
    ],
)
def test_the_bearer_token_of_an_authorization_header(header: str | None, token: str | None) -> None:
    """The scheme in any case, the token stripped; any other shape has no token."""
    assert bearer_token(header) == token


def test_a_key_matches_only_one_of_the_keys_exactly() -> None:
    """A key of the list matches; a prefix, an extension, another case or an empty key never."""
    keys = ["gw-key-one", "gw-key-two", ""]
    assert key_matches("gw-key-two", keys)
    assert not key_matches("gw-key", keys)
    assert not key_matches("gw-key-one1", keys)
    assert not key_matches("GW-KEY-ONE", keys)
    assert not key_matches("", keys)
    assert not key_matches("gw-key-one", [])
