"""The terminal driver of a stored sweep: a progress bar, a line per round, a line per
stored run."""

from __future__ import annotations

import random
import sys

__all__ = ["run_with_progress", "run_and_summarize"]


def run_with_progress(request, specs, args, *, seed: int | None = None,
                      process_per_run: bool = False, runner=None):
    """Run a request's specs (request.expand()) with a progress bar, a line per round and
    one printed line per stored run: the one terminal driver of `run`, `train` and
    `dataload`, through the same `request.run` the Run page's jobs call. What the bar counts
    (runs, or training steps read from progress events) and how a run is described come
    from the request's scenario. The bar redraws only on a terminal: in a CI log or through
    `| tee` the lines per round and per stored run are the progress."""
    from tqdm import tqdm

    from engine.core.protocol import Progress, Ready, Started
    from engine.present.outcome import worker_start_text
    from engine.run.process.drive import Starting, Timing
    from engine.run.jobs.rounds import order_name
    from engine.run.process.together import timing_line
    from store.db import resolve_db_path

    budget = request.budget()
    scenario = request.scenario
    unit = scenario.progress_unit
    width = getattr(runner, "width", 1)  # a fleet runs every run on each node kind
    total_units = scenario.progress_total(specs) * width
    db = resolve_db_path(args.db)
    seed = seed if seed is not None else random.randrange(2**31)
    state = {"bar": None, "run_units": 0}
    records = []

    upto = (f"{budget.rounds} rounds" if budget.max_rounds == budget.rounds else
            f"{budget.rounds} rounds (up to {budget.max_rounds} for undecided contests"
            + (f", within {budget.time_budget_s:g} s" if budget.time_budget_s else "") + ")")

    def on_start(sweep_id):
        where = f" x {width} node kinds" if width > 1 else ""
        print(f"sweep {sweep_id}: {len(specs)} configurations{where} x {upto} = "
              f"{len(specs) * width * budget.rounds} runs at least (seed {seed}) -> {db}",
              flush=True)
        state["bar"] = tqdm(total=total_units * budget.rounds, unit=unit, file=sys.stderr,
                            dynamic_ncols=True, disable=not sys.stderr.isatty())

    def on_plan(step):
        bar = state["bar"]
        if step.why != "minimum":  # an extra round: only the undecided configurations
            bar.total += scenario.progress_total(step.specs) * width
            bar.refresh()
        bar.write(f"round {step.round_no}: {order_name(step.round_no)} order"
                  + ("" if step.why == "minimum" else f", {step.why}"), file=sys.stdout)

    def on_stop(why):
        state["bar"].write(f"stopped: {why}", file=sys.stdout)

    def on_event(notice, r):
        bar = state["bar"]
        if isinstance(notice, Timing):  # how this round's contenders are timed, once
            bar.write("  " + timing_line(notice), file=sys.stdout)
            return
        if isinstance(notice, Starting):  # before its Ready: spawned or forked, importing
            state.setdefault("starting", {})[notice.worker] = notice.framework
            bar.set_postfix_str(f"round {r} starting: "
                                + worker_start_text(notice.framework, notice.start,
                                                    notice.server_import_s),
                                refresh=True)
            return
        ev, spec = notice.event, notice.spec
        if isinstance(ev, Ready):
            framework = state.get("starting", {}).pop(notice.worker, "")
            bar.set_postfix_str(f"round {r} {framework} worker ready, its import "
                                f"{ev.import_s:.1f} s", refresh=True)
            return
        if spec is None or not isinstance(ev, (Started, Progress)):
            return
        n = scenario.progress_units(ev)
        if n is not None and n > state["run_units"]:
            bar.update(n - state["run_units"])
            state["run_units"] = n
        bar.set_postfix_str(f"round {r} {scenario.describe_event(spec, ev)}", refresh=True)

    def on_stored(rec):
        records.append(rec)
        bar = state["bar"]
        if unit == "run":
            bar.update(1)
        state["run_units"] = 0
        bar.write(f"stored {rec.run_id} round {rec.round_no} {scenario.describe_record(rec)}",
                  file=sys.stdout)
        sys.stdout.flush()

    runner = runner or request.runner(db=db, shape=args.machine_shape,
                                      process_per_run=process_per_run)
    try:
        request.run(specs, db=db, runner=runner, seed=seed,
                    command=" ".join(["python -m engine", *args.argv]),
                    on_start=on_start, on_plan=on_plan, on_stop=on_stop,
                    on_stored=on_stored, on_event=on_event)
        return records, db
    finally:
        if state["bar"] is not None:
            state["bar"].close()


def run_and_summarize(request, specs, args, *, table, noun: str, **options) -> list:
    """run_with_progress, then the kind's summary table (table(records) -> text, or None to
    skip it) and how many runs were stored and which are not ok, by status (the command's
    exit status follows from the same records: engine.present.outcome.runs_exit)."""
    import time

    from engine.analysis.time_split import time_split
    from engine.present.outcome import not_ok_text, split_text
    from engine.run.process.together import worker_key

    t0 = time.monotonic()
    records, db = run_with_progress(request, specs, args, **options)
    wall = time.monotonic() - t0
    if table is not None:
        print()
        print(table(records))
    if records:  # where the time went: measuring, and each phase before it
        print("\n" + split_text(time_split(records, wall,
                                           worker_of=lambda r: (r.round_no, *worker_key(r)))))
    # the last line, as CI logs and scripts read it
    print(f"\n{len(records)} {noun} stored in {db}; {not_ok_text(r.status for r in records)}")
    return records
