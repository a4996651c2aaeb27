"""The demo's bundled knowledge base: a fictional help-desk SaaS, "Brightdesk".

``corpus.json`` holds a few dozen short support articles with concrete prices, limits,
names and periods (so a contradicted number or name is detectable), and a list of
questions, each with the id of the article that answers it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True, slots=True)
class KbDocument:
    id: str
    title: str
    topic: str
    text: str


@dataclass(frozen=True, slots=True)
class KbQuestion:
    question: str
    document_id: str  # the article that answers it


@dataclass(frozen=True, slots=True)
class Corpus:
    company: str
    documents: tuple[KbDocument, ...]
    questions: tuple[KbQuestion, ...]

    def document(self, doc_id: str) -> KbDocument:
        for doc in self.documents:
            if doc.id == doc_id:
                return doc
        raise KeyError(doc_id)


@lru_cache(maxsize=1)
def load_corpus() -> Corpus:
    """The bundled corpus (parsed once per process)."""
    raw = json.loads(resources.files("ragmon.demo").joinpath("corpus.json").read_text(encoding="utf-8"))
    return Corpus(
        company=raw["company"],
        documents=tuple(KbDocument(**d) for d in raw["documents"]),
        questions=tuple(KbQuestion(**q) for q in raw["questions"]),
    )
