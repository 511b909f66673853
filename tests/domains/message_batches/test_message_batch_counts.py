"""A Message Batch's request_counts from its batch row (app/domains/message_batches/service.py): they
always add up to the number of requests, whenever and however the batch ended."""

from __future__ import annotations

import pytest

from app.core.statuses import BatchStatus
from app.db.models import Batch
from app.domains.message_batches.service import request_counts


def _batch(status, *, total=10, completed=0, failed=0, unexecuted=0) -> Batch:
    return Batch(status=status, total=total, completed=completed, failed=failed, unexecuted=unexecuted)


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (_batch(BatchStatus.VALIDATING), (10, 0, 0, 0, 0)),
        (_batch(BatchStatus.IN_PROGRESS, completed=3, failed=1), (6, 3, 1, 0, 0)),
        (_batch(BatchStatus.CANCELLING, completed=3, failed=1), (6, 3, 1, 0, 0)),
        (_batch(BatchStatus.COMPLETED, completed=9, failed=1), (0, 9, 1, 0, 0)),
        (_batch(BatchStatus.CANCELLED, completed=3, failed=7, unexecuted=6), (0, 3, 1, 6, 0)),
        (_batch(BatchStatus.EXPIRED, completed=3, failed=7, unexecuted=6), (0, 3, 1, 0, 6)),
        (_batch(BatchStatus.CANCELLED), (0, 0, 0, 10, 0)),  # cancelled before it was validated
        (_batch(BatchStatus.FAILED), (0, 0, 10, 0, 0)),
    ],
)
def test_request_counts(batch, expected):
    counts = request_counts(batch)
    assert (counts.processing, counts.succeeded, counts.errored, counts.canceled, counts.expired) == expected
