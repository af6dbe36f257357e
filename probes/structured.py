"""C6 structured-output judge (pure): a small fixed strict schema, parsed and
validated with jsonschema.

- `unsupported` when the endpoint does not advertise `response_format` /
  `structured_outputs` (the probe set does not even send the request then);
- `transport` / `misrouted` from `classify_transport` (a broken connection says
  nothing about capability);
- `fail` on a *completed* generation that does not parse (`invalid_json`), does
  not validate (`schema_violation`, with the JSON path, the failing keyword and
  the message in the evidence) or was truncated (`truncated`);
- `fail` on an empty completion (`empty_completion`);
- `inconclusive` when the output was filtered or refused (`filtered`, `refused`:
  the refusal contract owns that evidence) or nothing was generated for a reason
  that is not the provider's output (gave up waiting, a 4xx not about capability).

No repair beyond trimming whitespace (SPEC R7).
"""

from __future__ import annotations

import itertools
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from probes.refusal import match_refusal
from probes.transport import outcome, unjudgeable
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript
from wire import jsonio

MAX_DEPTH = 16  # the probe object is 2 levels deep; deeper output is not the object asked for
MAX_ERRORS = 50  # schema errors collected (a reply with thousands of keys has thousands)

PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 60},
        "mood": {"type": "string", "enum": ["calm", "happy", "sad", "angry", "afraid", "curious"]},
        "age": {"type": "integer", "minimum": 1, "maximum": 120},
    },
    "required": ["name", "mood", "age"],
    "additionalProperties": False,
}

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "probe_character", "strict": True, "schema": PROBE_SCHEMA},
}

Draft202012Validator.check_schema(PROBE_SCHEMA)
_VALIDATOR = Draft202012Validator(PROBE_SCHEMA)


def json_path(path: Any) -> str:
    """jsonschema's deque path as `$.a[0].b`."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_object(text: str) -> tuple[str, dict[str, object]] | None:
    """None when `text` is a valid probe object, else (reason, evidence)."""
    body = text.strip()
    try:
        # bounded and strict: no NaN / Infinity, at most MAX_DEPTH levels, 100-digit integers
        value = jsonio.loads(body, max_depth=MAX_DEPTH, strict=True)
    except jsonio.WireJSONError as exc:
        return "invalid_json", {"error": str(exc)[:160], "excerpt": body[:120]}
    errors = list(itertools.islice(_VALIDATOR.iter_errors(value), MAX_ERRORS))
    if not errors:
        return None
    worst = best_match(errors)
    return "schema_violation", {
        "path": json_path(worst.absolute_path),
        "validator": str(worst.validator),
        "message": worst.message[:200],
        "errors": len(errors),
        "excerpt": body[:120],
    }


def judge_structured(t: Transcript, endpoint: Endpoint) -> Outcome:
    """C6 on one structured-output transcript of `endpoint`."""
    c = Contract.STRUCTURED
    if not endpoint.supports_structured_output:
        return Outcome(
            contract=c,
            status=OutcomeStatus.UNSUPPORTED,
            reason="not_advertised",
            tag=endpoint.tag,
            locale=t.locale,
            evidence={"supported_parameters": list(endpoint.supported_parameters)},
        )
    unjudged = unjudgeable(t, c, "no_text_within_threshold")
    if unjudged is not None:
        return unjudged
    finish = (t.finish_reason or "").lower()
    if finish == "content_filter" or "content_filter" in (t.native_finish_reason or "").lower():
        return outcome(t, c, OutcomeStatus.INCONCLUSIVE, "filtered", excerpt=t.text[:120])
    if not t.text.strip():
        return outcome(t, c, OutcomeStatus.FAIL, "empty_completion", finish_reason=t.finish_reason)
    if match_refusal(t.text, t.locale) is not None:
        return outcome(t, c, OutcomeStatus.INCONCLUSIVE, "refused", excerpt=t.text[:120])
    if finish == "length":
        return outcome(
            t, c, OutcomeStatus.FAIL, "truncated", chars=len(t.text), excerpt=t.text[:120]
        )
    problem = validate_object(t.text)
    if problem is None:
        return outcome(t, c, OutcomeStatus.PASS, "valid")
    reason, evidence = problem
    return outcome(t, c, OutcomeStatus.FAIL, reason, **evidence)
