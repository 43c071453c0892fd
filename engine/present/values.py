"""One test for a missing value, whatever carried it: None, a float NaN, or pandas' NA.

DuckDB hands a nullable INTEGER column to pandas 3 as a nullable integer dtype whose
missing value is pd.NA, and `NA != NA` is NA, whose truth value raises: the usual
`v is None or v != v` test breaks on any run that left an integer column empty (a user's
model has no image size). Pure; no Streamlit.
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["missing"]


def missing(v) -> bool:
    """None, NaN or pd.NA (NaT too): a value a table shows as empty."""
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float) and math.isnan(v)
