"""The engine priority a batch line carries, and a tenant's own kept behind online traffic."""

from __future__ import annotations

import pytest

from app.scheduling.priority import (
    AT_RISK_PRIORITY,
    BATCH_PRIORITY,
    BEHIND_PRIORITY,
    MAX_PRIORITY,
    batch_priority,
    clamp_tenant_priority,
    tenant_body,
)


def test_batch_lines_wait_behind_online_traffic_and_at_risk_ones_go_first():
    assert 0 < batch_priority(ahead=True) == AT_RISK_PRIORITY < batch_priority(ahead=False) == BATCH_PRIORITY
    assert batch_priority(ahead=False, behind=True) == BEHIND_PRIORITY > BATCH_PRIORITY
    assert batch_priority(ahead=True, behind=True) == AT_RISK_PRIORITY


@pytest.mark.parametrize(
    ("named", "sent"),
    [(-100, AT_RISK_PRIORITY), (0, AT_RISK_PRIORITY), (5000, 5000), (2**40, MAX_PRIORITY), ("x", BATCH_PRIORITY)],
)
def test_a_tenants_priority_is_clamped_into_the_batch_range(named, sent):
    assert clamp_tenant_priority(named) == sent
    assert tenant_body({"model": "m", "priority": named}, allowed=False) == {"model": "m", "priority": sent}


def test_a_body_without_priority_or_an_allowed_one_is_left_as_it_is():
    body = {"model": "m"}
    assert tenant_body(body, allowed=False) is body
    pushy = {"model": "m", "priority": -100}
    assert tenant_body(pushy, allowed=True) is pushy
