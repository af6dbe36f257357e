"""Shared pytest set-up. Fixtures live in tests/fixtures/<topic>.py, one file
per topic, and are registered here as plugins so each topic owns its file.

Tests never read a developer's `.env` or real keys. `load_settings()` (pydantic-settings)
reads `.env` in the working directory, so the session runs in an empty directory of its
own, entered once the session has started and before any test module is collected (some
build settings at import), and the subprocesses the fixtures start inherit it;
`load_settings()` keys its cached instance on the working directory, so nothing built
before the move is handed out after it. `tests/test_no_dotenv.py` proves a `.env` in the
checkout is read neither by the suite nor by its subprocesses.

`make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadscope`). Each
worker is a session of its own: its own Prefect test harness, fleet subprocess, hostile
upstream and empty working directory (entered after xdist started the workers from where
pytest was started, so they read the project's configuration). A module's tests run on one
worker, in order, so a module-scoped fixture (the round world, the tools zoo, the
server-faults server, the copied tree of test_layers) is built once. Session-scoped state
is per worker: a test never relies on what a test of another module left behind."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.pop("OPENROUTER_API_KEY", None)
os.environ.pop("CANARY_API_KEY", None)

pytest_plugins: list[str] = [
    "tests.fixtures.prefect",
    "tests.fixtures.fleet",
    "tests.fixtures.routing",
    "tests.fixtures.canary_env",
    "tests.fixtures.hostile",
    "tests.fixtures.world",
    "tests.fixtures.postgres",
    # add "tests.fixtures.<topic>" here (one line each)
]

_SESSION_CWD = pytest.StashKey[Path]()


@pytest.hookimpl(trylast=True)  # after every plugin has resolved its own paths
def pytest_configure(config: pytest.Config) -> None:
    """What pytest still resolves against the working directory later (`--ignore`,
    `--ignore-glob`) and Hypothesis's example database stay where pytest was started."""
    started = config.invocation_params.dir
    for option in ("ignore", "ignore_glob"):
        given = getattr(config.option, option, None)
        if given:
            setattr(config.option, option, [str(started / path) for path in given])
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(started / ".hypothesis"))


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session) -> Iterator[None]:
    """Enter the session's empty working directory once the session has started (under
    xdist: once the workers were started from where pytest was) and before collection."""
    yield
    cwd = Path(tempfile.mkdtemp(prefix="canary-tests-cwd-"))
    session.config.stash[_SESSION_CWD] = cwd
    os.chdir(cwd)


def pytest_unconfigure(config: pytest.Config) -> None:
    cwd = config.stash.get(_SESSION_CWD, None)
    if cwd is not None:
        os.chdir(config.invocation_params.dir)
        shutil.rmtree(cwd, ignore_errors=True)
