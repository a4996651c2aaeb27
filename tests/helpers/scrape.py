"""Read values from a real /metrics endpoint over HTTP."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = []
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                self.samples.append((s.name, dict(s.labels), s.value))

    def value(self, name: str, **labels: str) -> float:
        """Sum of samples named ``name`` whose labels include ``labels`` (0 when none)."""
        return sum(v for n, lab, v in self.samples
                   if n == name and all(lab.get(k) == val for k, val in labels.items()))

    def labelsets(self, name: str) -> list[dict[str, str]]:
        return [lab for n, lab, _ in self.samples if n == name]


def scrape(port: int, host: str = "127.0.0.1") -> Scrape:
    response = httpx.get(f"http://{host}:{port}/metrics", timeout=10)
    response.raise_for_status()
    return Scrape(response.text)
