"""The ``priority`` a batch line carries to an engine.

vLLM's priority scheduler serves its waiting queue lowest ``priority`` first, then in arrival
order; online requests that name none have 0. Batch lines must wait behind online traffic, and
among themselves be served in the order batchd's gates admitted them, which is already fair
share across projects, earliest deadline within a project and at-risk batches ahead. So every
batch line carries one of two numbers, both above online traffic's (and any small online tiers a
fleet uses): :data:`AT_RISK_PRIORITY` for a line the gate let go ahead of fair share (a batch at
risk of missing its deadline, a small batch on credit), :data:`BEHIND_PRIORITY` for a
batch whose project has one due well before it running (fair_share.behind_ids: the earlier one
goes first within the project on every replica, not only on the replica that runs both),
otherwise :data:`BATCH_PRIORITY`. Equal numbers keep the engine's queue in admission order. A number per
deadline (as before) reordered the queue by deadline across projects, which undid fair share
wherever lines queued at the engine.

A tenant may name a ``priority`` in a line's body. Unless the operator allows it
(``BATCHD_ALLOW_TENANT_PRIORITY``), batchd's own number replaces it where the engine schedules
by priority, and elsewhere it is clamped into the batch range, so no key can put its lines ahead
of online users."""

from __future__ import annotations

from typing import Any

AT_RISK_PRIORITY = 100
BATCH_PRIORITY = 101
BEHIND_PRIORITY = 102
MAX_PRIORITY = 2**31 - 1


def batch_priority(ahead: bool, behind: bool = False) -> int:
    """The priority of a batch line now: lines that go ahead of fair share (at risk, a small
    batch on credit) go ahead of the others' at the engine too; a later batch of a project waits behind."""
    if ahead:
        return AT_RISK_PRIORITY
    return BEHIND_PRIORITY if behind else BATCH_PRIORITY


def clamp_tenant_priority(value: Any) -> int:
    """A tenant's own ``priority`` moved into the batch range (never ahead of online traffic)."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return BATCH_PRIORITY
    return min(max(number, AT_RISK_PRIORITY), MAX_PRIORITY)


def tenant_body(body: Any, allowed: bool) -> Any:
    """The body as it goes to the engine: a ``priority`` the tenant named is clamped into the
    batch range unless the operator allows tenants their own."""
    if allowed or not isinstance(body, dict) or "priority" not in body:
        return body
    return {**body, "priority": clamp_tenant_priority(body["priority"])}


__all__ = [
    "AT_RISK_PRIORITY",
    "BATCH_PRIORITY",
    "BEHIND_PRIORITY",
    "batch_priority",
    "clamp_tenant_priority",
    "tenant_body",
]
