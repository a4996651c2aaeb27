"""A RAG app that behaves like a real one, for the hand-off tests: ragmon's SDK with its default
export (a BatchSpanProcessor exporting every 5 s over OTLP/HTTP), retrieval at once, an LLM call
of 0.3-2.0 s, 8 requests in flight. A trace whose LLM call straddles an export is written in two
parts. Prints each request's trace id as it finishes, then flushes and exits.

    python -m tests.kafka.split_app --endpoint http://127.0.0.1:4318/v1/traces --requests 200 --rate 5
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ragmon

CONTEXTS = [
    {"id": "pricing", "text": "The Pro plan costs 49 dollars per month and includes 10 seats.", "score": 0.9},
    {"id": "refunds", "text": "Refunds are available within 30 days of purchase for annual plans.", "score": 0.5},
    {"id": "sso", "text": "Single sign-on with SAML is included in the Enterprise plan only.", "score": 0.3},
]
ANSWER = "The Pro plan costs 49 dollars per month and includes 10 seats."


@ragmon.retriever
def search(query: str) -> list[dict[str, object]]:
    return CONTEXTS


@ragmon.generator(model="slow-llm")
def answer(query: str, docs: list[dict[str, object]]) -> str:
    time.sleep(random.uniform(0.3, 2.0))  # the LLM call
    return ANSWER


@ragmon.pipeline(name="support")
def rag(query: str) -> str:
    answer(query, search(query))
    return ragmon.current_trace_id() or ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0, help="requests started per second")
    parser.add_argument("--in-flight", type=int, default=8)
    args = parser.parse_args()
    ragmon.init(service_name="split-app", endpoint=args.endpoint)
    lock = threading.Lock()

    def one(i: int) -> None:
        trace_id = rag(f"How much does the Pro plan cost per month? (#{i})")
        with lock:
            sys.stdout.write(trace_id + "\n")
            sys.stdout.flush()

    with ThreadPoolExecutor(args.in_flight) as pool:
        started = time.monotonic()
        for i in range(args.requests):
            time.sleep(max(0.0, started + i / args.rate - time.monotonic()))
            pool.submit(one, i)
    ragmon.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
