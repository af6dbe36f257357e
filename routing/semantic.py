"""Workload semantic validators (SPEC R7): deterministic checks on an already
schema-valid object. Each returns `None` when fine, else a short reason code
plus detail. They never repair a value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Verdict = tuple[str, str] | None


def check_invoice(obj: Any, params: dict[str, Any]) -> Verdict:
    """Non-negative total, a supported currency, line items summing to the total within tolerance."""
    if not isinstance(obj, dict):
        return ("invoice_not_object", type(obj).__name__)
    currencies = {str(c).upper() for c in params.get("currencies", ["USD", "EUR"])}
    tolerance = float(params.get("tolerance", 0.01))
    total = obj.get("total")
    if not isinstance(total, int | float) or isinstance(total, bool):
        return ("invoice_total_not_number", repr(total))
    if total < 0:
        return ("invoice_negative_total", str(total))
    currency = obj.get("currency")
    if not isinstance(currency, str) or currency not in currencies:
        return ("invoice_unsupported_currency", repr(currency))
    items = obj.get("line_items") or []
    raw = [i.get("amount") for i in items if isinstance(i, dict)]
    if any(not isinstance(a, int | float) or isinstance(a, bool) for a in raw):
        return ("invoice_item_amount_not_number", "")
    amounts = [float(a) for a in raw if isinstance(a, int | float)]
    if items and abs(sum(amounts) - total) > tolerance:
        return ("invoice_items_do_not_sum", f"items {sum(amounts):.2f} vs total {total:.2f}")
    return None


def check_classify(obj: Any, params: dict[str, Any]) -> Verdict:
    """The label must come from the allowed set (compared exactly, after trimming)."""
    labels = [str(label) for label in params.get("labels", [])]
    if not isinstance(obj, dict):
        return ("classify_not_object", type(obj).__name__)
    label = obj.get("label")
    if not isinstance(label, str) or label.strip() not in labels:
        return ("classify_label_not_allowed", repr(label))
    return None


VALIDATORS: dict[str, Callable[[Any, dict[str, Any]], Verdict]] = {
    "invoice": check_invoice,
    "classify": check_classify,
}
