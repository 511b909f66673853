"""Fair on every model (issue #59): one replica in front of two fleets that serve their queues by
priority (16 slots and 50 ms a line each, batchd's window above the slots); twenty projects
(p00-p09 weight 1, p10-p19 weight 2) create a 400-line batch each on the first model, one after
another, then p00-p04 one each on the second. While all of a model's projects have work (from a
second after the last of them was first served to the first one's last line), each gets its
weight share of that model's lines within 10 %: the five 20 % each on the second model, whatever
order their batches were created in. The fleets answer nothing until every batch is validated
(harness/fake_upstream.py --held), so every project has work from the first line on however
slowly a busy host validates them, and the order of creation (and so of deadlines) is all that
could rank them: shares following it fail the test. The scenario is bench W6's `two-models`
(bench/workloads/w6/two_models.py); shares come from the fleets' own logs."""

from __future__ import annotations

import pytest

from bench.workloads.w6.fleet import running_cluster
from bench.workloads.w6.two_models import CLUSTER, ON_SECOND, PROJECTS, two_models
from harness.tenancy import MODEL

# Servers in front of fake upstream fleets, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

SECOND = CLUSTER["models"][1]
# The fleets are held until every batch is validated, so all of a model's projects have work from
# its first answered line: the window runs from a second after that to the first project's last
# line (about 17 s on the first model, 5 s on the second at full speed; longer on a slower host).
# Shorter than this would mean the hold did not work and there are no shares to judge.
MIN_WINDOW_S = 2.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("two-models"), PROJECTS, held=True, **CLUSTER) as cluster:
        yield cluster


def test_projects_with_work_on_two_models_get_their_weight_shares_on_each(cluster):
    result = two_models(cluster)
    assert not result["not_completed"], result["not_completed"]
    for model, projects in ((MODEL, PROJECTS), (SECOND, ON_SECOND)):
        rows = result["models"][model]["projects"]
        window = result["models"][model]["common_window_s"]
        assert [row["project"] for row in rows] == sorted(projects)
        assert window[1] - window[0] >= MIN_WINDOW_S, (model, window, result["released_s"])
        errors = {row["project"]: row["relative_error"] for row in rows}
        assert all(e is not None and abs(e) <= 0.10 for e in errors.values()), (model, window, errors)
