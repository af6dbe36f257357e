"""Scenario files: which models the fleet serves, their endpoints and each
endpoint's scripted behaviour (timing, transport faults, quality defects).

A scenario is a YAML (or TOML) file validated by pydantic. Built-in scenarios
live in `fleet/scenarios/<name>.yaml`; `load_scenario` accepts a name or a
path. A bad file raises `ScenarioError` whose message names the offending
field and its line in the file (YAML and TOML; JSON files and scenario
objects posted to `/_fleet/scenario` get the field path only), e.g.
`seed.yaml: models.0.endpoints.2.timing.ttft_s (line 31): Input should be greater than or equal to 0`.

Every fault and defect carries either `rate` (drawn from the endpoint's
seeded RNG) or `first_n` (applies to the first N requests routed to the
endpoint, then stops). Within `faults` (and separately within `defects`)
the `rate` entries are mutually exclusive: one uniform draw per request picks
at most one of them, so their rates must sum to at most 1.
"""

from __future__ import annotations

import json
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fleet.toml_lines import key_lines as toml_key_lines
from fleet.toml_lines import line_of as toml_line_of
from ground.errors import CanaryError

SCENARIO_DIR = Path(__file__).parent / "scenarios"

DEFAULT_PARAMETERS: tuple[str, ...] = (
    "max_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "response_format",
    "structured_outputs",
    "tools",
    "tool_choice",
)


class ScenarioError(CanaryError, ValueError):
    """A scenario that cannot be loaded; the message names field and line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Trigger(_Strict):
    rate: float | None = Field(default=None, ge=0, le=1)
    first_n: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_trigger(self) -> _Trigger:
        if (self.rate is None) == (self.first_n is None):
            raise ValueError("give exactly one of `rate` or `first_n`")
        return self


# ---- transport faults -------------------------------------------------------


class HttpErrorFault(_Trigger):
    kind: Literal["http_error"]
    status: Literal[408, 429, 500, 502, 503, 504] = 502
    retry_after_s: float | None = Field(default=None, ge=0)


class OpenAIErrorFault(_Trigger):
    """An error before the first token in the OpenAI-compatible dialect many providers and
    servers speak, `{"error": {"message", "type", "param", "code"}}`: the kind in `code` (a
    string, e.g. `context_length_exceeded`, `content_policy_violation`,
    `rate_limit_exceeded`; null: only `type` names it), not OpenRouter's `metadata`."""

    kind: Literal["openai_error"]
    status: int = Field(default=400, ge=400, le=599)
    code: str | None
    type: str = "invalid_request_error"
    message: str = Field(default="The provider rejected the request.", min_length=1)
    param: str | None = None
    retry_after_s: float | None = Field(default=None, ge=0)


class ResetFault(_Trigger):
    kind: Literal["reset"]


class StreamCutFault(_Trigger):
    """The stream ends (a clean end of the body, no finish reason, no `[DONE]`) after
    `after_chunks` content tokens when given, else after `after_fraction` of them."""

    kind: Literal["stream_cut"]
    after_fraction: float = Field(default=0.4, gt=0, lt=1)
    after_chunks: int | None = Field(default=None, ge=1)


class MidstreamErrorFault(_Trigger):
    kind: Literal["midstream_error"]
    after_fraction: float = Field(default=0.4, gt=0, lt=1)
    code: int = 502
    error_type: str = "provider_unavailable"


class NoDoneFault(_Trigger):
    """The whole reply, its finish reason and usage, then a clean end without `[DONE]`."""

    kind: Literal["no_done"]


class MalformedEventFault(_Trigger):
    """`count` SSE `data:` events that are not JSON, after `after_fraction` of the reply's
    chunks; the reply then goes on to its end (one is a glitch, many a stream of garbage)."""

    kind: Literal["malformed_event"]
    after_fraction: float = Field(default=0.4, gt=0, lt=1)
    count: int = Field(default=1, ge=1, le=1000)


