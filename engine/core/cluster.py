"""What a sweep on a Ray cluster may ask for, checked before any node is contacted: one
place for the CLI, the Run page's request and the executor (issue #15)."""

from __future__ import annotations

from engine.core.errors import UserError

__all__ = ["parse_placement", "check_profile_on_cluster", "EXECUTORS", "check_where"]


def parse_placement(text: str) -> tuple[str, str]:
    """("shape", NAME) or ("node", ID) from `shape=NAME` / `node=ID`; UserError naming
    `placement` otherwise."""
    key, sep, value = (text or "").partition("=")
    key, value = key.strip(), value.strip()
    if not sep or key not in ("shape", "node") or not value:
        raise UserError(f"placement: {text!r}; allowed: shape=NAME (a node tagged with the "
                        "custom resource shape:NAME) or node=ID (a Ray node id)",
                        field="placement")
    return key, value


def check_profile_on_cluster(profile_steps: int) -> None:
    """A profile's trace file is written on the node that ran it, where the driver cannot
    read it: refused rather than stored without its trace."""
    if profile_steps:
        raise UserError("profile_steps: a profile's trace stays on the node that ran it; "
                        "allowed on a Ray cluster (--executor ray): 0", field="profile_steps")


# Where a job runs: this machine, or the Ray cluster at $BENCH_RAY_ADDRESS
EXECUTORS = ("local", "ray")


def check_where(executor: str, placements) -> None:
    """A known executor, and placements (shape=NAME or node=ID) only on the cluster."""
    if executor not in EXECUTORS:
        raise UserError(f"executor: {executor!r} is not known; allowed: "
                        f"{', '.join(EXECUTORS)}", field="executor")
    if executor == "local" and placements:
        raise UserError("placement: only with the ray executor; allowed on this machine: "
                        "none", field="placement")
    for p in placements:
        parse_placement(p)
