"""Metric code read from the metric table (``ragmon.quality``): pure, synchronous, no I/O.

Both judges compute their scores with these modules, so a faithfulness of 0.8 means the same
from the local judge, the LLM judge, ``ragmon eval`` and the dashboard.

Modules:

- ``formulas``    the RAGAS formulas (faithfulness, context precision, answer relevancy, context
                  recall, answer correctness) and the citation and abstention scores
- ``citations``   citation markers in an answer, paired with its claims and the cited contexts
- ``abstention``  whether an answer declines to answer (``no_answer`` questions)
- ``diagnosis``   retrieval vs generation failure of one scored trace, from the table's roles
"""
