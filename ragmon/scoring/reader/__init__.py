"""ragmon's own reader: a small cross-encoder that reads a claim against the context sentences it
restates and says supported / unsupported / contradicted.

Trained here, reproducibly, from public human-labelled data (``data_manifest.json``), and shipped
int8 inside the package (``assets/``, with its model card). Modules:

- ``windows``  the premise window of a claim (its best context sentences; shared by training and use), verbatim copies
- ``edits``    one-edit contradictions made from training sentences
- ``data``     the manifest's sources (sha256-checked) into training / dev pairs; RAGTruth folds
- ``train``    the training recipe (the ``train`` extra: torch, transformers), checkpoints, resume
- ``export``   the trained model to ONNX, then int8, with its equality check and model card
- ``fixed_ranges`` the export's int8 activations on fixed ranges measured once, so no verdict depends on its batch
- ``model``    the shipped model at run time, on the shared ONNX runner
"""
