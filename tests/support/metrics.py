"""Read a server's /metrics with prometheus_client's own text parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from harness.server import ServerProcess


def scrape(server: ServerProcess, token: str | None = None) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted label items): value} of every sample."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = server.http.get(server.base_url.removesuffix("/v1") + "/metrics", headers=headers)
    response.raise_for_status()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
