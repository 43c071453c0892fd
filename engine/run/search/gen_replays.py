"""What a stored search of serving a language model found, read back from the store (issue
38): each job's sweep records its request in its command (GEN_RATE_COMMAND, GEN_USERS_COMMAND
or GEN_TUNE_COMMAND, then the request's fields as JSON: engine/run/search/genserve_jobs.py),
and the pure search is replayed over the sweep's stored tests, in the order they ran, so any
reader of the database (viewer mode, a report) sees the conclusion the job printed:

- the max-rate search: serving's replay_max_qps over the sweep's Server tests, within the
  genserve probe range (gen_max_rate.gen_rate_range) for the recorded query count and TTFT
  bound; the Offline test that gave the estimate is the sweep's Offline test;
- the concurrency sweep: gen_max_rate.sweep_users re-run, each probe answered by the next
  stored closed loop;
- the tuning: serving's autotune re-run (the same prune and stop rules), each candidate's
  closed-loop figure the sweep's first closed loop of its engine, precision, sequences and
  threads (read by gen_autotune.closed_figure, as the tuning read it), each confirmation
  the max-rate search replayed over that candidate's Server tests, priced on the recorded
  shape by gen_autotune.token_price.

A stored test is read as a GenProbe: the fields of a RunRecord these searches look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.analysis.genserve_cost import TokenRates
from engine.run.search.autotune import PRUNE_FACTOR, TOP_N, ClosedFigure, Tuning, autotune
from engine.run.search.gen_autotune import GenCandidate, closed_figure, token_price
from engine.run.search.gen_max_rate import (RISE_STOP, Concurrency, figures_of, ttft_view,
                                            gen_rate_range, pareto_points, sweep_users)
from engine.run.search.max_qps import (CUT_SHORT, DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES,
                                       QpsSearch, replay_max_qps)
from engine.scenarios.genserve.table import GENSERVE_RESULTS

__all__ = ["GenProbe", "gen_probes", "replay_gen_rate", "replay_users", "replay_gen_tune",
           "token_rates", "estimate_source"]

# genserve_results' columns as store/genserve.sweep_tests returns them
_FIGURES = tuple(c.name for c in GENSERVE_RESULTS.columns if c.name != "run_id")


@dataclass(frozen=True)
class GenProbe:
    """A stored genserve test as the searches read a run: its status and reason, what it
    was asked for, its figures (genserve_results' row, {} for a test that measured nothing)
    and how it ran (to price it)."""
    run_id: str
    status: str
    reason: str = ""
    scenario: str = ""
    target_qps: float | None = None
    users: int = 1
    runtime: str = ""
    precision: str = "fp32"
    max_num_seqs: int = 1
    intra_threads: int = 1
    replicas: int = 1
    p99_ms: float | None = None
    throughput: float | None = None
    threads_per_core: int | None = None
    machine_shape: str | None = None
    cores_used: int | None = None
    hypervisor: bool | None = None
    figures: dict = field(default_factory=dict, compare=False)
    serving = None  # not a serving run: loadgen_p99_ms falls back to p99_ms, as for the record

    @property
    def extra(self) -> dict:  # as a RunRecord keeps them (closed_figure reads them)
        return {"cores_used": self.cores_used, "hypervisor": self.hypervisor}

    @property
    def kind_rows(self) -> dict:  # as a RunRecord keeps them (figures_of reads them)
        return {GENSERVE_RESULTS.name: [self.figures]} if self.figures else {}


def _v(x):
    """None for a missing value as a DataFrame row holds one (None, NaN, pandas' NA)."""
    try:
        return None if x is None or bool(x != x) else x
    except TypeError:  # pandas.NA
        return None


def _i(x):
    x = _v(x)
    return None if x is None else int(x)


def gen_probes(tests) -> list[GenProbe]:
    """store.genserve.sweep_tests' rows (a DataFrame, in the order they ran) as GenProbes."""
    out = []
    for r in tests.to_dict("records"):
        figures = ({k: _v(r.get(k)) for k in _FIGURES if k in r}
                   if _v(r.get("requests")) else {})
        hyp = _v(r.get("hypervisor"))
        out.append(GenProbe(
            r["run_id"], r["status"], r.get("reason") or "", r.get("scenario") or "",
            _v(r.get("target_qps")), _i(r.get("users")) or 1, r.get("runtime") or "",
            r.get("precision") or "fp32", _i(r.get("max_num_seqs")) or 1,
            _i(r.get("intra_threads")) or 1, _i(r.get("replicas")) or 1, _v(r.get("p99_ms")),
            _v(r.get("throughput")),
            _i(r.get("threads_per_core")), _v(r.get("machine_shape")), _i(r.get("cores_used")),
            None if hyp is None else bool(hyp), figures))
    return out


def estimate_source(fields: dict) -> str:
    """Where the search's first target came from, as the job said it."""
    return ("the target given" if fields.get("target_qps") is not None
            else "the Offline test's requests/s")


def replay_gen_rate(fields: dict, probes: list[GenProbe]) -> tuple[QpsSearch, GenProbe | None]:
    """(the max-rate search as it ran, its Offline test or None). fields: the sweep
    command's (replays.request_fields)."""
    queries, ttft = fields["search_queries"], fields["ttft_bound_ms"]
    offline = next((p for p in probes if p.scenario == "offline"), None)
    if fields.get("target_qps") is None and offline is not None and (
            offline.status != "ok" or not figures_of(offline).get("requests_per_s")):
        return QpsSearch((), None, None, (None, None), (
            f"the Offline test that gives the estimate ended {offline.status}: "
            f"{offline.reason[:160]}"), query_count=queries), offline
    res = replay_max_qps([p for p in probes if p.scenario == "server"],
                         precision=fields.get("qps_precision", DEFAULT_QPS_PRECISION),
                         max_probes=fields.get("max_probes", DEFAULT_QPS_PROBES),
                         query_count=queries, bound_ms=ttft,
                         qps_range=gen_rate_range(queries, ttft))
    return res, offline


def replay_users(fields: dict, probes: list[GenProbe]) -> Concurrency:
    """The concurrency sweep as it ran: sweep_users, each point the next stored closed
    loop; one stopped early (cancelled, still running) says so."""
    points = iter([p for p in probes if p.scenario == "closed-loop"])

    def probe(users: int):
        return next(points, None) or GenProbe("", CUT_SHORT, "no further point stored",
                                              users=users)

    c = sweep_users(probe, cap=fields["max_users"], rise_stop=fields.get("rise_stop",
                                                                         RISE_STOP))
    if c.points and c.points[-1][1].status == CUT_SHORT:
        kept = c.points[:-1]
        c = Concurrency(kept, f"stopped after {len(kept)} points with no further point "
                              "stored (cancelled, or still running)", pareto_points(kept))
    return c


def replay_gen_tune(fields: dict, probes: list[GenProbe], machine) -> Tuning:
    """The tuning as it ran. machine: the catalog's Machine of the recorded shape (None:
    none recorded, or no longer in the catalog: nothing is priced)."""
    cands = [GenCandidate(*c) for c in fields["candidates"]]
    ttft, tpot = fields["ttft_bound_ms"], fields["tpot_bound_ms"]
    queries = fields["search_queries"]

    def same(c: GenCandidate, p: GenProbe) -> bool:
        return (p.runtime, p.precision, p.max_num_seqs, p.intra_threads, p.replicas) == (
            c.runtime, c.precision, c.max_num_seqs, c.threads, c.replicas)

    seen: dict = {}

    def closed_probe(c: GenCandidate) -> ClosedFigure:
        if c not in seen:
            p = next((p for p in probes if p.scenario == "closed-loop" and same(c, p)), None)
            seen[c] = (closed_figure(p, ttft, tpot) if p is not None else
                       ClosedFigure("missing", reason="no closed-loop test stored"))
        return seen[c]

    def qps_search(c: GenCandidate, start: float) -> QpsSearch:
        return ttft_view(replay_max_qps(
            [p for p in probes if p.scenario == "server" and same(c, p)],
            query_count=queries, bound_ms=ttft, qps_range=gen_rate_range(queries, ttft)))

    return autotune(cands, default=GenCandidate(*fields["default"]), closed_probe=closed_probe,
                    qps_search=qps_search,
                    price=token_price(machine, fields["output_len"], fields["prompt_len"]),
                    bound_ms=ttft, objective=fields["objective"], margin=fields["margin"],
                    top_n=fields.get("top_n", TOP_N),
                    prune_factor=fields.get("prune_factor", PRUNE_FACTOR), unit="requests/s")


def token_rates(best, offline=None) -> TokenRates | None:
    """A search's rates for pricing: at the max (its best probe, a RunRecord or GenProbe)
    and flat out (its Offline test when ok); None: no max."""
    if best is None:
        return None
    g = figures_of(best)
    flat = figures_of(offline) if offline is not None and offline.status == "ok" else {}
    extra = best.extra or {}
    return TokenRates(g["output_tok_s"], g["input_tok_s"], g["requests_per_s"],
                      threads=best.intra_threads, replicas=getattr(best, "replicas", 1) or 1,
                      threads_per_core=best.threads_per_core,
                      cores_used=extra.get("cores_used"), shape=best.machine_shape,
                      hypervisor=extra.get("hypervisor"),
                      flat_output_tok_s=flat.get("output_tok_s"),
                      flat_input_tok_s=flat.get("input_tok_s"))

