"""The offline local judge: MiniLM sentence embeddings plus claim-level evidence checks.

No network, no GPU, no LLM. For each trace it

1. splits the answer into claims and each context into sentences (``claims``, over ``scoring.text``),
2. embeds the question, the claims and the context sentences that share a word with them in
   one batch (``embedder``; matrix products on int8 kernels, ``onnx_int8``),
3. finds each claim's best evidence and checks words, numbers, negations and names
   against it (``evidence``),
4. combines those interpretable features with coefficients fitted on human-labelled data
   (``model``, coefficients in ``coefficients``; see docs/judges.md for the method, the held-out
   numbers and the blind spots).

For ``ragmon eval`` (``score_for_eval``) the same per-claim support check is run on other pairs:
reference claims against the contexts (context recall), answer claims against the reference and
reference claims against the answer (the TP/FP/FN of answer correctness, blended with the MiniLM
cosine of answer and reference), and each cited claim against the context it cites (citation
correctness; markers found by ``metrics.citations``); abstention is recognised by
``metrics.abstention``.

What it cannot do is read: a paraphrase that reverses the meaning without a negation word,
a wrong causal link between two supported facts, or a claim that is true in the world but not
stated in the contexts all look the same to it as faithful text. See docs/judges.md.

Modules. Private (this package's API is ``__all__``): ``_encoder`` embeddings through the sentence
cache, ``_analysis`` claims/evidence/context features (steps 1-3), ``_online`` the three online
metrics (step 4), ``_offline`` the ``ragmon eval`` metrics, ``_judge`` the facade, ``_profile``
judge profiles (``ragmon calibrate --fit`` fits them with ``online_values``). Public building
blocks, used by the dataset tools, calibration and bench/: ``claims`` claims, numbers, negations,
names; ``evidence`` a claim's best evidence and its word/number/negation/name checks; ``conflicts``
a changed number, name, month or unit against the sentence a claim restates; ``embedder``
the MiniLM model (``assets/`` holds its tokenizer); ``onnx_int8`` the int8 rewrite of its graph;
``model`` the interpretable features and how they combine; ``coefficients`` the fitted numbers
(written by bench/fit_local_judge.py).
"""

from __future__ import annotations

from ._analysis import Analysis
from ._judge import STAGES, LocalJudge
from ._online import online_values
from ._profile import JudgeProfile, load_profile, save_profile

__all__ = ["STAGES", "Analysis", "JudgeProfile", "LocalJudge", "load_profile", "online_values", "save_profile"]
