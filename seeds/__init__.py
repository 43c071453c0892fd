"""Test data built by hand (seeds/records.py), shared by tests/ and bench/; nothing in the
product imports it."""

__all__: list[str] = []
