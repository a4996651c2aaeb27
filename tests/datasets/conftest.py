"""Fixtures for the golden-set tools: small real corpora on disk; the SDK's clean global state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sdk.conftest import clean_sdk  # noqa: F401  # fresh SDK state for the harvest end-to-end test

DOCS = {
    "refunds.md": "# Refunds\n\nRefunds are paid to the original card within 5 business days after the returned "
                  "item reaches the warehouse in Leipzig.\n\nStore credit is issued at once instead when the "
                  "customer asks for it at the till.\n\n## Exceptions\n\nGift cards are never refunded; they can "
                  "be exchanged for a new gift card with the same balance at any Northwind store.",
    "shipping.md": "# Shipping\n\nParcels leave the Leipzig warehouse every weekday at 4 pm. Standard delivery "
                   "inside Germany takes 2 business days; express delivery arrives the next morning.\n\n"
                   "Northwind ships to Austria and Switzerland for a flat fee of 9 euros.",
    "warranty.txt": "Every Northwind kettle carries a warranty of 3 years. The warranty covers the heating element "
                    "and the switch but not limescale damage. Claims need the original receipt.",
    "care/descaling.txt": "Descale the kettle once a month with citric acid. Limescale shortens the life of the "
                          "heating element and voids the warranty on it. Rinse twice after descaling.",
}


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    for name, text in DOCS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
