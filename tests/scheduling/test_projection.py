"""A batch not yet submitted, put into the queue's outlook: behind its project's earlier-due
lines, at the project's rate or its share of the model's, or of the model's recent throughput."""

from app.scheduling.projection import project_new_batch, throughput
from app.scheduling.state import BatchProgress

NOW = 1_000_000.0
DAY = 86400


def _batch(batch_id, project, window_s, total, done=0, model="m", status="in_progress"):
    created = int(NOW - 10)
    return BatchProgress(batch_id, project, model, status, "", created, created + window_s, created + 1, total, done)


def _project(batches, rates, lines=100, window_s=DAY, project="a", weights=None, finished_rate=None):
    return project_new_batch(
        batches,
        weights or {},
        rates,
        NOW,
        project=project,
        model="m",
        lines=lines,
        deadline=int(NOW) + window_s,
        finished_rate=finished_rate,
    )


def test_nothing_is_projected_without_a_rate():
    quote = _project([], {})
    assert (quote.rate, quote.start_at, quote.finish_at, quote.feasible, quote.at_risk) == (None,) * 5


def test_an_idle_model_runs_it_at_its_recent_throughput():
    quote = _project([], {}, finished_rate=10.0)
    assert (quote.rate, quote.start_at, quote.finish_at) == (10.0, NOW, NOW + 10)
    assert quote.feasible and not quote.at_risk


def test_it_waits_behind_its_projects_earlier_due_lines_at_the_projects_rate():
    hour, later = _batch("hour", "a", 3600, 500, done=100), _batch("later", "a", 2 * DAY, 1000)
    quote = _project([hour, later], {"hour": 4.0}, lines=100)
    # 400 lines left of the batch due first, not the one due after the new one.
    assert (quote.rate, quote.start_at, quote.finish_at) == (4.0, NOW + 100, NOW + 125)


def test_a_project_without_running_work_gets_its_share_of_the_model():
    other = _batch("b1", "b", DAY, 1000)
    quote = _project([other], {"b1": 9.0}, weights={"a": 2}, finished_rate=100.0)
    # Project a's share is 2/3 of the 9 lines/s the model serves now (its history is not used).
    assert quote.rate == 6.0 and quote.start_at == NOW and quote.finish_at == NOW + 100 / 6


def test_another_models_work_and_validating_batches_are_not_ahead():
    queued = [_batch("x", "a", 3600, 500, model="other"), _batch("v", "a", 3600, 500, status="validating")]
    quote = _project(queued, {"x": 50.0}, finished_rate=5.0)
    assert (quote.rate, quote.start_at) == (5.0, NOW)


def test_a_finish_past_the_deadline_is_infeasible_and_near_it_at_risk():
    late = _project([], {}, lines=200, window_s=100, finished_rate=1.0)
    assert late.feasible is False and late.at_risk is True
    close = _project([], {}, lines=95, window_s=100, finished_rate=1.0)
    assert close.feasible is True and close.at_risk is True


def test_throughput_of_finished_batches_skips_empty_and_instant_ones():
    assert throughput([]) is None
    assert throughput([(100, 10.0), (300, 10.0), (50, 0.0), (0, 5.0)]) == 20.0
