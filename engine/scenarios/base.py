"""What a scenario is: one kind of work (inference, training, data loading, serving), end to
end.

A scenario owns its spec type, the module whose `run_group` is the worker body, its
protocol messages and measurement tables, the fields a record of its kind carries beyond
the common columns, and how the CLI describes its progress and results (the job a user
asks for is its package's request.py, made a Request on the parent side,
engine/run/jobs/). The runner, the sweep driver, the job queue, the worker's harness and
the CLI are shared by every kind and ask the scenario (through
engine.scenarios.scenario_of) instead of branching on the kind.

Adding a kind is adding a package here (its spec, messages, hooks, tables, request) and its
worker body (engine/worker/<kind>/), and registering it in engine/scenarios/__init__.py:
docs/ARCHITECTURE.md, "Adding a kind of work".
"""

from __future__ import annotations

from typing import ClassVar

from engine.core.protocol import Event, Progress, Result
from engine.scenarios.serving.loadgen import live_text

__all__ = ["Scenario", "phase_of", "models_label"]


def phase_of(ev: Event) -> str:
    """Where a run in flight is, from the worker's latest event about it."""
    if not isinstance(ev, Progress):
        return "start"
    if ev.completed is None:
        return ev.phase
    return live_text(ev.phase, ev.completed, ev.per_s, ev.unit or "query", ev.tail_pct,
                     ev.tail_ms)


def models_label(models, frameworks) -> str:
    """'resnet18, mobilenet_v3_small × torch': a sweep's label, its models by frameworks."""
    return f"{', '.join(models)} × {', '.join(frameworks)}"


