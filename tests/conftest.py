"""Shared pytest set-up. Fixtures live in tests/fixtures/<topic>.py, one file
per topic, and are registered here as plugins so each topic owns its file."""

import os

# Tests never read a developer's .env or real keys.
os.environ.pop("OPENROUTER_API_KEY", None)
os.environ.pop("CANARY_API_KEY", None)

pytest_plugins: list[str] = [
    "tests.fixtures.prefect",
    "tests.fixtures.fleet",
    "tests.fixtures.routing",
    "tests.fixtures.canary_env",
    "tests.fixtures.hostile",
    # add "tests.fixtures.<topic>" here (one line each)
]
