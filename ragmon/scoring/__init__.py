"""Judges, sampling and scoring formulas. httpx never leaves this package."""
