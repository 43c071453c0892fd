"""The tuner for serving a language model (issue 38): engine x precision x max concurrent
sequences x threads under a p99 TTFT and a p99 TPOT bound, for the most requests/s or the
least USD per 1 M output tokens on a shape; the recommendation, its gain over the default
(PyTorch eager, one request at a time), the Pareto front and every pruned candidate with why.

It is serving's tuner (engine/run/search/autotune.autotune: prune, confirm the best
survivors with a max-rate search, stop when confirmations stop paying; the default
confirmed too), fed with this kind's measurements:
- a candidate's cheap figure is a closed loop of as many users as its engine takes
  sequences (its full batch, no queue), read as requests/s; a closed loop whose median
  TPOT is already over the TPOT bound there, or whose p99 TTFT is over the TTFT bound, is
  pruned with that reason (a slower arrival rate batches less; the candidates with fewer
  sequences measure that);
- a confirmation is the max-rate search under both bounds (gen_max_rate.py), every probe
  the same number of requests;
- a price is USD per 1 M output tokens at the max rate (requests/s x output tokens) on
  the shape (engine/analysis/genserve_cost.py: whole machines, measured or scaled).
Every test is stored under the tuning's one sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from engine.analysis.cost import Machine
from engine.analysis.genserve_cost import TokenRates, token_serving_rows
from engine.core.record import RunRecord
from engine.run.search.autotune import (DEFAULT_TUNE_MARGIN, PRUNE_FACTOR, TOP_N,
                                        ClosedFigure, Tuning, autotune)
from engine.run.search.gen_max_rate import (GEN_QUERIES, figures_of, search_in, stored_runs,
                                           ttft_view)
from engine.scenarios.genserve.engines import engine_row

__all__ = ["GenCandidate", "gen_candidates", "closed_figure", "stored_gen_tune",
           "DEFAULT_ENGINE_CANDIDATE", "token_price", "default_candidate"]

DEFAULT_ENGINE_CANDIDATE = "eager"


@dataclass(frozen=True)
class GenCandidate:
    runtime: str  # the engine
    precision: str
    max_num_seqs: int
    threads: int
    replicas: int = 1
    framework = "torch"

    @property
    def max_batch(self) -> int:  # serving's tuner words a candidate's batch so
        return self.max_num_seqs

    def closed_loop(self) -> "GenCandidate":
        return self

    def label(self) -> str:
        seqs = (f"up to {self.max_num_seqs} sequences" if engine_row(self.runtime)
                and engine_row(self.runtime).continuous else "one request at a time")
        reps = f" x {self.replicas} replicas" if self.replicas > 1 else ""
        return (f"{self.runtime} {self.precision}, {seqs}, {self.threads} "
                f"thread{'s' * (self.threads != 1)}{reps}")


def gen_candidates(engines, precisions, seqs, threads, replicas=(1,),
                   cores: int | None = None) -> list[GenCandidate]:
    """Every engine x precision (its own) x sequences (1 for a one-at-a-time engine) x
    threads x replicas, those whose threads x replicas fit `cores` (None: this machine's)."""
    from engine.core.limits import logical_cores

    cores = cores or logical_cores()
    out = []
    for e in dict.fromkeys(engines):
        row = engine_row(e)
        for p in dict.fromkeys(precisions):
            if row is None or p not in row.precisions:
                continue
            for n in (dict.fromkeys(seqs) if row.continuous else (1,)):
                for t in dict.fromkeys(threads):
                    for r in dict.fromkeys(replicas):
                        if t * r <= cores:
                            out.append(GenCandidate(e, p, n, t, r))
    return list(dict.fromkeys(out))


def closed_figure(rec: RunRecord, ttft_ms: float, tpot_ms: float) -> ClosedFigure:
    """A closed-loop test as the tuner reads it: requests/s, its p99 TTFT as the p99 the
    TTFT bound prunes on, and invalid when its median TPOT is over the TPOT bound."""
    g = figures_of(rec)
    status, reason = rec.status, rec.reason or ""
    tpot = g.get("tpot_p50_ms")
    if status == "ok" and tpot is not None and tpot > tpot_ms:
        status, reason = "invalid", (f"median TPOT {tpot:,.1f} ms at its full batch is over "
                                     f"the {tpot_ms:g} ms TPOT bound")
    extra = rec.extra or {}
    return ClosedFigure(status, g.get("requests_per_s"), g.get("ttft_p99_ms"), reason,
                        "measured", rec.run_id, rec.threads_per_core, extra.get("cores_used"),
                        rec.machine_shape, extra.get("hypervisor"))


def default_candidate(candidates) -> GenCandidate:
    """The default a tuning is measured against: PyTorch eager, fp32, one request at a time,
    one process on as many threads as the largest candidate holds (threads x replicas; its
    replay reads the same one back)."""
    return GenCandidate(DEFAULT_ENGINE_CANDIDATE, "fp32", 1,
                        max(c.threads * c.replicas for c in candidates))


def token_price(machine: Machine | None, output_len: int, prompt_len: int):
    """price(candidate, figure, requests/s) -> (USD per 1 M output tokens on machine, the
    estimate's assumption or "" when measured), or None: the tuning's and its replay's."""
    def price(c: GenCandidate, f: ClosedFigure, rate: float):
        if machine is None or not rate:
            return None
        r = TokenRates(rate * output_len, rate * prompt_len, rate, threads=c.threads,
                       replicas=c.replicas,
                       threads_per_core=f.threads_per_core, cores_used=f.cores_used,
                       shape=f.shape, hypervisor=f.hypervisor)
        rows = token_serving_rows([machine], r)
        if not rows:
            return None
        row = rows[0]
        return row["usd_per_m_output"], (row["assumption"] if row["estimate"] else "")
    return price


def stored_gen_tune(base, candidates: list[GenCandidate], *, db, runner, command: str,
                    objective: str, machine: Machine | None, closed_requests: int = 16,
                    query_count: int = GEN_QUERIES, margin: float = DEFAULT_TUNE_MARGIN,
                    top_n: int = TOP_N, prune_factor: float = PRUNE_FACTOR,
                    on_start: Callable[[str], None] = lambda sweep_id: None,
                    on_stored: Callable[[RunRecord], None] = lambda rec: None,
                    on_event=None) -> tuple[str, Tuning, GenCandidate]:
    """The tuning on real tests, one sweep. base: a validated GenServeSpec of the model, the
    shape (prompt, output) and the bounds; each candidate replaces its engine fields."""
    sweep, run = stored_runs(db, runner, command=command, on_start=on_start,
                             on_stored=on_stored, on_event=on_event)

    def of(c: GenCandidate, **kw):
        return replace(base, runtime=c.runtime, precision=c.precision,
                       max_num_seqs=c.max_num_seqs, intra_threads=c.threads,
                       replicas=c.replicas, kv_blocks=0,
                       max_batched_tokens=0, **kw)

    def closed_probe(c: GenCandidate) -> ClosedFigure:
        spec = of(c, scenario="closed-loop", users=c.max_num_seqs, target_qps=None,
                  query_count=None,
                  min_query_count=max(closed_requests, 2 * c.max_num_seqs)).validate()
        return closed_figure(run(spec), base.ttft_bound_ms, base.tpot_bound_ms)

    def qps_search(c: GenCandidate, start: float):
        spec = of(c, scenario="server", users=1, target_qps=start,
                  query_count=query_count).validate()
        return ttft_view(search_in(spec, run, start_qps=start, query_count=query_count))

    default = default_candidate(candidates)
    tuning = autotune(candidates, default=default, closed_probe=_memo(closed_probe),
                      qps_search=qps_search,
                      price=token_price(machine, base.output_len, base.prompt_len),
                      bound_ms=base.ttft_bound_ms, objective=objective, margin=margin,
                      top_n=top_n, prune_factor=prune_factor, unit="requests/s")
    return sweep.sweep_id, tuning, default


def _memo(probe):
    seen: dict = {}

    def once(c):
        if c not in seen:
            seen[c] = probe(c)
        return seen[c]
    return once