class StallFault(_Trigger):
    """After `after_chunks` content chunks, no byte for `stall_s` (scaled), then the rest of
    the reply (a stall after N chunks; capped before the reply's last chunk)."""

    kind: Literal["stall"]
    after_chunks: int = Field(default=2, ge=1)
    stall_s: float = Field(default=30.0, ge=0)


class SlowFirstTokenFault(_Trigger):
    kind: Literal["slow_first_token"]
    ttft_s: float = Field(default=12.0, ge=0)


class MisrouteFault(_Trigger):
    kind: Literal["misroute"]
    serve_as: str


Fault = Annotated[
    HttpErrorFault
    | OpenAIErrorFault
    | ResetFault
    | StreamCutFault
    | MidstreamErrorFault
    | NoDoneFault
    | MalformedEventFault
    | StallFault
    | SlowFirstTokenFault
    | MisrouteFault,
    Field(discriminator="kind"),
]

# ---- quality defects ----------------------------------------------------------

PolicyMode = Literal[
    "refusal", "content_filter_empty", "content_filter_cut", "empty", "moderation_403"
]
SchemaBreakMode = Literal["invalid_json", "missing_field", "wrong_type", "prose"]
Modality = Literal["text", "image", "file", "audio"]
Codec = Literal["cp1252", "latin-1", "cp1251", "gbk", "shift_jis"]
ToolViolationMode = Literal["missing_required", "wrong_enum", "wrong_type"]
ToolLeakStyle = Literal["xml", "mistral", "kimi", "llama"]
ReasoningLeakStyle = Literal["think", "thinking", "channel", "unclosed"]
EscapeStyle = Literal["newline", "unicode", "double_json"]
ReasoningMode = Literal["off", "stream"]
PrefillMode = Literal["continue", "repeat", "reject"]


class StrayStartDefect(_Trigger):
    kind: Literal["stray_start"]


class StartPrefixDefect(_Trigger):
    """A fixed prefix glued before every reply: a model's house style when every endpoint has
    it, a defect form no rule names when one endpoint has it."""

    kind: Literal["start_prefix"]
    prefix: str = Field(default='"', min_length=1, max_length=128)


class FirstTokenDropDefect(_Trigger):
    """The first streamed token of the reply is lost (`*She smiles.*` -> `smiles.*`)."""

    kind: Literal["first_token_drop"]


class LanguageMixDefect(_Trigger):
    kind: Literal["language_mix"]
    source: str = "pt-BR"
    intruder: str = "es"
    sentence_share: float = Field(default=0.5, gt=0, le=1)


class LanguageSwitchDefect(_Trigger):
    kind: Literal["language_switch"]
    to: str = "en"
    alt: str = "de"


class MojibakeDefect(_Trigger):
    kind: Literal["mojibake"]
    codecs: list[Codec] = Field(default_factory=lambda: list(get_args(Codec)), min_length=1)


class ReplacementCharsDefect(_Trigger):
    kind: Literal["replacement_chars"]
    count: int = Field(default=4, ge=1)


class RepetitionDefect(_Trigger):
    kind: Literal["repetition"]
    repeats: int = Field(default=8, ge=3)


class TruncationDefect(_Trigger):
    kind: Literal["truncation"]
    keep_fraction: float = Field(default=0.35, gt=0, lt=1)


class PolicyFilterDefect(_Trigger):
    kind: Literal["policy_filter"]
    modes: list[PolicyMode] = Field(
        default_factory=lambda: list(get_args(PolicyMode)),
        min_length=1,
    )


class SchemaBreakDefect(_Trigger):
    kind: Literal["schema_break"]
    modes: list[SchemaBreakMode] = Field(
        default_factory=lambda: list(get_args(SchemaBreakMode)),
        min_length=1,
    )


class ToolUnknownNameDefect(_Trigger):
    kind: Literal["tool_unknown_name"]


