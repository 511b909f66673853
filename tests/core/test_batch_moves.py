"""The batch status moves (BATCH_MOVES in app/core/statuses.py): which status may move to which,
the moves the code makes allowed, any other refused as a programming error."""

from __future__ import annotations

import pytest

from app.core.statuses import (
    BATCH_MOVES,
    CANCELLABLE_BATCH_STATUSES,
    EXPIRABLE_BATCH_STATUSES,
    TERMINAL_BATCH_STATUSES,
    BatchStatus,
    ForbiddenBatchMove,
    batch_moves_from,
)

S = BatchStatus


def test_every_status_has_its_moves_and_an_ending_has_none():
    assert set(BATCH_MOVES) == set(BatchStatus)
    assert all(not BATCH_MOVES[status] for status in TERMINAL_BATCH_STATUSES)
    assert all(status not in moves for status, moves in BATCH_MOVES.items())  # no move to itself


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (S.VALIDATING, S.IN_PROGRESS),  # validated: cut into shards
        (S.VALIDATING, S.FAILED),  # refused at validation
        (S.IN_PROGRESS, S.FINALIZING),  # every shard done
        (S.FINALIZING, S.COMPLETED),
        (S.CANCELLING, S.CANCELLED),
        *((status, S.CANCELLING) for status in CANCELLABLE_BATCH_STATUSES),
        *((status, S.EXPIRED) for status in EXPIRABLE_BATCH_STATUSES),
        *((status, S.FAILED) for status in (S.IN_PROGRESS, S.FINALIZING, S.CANCELLING)),  # the dead letter
    ],
)
def test_the_moves_the_code_makes_are_allowed(source, target):
    assert batch_moves_from(target, (source,)) == (source,)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (S.COMPLETED, S.IN_PROGRESS),
        (S.CANCELLED, S.CANCELLING),
        (S.FAILED, S.FAILED),
        (S.VALIDATING, S.COMPLETED),  # no batch completes without finalizing
        (S.IN_PROGRESS, S.COMPLETED),
        (S.FINALIZING, S.EXPIRED),  # past its expiry, a finalizing batch still completes
        (S.CANCELLING, S.IN_PROGRESS),
        (S.CANCELLING, S.EXPIRED),
        (S.FINALIZING, S.IN_PROGRESS),
    ],
)
def test_any_other_move_is_refused_with_the_move_named(source, target):
    with pytest.raises(ForbiddenBatchMove) as refused:
        batch_moves_from(target, (source,))
    assert f"may not move to {target} from {source} " in str(refused.value)


def test_one_refused_source_among_allowed_ones_is_refused_and_none_is_too():
    with pytest.raises(ForbiddenBatchMove) as refused:
        batch_moves_from(S.EXPIRED, (S.VALIDATING, S.FINALIZING, S.IN_PROGRESS))
    assert "may not move to expired from finalizing " in str(refused.value)
    with pytest.raises(ForbiddenBatchMove):
        batch_moves_from(S.CANCELLED, ())


def test_a_target_alone_moves_from_every_status_allowed_to_reach_it():
    assert batch_moves_from(S.COMPLETED) == (S.FINALIZING,)
    assert batch_moves_from(S.CANCELLED) == (S.CANCELLING,)
    assert batch_moves_from(S.IN_PROGRESS) == (S.VALIDATING,)
    assert set(batch_moves_from(S.EXPIRED)) == set(EXPIRABLE_BATCH_STATUSES)
    assert set(batch_moves_from(S.CANCELLING)) == set(CANCELLABLE_BATCH_STATUSES)
    assert set(batch_moves_from(S.FAILED)) == {S.VALIDATING, S.IN_PROGRESS, S.FINALIZING, S.CANCELLING}
    assert batch_moves_from(S.VALIDATING) == ()  # a batch is created validating
