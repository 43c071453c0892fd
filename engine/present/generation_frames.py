"""A generation sweep as the pages show it: one row per configuration over its rounds (the
figures' p50/p90/p99, tokens/s, the agreement share, and every failed or invalid round with
its reason), the contest sentences per configuration, one run's figures and its timeline,
and the Run page's plan line.

A configuration is (model, runtime and precision, prompt, output, batch, threads): its
figures are the medians over its ok rounds, never blended across any of those. A round that
failed or was ruled invalid is counted in the row's status and its reason is shown; a
configuration with no ok round keeps its row, figures empty, reason given.

Pure functions over store.generation.generation_runs frames; no Streamlit here.
"""

from __future__ import annotations

import pandas as pd

from engine.analysis.compare import contender_name
from engine.analysis.generation_verdicts import METRICS, MetricContest
from engine.present.generation_text import DEFINITIONS, GLOSSARY, contest_sentences

__all__ = ["CONFIG", "FIGURES", "with_contender", "config_frame", "verdict_lines",
           "run_figures", "timeline_frame", "generation_plan", "METRIC_COLUMNS", "glossary_frame", "sweep_labels"]

CONFIG = ["model", "contender", "prompt_len", "output_len", "batch_size", "intra_threads"]
FIGURES = [f"{m}_p{p}_ms" for m in ("ttft", "tpot", "itl", "e2e") for p in (50, 90, 99)] + [
    "prefill_tok_s", "decode_tok_s", "output_tok_s"]
# what a chart plots, by the name the page offers: its column and its axis title
METRIC_COLUMNS = {"TTFT": ("ttft_p50_ms", "TTFT p50 [ms]"),
                  "TPOT": ("tpot_p50_ms", "TPOT p50 [ms]"),
                  "output tokens/s": ("output_tok_s", "output tokens/s")}


def with_contender(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with a `contender` column named as the contests name them (framework
    (runtime), with the precision where it is not fp32)."""
    return runs.assign(contender=[contender_name(r) for r in runs.to_dict("records")])


def _status(statuses: list[str]) -> str:
    counts = pd.Series(statuses).value_counts()
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items(),
                                                   key=lambda kv: (kv[0] != "ok", kv[0])))


def config_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: its rounds, status counts ("2 ok", "1 invalid"), the
    medians over its ok rounds of every figure, its lowest agreement share, and the reason
    of a round that did not count (the first, by round); refused and invalid rows kept."""
    if runs.empty:
        return pd.DataFrame(columns=[*CONFIG, "rounds", "status", *FIGURES, "agreement",
                                     "reason"])
    d = with_contender(runs)
    rows = []
    for key, g in d.groupby(CONFIG, sort=True, dropna=False):
        ok = g[g.status == "ok"]
        bad = g[g.status != "ok"].sort_values("round_no")
        row = dict(zip(CONFIG, key))
        row.update(rounds=int(g.round_no.nunique()), status=_status(list(g.status)))
        for col in FIGURES:
            vals = ok[col].dropna()
            row[col] = float(vals.median()) if len(vals) else None
        agree = ok["agreement"].dropna()
        row["agreement"] = float(agree.min()) if len(agree) else None
        row["reason"] = str(bad.reason.iloc[0]) if len(bad) else ""
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.sort_values(["model", "output_len", "intra_threads", "prompt_len", "batch_size",
                            "contender"], kind="stable").reset_index(drop=True)


def verdict_lines(contests: list[MetricContest]) -> list[str]:
    """Every contest's sentences, each prefixed with its configuration, metric by metric
    (TTFT, TPOT, output tokens/s) in the order generation_verdicts.METRICS gives."""
    order = {m.key: i for i, m in enumerate(METRICS)}
    out = []
    for mc in sorted(contests, key=lambda c: (order[c.metric.key], c.model, c.prompt_len,
                                              c.output_len, c.batch_size, c.threads)):
        where = (f"{mc.model} · prompt {mc.prompt_len} · output {mc.output_len} · batch "
                 f"{mc.batch_size} · {mc.threads} threads")
        out.extend(f"{where}: {s}" for s in contest_sentences(mc))
    return out


def run_figures(run: dict) -> list[tuple[str, str, str]]:
    """(label, value, what it is) for one generation run (a generation_runs record)."""
    if run.get("ttft_p50_ms") is None or pd.isna(run.get("ttft_p50_ms")):
        return []

    def pct(m: str, fmt: str) -> str:
        return " / ".join(format(run[f"{m}_p{p}_ms"], fmt) for p in (50, 90, 99))

    agree = (f"{run['agreement']:.1%} of {int(run['agreement_tokens'])} tokens"
             if run.get("agreement") is not None and not pd.isna(run["agreement"]) else "-")
    return [
        ("TTFT p50 / p90 / p99 [ms]", pct("ttft", ".2f"), "start to the first token"),
        ("TPOT p50 / p90 / p99 [ms]", pct("tpot", ".3f"), "(E2E - TTFT) / (output - 1)"),
        ("E2E p50 / p90 / p99 [ms]", pct("e2e", ".1f"), "one call, prompt in to last token"),
        ("tokens/s prefill / decode / output",
         f"{run['prefill_tok_s']:,.0f} / {run['decode_tok_s']:,.1f} / "
         f"{run['output_tok_s']:,.1f}", "medians over the timed calls"),
        ("agreement with the reference", agree,
         f"greedy tokens equal to {run.get('agreement_reference') or 'the reference'}'s")]


def timeline_frame(timeline: pd.DataFrame, rep: int = 0) -> pd.DataFrame:
    """One call's readings as the chart and table show them: step, what it is ("prefill +
    first token" for step 0, "decode" after), ms since the call's start and the gap since
    the step before (step 0's gap: its TTFT)."""
    t = timeline[timeline.rep == rep].sort_values("step")
    return pd.DataFrame({
        "step": t.step.astype(int).to_numpy(),
        "phase": ["prefill + first token" if s == 0 else "decode" for s in t.step],
        "ms_since_start": (t.t_ns / 1e6).to_numpy(),
        "gap_ms": (t.gap_ns.fillna(t.t_ns) / 1e6).to_numpy(),
        "reading": t.reading.to_numpy()})


def generation_plan(specs: list, rounds: int) -> str:
    """The Run page's line for a generation sweep: its size, and what the first call of
    each run costs beside the timed ones."""
    n = len(specs)
    models = sorted({s.model for s in specs})
    tokens = sum(s.batch_size * s.output_len for s in specs)
    return (f"**{n} configurations × {rounds} rounds = {n * rounds} runs** of "
            f"{', '.join(models)}; {tokens:,} output tokens per round per timed call. Each "
            "run first builds (exports or compiles) its model and checks its tokens against "
            "the reference: minutes for a 1 B model.")


def glossary_frame() -> pd.DataFrame:
    """generation_text's glossary as a table: our name, our definition, each tool's name."""
    tools = list(next(iter(GLOSSARY.values())))
    return pd.DataFrame([{"ours": ours, "definition": DEFINITIONS[ours],
                          **{t: GLOSSARY[ours][t] for t in tools}} for ours in GLOSSARY])


def sweep_labels(sweeps: pd.DataFrame) -> dict:
    """store.generation.generation_sweeps rows -> their labels, newest first."""
    return {s.sweep_id: (f"sweep {s.sweep_id[:16]} · {str(s.created_at)[:16]} · {s.rounds} "
                         f"round{'s' if s.rounds != 1 else ''} · {s.ok} of {s.runs} runs ok")
            for s in sweeps.itertuples()}
