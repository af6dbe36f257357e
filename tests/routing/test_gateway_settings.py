"""Gateway settings: client keys are secrets (house rule: secrets never reach reprs or logs)."""

from __future__ import annotations

import pytest

from ground.settings import GatewayConfig, Settings
from routing.gateway import create_app
from tests.fixtures.routing import make_router


def test_gateway_keys_parse_from_csv_and_never_show_in_reprs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CANARY_GATEWAY__KEYS still parses as comma-separated keys, and neither repr nor dump shows them."""
    monkeypatch.setenv("CANARY_GATEWAY__KEYS", "gw-key-one, gw-key-two")
    settings = Settings()
    assert [k.get_secret_value() for k in settings.gateway.keys] == ["gw-key-one", "gw-key-two"]
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert "gw-key-one" not in text and "gw-key-two" not in text


def test_the_gateway_state_never_shows_the_client_keys() -> None:
    """The app's state holds the keys as plain strings for the constant-time check; its repr
    (a log line, a traceback's locals) never shows them."""
    router = make_router("http://127.0.0.1:9/api/v1", "sk-upstream")
    app = create_app(router, GatewayConfig(keys=["gw-key-one", ""]))
    state = app.state.gateway
    assert state.keys == ("gw-key-one",)  # an empty key is never accepted
    assert "gw-key-one" not in repr(state)
