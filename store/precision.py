"""Reduced-precision runs beside their fp32 baseline (issue 28 part 6): named queries for
Results, Compare and the report. Bound parameters only."""

from __future__ import annotations

import pandas as pd

from engine.core.runtimes import OPTIONS
from engine.scenarios import INFERENCE

__all__ = ["precision_vs_fp32", "BASELINE"]

# What a reduced-precision run's speed-up is measured against, in words (pages say it); the
# runtimes' own options (engine.core.runtimes: OpenVINO's hint) are part of the setting.
BASELINE = ("the median p50 of every successful fp32 run of the same model, framework, "
            "runtime, batch size, threads, image size, device, replicas, neighbour setting and "
            f"{' and '.join(o.label for o in OPTIONS)} on the same machine, over this run's p50")

# b: the fp32 runs a reduced-precision run r is compared with (see BASELINE)
_SAME = ("b.status = 'ok' AND b.kind = r.kind AND b.precision = 'fp32' AND b.model = r.model "
         "AND b.framework = r.framework AND b.runtime = r.runtime "
         "AND b.batch_size = r.batch_size AND b.intra_threads = r.intra_threads "
         "AND b.image_size IS NOT DISTINCT FROM r.image_size AND b.device = r.device "
         "AND b.system_id IS NOT DISTINCT FROM r.system_id "
         "AND coalesce(b.replicas, 1) = coalesce(r.replicas, 1) "
         "AND coalesce(b.contention, 'none') = coalesce(r.contention, 'none') "
         "AND coalesce(b.wait_policy, '') = coalesce(r.wait_policy, '')"
         # an option's name is the project's identifier (a row's), never a user's text
         + "".join(f" AND coalesce(b.extra->>'$.{o.name}', '') = "
                   f"coalesce(r.extra->>'$.{o.name}', '')" for o in OPTIONS))


def precision_vs_fp32(con, *, models=None, sweep_id: str | None = None) -> pd.DataFrame:
    """Every successful bf16/int8 inference run (of the models, of a sweep; None: all) with
    its error against fp32 and the fp32 baseline's median p50 (NULL when none is stored)."""
    return con.execute(
        "SELECT r.run_id, r.sweep_id, r.model, r.framework, r.runtime, r.precision, "
        "r.batch_size, r.intra_threads AS threads, r.image_size, r.median_ms AS p50_ms, "
        "r.output_max_abs, r.output_max_rel, r.top1_agreement, r.top1_inputs, "
        f"(SELECT median(b.median_ms) FROM runs b WHERE {_SAME}) AS fp32_p50_ms, "
        f"(SELECT count(*) FROM runs b WHERE {_SAME}) AS fp32_runs "
        "FROM runs r WHERE r.status = 'ok' AND r.kind = ? AND r.precision <> 'fp32' "
        "AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], r.model)) "
        "AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        "ORDER BY r.model, r.framework, r.runtime, r.precision, r.batch_size, r.intra_threads",
        [INFERENCE.kind, models, models, sweep_id, sweep_id]).df()
