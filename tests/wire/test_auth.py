"""Bearer-token parsing and the constant-time key check, written once (wire/auth.py) for the
gateway and the fleet: odd headers, non-ASCII tokens, and every key compared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire.auth import bearer_token, key_matches


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer gw-key", "gw-key"),
        ("bearer  gw-key  ", "gw-key"),
        ("BEARER gw-key", "gw-key"),
        ("bEaReR gw-key", "gw-key"),
        ("Bearer \t gw-key \t", "gw-key"),
        ("Bearer gw key", "gw key"),
        ("Bearer clé-ü", "clé-ü"),
        ("Bearer Ã©", "Ã©"),
        (None, None),
        ("", None),
        ("Bearer", None),
        ("bearer", None),
        ("Bearer ", None),
        ("Bearer    ", None),
        ("Bearer \t ", None),
        ("Bearer\tgw-key", None),
        ("Bearergw-key", None),
        (" Bearer gw-key", None),
        ("Béarer gw-key", None),
        ("Basic dXNlcjpwdw==", None),
        ("Token gw-key", None),
        ("gw-key", None),
    ],
)
def test_the_bearer_token_of_an_authorization_header(header: str | None, token: str | None) -> None:
    """The scheme in any case, one space, then any whitespace; the token stripped; any other
    shape (no header, another scheme, a scheme alone or glued to the token) has none."""
    assert bearer_token(header) == token


@given(st.text(alphabet=st.characters(codec="latin-1"), min_size=1).map(str.strip))
def test_any_latin1_token_comes_back_whole(token: str) -> None:
    """Whatever a Latin-1 decoded header carries after `Bearer ` is the token, stripped."""
    assert bearer_token(f"Bearer {token}") == (token or None)


def test_a_key_matches_only_one_of_the_keys_exactly() -> None:
    """A key of the list matches; a prefix, an extension, another case or an empty key never."""
    keys = ["gw-key-one", "gw-key-two", ""]
    assert key_matches("gw-key-two", keys) and key_matches("gw-key-one", keys)
    assert not key_matches("gw-key", keys)
    assert not key_matches("gw-key-one1", keys)
    assert not key_matches("GW-KEY-ONE", keys)
    assert not key_matches("", keys)
    assert not key_matches(None, keys)
    assert not key_matches("gw-key-one", [])


def test_an_empty_key_never_matches() -> None:
    """An empty configured key accepts nothing (not an empty, a blank or a missing token)."""
    for given_key in ["", None, " "]:
        assert not key_matches(given_key, ["", "gw-key"])


def test_non_ascii_tokens_are_compared_as_bytes() -> None:
    """`compare_digest` refuses non-ASCII str: such a token is compared, never an error."""
    assert key_matches("clé-ü", ["gw-key", "clé-ü"])
    assert not key_matches("clé-u", ["clé-ü"])
    assert not key_matches("Ã©", ["é"])  # the Latin-1 reading of é's UTF-8 bytes is not é


def test_every_key_is_compared_even_after_a_match() -> None:
    """No short-circuit: the keys after the matching one are compared too, so the time of
    the answer does not tell which key matched."""
    seen: list[str] = []

    def keys() -> Iterator[str]:
        for key in ["gw-first", "gw-second", "gw-third"]:
            seen.append(key)
            yield key

    assert key_matches("gw-first", keys())
    assert seen == ["gw-first", "gw-second", "gw-third"]
