"""Test stand-ins that speak a real protocol over real I/O (only for paid external services)."""
