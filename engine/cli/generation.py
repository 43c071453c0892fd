"""Commands for text generation (issue 37): `generate` runs a sweep of language models x
runtimes x prompt lengths x output lengths x batches x threads x precisions and stores it;
`generations` prints a stored generation sweep (its figures, its contests per metric, one
run's per-token timeline) and the glossary of metric names.

`generate` builds the request a page would (engine/run/jobs/generation_request.py) and goes
through the same sweep driver as `run`, so its rows, rounds and failures are stored alike.
"""

from __future__ import annotations

from engine.cli.args import (budget_options, db_arg, energy_options, energy_seconds,
                             float_arg, int_arg, memory_cap, sweep_options)
from engine.cli.progress import run_and_summarize
from engine.core.limits import DEFAULT_ROUNDS, SEED_RANGE, logical_cores
from engine.core.runtimes import RuntimeOptions
from engine.present.outcome import runs_exit
from engine.scenarios import GENERATION
from engine.scenarios.generation.models import LANGUAGE_MODELS
from engine.scenarios.generation.runtimes import GEN_PRECISIONS, GEN_ROWS
from engine.scenarios.generation.spec import GEN_BATCH_RANGE, GEN_POLICY

__all__ = ["add_parsers", "COMMANDS", "COMPARES", "compare_generation"]


def _list(item):
    """A flag's values, space- or comma-separated ("16,32" or "16 32"), each parsed by item."""
    def parse(text):
        return [item(t) for t in text.split(",") if t.strip()]
    return parse


def _flat(values) -> tuple:
    return tuple(v for chunk in values for v in chunk)


# Every generation runtime's own options, once each (engine/scenarios/generation/runtimes.py)
_GEN_OPTIONS = tuple({o.name: o for r in GEN_ROWS for o in r.options}.values())


def _owners(o) -> list[str]:
    return [r.name for r in GEN_ROWS if o in r.options]


def add_parsers(sub) -> None:
    g = sub.add_parser("generate", help="greedy text generation timed token by token: TTFT, "
                                        "TPOT, ITL, E2E and tokens/s per runtime, stored")
    g.add_argument("--models", nargs="+", type=_list(str), required=True, metavar="NAME",
                   help=f"language models: {', '.join(LANGUAGE_MODELS)}")
    g.add_argument("--runtimes", nargs="+", type=_list(str), default=[["eager"]],
                   metavar="RT", help="; ".join(f"{r.name} ({r.framework}): {r.label}"
                                                for r in GEN_ROWS) + " (default eager)")
    g.add_argument("--prompt-lens", nargs="+", type=_list(int_arg("prompt_len", 1)),
                   required=True, metavar="P", help="prompt tokens (random ids, seeded)")
    g.add_argument("--output-lens", nargs="+", type=_list(int_arg("output_len", 2)),
                   required=True, metavar="N", help="tokens generated per call, exactly "
                                                    "(end-of-sequence ignored)")
    g.add_argument("--batches", nargs="+", type=_list(int_arg("batch_size", *GEN_BATCH_RANGE)),
                   default=[[1]], metavar="B", help="prompts per call (default 1)")
    g.add_argument("--threads", nargs="+", type=_list(int_arg("threads", 1)), default=[[1]],
                   metavar="T", help=f"intra-op threads, 1..{logical_cores()} here")
    g.add_argument("--precisions", nargs="+", type=_list(str), default=[["fp32"]],
                   metavar="PREC", help=f"{', '.join(GEN_PRECISIONS)} (default fp32); a "
                                        "runtime x precision that cannot run here is "
                                        "skipped with its reason")
    g.add_argument("--inter-threads", type=int_arg("inter_threads", 1), default=1)
    g.add_argument("--seed", type=int_arg("seed", *SEED_RANGE), default=0,
                   help="the weights and the prompts (default 0)")
    p = GEN_POLICY
    g.add_argument("--warmup", type=int_arg("warmup_iters", 0), default=p.warmup_iters,
                   help=f"untimed calls before timing (default {p.warmup_iters})")
    g.add_argument("--min-reps", type=int_arg("min_iters", 1), default=p.min_iters,
                   help=f"timed calls at least (default {p.min_iters})")
    g.add_argument("--min-time", type=float_arg("min_time_s"), default=p.min_time_s,
                   help=f"timed seconds at least (default {p.min_time_s:g})")
    g.add_argument("--max-time", type=float_arg("max_time_s"), default=p.max_time_s,
                   help=f"timed seconds at most (default {p.max_time_s:g})")
    for o in _GEN_OPTIONS:  # each runtime's own (--attention-backend), from its row
        g.add_argument(o.flag, choices=o.choices, default=None,
                       help=f"{o.what}; default {o.default} ({', '.join(_owners(o))} only)")
    energy_options(g, figures="joules per 1 K output tokens")
    sweep_options(g, timeout=1800.0, rounds=DEFAULT_ROUNDS,
                  rounds_help=f"the minimum rounds of the whole sweep, each in fresh worker "
                              f"processes and in alternating order (default {DEFAULT_ROUNDS}; "
                              "contests need 2 or more)")
    budget_options(g)

    s = sub.add_parser("generations", help="a stored generation sweep: figures, contests per "
                                           "metric, a run's per-token timeline, the glossary")
    s.add_argument("sweep", metavar="SWEEP_ID", nargs="?",
                   help="a sweep id (default: the newest generation sweep)")
    s.add_argument("--run", metavar="RUN_ID", help="also print this run's per-token timeline")
    s.add_argument("--glossary", action="store_true",
                   help="print how our TTFT, TPOT, ITL, E2E and tokens/s map to other tools")
    db_arg(s)