class ToolBadArgsDefect(_Trigger):
    """Arguments that do not parse as JSON (cut short, single quotes, a trailing comma,
    unquoted keys)."""

    kind: Literal["tool_bad_args"]


class ToolSchemaViolationDefect(_Trigger):
    """Arguments that parse as JSON but violate the function's schema."""

    kind: Literal["tool_schema_violation"]
    modes: list[ToolViolationMode] = Field(
        default_factory=lambda: list(get_args(ToolViolationMode)), min_length=1
    )


class ToolAsTextDefect(_Trigger):
    """A broken tool parser: the call is written into `content` in the model's own markup
    (finish `stop`, no `tool_calls`)."""

    kind: Literal["tool_as_text"]
    style: ToolLeakStyle = "xml"


class ToolsIgnoredDefect(_Trigger):
    """A call that is due (required, named, or plainly asked for) answered in plain text."""

    kind: Literal["tools_ignored"]


class ToolChoiceNoneViolatedDefect(_Trigger):
    """A tool call although the request said `tool_choice: "none"`."""

    kind: Literal["tool_choice_none_violated"]


class ToolResultIgnoredDefect(_Trigger):
    """After a tool result, a reply that does not use it (it says it cannot know)."""

    kind: Literal["tool_result_ignored"]


class ReasoningLeakDefect(_Trigger):
    """Reasoning text at the start of `content` (`<think>…</think>`, `<thinking>…`,
    `<|channel|>analysis<|message|>…`, or a `<think>` never closed)."""

    kind: Literal["reasoning_leak"]
    style: ReasoningLeakStyle = "think"


class BpeMarkersDefect(_Trigger):
    """Byte-level BPE markers where whitespace belongs (`Ġ` space, `Ċ` newline, `ĉ` tab) in
    the first `share` of the reply's words; the paragraph break after the opener always."""

    kind: Literal["bpe_markers"]
    share: float = Field(default=1.0, gt=0, le=1)


class LiteralEscapesDefect(_Trigger):
    """Escape sequences written out where text belongs: `\\n` as two characters, `\\u00e9`
    written out, or the whole reply JSON-encoded once more (a quoted string)."""

    kind: Literal["literal_escapes"]
    style: EscapeStyle = "newline"


class BufferedStreamDefect(_Trigger):
    """Fake streaming: nothing (keep-alives at most) for `hold_s` (scaled) plus the reply's
    generation time, then the whole reply in one chunk."""

    kind: Literal["buffered_stream"]
    hold_s: float = Field(default=6.0, ge=0)


class SlowOutputDefect(_Trigger):
    """A normal first token, then tokens at `tokens_per_s` (far below the endpoint's rate)."""

    kind: Literal["slow_output"]
    tokens_per_s: float = Field(default=4.0, gt=0)


class SubstitutedModelDefect(_Trigger):
    """The reply's `model` field names another model than the one requested."""

    kind: Literal["substituted_model"]
    served_model: str = Field(default="meta-llama/llama-3.1-8b-instruct", min_length=1)


Defect = Annotated[
    StrayStartDefect
    | StartPrefixDefect
    | FirstTokenDropDefect
    | LanguageMixDefect
    | LanguageSwitchDefect
    | MojibakeDefect
    | ReplacementCharsDefect
    | RepetitionDefect
    | TruncationDefect
    | PolicyFilterDefect
    | SchemaBreakDefect
    | ToolUnknownNameDefect
    | ToolBadArgsDefect
    | ToolSchemaViolationDefect
    | ToolAsTextDefect
    | ToolsIgnoredDefect
    | ToolChoiceNoneViolatedDefect
    | ToolResultIgnoredDefect
    | ReasoningLeakDefect
    | BpeMarkersDefect
    | LiteralEscapesDefect
    | BufferedStreamDefect
    | SlowOutputDefect
    | SubstitutedModelDefect,
    Field(discriminator="kind"),
]

