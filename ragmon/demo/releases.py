"""The demo's support bot as two releases, for ``ragmon demo eval`` — or for ``ragmon eval --app``::

    ragmon eval GOLDEN.jsonl --app ragmon.demo.releases:released --out released.json
    ragmon eval GOLDEN.jsonl --app ragmon.demo.releases:broken --baseline released.json

=========  ===================================================================================
released   the bot as ``ragmon demo`` runs it: BM25 over each article's title and text, the
           answer made of the retrieved articles' sentences
broken     a release that went wrong twice: the new index holds only the articles' titles (a
           worse retriever: the gold article falls out of the top 3 for about one question in
           six), and the new prompt makes the model change one fact in every answer (a number,
           a name or a negation, as ``failures.contradict`` does for ``ragmon demo``)
=========  ===================================================================================

Each entry point is ``fn(question) -> answer`` over ``DemoRag``, whose ``@ragmon`` decorators
give ``ragmon eval`` the spans it captures. Both are deterministic: the simulated latency and the
changed fact are drawn from a seed made of the question alone.
"""

from __future__ import annotations

import zlib
from functools import cache

from .app import DemoRag
from .corpus import KbDocument, load_corpus
from .failures import FailureKind
from .retriever import Bm25Retriever

__all__ = ["broken", "released"]


def title_only(doc: KbDocument) -> str:
    """What the broken release indexes: the title, without the article's text."""
    return doc.title


@cache
def _released_bot() -> DemoRag:
    return DemoRag()


@cache
def _broken_bot() -> DemoRag:
    corpus = load_corpus()
    return DemoRag(corpus, retriever=Bm25Retriever(corpus, indexed=title_only))


def _seed(question: str) -> int:
    return zlib.crc32(question.encode("utf-8"))


def released(question: str) -> str:
    """The support bot as released."""
    return _released_bot().ask(question, FailureKind.HEALTHY, seed=_seed(question)).answer


def broken(question: str) -> str:
    """The broken release: a title-only index, and a prompt that changes one fact per answer."""
    return _broken_bot().ask(question, FailureKind.CONTRADICTION, seed=_seed(question)).answer
