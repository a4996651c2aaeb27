"""Length-bucketed batches in the embedder: a text's vectors do not depend on the texts it was
batched with (float32 and int8 paths), and the batch cutter covers every text once within the
batch bound."""

from __future__ import annotations

import numpy as np
import pytest

from ragmon.scoring.local.embedder import Embedder, shared_embedder
from ragmon.scoring.onnx_runner import length_buckets

TEXTS = [
    "Paris.",
    "The museum is open from 9 am to 6 pm every day except Monday.",
    "Tickets cost 12 euros for adults; children under 12 enter for free.",
    "",
    "When was the Eiffel Tower completed?",
    "The Eiffel Tower was completed in March 1889 for the World's Fair, after two years, two months "
    "and five days of construction by some three hundred workers, and it remained the tallest "
    "man-made structure in the world for forty-one years until the Chrysler Building was finished.",
    "Yes.",
    "Guided tours in Japanese start at the fountain behind the cathedral.",
]


@pytest.fixture(scope="module", params=[False, True], ids=["float32", "int8"])
def embedder(request: pytest.FixtureRequest) -> Embedder:
    # int8: activations are quantized with fixed ranges (not per batch), so this holds there too
    return Embedder(int8=True) if request.param else shared_embedder()


def test_vectors_do_not_depend_on_the_batch(embedder: Embedder) -> None:
    together, states = embedder.embed_with_tokens(TEXTS)
    for i, text in enumerate(TEXTS):
        alone, alone_states = embedder.embed_with_tokens([text])
        np.testing.assert_allclose(together[i], alone[0], atol=1e-5)
        assert states[i].ids.tolist() == alone_states[0].ids.tolist()
        np.testing.assert_allclose(
            states[i].vectors.astype(np.float32), alone_states[0].vectors.astype(np.float32), atol=2e-3
        )
    # the order of the input is the order of the output, whatever the batches were
    reversed_vecs, _ = embedder.embed_with_tokens(TEXTS[::-1])
    np.testing.assert_allclose(reversed_vecs[::-1], together, atol=1e-5)


def test_empty_text_is_embedded_as_a_space(embedder: Embedder) -> None:
    vecs, states = embedder.embed_with_tokens(["", " "])
    np.testing.assert_allclose(vecs[0], vecs[1], atol=1e-6)
    assert states[0].ids.tolist() == [] and states[0].vectors.shape == (0, 384)


def test_length_buckets_cover_every_text_once_within_the_bound() -> None:
    lengths = [5, 40, 6, 7, 128, 41, 5, 39, 6, 12, 128, 7]
    groups = length_buckets(lengths, max_batch=3)
    flat = [i for g in groups for i in g]
    assert sorted(flat) == list(range(len(lengths)))
    assert all(1 <= len(g) <= 3 for g in groups)
    # batches are runs of the length order: no batch mixes a short text with a long one
    for g in groups:
        assert max(lengths[i] for i in g) - min(lengths[i] for i in g) <= 2


def test_length_buckets_trade_padding_against_runs() -> None:
    # equal lengths: one run; a few tokens apart: still one run (padding is cheaper than a run)
    assert length_buckets([20] * 6, max_batch=32) == [[0, 1, 2, 3, 4, 5]]
    assert len(length_buckets([20, 21, 22, 20], max_batch=32)) == 1
    # far apart: padding the short ones to the long one costs more than a second run
    assert sorted(map(sorted, length_buckets([10, 10, 10, 120], max_batch=32))) == [[0, 1, 2], [3]]
    assert length_buckets([], max_batch=8) == []
    # a larger run cost merges more
    assert len(length_buckets([10, 10, 10, 120], max_batch=32, run_cost=1000)) == 1
