"""Measure a judge against human labels (``ragmon calibrate``, docs/judges.md).

- ``dataset``  labelled rows (JSONL): read, validated, malformed lines reported with their number
- ``stats``    agreement statistics (ROC AUC, balanced accuracy, kappa, best threshold) and ranking
               metrics, on ``ragmon eval``'s IR functions and bootstrap (``evaluation.ir``/``stats``)
- ``report``   the per-metric report: JSON and the terminal table
- ``fit``      ``--fit``: the local judge refitted to the labels (faithfulness, answer relevancy, context
               relevance; cross-validated), as a judge profile
- ``label_order`` which traces to label first for a fit (``ragmon dataset label --mode judge``, the
               learning curve of ``--fit``): scores nearest the threshold, pipelines taking turns
- ``command``  ``ragmon calibrate``: score the labelled rows with a judge, print and write the report
"""
