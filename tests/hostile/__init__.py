"""Hostile and buggy clients against a real agent: malformed input, load, slow clients, signals,
and who may connect. Each test is the regression test of one way the agent once failed
(issue 17); the next attacker starts from here."""
