"""Serving: one MLPerf LoadGen test against a warm model, LoadGen's verdict kept.

One kind of work, in one package: spec.py (what to run), hooks.py (its Scenario) and
the rest its files name. Nothing is imported here, so a module of the kind imports
another without running the registry (engine/scenarios/__init__.py lists the kinds).
"""

__all__: list[str] = []
