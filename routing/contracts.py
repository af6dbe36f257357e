"""Routing contracts (SPEC R1): one versioned, machine-readable file per workload.

Directory format (`--contracts DIR`, default: the worked examples shipped in
`routing/contracts/`):

    DIR/
      routes.yaml            vetted routes + route groups (see routing.routes)
      schemas/<id>.json      JSON Schemas by id, e.g. schemas/invoice-v3.json
      <workload>.yaml        one contract per workload (fields: `Contract` below)

A contract file, e.g. `invoice_extraction.yaml`:

    workload: invoice_extraction
    version: 3
    modalities: [text, image]
    max_input_tokens: 50000
    requires_tools: false
    structured_output: {required: true, schema_id: invoice-v3, strict: true}
    allowed_model_classes: [document-extraction, general]
    route_groups: [schema]
    max_cost_usd: 0.08
    deadline_ms: 8000
    constraints: {complete_output_required: true, min_output_chars: 2}
    semantic: {validator: invoice, params: {currencies: [USD, EUR], tolerance: 0.01}}

Unknown keys are errors; every error names the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from routing.errors import ContractError

Modality = Literal["text", "image"]
AmbiguousPolicy = Literal["fail", "reconcile", "replay"]
MidstreamPolicy = Literal["continue", "error"]
# a provider's content-policy refusal (routing.classify.ErrorKind.refusal): another route may
# try (`fallback`), or the refusal, with the provider's reason, is the answer (`stop`)
RefusalPolicy = Literal["fallback", "stop"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StructuredOutput(_Strict):
    required: bool = False
    schema_id: str | None = None
    strict: bool = True

    @model_validator(mode="after")
    def _schema_when_required(self) -> StructuredOutput:
        if self.required and not self.schema_id:
            raise ValueError("schema_id is required when structured output is required")
        return self


class ToolSpec(_Strict):
    """A registered tool: the only names the model may call, with their argument schema."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    side_effect: bool = False


class Constraints(_Strict):
    min_output_chars: int = Field(default=0, ge=0)
    required_finish_reason: str | None = None
    complete_output_required: bool = True  # reject finish_reason "length"
    regions: tuple[str, ...] = ()


class SemanticCheck(_Strict):
    validator: Literal["invoice", "classify"]
    params: dict[str, Any] = Field(default_factory=dict)


class Contract(_Strict):
    workload: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    version: int = Field(ge=1)
    description: str = ""
    modalities: tuple[Modality, ...] = ("text",)
    max_input_tokens: int = Field(gt=0)
    requires_tools: bool = False
    tools: tuple[ToolSpec, ...] = ()
    structured_output: StructuredOutput = StructuredOutput()
    allowed_model_classes: tuple[str, ...] = Field(min_length=1)
    route_groups: tuple[str, ...] = Field(min_length=1)
    max_cost_usd: float = Field(gt=0)
    deadline_ms: int = Field(gt=0, le=600_000)
    streaming: bool = False
    locale: str = "en"  # for the streaming response-start check
    latency_critical: bool = False
    side_effect_free: bool = True
    hedge_after_ms: int | None = Field(default=None, gt=0)
    ambiguous_policy: AmbiguousPolicy = "replay"
    on_refusal: RefusalPolicy = "fallback"
    max_attempts: int = Field(default=3, ge=1, le=10)
    # a released stream that fails (cut, stall, garbage) is continued on a prefill-capable
    # route (R15) or ends with an in-band error; None: continue for a text workload without
    # side effects, error otherwise (`continues_midstream`)
    midstream: MidstreamPolicy | None = None
    constraints: Constraints = Constraints()
    semantic: SemanticCheck | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Contract:
        if self.requires_tools and not self.tools:
            raise ValueError("requires_tools is true but no tools are registered")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate tool names: {sorted(names)}")
        if self.hedge_after_ms is not None and not (
            self.latency_critical and self.side_effect_free
        ):
            raise ValueError(
                "hedging (hedge_after_ms) needs latency_critical: true and side_effect_free: true"
            )
        if not self.side_effect_free and self.ambiguous_policy == "replay":
            raise ValueError(
                "a workload with side effects may not use ambiguous_policy 'replay' implicitly;"
                " set side_effect_free: true or choose 'fail' / 'reconcile'"
            )
        if self.midstream == "continue" and (self.side_effect_tools or not self.side_effect_free):
            raise ValueError(
                "midstream: 'continue' is refused for a workload with side effects (a tool with"
                " side_effect: true, or side_effect_free: false): a continued stream would run"
                " them on a second route; use midstream: 'error'"
            )
        return self

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    @property
    def continues_midstream(self) -> bool:
        """Whether a released stream that failed may be continued on another route (R15):
        `midstream`, by default yes for a text workload without side effects."""
        if self.midstream is not None:
            return self.midstream == "continue"
        return (
            self.side_effect_free and not self.side_effect_tools
            and not self.structured_output.required
        )  # fmt: skip

    @property
    def side_effect_tools(self) -> bool:
        """Whether a registered tool has side effects: an ambiguous completion (a read
        timeout after the upstream may have accepted included) is then never replayed."""
        return any(t.side_effect for t in self.tools)


def format_errors(exc: ValidationError, source: str) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{source}: {field}: {err['msg']}")
    return "\n".join(parts)


def read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ContractError(f"{path.name}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ContractError(
            f"{path.name}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    except OSError as exc:
        raise ContractError(f"{path}: cannot read: {exc.strerror}") from None


def parse_contract(data: Any, source: str = "contract") -> Contract:
    if not isinstance(data, dict):
        raise ContractError(f"{source}: a contract must be a mapping, got {type(data).__name__}")
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        raise ContractError(format_errors(exc, source)) from None


def load_contracts(directory: Path) -> dict[str, Contract]:
    """Every `<workload>.yaml` in `directory` except `routes.yaml`."""
    contracts: dict[str, Contract] = {}
    for path in sorted(directory.glob("*.y*ml")):
        if path.stem == "routes":
            continue
        contract = parse_contract(read_yaml(path), path.name)
        if contract.workload != path.stem:
            raise ContractError(
                f"{path.name}: workload: {contract.workload!r} must match the file name {path.stem!r}"
            )
        contracts[contract.workload] = contract
    if not contracts:
        raise ContractError(f"{directory}: no contract files (<workload>.yaml)")
    return contracts
