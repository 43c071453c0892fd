"""The Deploy page's searches as dashboard jobs (issue 27): the max-QPS search of one Server
configuration and the autotuner, each a request in the style of BatchSearchRequest that
wraps the stored search the CLI runs (engine/run/search/max_qps.py's stored_max_qps_search,
engine/run/search/autotune_runs.py's stored_autotune), so there is one search, not a
second one.

A job's sweep carries its request in its command (MAX_QPS_COMMAND or TUNE_COMMAND, then the
request's fields as JSON; a query count chosen from the search's estimate is restated there
before the first Server probe), so what it found is read back from the store by replaying
the pure search over the stored probes (engine/run/search/replays.py): any reader of the
database, viewer mode included, sees the same conclusion the job printed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable

from engine.core.catalog import CATALOG, DIAGNOSTIC_MODELS, REFERENCE_RUNTIME
from engine.core.model_source import default_runtime
from engine.core.errors import UserError
from engine.core.limits import (QPS_PRECISION_RANGE, QPS_PROBES_RANGE, SERVE_BATCH_RANGE,
                                choice, float_range, int_range, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.run.search.autotune import (DEFAULT_TUNE_MARGIN, Candidate, ClosedFigure,
                                        check_tune)
from engine.run.search.autotune_runs import stored_figures
from engine.run.search.max_qps import (DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES,
                                       check_first_target, search_timeout_s,
                                       stored_max_qps_search)
from engine.core.cluster import check_where
from engine.run.jobs.requests import local_runner
from engine.run.jobs.serve_request import ServeRequest
from engine.run.search.replays import MAX_QPS_COMMAND, TUNE_COMMAND

__all__ = ["MaxQpsRequest", "TuneRequest", "TUNE_TEST_S", "TUNE_PROBE_S", "tune_price",
           "stored_autotune_job"]

# As `python -m engine tune`: a closed-loop probe only ranks (1 s); a Server test of a
# confirmation runs the search's fixed query count (search_queries), whatever its rate, so
# each candidate is held to the same early-stopping strictness. The specs a tuning checks
# before it runs carry this minimum duration, which LoadGen is not given for a fixed count.
TUNE_PROBE_S = 1.0
TUNE_TEST_S = 2.0


@dataclass(frozen=True)
class _Search(ServeRequest):
    """What both searches share: the max-QPS search's bracket precision, probe limit and
    queries a probe (each of the tuner's confirmations is one such search), checked before
    anything runs and recorded in the sweep's command so that the replay is the same
    search. The form's minimum query count and duration are its own test's: a search's
    probes run search_queries queries each, the Offline estimate the form's duration."""

    qps_precision: float = DEFAULT_QPS_PRECISION
    max_probes: int = DEFAULT_QPS_PROBES
    search_queries: int | None = None  # None: chosen from the search's estimate

    def _check_limits(self) -> None:
        float_range("qps_precision", self.qps_precision, *QPS_PRECISION_RANGE)
        int_range("max_probes", self.max_probes, *QPS_PROBES_RANGE)
        check_first_target(None, self.search_queries, self.bound_ms)  # count, bound

    def _limits(self, queries=None) -> dict:
        """queries: the QueryChoice once the count is known (None: the count given, or
        none yet: an automatic count is restated in the command once chosen)."""
        return {"qps_precision": self.qps_precision, "max_probes": self.max_probes,
                **(queries.fields() if queries is not None else
                   {"search_queries": self.search_queries})}

    def check_stored(self, specs: list, *, db) -> None:
        """Nothing: a search picks its own rates; the form's target QPS is not one of them."""

    def runner(self, *, db, shape: str | None = None, **options):
        """Its longest probe (MAX_PROBE_S) or the Offline estimate's duration, and the
        margin, unless the request names a limit."""
        return local_runner(timeout_s=self.timeout_s or search_timeout_s(self.duration_s()),
                            memory_cap_bytes=self.memory_cap_bytes, db=db, shape=shape,
                            **options)


@dataclass(frozen=True)
class MaxQpsRequest(_Search):
    """The highest Server target QPS still VALID under the bound, for the Deploy form's
    Server configuration: an Offline run of the same SUT gives the estimate (and the
    flat-out figure the cost compares with), then doubling and bisection, each probe a
    stored LoadGen Server test."""

    def _expand(self):
        if self.bound_ms is None:
            raise UserError("bound_ms: the search needs a p99 bound; allowed: "
                            "0.001..600000 ms", field="bound_ms")
        self._check_limits()
        [base], _ = ServeRequest._expand(replace(
            self, scenarios=("server",), target_qps=self.target_qps or 1.0))
        base = replace(base, query_count=self.search_queries).validate(self.cores)
        return [base] * (self.max_probes + 1), []  # the most runs: Offline + the probes

    def command(self, queries=None) -> str:
        return f"{MAX_QPS_COMMAND} " + json.dumps({
            "model": self.model, "framework": self.framework, "runtime": self.runtime,
            "threads": self.threads, "max_batch": self.max_batch, "bound_ms": self.bound_ms,
            "max_wait_ms": self.max_wait_ms, **self._limits(queries)})

    def label(self) -> str:
        return f"max-QPS search {self.model} {self.framework}, p99 under {self.bound_ms:g} ms"

    def run(self, specs, *, db, runner, seed: int, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop: Callable[[str], None] = lambda why: None,
            command: str | None = None) -> str:
        from engine.present.search_text import qps_conclusion

        count = [1]

        def event(ev):  # progress names the probe
            on_event(ev, count[0])

        def stored(rec):
            count[0] += 1
            on_stored(rec)
        base = replace(specs[0], target_qps=self.target_qps or 1.0).validate()
        _, res, _, _ = stored_max_qps_search(
            base, db=db, runner=runner, command=self.command, start_qps=None,
            precision=self.qps_precision, max_probes=self.max_probes,
            query_count=self.search_queries,
            on_start=on_start, on_stored=stored, on_event=event)
        on_stop(res.stop_reason)
        return qps_conclusion(res, self.bound_ms)


@dataclass(frozen=True)
class TuneRequest(_Search):
    """The autotuner for the Deploy form's model (and `models`, other catalog models of its
    framework, each tuned alone in a sweep of its own): its runtime x max batch x threads x
    replicas (max wait the form's) under the bound, for the most QPS or the least cost per
    1 M on a shape; the default (the reference runtime, batch 1, every thread, one replica)
    confirmed too."""

    objective: str = "qps"
    batches: tuple[int, ...] = (1, 2, 4, 8)
    thread_choices: tuple[int, ...] = ()  # empty: 1 and every logical core
    replica_choices: tuple[int, ...] = (1,)  # splits of threads x replicas over the cores
    machine_shape: str | None = None  # this machine's (a cluster: each node's own shape)
    margin: float = DEFAULT_TUNE_MARGIN
    # where (issue 15): "local", or "ray" on the node kinds `placements` name (none: every
    # kind), the same search on each at once (engine/run/search/fleet_tune.py)
    executor: str = "local"
    placements: tuple[str, ...] = ()
    # a Server test's limit, which a cluster job's runner is built with (engine/run/cluster/join)
    timeout_s: float | None = search_timeout_s(TUNE_TEST_S)
    # each max-QPS search's first target (None: the candidate's closed-loop samples/s), as
    # tune's --start-qps: a model of microseconds would start LoadGen at millions of QPS
    start_qps: float | None = None
    # other catalog models to tune the same way, one after the other, each in a sweep of its
    # own; `group`, set by the job, names the launch in each one's command, so the page
    # shows the models side by side
    models: tuple[str, ...] = ()
    group: str | None = None

    def tuned_models(self) -> tuple[str, ...]:
        """The form's model, then the others named, each once."""
        return tuple(dict.fromkeys((self.model, *self.models)))

    def candidates(self, cores: int | None = None) -> list[Candidate]:
        """Runtime x max batch x threads x replicas, the splits that fit `cores` (a node's;
        None: the request's, else this machine's)."""
        cores = cores or self.cores or logical_cores()
        threads = self.thread_choices or tuple(sorted({1, cores}))
        if not self.batches:
            raise UserError(f"batches: pick at least one max batch; allowed: "
                            f"{SERVE_BATCH_RANGE[0]}..{SERVE_BATCH_RANGE[1]}", field="batches")
        splits = [(t, r) for t in dict.fromkeys(threads)
                  for r in dict.fromkeys(self.replica_choices) if t * r <= cores]
        if not splits:
            raise UserError(f"replicas: no threads x replicas split fits this machine's "
                            f"{cores} logical cores; allowed: threads x replicas <= {cores}",
                            field="replicas")
        return [Candidate(self.framework, self.runtime or REFERENCE_RUNTIME[self.framework],
                          self.precision, b, t, self.max_wait_ms, r)
                for t, r in splits for b in dict.fromkeys(self.batches)]

    def default(self, cores: int | None = None) -> Candidate:
        """The reference runtime (a user's file: its format's default), batch 1, every
        thread (of `cores`, as candidates), one replica."""
        src = self.user_model
        runtime = (default_runtime(src.format, self.framework) if src is not None
                   else REFERENCE_RUNTIME.get(self.framework, self.framework))
        return Candidate(self.framework, runtime, self.precision, 1,
                         cores or self.cores or logical_cores())

    def _expand(self):
        check_where(self.executor, self.placements)
        check_tune(bound_ms=self.bound_ms, objective=self.objective, margin=self.margin,
                   shape=self.machine_shape if self.executor == "local" else "each node's")
        self._check_limits()
        check_first_target(self.start_qps, self.search_queries, self.bound_ms, "start_qps")
        others = self.tuned_models()[1:]
        if others and self.user_model is not None:
            raise UserError("models: a model file is tuned alone; allowed: other catalog "
                            "models only beside a catalog model", field="models")
        named = DIAGNOSTIC_MODELS if self.framework == "selftest" else CATALOG
        for m in others:
            choice("models", m, tuple(named))
        specs = []
        for m in self.tuned_models():
            for c in [*self.candidates(), self.default()]:
                [spec], _ = ServeRequest._expand(replace(
                    self, model=m, scenarios=("server",), runtime=c.runtime,
                    max_batch=c.max_batch, threads=c.threads, replicas=c.replicas,
                    target_qps=1.0, min_duration_s=TUNE_TEST_S))
                specs.append(replace(spec, query_count=self.search_queries).validate(
                    self.cores))
        return specs, []

    def runner(self, *, db, shape: str | None = None, **options):
        return local_runner(timeout_s=search_timeout_s(TUNE_TEST_S),
                            memory_cap_bytes=self.memory_cap_bytes, db=db,
                            shape=shape or self.machine_shape, **options)

    def command(self, known: dict[Candidate, dict] | None = None, *,
                node: dict | None = None, queries=None) -> str:
        """known: the store's figures the tuner uses instead of probes (autotune.
        stored_figures, read as the sweep opens), recorded so that the replay uses them too:
        they are older runs, not in the sweep. node: a fleet tuning's node kind (its fleet
        id, shape, cores and label): that node's candidates, priced on its shape. queries:
        the confirmations' QueryChoice, once known."""
        cores = node["cores"] if node else None
        return f"{TUNE_COMMAND} " + json.dumps({
            "model": self.model, "objective": self.objective, "bound_ms": self.bound_ms,
            "margin": self.margin,
            "machine_shape": node["shape"] if node else self.machine_shape,
            "candidates": [_cand_json(c) for c in self.candidates(cores)],
            "default": _cand_json(self.default(cores)), **self._limits(queries),
            "stored": [{"candidate": _cand_json(c), **row}
                       for c, row in (known or {}).items()], **(node or {}),
            **({"group": self.group} if self.group else {})})

    def label(self) -> str:
        where = ("" if self.executor == "local" else
                 f", on {', '.join(p.partition('=')[2] for p in self.placements)}"
                 if self.placements else ", on every node kind")
        return f"tune {', '.join(self.tuned_models())} {self.framework}: " \
               f"{self.objective}, p99 under {self.bound_ms:g} ms{where}"

    def run(self, specs, *, db, runner, seed: int, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop: Callable[[str], None] = lambda why: None,
            command: str | None = None) -> str:
        from engine.present.search_text import tune_conclusion

        if len(self.tuned_models()) > 1:  # each model alone, in turn, under one group
            from engine.run.process.records import new_id

            group = self.group or new_id()
            return "; ".join(
                f"{m}: " + replace(self, model=m, models=(), group=group).run(
                    specs, db=db, runner=runner, seed=seed, on_start=on_start,
                    on_stored=on_stored, on_event=on_event, on_plan=on_plan,
                    on_stop=on_stop, command=command)
                for m in self.tuned_models())
        if self.executor == "local":
            price = tune_price(db, self.machine_shape)
            _, t = stored_autotune_job(self, db=db, runner=runner, on_start=on_start,
                                       on_stored=on_stored, price=price)
            on_stop(t.stop_reason)
            return tune_conclusion(t, self.machine_shape)
        return self._run_fleet(db=db, runner=runner, on_start=on_start, on_stored=on_stored,
                               on_stop=on_stop)

    def _run_fleet(self, *, db, runner, on_start, on_stored, on_stop) -> str:
        """The same tuning on each node kind at once (engine/run/search/fleet_tune.py), each in a
        sweep of its own that names the fleet, its node's shape and cores."""
        from engine.present.tune_text import fleet_conclusion
        from engine.run.cluster.fleet import node_runners
        from engine.run.search.fleet_tune import fleet_autotune, fleet_best
        from engine.run.process.records import new_id

        fleet = new_id()
        catalog = _catalog(db)

        def tune_one(r, shape, cores, opened):
            node = {"fleet": fleet, "shape": shape, "cores": cores}
            return stored_autotune_job(
                self, db=db, runner=r, on_start=lambda sid: (opened(sid), on_start(sid)),
                on_stored=on_stored, price=tune_price(db, shape, catalog), node=node)
        results = fleet_autotune(node_runners(runner), tune_one)
        best = fleet_best(results, {m.shape: m.provider for m in catalog}.get)
        on_stop(f"{len(results)} node kinds tuned")
        return fleet_conclusion(results, best)


def _cand_json(c: Candidate) -> list:
    # positional, as Candidate(*fields) reads it back (older sweeps: no replicas, 1)
    return [c.framework, c.runtime, c.precision, c.max_batch, c.threads, c.max_wait_ms,
            c.replicas]


def stored_autotune_job(req: TuneRequest, *, db, runner, on_start, on_stored, price,
                        node: dict | None = None):
    """One tuning of the request: on this machine, or on one node kind of a fleet (node:
    its fleet id, shape and cores), where the store's figures of this machine say nothing
    and every candidate is probed."""
    from engine.run.search.autotune_runs import stored_autotune

    policy = MeasurementPolicy(min_time_s=TUNE_PROBE_S, max_time_s=5.0,
                               warmup_max_s=TUNE_PROBE_S)
    cores = node["cores"] if node else None
    cands, default = req.candidates(cores), req.default(cores)
    known = ({} if req.user_model is not None or node else  # a file's bytes count; a node's
             stored_figures(db, [*cands, default], model=req.model,  # figures are its own
                            image_size=req.image_size))
    return stored_autotune(
        cands, default=default, model=req.model, image_size=req.image_size,
        bound_ms=req.bound_ms, objective=req.objective, margin=req.margin, db=db,
        runner=runner, command=lambda queries: req.command(known, node=node, queries=queries),
        known=known,
        probe_policy=policy, cores=cores, here=node is None, price=price,
        max_probes=req.max_probes, precision=req.qps_precision, start_qps=req.start_qps,
        serve={"query_count": req.search_queries, "samples": req.samples,
               "seed": req.loadgen_seed},
        user_model=req.user_model, on_start=on_start, on_stored=on_stored)


def tune_price(db, shape: str | None, catalog=None):
    """price(candidate, figure, samples/s) -> (USD per 1 M on the shape, "" when measured
    on its whole machine, else the estimate's assumption), or None where it cannot be
    priced: engine.analysis.serving_cost's rule (whole machines), for the dashboard's
    tunings and `python -m engine tune` alike."""
    import platform

    from engine.analysis.serving_cost import serving_cost, serving_split

    if shape and catalog is None:
        from store.db import open_db
        from store.prices import effective_catalog

        # Read-write, as the dashboard's own handle is: this runs in the dashboard's job
        # thread, and DuckDB refuses a read-only connection beside a read-write one.
        with open_db(db) as con:
            catalog, _ = effective_catalog(con)
    machine = next((m for m in catalog or () if m.shape == shape), None)
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64",
            "arm64": "arm64"}.get(platform.machine().lower())

    def price(c: Candidate, fig: ClosedFigure, rate: float):
        if machine is None:
            return None
        cost = serving_cost(machine, serving_split(
            rate, threads=c.threads, replicas=c.replicas, threads_per_core=fig.threads_per_core,
            cores_used=fig.cores_used, shape=fig.shape or shape, arch=arch,
            hypervisor=fig.hypervisor))
        if cost is None:
            return None
        bound = cost.at_bound
        return cost.per_million_at_bound, (bound.assumption if bound.estimate else "")
    return price


def _catalog(db):
    """The price catalog the store holds (read-write, as the dashboard's handle is)."""
    from store.db import open_db
    from store.prices import effective_catalog

    with open_db(db) as con:
        return effective_catalog(con)[0]