class Scenario:
    """Class attributes describe the kind; methods are the kind's hooks. Stateless."""

    kind: ClassVar[str]  # the runs table's `kind`
    spec_type: ClassVar[type]
    worker_body: ClassVar[str]  # module with run_group(runs, frame), imported in the worker
    title: ClassVar[str]  # the dashboard page that shows this kind
    sample_unit: ClassVar[str]  # what one timed sample is, as a chart's axis says it
    step_noun: ClassVar[str] = "iteration"  # one pass of the timed loop, in a sentence
    # The parent passes the params/FLOPs the store already knows to the worker, and a
    # finished run's counts are stored as the catalog's (only inference counts them).
    counts_model_stats: ClassVar[bool] = False
    # Its runs form contests (contenders side by side) that extra rounds can decide: the
    # sweep driver reads them through contest_rows and contest_fields.
    decides_contests: ClassVar[bool] = False
    # A round's contenders are timed alternately in short blocks, their workers warm at once
    # (engine/run/process/together.py): its worker body times under the parent's gate.
    interleaves: ClassVar[bool] = False
    # A worker with fewer threads than cores gets cores of its own (engine/run/process/pinning.py).
    # Not data loading: its loader processes inherit the worker's affinity.
    pinnable: ClassVar[bool] = True
    # A spec's replicas > 1 are R workers the runner starts and times in one window
    # (engine/run/process/replicas.py); serving's replicas are its worker's own processes instead.
    runner_replicates: ClassVar[bool] = True
    # The worker sets its framework's threads (and so imports it) before the body runs;
    # False where the body only drives processes of its own that do (serving a language
    # model: its engine process), so the worker neither pays for the import nor holds it.
    worker_imports_framework: ClassVar[bool] = True
    # What the CLI's progress bar counts: "run", or "step" (read from progress events).
    progress_unit: ClassVar[str] = "run"
    # Other tools' one-file-per-run formats a run of this kind can be written in
    # (store/export.py): both describe a model's inference, so only inference has them.
    exports: ClassVar[tuple[str, ...]] = ()
    # Its own protocol messages (its messages.py: its Result subclass, any events of its
    # own), which the registry joins with the protocol's into the decoder's map.
    messages: ClassVar[tuple[type, ...]] = ()
    # Its own measurement tables, keyed by run id (its table.py: engine.scenarios.tables),
    # which store/db.py creates from the registry: a kind's figures beyond the common
    # columns go there, never into a migration of `runs`.
    tables: ClassVar[tuple] = ()

    def spec_from_dict(self, d: dict):
        return self.spec_type.from_dict(d)

    def worker_cpus(self, spec) -> int:
        """How many CPUs the spec's worker is pinned to: its intra-op threads."""
        return spec.intra_threads

    def record_columns(self, spec) -> dict:
        """Columns of `runs` beyond the common ones (dataset, workers)."""
        return {}

    def config_extra(self, spec) -> dict:
        """What the run was asked to do beyond the common columns: kept on every row,
        failed ones included."""
        return {}

    def result_extra(self, res: Result) -> dict:
        """What a successful run adds to `extra` from its worker's result."""
        return {}

    def result_columns(self, res: Result) -> dict:
        """Record fields of its kind a successful run fills from its result (epochs); a
        kind with tables of its own puts their rows under `kind_rows` ({table: [row]})."""
        return {}

    def table_rows(self, rec) -> dict[str, list[dict]]:
        """The rows a stored record adds to the kind's own tables: table name -> rows, each
        a dict of its columns (store/kinds.py writes them in the run's transaction)."""
        return {name: list(rows) for name, rows in (rec.kind_rows or {}).items()}

    def finish_record(self, rec, res: Result):
        """The record of a successful run, as its kind judges it (serving: LoadGen's
        verdict); the others keep the verdict derived from the raw samples."""
        return rec

    def contest_fields(self, x) -> dict:
        """A spec or a record as the comparison groups it (engine/analysis/compare.py reads
        model, image_size, batch_size, intra_threads and contention for the contest, and
        the contender's fields): the configuration another round runs. Its own fields by
        default."""
        return dict(vars(x))

    def contest_rows(self, records) -> list[list[dict]]:
        """A sweep's records as the contests extra rounds decide: per family of contests (a
        metric), the rows compare.aggregate reads, their `median_ms` the figure judged
        (lower is better), grouped as contest_fields groups a spec. One family by default:
        each run's median latency."""
        return [[vars(r) for r in records]]

    def throughput(self, spec, res: Result, samples_ns) -> float | None:
        """Samples per second: samples processed over the total measured time (the
        inference-timing guide's definition), so stalls cost what they cost. A sample is one
        call's time (a block's over its calls), so this is batch size over the mean."""
        total = sum(samples_ns)
        return spec.batch_size * len(samples_ns) / (total / 1e9) if total else None

    def progress_total(self, specs: list) -> int:
        """How many progress units a sweep of these specs takes (one round)."""
        return len(specs)

    def progress_units(self, ev: Event) -> int | None:
        """How many progress units a worker's event reports done (None: not counted)."""
        return None

    def describe_event(self, spec, ev: Event) -> str:
        """One line for the CLI's progress bar while a run is in flight."""
        return (f"{spec.model} {spec.framework} ({spec.runtime}) b{spec.batch_size} "
                f"t{spec.intra_threads}: {phase_of(ev)}")

    def describe_record(self, rec) -> str:
        """One line for the CLI as each run is stored: what ran, how it ended, its figure
        (or, when it measured nothing, its reason)."""
        figure = self.figure(rec) if rec.median_ms is not None else None
        # a cluster node's run names its machine: a fleet's lines interleave
        where = (f" on {rec.machine_shape or rec.node_host}"
                 if getattr(rec, "node_id", None) else "")
        return f"{self.run_label(rec)}{where}: {rec.status} - {figure or rec.reason[:160]}"

    def run_label(self, rec) -> str:
        return (f"{rec.model} {rec.framework} ({rec.runtime}) b{rec.batch_size} "
                f"t{rec.intra_threads}")

    def figure(self, rec) -> str | None:
        """The headline figures of a run that measured something."""
        return f"p50 {rec.median_ms:.3f} ms, {rec.validity}"
