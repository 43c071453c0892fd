"""Queries the pages need for generation runs beyond store/generation.py's (issue 37): what
the Cost page prices. Generation's figures live in its own table (generation_runs); the
run's machine, split and setting in runs, read as store.queries.machine_throughput reads
them for inference, with the same machine columns, so engine.analysis.cost_machines' basis
and figure take these rows unchanged.
"""

from __future__ import annotations

import pandas as pd

from engine.core.errors import UserError
from engine.scenarios import GENERATION
from store.generation import generation_runs, generation_sweeps
from store.queries import _OF_SELECTED, _THREADS_PER_CORE, SETTING_COLUMNS, setting_params, setting_sql

__all__ = ["generation_throughput", "generation_sweep_ref", "generation_set_runs"]


def generation_throughput(con, setting: tuple | None,
                          sweep_id: str | None = None) -> pd.DataFrame:
    """Per configuration (model, runtime, prompt and output length, batch, intra-op threads,
    replicas) and machine (catalog shape and system), the medians over its ok runs of output
    tokens/s and prefill tokens/s (input tokens/s while the prompt is processed), with the
    machine columns cost_machines.basis reads; one device, precision and inter-op thread
    count (the setting's first three columns). Rows of the setting's own machine are
    `selected`; other machines' come only where runs name their catalog shape. Runs beside
    our neighbour are left out: a machine is priced from runs on it alone."""
    system = None if setting is None or setting[3] is None else str(setting[3])
    shape = None if setting is None or len(setting) < 5 else str(setting[4] or "")
    selected = [system, system, shape, shape]
    return con.execute(
        "SELECT r.model, r.framework, r.runtime, r.framework || ' (' || r.runtime || ')' "
        "AS contender, g.prompt_len, g.output_len, r.batch_size, r.intra_threads AS threads, "
        "coalesce(r.replicas, 1) AS replicas, r.machine_shape, r.system_id, "
        f"{_THREADS_PER_CORE} AS threads_per_core, {_OF_SELECTED} AS selected, "
        "median(g.output_tok_s) AS throughput, median(g.output_tok_s) AS output_tok_s, "
        "median(g.prefill_tok_s) AS prefill_tok_s, median(g.tpot_p50_ms) AS tpot_p50_ms, "
        "count(*) AS runs, "
        "max((r.extra->>'cores_used')::INTEGER) AS cores_used, "
        "bool_or((r.extra->>'hypervisor')::BOOLEAN) AS hypervisor, "
        "any_value(y.cpu_model) AS cpu_model, any_value(y.usable_cores) AS host_vcpus, "
        "any_value(y.platform) AS platform "
        "FROM runs r JOIN generation_runs g USING (run_id) "
        "LEFT JOIN systems y USING (system_id) "
        "WHERE r.status = 'ok' AND r.kind = ? AND g.output_tok_s > 0 "
        "AND g.prefill_tok_s > 0 AND r.source = 'engine' "
        "AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        "AND coalesce(r.contention, 'none') = 'none' AND "
        + setting_sql("r.", SETTING_COLUMNS[:3])
        + f" AND ({_OF_SELECTED} OR r.machine_shape IS NOT NULL) "
        "GROUP BY r.model, r.framework, r.runtime, g.prompt_len, g.output_len, r.batch_size, "
        "r.intra_threads, coalesce(r.replicas, 1), r.machine_shape, r.system_id, "
        f"{_THREADS_PER_CORE}, r.device, r.precision, r.inter_threads "
        "ORDER BY r.model, contender, g.prompt_len, g.output_len, r.batch_size, "
        "r.machine_shape NULLS FIRST, r.system_id, threads, replicas",
        [*selected, GENERATION.kind, sweep_id, sweep_id, *setting_params(setting, 3),
         *selected]).df()


def generation_sweep_ref(con, ref: str | None) -> str | None:
    """The full id of the generation sweep `ref` names (an exact id, or a prefix of exactly
    one), else None: the caller then reads it as another kind's."""
    if not ref:
        return None
    ids = generation_sweeps(con).sweep_id.tolist()
    match = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    return match[0] if len(match) == 1 else None


def generation_set_runs(con, selector: str, field: str) -> list[dict]:
    """The runs of the generation sweeps a selector names (ids or unique prefixes,
    comma-separated), oldest first; UserError naming `field` for one that names none."""
    out = []
    for ref in (r.strip() for r in (selector or "").split(",") if r.strip()):
        sweep_id = generation_sweep_ref(con, ref)
        if sweep_id is None:
            raise UserError(f"{field}: {ref!r} names no single generation sweep; allowed: a "
                            "generation sweep's id or unique prefix, comma-separated",
                            field=field)
        out.extend(generation_runs(con, sweep_id).to_dict("records"))
    if not out:
        raise UserError(f"{field}: no generation sweep named; allowed: a generation sweep's "
                        "id or unique prefix, comma-separated", field=field)
    return out
