"""Measure a judge against human labels: statistics (``stats``) and the ``calibrate`` run."""
