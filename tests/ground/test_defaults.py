"""Every default once: each knob's default lives in its domain's config object in
`ground/settings.py`, and the code takes that object whole. This test reads every knob and
its default from there and fails when a module restates one: a parameter, a dataclass field
or a class attribute named like a knob with a literal default, or a module constant that
spells a knob's default under a knob's name (`ERROR_BODY_MAX_BYTES = 64_000`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from ground.settings import (
    Allowances,
    BreakerConfig,
    BudgetConfig,
    GatewayConfig,
    LedgerConfig,
    PassiveConfig,
    PolicyConfig,
    ProbeConfig,
    RoutingConfig,
    Settings,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["ground", "wire", "probes", "quarantine", "routing", "reports", "flows", "canary", "deployments", "fleet", "bench", "scale"]  # fmt: skip
CONFIGS: dict[str, type[BaseModel]] = {
    "probe": ProbeConfig,
    "policy": PolicyConfig,
    "routing": RoutingConfig,
    "breaker": BreakerConfig,
    "allowances": Allowances,
    "gateway": GatewayConfig,
    "budget": BudgetConfig,
    "ledger": LedgerConfig,
    "passive": PassiveConfig,
}
# the fleet is a world of its own: its knobs are its scenario's, not the canary's
APART = {"fleet"}


def knobs() -> dict[str, object]:
    """Every knob of a domain config -> its default (None and empty lists are not restatable)."""
    found: dict[str, object] = {}
    for prefix, config in CONFIGS.items():
        assert Settings.model_fields[prefix].annotation is config, prefix
        for name, field in config.model_fields.items():
            default = field.get_default(call_default_factory=True)
            if isinstance(default, bool | int | float) and not isinstance(default, bool):
                found[name] = default
                found[f"{prefix}_{name}"] = default  # the flat name of earlier versions
    return found


def _words(name: str) -> frozenset[str]:
    return frozenset(name.lower().split("_")) - {"default", "s", ""}


def _literal(node: ast.expr | None) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value if not isinstance(node.value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        return -value if isinstance(value, int | float) else None
    return None


def _knob_like(name: str, value: object, table: dict[str, object]) -> bool:
    """`name` is a knob's, or a part of a knob's name holding that knob's default (`ttl_s`
    for `ignore_ttl_s`)."""
    if value is None:
        return False
    if name in table:
        return True
    mine = _words(name)
    return bool(mine) and any(v == value and mine <= _words(k) for k, v in table.items())


def restatements(source: str, where: str, table: dict[str, object]) -> list[str]:
    """Places in `source` that restate a knob's default (see the module docstring)."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(
                zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)
            )
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
            for arg, default in pairs:
                if _knob_like(arg.arg, _literal(default), table):
                    found.append(f"{where}:{node.lineno} parameter {arg.arg}={_literal(default)}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    if _knob_like(name, _literal(item.value), table):
                        found.append(
                            f"{where}:{item.lineno} {node.name}.{name}={_literal(item.value)}"
                        )
    for node in tree.body:  # module constants named after a knob, holding its default
        targets = [t for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target]
        value = _literal(getattr(node, "value", None))
        for target in targets:
            if not target.id.isupper() or value is None:
                continue
            mine = _words(target.id)
            for knob, knob_default in table.items():
                theirs = _words(knob)
                if (
                    knob_default == value
                    and len(mine & theirs) >= 2
                    and (mine <= theirs or theirs <= mine)
                ):
                    found.append(f"{where}:{node.lineno} {target.id} = {value} (knob {knob})")
                    break
    return found


def product_sources() -> list[Path]:
    return sorted(
        p
        for name in PACKAGES
        if name not in APART
        for p in (ROOT / name).rglob("*.py")
        if p != ROOT / "ground" / "settings.py"
    )


def test_the_configs_hold_the_spec_numbers() -> None:
    """The defaults read from the one place are SPEC's (C3, C9, R5, R9, Q2/Q4/Q6)."""
    s = Settings(_env_file=None)
    assert s.probe.ttft_threshold_s == 10.0 and s.probe.start_samples == 6
    assert s.probe.confirmations == 2  # C8: 2 of 3
    assert (s.policy.fail_rounds, s.policy.floor, s.policy.ladder_days) == (2, 2, (1.0, 3.0, 7.0))
    assert (s.routing.backoff_base_s, s.routing.backoff_cap_s, s.routing.same_route_retries) == (
        0.1,
        2.0,
        1,
    )
    assert s.breaker.consecutive_failures == 5 and s.allowances.required_s == pytest.approx(0.75)


def test_no_module_restates_a_default() -> None:
    table = knobs()
    found = [
        hit
        for path in product_sources()
        for hit in restatements(path.read_text("utf-8"), str(path.relative_to(ROOT)), table)
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "def run(client, *, start_samples: int = 2): ...",
        "async def probe(self, *, max_tokens: int = 300): ...",
        "class Policy:\n    backoff_base_s: float = 0.1\n",
        "ERROR_BODY_MAX_BYTES = 64_000\n",
        "DEFAULT_MAX_TOKENS = 300\n",
        "def serve(app, header_timeout_s: float = 10.0): ...",
        "def __init__(self, load, *, ttl_s: float = 2.0): ...",
    ],
)
def test_the_check_catches_each_form_of_restating(source: str) -> None:
    """The check is not vacuous: each form of restating a default is found."""
    assert restatements(source, "m.py", knobs()) != []


@pytest.mark.parametrize(
    "source",
    [
        "def run(client, config: ProbeConfig | None = None): ...",
        "def probe(self, *, max_tokens: int | None = None): ...",
        "MIN_ANOMALOUS = 2\n",
        "HEAD_MAX_FIELDS = 128\n",
    ],
)
def test_the_check_leaves_what_is_not_a_default_alone(source: str) -> None:
    assert restatements(source, "m.py", knobs()) == []
