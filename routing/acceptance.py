"""The acceptance pipeline (SPEC R7): one pure function every response passes,
the primary one included, before it is returned, cached, billed as success or
handed to a tool.

    1. transport complete (`[DONE]`, or a clean end after a finish reason) and envelope parseable (no in-band error), and within every cap
       of the assembler on content (`Completion.over_cap`, routing/response.py: too many
       tool calls, an overlong call id or name, a second choice): rejected with the cap's
       own reason, never passed on cut
    2. finish reason: `error` / `content_filter` always rejected; `length`
       rejected when complete output is required; a required reason enforced
    3. structured output: JSON parse, then JSON Schema of the contract
    4. tools: no call markup leaked into the content (`<tool_call>`, `[TOOL_CALLS]`,
       `<|python_tag|>`, ...: a provider's broken tool parser, C10's `tools:as_text`), only
       registered names, arguments valid against each tool's schema
    5. workload semantic validator (routing.semantic)
    6. app constraints (minimum output length)
    (+) for streaming workloads (chat) the canary's response-start check, so a
        non-streamed reply of the same workload meets the same bar

The only normalisation is trimming surrounding whitespace of the text; no
field is ever invented or rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from probes.integrity import stray_start_kind
from probes.tools import leaked_tool_markup
from routing.classify import Rejection
from routing.contracts import Contract
from routing.response import Completion
from routing.schemas import SchemaRegistry
from routing.semantic import VALIDATORS
from wire import jsonio

# a stream is complete at `[DONE]` or at a clean end after a finish reason (R15,
# routing/upstream.py); any other end is a cut
CUT = "stream ended without a finish reason or [DONE]"


@dataclass(frozen=True)
class Accepted:
    content: str  # trimmed
    parsed: Any = None  # the structured object, when the contract asks for one
    tool_arguments: list[dict[str, Any]] = field(default_factory=list)


def accept(
    completion: Completion, contract: Contract, schemas: SchemaRegistry
) -> Accepted | Rejection:
    """Run the pipeline; the first failing step decides the rejection."""
    rejected = _transport_and_finish(completion, contract)
    if rejected is not None:
        return rejected
    content = completion.content.strip()
    parsed = _structured(content, contract, schemas)
    if isinstance(parsed, Rejection):
        return parsed
    tool_args = _tool_arguments(completion, contract)
    if isinstance(tool_args, Rejection):
        return tool_args
    if contract.semantic is not None and parsed is not None:
        verdict = VALIDATORS[contract.semantic.validator](parsed, contract.semantic.params)
        if verdict is not None:
            return Rejection(*verdict)
    if not completion.tool_calls and len(content) < contract.constraints.min_output_chars:
        return Rejection(
            "output_too_short", f"{len(content)} < {contract.constraints.min_output_chars}"
        )
    return Accepted(content=content, parsed=parsed, tool_arguments=tool_args)


def _transport_and_finish(completion: Completion, contract: Contract) -> Rejection | None:
    """Steps 1-2 and the start check: a complete stream without an in-band error, a finish
    reason the contract takes, and (streaming workloads) a clean reply start."""
    if not completion.done:
        return Rejection("transport_incomplete", CUT)
    if completion.error is not None:
        return Rejection("in_band_error", completion.error.error_type or str(completion.error.code))
    if completion.over_cap is not None:
        return Rejection(*completion.over_cap)
    finish = completion.finish_reason
    if finish in ("error", "content_filter"):
        return Rejection(f"finish_{finish}")
    if finish == "length" and contract.constraints.complete_output_required:
        return Rejection("finish_length", "truncated output where complete output is required")
    required = contract.constraints.required_finish_reason
    if required and finish != required and not (required == "stop" and finish == "tool_calls"):
        return Rejection("finish_reason_mismatch", f"{finish!r} != {required!r}")
    content = completion.content.strip()
    if contract.streaming and content and not completion.tool_calls:
        kind = stray_start_kind(content, contract.locale)
        if kind is not None:
            return Rejection("stray_start", kind)
    return None


def _structured(content: str, contract: Contract, schemas: SchemaRegistry) -> Any:
    """Step 3: the structured object the contract asks for (None when it asks for none),
    or the rejection of malformed JSON or of the schema's first error."""
    so = contract.structured_output
    if not (so.required and so.schema_id):
        return None
    try:
        parsed = jsonio.loads(content, strict=True)  # bounded: depth, integer size, NaN
    except jsonio.WireJSONError as exc:
        return Rejection("malformed_json", str(exc)[:200])
    errors = sorted(schemas.validator(so.schema_id).iter_errors(parsed), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        reason = "missing_field" if err.validator == "required" else "schema_invalid"
        return Rejection(reason, f"{where}: {err.message[:200]}")
    return parsed


def _tool_arguments(completion: Completion, contract: Contract) -> list[dict[str, Any]] | Rejection:
    """Step 4: each tool call's arguments, when every call names a registered tool and its
    arguments are valid against that tool's schema (and a call is there when required). On a
    tool-use route, call markup in the content is a broken parser whatever else came back."""
    if contract.tools:
        marker = leaked_tool_markup(completion.content)
        if marker is not None:
            return Rejection("tool_markup_leak", marker[:64])
    if contract.requires_tools and not completion.tool_calls:
        return Rejection("no_tool_call", "the contract requires a tool call")
    tool_args: list[dict[str, Any]] = []
    for call in completion.tool_calls:
        spec = contract.tool(call.name)
        if spec is None:
            return Rejection("unknown_tool", call.name[:64])
        try:
            args = jsonio.loads(call.arguments or "{}", strict=True)
        except jsonio.WireJSONError as exc:
            return Rejection("tool_args_malformed", f"{call.name[:64]}: {str(exc)[:120]}")
        errors = list(Draft202012Validator(spec.parameters).iter_errors(args))
        if errors:
            return Rejection("tool_args_invalid", f"{call.name}: {errors[0].message[:200]}")
        tool_args.append(args)
    return tool_args
