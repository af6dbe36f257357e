"""One error root (`ground.errors.CanaryError`) and one table from its classes to the CLI's
exit codes (`canary.cli.errors.exit_codes`): every class of the tree has a row of its own
or below a named ancestor, never only the root's catch-all."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest
import typer

from canary.cli.errors import BAD_INPUT, RUNTIME, cli_errors, exit_code_for, exit_codes
from ground.errors import CanaryError

PACKAGES = ["ground", "wire", "probes", "quarantine", "routing", "reports", "flows", "canary", "deployments", "fleet"]  # fmt: skip


def _modules() -> list[ModuleType]:
    """Every module of our packages (not `__main__`, which runs the CLI)."""
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if not info.name.endswith("__main__"):
                found.append(importlib.import_module(info.name))
    return found


def _tree() -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    todo: list[type[BaseException]] = [CanaryError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.split(".")[0] in PACKAGES and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_error_of_ours_derives_from_the_root() -> None:
    """No class named *Error in our packages stands outside the root's tree (foreign bases
    such as ValueError are mixed in, never the root)."""
    modules = _modules()
    ours = _tree()
    outside = [
        f"{value.__module__}.{value.__qualname__}"
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__
        and value not in ours
        and value is not CanaryError
    ]
    assert outside == []


def test_every_class_of_the_tree_has_a_row_before_the_catch_all() -> None:
    """The first row matching each class is not the root's own row."""
    _modules()
    table = exit_codes()
    rows = [cls for cls, _ in table]
    root_row = rows.index(CanaryError)
    unnamed = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _tree()
        if next(i for i, row in enumerate(rows) if issubclass(cls, row)) == root_row
    )
    assert unnamed == []
    assert {code for _, code in table} == {BAD_INPUT, RUNTIME}


def test_the_table_decides_by_class_most_specific_first() -> None:
    """A subclass row wins over its ancestor's; a foreign error is not ours."""
    from canary.cli.preflight import BadInput, Unavailable
    from probes.errors import DiscoveryError, InvalidModelIdError
    from quarantine.errors import LeaseLostError, NotSuspendedError

    assert exit_code_for(BadInput("x")) == (BAD_INPUT, "x")
    assert exit_code_for(Unavailable("down")) == (RUNTIME, "down")
    assert exit_code_for(InvalidModelIdError("no slash"))[0] == BAD_INPUT  # type: ignore[index]
    assert exit_code_for(DiscoveryError("a/b", "gone"))[0] == RUNTIME  # type: ignore[index]
    # a quarantine error that is also a ValueError stays ours: runtime, not bad input
    assert exit_code_for(NotSuspendedError("not suspended")) == (RUNTIME, "not suspended")
    assert exit_code_for(LeaseLostError("lost")) == (RUNTIME, "lost")
    assert exit_code_for(KeyError("foreign")) is None


@pytest.mark.parametrize(
    ("error", "code"), [(CanaryError("ours"), RUNTIME), (ValueError("bad"), BAD_INPUT)]
)
def test_a_command_ends_with_the_table_s_code_and_one_line(
    error: Exception, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cli_errors` turns the raised error into `error: ...` on stderr and its exit code."""

    @cli_errors
    def command() -> None:
        raise error

    with pytest.raises(typer.Exit) as ended:
        command()
    assert ended.value.exit_code == code
    assert capsys.readouterr().err == f"error: {error}\n"


def test_the_exit_codes_are_defined_once() -> None:
    """Only `canary/cli/errors.py` assigns BAD_INPUT and RUNTIME (the preflight checks in
    `canary/cli/preflight.py` are decided by the table, not by codes of their own)."""
    root = Path(__file__).resolve().parents[2]
    found = sorted(
        f"{path.relative_to(root)}: {target.id}"
        for package in PACKAGES
        for path in (root / package).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id in {"BAD_INPUT", "RUNTIME"}
    )
    assert found == ["canary/cli/errors.py: BAD_INPUT", "canary/cli/errors.py: RUNTIME"]
