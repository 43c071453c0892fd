"""The Pareto front of measured configurations: those no other one beats on every axis.

Pure: items and a key in, the front out. key(item) gives each axis as a value to minimise
(negate what is better higher, such as QPS); an axis that is None on either item of a pair
is left out of that pair's comparison (a configuration nobody priced is still compared on
latency and rate).
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

__all__ = ["pareto_front", "dominates"]

T = TypeVar("T")


def dominates(a: Sequence[float | None], b: Sequence[float | None]) -> bool:
    """a is no worse than b on every axis both know, and better on one."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    return bool(pairs) and all(x <= y for x, y in pairs) and any(x < y for x, y in pairs)


def pareto_front(items: Sequence[T], key: Callable[[T], Sequence[float | None]]) -> list[T]:
    """The items no other item dominates, in their given order."""
    keys = [tuple(key(i)) for i in items]
    return [item for item, k in zip(items, keys)
            if not any(dominates(o, k) for o in keys)]
