"""More teams than the old shard slots, on one replica in front of fleets that serve their
queues by priority as vLLM's priority scheduler does: 20 teams with a batch each on one model
(five of them also on a second model) are all served at once, the teams created last get
their share like the first, a 21st team's small batch finishes within seconds, and the second
model's teams run side by side, not one after another. Shares come from the fleets' own logs.

Each fleet: 2 URLs x 8 slots x 50 ms = 320 lines/s; batchd's window is twice its slots, so a
queue forms at the fleet and its order (the priorities batchd sends) decides who is served."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.scheduling.priority import AT_RISK_PRIORITY, BATCH_PRIORITY
from harness import postgres
from harness.poll import wait_for_batch, wait_until
from harness.tenancy import MODEL, TenancyCluster, project_of, shares, span
from tests.support.batches import SLOW_HOST_SECONDS

# Servers in front of fake upstream fleets, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

SECOND = "fleet-model-2"
TEAMS = [f"team{n:02}" for n in range(20)]
LATE = "team-late"
# Each team's batch needs about 30 s at a twentieth of the fleet: long enough that on a slow host, where
# validating the 26 batches staggers their starts by seconds, every team still has work once the
# last one starts (the shares are measured then). A second-model batch needs about 2 s of its
# fleet alone and 9 s shared by the five: longer than the seconds their validations may stagger.
LINES, SECOND_LINES, SMALL = 500, 600, 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, replica_storage_env):
    database_url = postgres.create_database()
    cluster = TenancyCluster(
        tmp_path_factory.mktemp("many-teams"),
        database_url,
        [*TEAMS, LATE],
        replica_storage_env,
        replicas=1,
        delay_ms=50,
        models=(MODEL, SECOND),
        priority=True,
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        postgres.drop_database(database_url)


def test_twenty_teams_on_one_replica_are_served_at_once_and_share_alike(cluster):
    files = {team: cluster.upload(team, "main", LINES) for team in TEAMS}
    second = {team: cluster.upload(team, "second", SECOND_LINES, model=SECOND) for team in TEAMS[-5:]}
    small = cluster.upload(LATE, "small", SMALL)
    created: dict[str, float] = {}
    batches = {}
    for team in TEAMS:
        batches[team] = cluster.create(team, files[team]).id

    def create_second(team: str) -> None:
        created[team] = time.time()
        batches[f"{team}/second"] = cluster.create(team, second[team]).id

    # At once, as five teams would: created one by one on a busy host, the first could be done
    # before the last exists, and no order of service would show.
    with ThreadPoolExecutor(5) as pool:
        list(pool.map(create_second, TEAMS[-5:]))
    # Every team's lines reach the fleet, the last created as well as the first.
    wait_until(lambda: {project_of(r.tag) for r in cluster.log()} >= set(TEAMS), timeout=20, what="all 20 served")
    small_created = time.monotonic()
    small_batch = cluster.create(LATE, small).id
    small_done = wait_for_batch(cluster.client(LATE), small_batch, timeout=60, interval=0.05)
    small_seconds = time.monotonic() - small_created
    for key, batch_id in batches.items():
        done = wait_for_batch(cluster.client(project_of(key)), batch_id, timeout=180)
        assert done.status == "completed" and done.request_counts.failed == 0, done

    log = cluster.log(MODEL)
    # The goal is 3 s (bench W6 on a quiet host); the suite runs on a busy one whose speed drifts
    # (4.5 s seen on a slow day, and W6 itself took 6.6-7.6 s on a slow night). Before this
    # scheduler, 15.6 s.
    assert small_done.status == "completed" and small_seconds <= SLOW_HOST_SECONDS, small_seconds
    # While every team has work: from the moment the last one was served to the first one's end.
    starts = {team: span(log, f"{team}/")[0] for team in TEAMS}
    ends = {team: span(log, f"{team}/main")[1] for team in TEAMS}
    window = (max(starts.values()) + 1, min(ends.values()))
    assert window[1] - window[0] >= 3, window
    share = {p: s for p, s in shares(log, *window).items() if p in TEAMS}
    assert len(share) == 20, share
    fair = 1 / 20
    assert all(abs(s - fair) <= 0.3 * fair for s in share.values()), share
    # Batch lines reach the fleet behind online traffic at the batch priority, but for the small
    # batch's, which go ahead once the scheduler has seen it (within a second). None should be at
    # risk; once, in a CI run on an overloaded host, some were for a moment (a few percent of lines).
    team_priorities = [r.priority for r in log if project_of(r.tag) in TEAMS]
    assert set(team_priorities) <= {BATCH_PRIORITY, AT_RISK_PRIORITY}, set(team_priorities)
    assert team_priorities.count(AT_RISK_PRIORITY) <= 0.1 * len(team_priorities), team_priorities.count(
        AT_RISK_PRIORITY
    )
    small_priorities = [r.priority for r in log if project_of(r.tag) == LATE]
    assert small_priorities.count(AT_RISK_PRIORITY) >= SMALL / 2, small_priorities

    second_log = cluster.log(SECOND)
    second_starts = sorted(span(second_log, f"{team}/second")[0] - created[team] for team in TEAMS[-5:])
    # Side by side: each of the five starts within seconds of its creation, not after the others
    # (within 3 s in W6 on a quiet host; 3.9 s seen in a CI run at twice the suite's usual time,
    # up to 8 s in W6 on a slow night).
    assert second_starts[-1] <= SLOW_HOST_SECONDS, second_starts
    second_ends = [span(second_log, f"{team}/second")[1] for team in TEAMS[-5:]]
    second_first = [span(second_log, f"{team}/second")[0] for team in TEAMS[-5:]]
    # Every second-model team was served before any finished, give or take the slow host's seconds.
    assert max(second_first) < min(second_ends) + 2, (second_first, second_ends)
