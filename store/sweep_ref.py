"""Which stored sweep a user means: a full id or a unique prefix, else the newest inference
sweep. Shared by the commands that read one sweep (`compare`, `report`) and by the report a
page offers, so each refuses the same references with the same words."""

from __future__ import annotations

from engine.scenarios import INFERENCE, SCENARIOS
from engine.core.errors import UserError
from store.runs import list_sweeps

__all__ = ["resolve_inference_sweep", "resolve_sweep"]


def resolve_sweep(con, ref: str | None, scenarios=(INFERENCE,)) -> tuple[str, object]:
    """(the full id of the sweep `ref` names, its Scenario); None or "": the newest
    inference sweep.

    An exact id wins over a longer id it is a prefix of ("sweep-1" beside "sweep-10");
    otherwise the prefix must match exactly one sweep. UserError (field "sweep") when none
    is stored, the prefix is unknown or ambiguous, or the sweep holds runs of a kind not
    among `scenarios` (what the caller covers)."""
    sweeps = list_sweeps(con, kind=None if ref else INFERENCE.kind)
    ids = sweeps.sweep_id.tolist()
    if not ids:
        raise UserError("sweep: none stored yet; run `python -m engine run ...` first",
                        field="sweep")
    match = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref or "")]
    if ref and len(match) != 1:
        raise UserError(f"sweep: {ref!r} matches {len(match)} sweeps; allowed: a unique id "
                        "prefix (see `python -m engine sweeps`)", field="sweep")
    sweep_id = match[0]
    scenario = SCENARIOS.get(sweeps.set_index("sweep_id").kind.get(sweep_id), INFERENCE)
    if scenario not in scenarios:
        allowed = " or ".join(s.kind for s in scenarios)
        raise UserError(f"sweep: {sweep_id[:8]} holds {scenario.kind} runs, which this "
                        f"comparison does not cover; allowed: an {allowed} sweep (see "
                        f"`python -m engine runs --sweep {sweep_id}` or the dashboard's "
                        f"{scenario.title} page)", field="sweep")
    return sweep_id, scenario


def resolve_inference_sweep(con, ref: str | None) -> str:
    """The full id of the inference sweep `ref` names (resolve_sweep's refusals)."""
    return resolve_sweep(con, ref)[0]