# ---- endpoints and models ------------------------------------------------------


class Timing(_Strict):
    ttft_s: float = Field(default=0.4, ge=0)
    tokens_per_s: float = Field(default=80.0, gt=0)
    jitter: float = Field(
        default=0.1, ge=0, le=1, description="relative +- jitter on TTFT and gaps"
    )


class Pricing(_Strict):
    prompt: str = "0.0000003"
    completion: str = "0.0000005"
    request: str = "0"
    image: str = "0"

    @model_validator(mode="after")
    def _numeric(self) -> Pricing:
        for name in ("prompt", "completion", "request", "image"):
            try:
                float(getattr(self, name))
            except ValueError as exc:
                raise ValueError(f"pricing.{name} must be a decimal string") from exc
        return self


class EndpointSpec(_Strict):
    tag: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9._-]+)?$")
    provider_name: str = Field(min_length=1)
    quantization: str | None = None
    status: int = 0
    context_length: int | None = Field(default=None, gt=0)
    max_completion_tokens: int | None = Field(default=16384, gt=0)
    pricing: Pricing = Field(default_factory=Pricing)
    supported_parameters: list[str] = Field(default_factory=lambda: list(DEFAULT_PARAMETERS))
    uptime_last_30m: float | None = 99.9
    service_tier: str | None = None
    supports_implicit_caching: bool = False
    reasoning: ReasoningMode = Field(
        default="off",
        description="`stream`: healthy reasoning in `delta.reasoning` / `reasoning_details` before the content",
    )
    parallel_tool_calls: int = Field(
        default=1,
        ge=1,
        le=100_000,
        description="a due call made this many times in one reply (parallel calls, each its own id and arguments)",
    )
    prefill: PrefillMode = Field(
        default="continue",
        description="a conversation ending in an assistant message (a prefill): `continue` it,"
        " `repeat` it before the continuation, or `reject` it with a 400",
    )
    usage: Literal["always", "when_asked"] = Field(
        default="always",
        description="`always`: every stream ends with the usage chunk (OpenRouter); `when_asked`: only a stream whose request set `stream_options.include_usage: true` (OpenAI and plain OpenAI-compatible servers; a non-streamed reply always carries it)",
    )
    timing: Timing = Field(default_factory=Timing)
    faults: list[Fault] = Field(default_factory=list)
    defects: list[Defect] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rates(self) -> EndpointSpec:
        if self.quantization is None and "/" in self.tag:
            self.quantization = self.tag.split("/", 1)[1]
        for group in ("faults", "defects"):
            total = sum(item.rate or 0.0 for item in getattr(self, group))
            if total > 1.0 + 1e-9:
                raise ValueError(
                    f"{group} rates sum to {total:.3f} > 1 (they are mutually exclusive)"
                )
        return self

    @property
    def slug(self) -> str:
        return self.tag.split("/", 1)[0]


