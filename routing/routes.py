"""Vetted routes and route groups (SPEC R1, R6): `routes.yaml` in the contract directory.

    version: 1
    routes:
      - id: llama-70b                        # our name for the route
        model: meta-llama/llama-3.3-70b-instruct
        provider: {order: [deepinfra]}       # optional OpenRouter provider object
        modalities: [text]
        context_length: 131072
        tools: true
        schema_modes: [json_schema]          # empty: no structured output
        model_class: general
        pricing: {prompt: 0.00000023, completion: 0.0000004}   # USD per token
        latency_p50_ms: 400                  # prior for ranking (and for budgets: R13)
        regions: [us, eu]                    # optional; matched against contract constraints.regions
        prefill: true                        # accepts an assistant prefill (R15); unknown: no
    groups:
      text: [llama-70b, qwen-72b]
      schema: [qwen-72b, llama-70b]
      tools: [...]
      vision: [gemini-flash]
      long_context: [gemini-flash]

A contract names the groups its routes come from (`route_groups`); a route
that is a fine fallback for text is not thereby one for tools or images.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from routing.contracts import Contract, format_errors, load_contracts, read_yaml
from routing.errors import ContractError
from routing.schemas import SchemaRegistry, check_schema


class RoutePricing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: float = Field(default=0.0, ge=0)
    completion: float = Field(default=0.0, ge=0)
    request: float = Field(default=0.0, ge=0)


class Route(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    model: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")
    provider: dict[str, Any] = Field(default_factory=dict)
    modalities: tuple[Literal["text", "image"], ...] = ("text",)
    context_length: int = Field(gt=0)
    max_output_tokens: int = Field(default=4096, gt=0)
    tools: bool = False
    schema_modes: tuple[Literal["json_schema", "json_object"], ...] = ()
    model_class: str = "general"
    pricing: RoutePricing = RoutePricing()
    latency_p50_ms: float = Field(default=1000.0, ge=0)
    regions: tuple[str, ...] = ()  # where it is served; matched against contract constraints
    # whether the route continues a conversation ending in an assistant message (a prefill):
    # only such a route continues a released stream that failed (R15, routing/continuation.py);
    # None: unknown (OpenRouter's listing does not say), treated as no
    prefill: bool | None = None

    @model_validator(mode="after")
    def _provider_keys(self) -> Route:
        allowed = {"order", "only", "ignore", "allow_fallbacks", "require_parameters",
                   "quantizations", "sort", "max_price", "data_collection"}  # fmt: skip
        unknown = set(self.provider) - allowed
        if unknown:
            raise ValueError(f"unknown provider keys {sorted(unknown)}")
        return self

    def estimate_cost(self, input_tokens: int, output_tokens: int) -> float:
        p = self.pricing
        return p.request + p.prompt * input_tokens + p.completion * output_tokens


class RouteTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(ge=1)
    routes: tuple[Route, ...] = Field(min_length=1)
    groups: dict[str, tuple[str, ...]] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> RouteTable:
        ids = [r.id for r in self.routes]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate route ids: {dupes}")
        for name, members in self.groups.items():
            missing = sorted(set(members) - set(ids))
            if missing:
                raise ValueError(f"group {name!r} names unknown routes {missing}")
        return self

    def route(self, route_id: str) -> Route:
        return next(r for r in self.routes if r.id == route_id)

    def for_groups(self, groups: tuple[str, ...]) -> list[Route]:
        seen: dict[str, Route] = {}
        for group in groups:
            for route_id in self.groups.get(group, ()):
                seen.setdefault(route_id, self.route(route_id))
        return list(seen.values())


def parse_routes(data: Any, source: str = "routes.yaml") -> RouteTable:
    if not isinstance(data, dict):
        raise ContractError(f"{source}: must be a mapping")
    try:
        return RouteTable.model_validate(data)
    except ValidationError as exc:
        raise ContractError(format_errors(exc, source)) from None


@dataclass(frozen=True)
class Catalog:
    """Everything the router needs to know statically: contracts, schemas, routes."""

    contracts: dict[str, Contract]
    schemas: SchemaRegistry
    routes: RouteTable

    def __post_init__(self) -> None:
        for contract in self.contracts.values():
            source = f"{contract.workload}.yaml"
            schema_id = contract.structured_output.schema_id
            if schema_id and schema_id not in self.schemas:
                raise ContractError(
                    f"{source}: structured_output.schema_id: unknown schema {schema_id!r};"
                    f" known: {sorted(self.schemas)}"
                )
            for group in contract.route_groups:
                if group not in self.routes.groups:
                    raise ContractError(
                        f"{source}: route_groups: unknown group {group!r};"
                        f" known: {sorted(self.routes.groups)}"
                    )
            for i, tool in enumerate(contract.tools):
                check_schema(tool.parameters, f"{source}: tools.{i}.parameters")

    def contract(self, workload: str) -> Contract:
        try:
            return self.contracts[workload]
        except KeyError:
            raise KeyError(workload) from None

    def workload_models(self) -> list[str]:
        """The models of every workload's routes (what a request of one may reach)."""
        return sorted(
            {
                r.model
                for c in self.contracts.values()
                for r in self.routes.for_groups(c.route_groups)
            }
        )


DEFAULT_DIR = Path(__file__).parent / "contracts"


def load_catalog(directory: Path | str | None = None) -> Catalog:
    """Load and cross-check a contract directory; raise ContractError naming file and field."""
    root = Path(directory) if directory is not None else DEFAULT_DIR
    if not root.is_dir():
        raise ContractError(f"{root}: contract directory not found")
    routes_file = root / "routes.yaml"
    if not routes_file.is_file():
        raise ContractError(f"{root}: missing routes.yaml")
    return Catalog(
        contracts=load_contracts(root),
        schemas=SchemaRegistry.load(root / "schemas"),
        routes=parse_routes(read_yaml(routes_file)),
    )
