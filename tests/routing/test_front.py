"""The routing package's front (`routing/__init__.py`) names its parts lazily (issue 26): a
round that reads the gateway's production evidence imports routing.passive_ledger, and the
front must not load the gateway with it. Every name it exports still resolves, to the very
object its module defines, and an unknown name is an AttributeError."""

from __future__ import annotations

import importlib

import pytest

import routing


def test_every_exported_name_resolves_to_its_modules_object() -> None:
    """Each name of `routing.__all__` is in the lazy map and is the object of the module the
    map names (a name added to `__all__` without its module fails here)."""
    lazy = routing._LAZY
    assert set(lazy) == set(routing.__all__)
    for name, module in lazy.items():
        assert getattr(routing, name) is getattr(importlib.import_module(module), name), name
    from routing import Router, build_router

    assert Router.__module__ == "routing.router" and build_router.__module__ == "routing.compose"


def test_an_unknown_name_is_an_attribute_error_and_submodules_still_import() -> None:
    """`routing.nothing` raises AttributeError; `from routing import upstream` is the module."""
    with pytest.raises(AttributeError, match="nothing"):
        _ = routing.nothing
    from routing import upstream

    assert upstream.__name__ == "routing.upstream"