def cmd_generate(args) -> int:
    from dataclasses import replace

    from engine.run.jobs.generation_request import GenRequest

    policy = replace(GEN_POLICY, warmup_iters=args.warmup, min_iters=args.min_reps,
                     min_time_s=args.min_time, max_time_s=args.max_time,
                     energy_s=energy_seconds(args))
    request = GenRequest(
        models=_flat(args.models), runtimes=_flat(args.runtimes),
        prompt_lens=_flat(args.prompt_lens), output_lens=_flat(args.output_lens),
        batch_sizes=_flat(args.batches), threads=_flat(args.threads),
        precisions=_flat(args.precisions), inter_threads=args.inter_threads,
        options=RuntimeOptions({o.name: getattr(args, o.name) for o in _GEN_OPTIONS
                                if getattr(args, o.name) is not None}),
        gen_seed=args.seed, policy=policy, rounds=args.rounds, max_rounds=args.max_rounds,
        time_budget_s=args.time_budget, margin=args.margin, timeout_s=args.timeout,
        memory_cap_bytes=memory_cap(args))
    specs, skipped = request.expand()
    for line in skipped:
        print(f"skipped {line}")
    print(f"generating with {len(specs)} configurations")
    records = run_and_summarize(request, specs, args, table=None, noun="generation runs")
    if records:
        _print_sweep(args.db, records[0].sweep_id, None)
    return runs_exit(r.status for r in records)


def _print_sweep(db, sweep_id: str | None, run_id: str | None) -> None:
    from engine.core.errors import UserError
    from engine.present.generation_text import (contest_sentences, energy_notes,
                                                figures_table, timeline_table)
    from store.db import open_db, resolve_db_path
    from store.generation import (generation_contests, generation_runs,
                                  newest_generation_sweep, token_timeline)

    with open_db(resolve_db_path(db)) as con:
        sweep_id = sweep_id or newest_generation_sweep(con)
        if sweep_id is None:
            print("no generation sweeps stored yet: `python -m engine generate --models "
                  "tiny_llama --prompt-lens 16 --output-lens 8` makes one")
            return
        df = generation_runs(con, sweep_id)
        if df.empty:
            raise UserError(f"sweep: {sweep_id!r} holds no generation runs; allowed: a "
                            "generation sweep's id (`python -m engine sweeps`)",
                            field="sweep")
        rule, contests = generation_contests(con, sweep_id)
        timeline = token_timeline(con, run_id) if run_id else None
    print(f"\ngeneration sweep {sweep_id}: {len(df)} runs")
    print(figures_table(df))
    for line in energy_notes(df):
        print(line)
    lines = [s for mc in contests for s in contest_sentences(mc)]
    if lines:
        print(f"\ncontests per metric ({rule.plan.first}-{rule.plan.last} rounds, margin "
              f"±{100 * rule.margin:g} %):")
        for mc in contests:
            for s in contest_sentences(mc):
                print(f"  {mc.model} prompt {mc.prompt_len} output {mc.output_len} "
                      f"b{mc.batch_size} t{mc.threads}: {s}")
    if timeline is not None:
        print(f"\nrun {run_id}: first call's readings")
        print(timeline_table(timeline) if not timeline.empty else "no readings stored")


def cmd_generations(args) -> int:
    if args.glossary:
        from engine.present.generation_text import glossary_text

        print(glossary_text())
        return 0
    _print_sweep(args.db, args.sweep, args.run)
    return 0


def compare_generation(args, sweep_id: str) -> None:
    """`compare` on a generation sweep: its figures and its contests per metric."""
    _print_sweep(args.db, sweep_id, None)


COMMANDS = {"generate": cmd_generate, "generations": cmd_generations}
# How `compare` prints a sweep of this kind (engine/cli/results.py)
COMPARES = {GENERATION: compare_generation}