class ModelSpec(_Strict):
    id: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")
    name: str | None = None
    created: int = 1733506137
    description: str = ""
    context_length: int = Field(default=131072, gt=0)
    input_modalities: list[Modality] = Field(default_factory=lambda: list[Modality](["text"]))
    tokenizer: str = "Other"
    # which endpoint serves a request that names no `order` / `sort`: the cheapest (the
    # default, deterministic), or OpenRouter's default load balancing, `price`: one drawn with
    # weight 1 / price^2, the rest after it cheapest first (fleet/selection.py `balanced`)
    load_balance: Literal["cheapest", "price"] = "cheapest"
    endpoints: list[EndpointSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_tags(self) -> ModelSpec:
        tags = [e.tag for e in self.endpoints]
        dupes = sorted({t for t in tags if tags.count(t) > 1})
        if dupes:
            raise ValueError(f"duplicate endpoint tags: {dupes}")
        for endpoint in self.endpoints:
            if endpoint.context_length is None:
                endpoint.context_length = self.context_length
        return self


class Scenario(_Strict):
    name: str = "custom"
    description: str = ""
    seed: int = 0
    time_scale: float = Field(default=1.0, gt=0, le=100)
    image_tokens: int = Field(default=800, ge=0)
    models: list[ModelSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_models(self) -> Scenario:
        ids = [m.id for m in self.models]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate model ids")
        return self

    def model(self, model_id: str) -> ModelSpec | None:
        return next((m for m in self.models if m.id == model_id), None)


# ---- loading ----------------------------------------------------------------------


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def _resolve(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml", ".toml", ".json"} or path.exists():
        if not path.is_file():
            raise ScenarioError(f"scenario file not found: {path}")
        return path
    candidate = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        raise ScenarioError(
            f"unknown scenario {str(name_or_path)!r}; built-in: {', '.join(builtin_names())}"
        )
    return candidate


def _yaml_line(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the deepest YAML node along `loc`."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if match is None:
                break
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        line = node.start_mark.line + 1
    return line


def format_validation_error(
    exc: ValidationError,
    source: str,
    root: yaml.Node | None = None,
    toml_lines: dict[tuple[int | str, ...], int] | None = None,
) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in _KIND_NAMES))
        field = ".".join(str(p) for p in loc) or "(top level)"
        line = _yaml_line(root, loc) if root is not None else None
        if toml_lines is not None:
            line = toml_line_of(toml_lines, loc)
        where = f" (line {line})" if line else ""
        lines.append(f"{source}: {field}{where}: {err['msg']}")
    return "\n".join(lines)


_KIND_NAMES = {
    "http_error", "openai_error", "reset", "stream_cut", "midstream_error", "slow_first_token", "misroute",
    "no_done", "malformed_event", "stall",
    "stray_start", "start_prefix", "first_token_drop", "language_mix", "language_switch",
    "mojibake", "replacement_chars", "repetition", "truncation", "policy_filter", "schema_break", "tool_unknown_name", "tool_bad_args",
    "tool_schema_violation", "tool_as_text", "tools_ignored", "tool_choice_none_violated",
    "tool_result_ignored", "reasoning_leak", "bpe_markers", "literal_escapes", "buffered_stream",
    "slow_output", "substituted_model",
}  # fmt: skip


def parse_scenario(
    data: Any,
    source: str = "scenario",
    root: yaml.Node | None = None,
    toml_lines: dict[tuple[int | str, ...], int] | None = None,
) -> Scenario:
    """Validate a scenario mapping; raise ScenarioError naming field (and line, given
    the YAML node tree `root` or the TOML `toml_lines` map)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, source, root, toml_lines)) from None


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a built-in scenario by name, or a YAML/TOML/JSON file by path."""
    if not isinstance(name_or_path, str | Path):
        raise ScenarioError(
            f"a scenario name or path must be a string, got {type(name_or_path).__name__}"
        )
    try:
        path = _resolve(name_or_path)
        return _load_file(path.resolve(), path.stat().st_mtime_ns, path.name).model_copy(deep=True)
    except (OSError, ValueError) as exc:  # e.g. permission denied, embedded NUL, name too long
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(f"cannot read scenario {str(name_or_path)!r}: {exc}") from None


@lru_cache(maxsize=32)
def _load_file(path: Path, mtime_ns: int, source: str) -> Scenario:
    """Read and validate `path` (cached per mtime); messages name the file as `source`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{source}: not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at offset {exc.start})"
        ) from None
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read scenario file: {exc.strerror or exc}") from None
    root: yaml.Node | None = None
    lines: dict[tuple[int | str, ...], int] | None = None
    suffix = Path(source).suffix  # as named (a symlink's target may have none)
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
            lines = toml_key_lines(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            root = yaml.compose(text)
            data = yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{source}: not valid {suffix.lstrip('.')}: {exc}") from None
    return parse_scenario(data, source, root, lines)
