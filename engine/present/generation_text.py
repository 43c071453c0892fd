"""Generation in words: the glossary that maps our figures to other tools' names, a sweep's
figures as a table, its per-metric contest sentences, and a run's per-token timeline.

Our definitions (engine/scenarios/generation/metrics.py) are stated once; the glossary says
what each tool calls the same quantity and where a tool's figure of the same name is a
different one (guidellm's TPOT counts the first token; AIPerf's ITL is our TPOT; LLMPerf's
ITL includes TTFT), so a number compared across tools is compared on one definition.
"""

from __future__ import annotations

import pandas as pd

from engine.analysis.generation_verdicts import MetricContest
from engine.analysis.looks import confidence_text
from engine.analysis.sequential import WINNER
from engine.present.tables import format_table

__all__ = ["GLOSSARY", "DEFINITIONS", "glossary_text", "contest_sentences", "figures_table",
           "timeline_table", "energy_notes"]

# ours -> what it is
DEFINITIONS = {
    "TTFT": "time to first token: from handing the runtime the prompt to the first "
            "generated token being visible (prefill plus one step)",
    "TPOT": "time per output token after the first: (E2E - TTFT) / (output tokens - 1), "
            "per call",
    "ITL": "inter-token latency: every gap between consecutive tokens, pooled over calls",
    "E2E": "end-to-end latency of one call: prompt in to the last token out",
    "prefill tokens/s": "batch x prompt tokens / TTFT",
    "decode tokens/s": "batch x (output tokens - 1) / (E2E - TTFT)",
    "output tokens/s": "batch x output tokens / E2E (the run's throughput)",
}

# ours -> tool -> their name (and how it differs); "-": the tool reports no such figure
GLOSSARY = {
    "TTFT": {"vLLM bench serve": "TTFT (request sent to first chunk, over HTTP)",
             "AIPerf": "time to first token",
             "guidellm": "time to first token",
             "optimum-benchmark": "prefill latency (generate start to first logits, "
                                  "before the token is chosen)",
             "OpenVINO GenAI PerfMetrics": "get_ttft()"},
    "TPOT": {"vLLM bench serve": "TPOT (same definition)",
             "AIPerf": "inter token latency (ITL): its ITL is our TPOT",
             "guidellm": "inter token latency; its TPOT instead counts the first token "
                         "(E2E / output tokens)",
             "optimum-benchmark": "per-token decode latency (mean of its gaps, close to "
                                  "ours)",
             "OpenVINO GenAI PerfMetrics": "get_tpot() (mean over generated tokens)"},
    "ITL": {"vLLM bench serve": "ITL (same: every gap, pooled)",
            "AIPerf": "- (its ITL is our TPOT)",
            "guidellm": "- (its ITL is our TPOT)",
            "optimum-benchmark": "per_token latencies (gaps between logits calls)",
            "OpenVINO GenAI PerfMetrics": "raw_metrics.m_durations (per-token gaps); "
                                          "get_ipot() is their mean"},
    "E2E": {"vLLM bench serve": "E2EL", "AIPerf": "request latency",
            "guidellm": "request latency", "optimum-benchmark": "generate latency",
            "OpenVINO GenAI PerfMetrics": "get_generate_duration()"},
    "prefill tokens/s": {"vLLM bench serve": "-", "AIPerf": "-", "guidellm": "-",
                         "optimum-benchmark": "prefill throughput (in samples/s, not "
                                              "tokens/s)",
                         "OpenVINO GenAI PerfMetrics": "-"},
    "decode tokens/s": {"vLLM bench serve": "-", "AIPerf": "-", "guidellm": "-",
                        "optimum-benchmark": "decode throughput (tokens/s)",
                        "OpenVINO GenAI PerfMetrics": "-"},
    "output tokens/s": {"vLLM bench serve": "output token throughput (over the whole "
                                            "benchmark)",
                        "AIPerf": "output token throughput",
                        "guidellm": "output tokens/s",
                        "optimum-benchmark": "-",
                        "OpenVINO GenAI PerfMetrics": "get_throughput() (tokens/s)"},
}


def glossary_text() -> str:
    """The glossary as a plain table: our name, our definition, then each tool's name."""
    tools = list(next(iter(GLOSSARY.values())))
    rows = [[ours, DEFINITIONS[ours], *(GLOSSARY[ours][t] for t in tools)]
            for ours in GLOSSARY]
    return format_table(["ours", "definition", *tools], rows)


def _winner_sentence(mc: MetricContest, best: str, rival: str, cmp) -> str:
    fast, slow, x, lo, hi = cmp.leaning(best, rival)
    side = "lower" if mc.metric.lower_is_better else "higher"
    level = confidence_text(cmp.rule.plan.alpha)
    kind = f"{level} sequential interval" if cmp.rule.plan.sequential else f"{level} CI"
    return (f"{fast} has {x:.2f}x {side} {mc.metric.name} than {slow} ({kind} "
            f"{lo:.2f}-{hi:.2f}, {cmp.rounds} rounds)")


def contest_sentences(mc: MetricContest) -> list[str]:
    """Each rival against the contest's best, in words: a winner as "A has 1.8x lower TPOT
    than B (95 % sequential interval ..., 3 rounds)"; equivalence, a single round or an
    undecided gap (with the rounds that would decide it) in the rule's own sentence."""
    c = mc.contest
    out = []
    for rival, cmp in c.comparisons.items():
        if cmp.state == WINNER:
            out.append(_winner_sentence(mc, c.best, rival, cmp))
        else:
            out.append(f"{mc.metric.name}: {cmp.sentence(c.best, rival)}")
    return out


def _missing(v) -> bool:
    return v is None or bool(pd.isna(v))


def _f(v, fmt: str) -> str:
    return "-" if _missing(v) else format(v, fmt)


def figures_table(df) -> str:
    """One row per stored run: configuration, status, TTFT/TPOT/ITL/E2E p50 [p99], tokens/s,
    agreement and build time; a failed run's reason instead of figures."""
    rows = []
    for r in df.itertuples():
        head = [r.model, f"{r.framework} ({r.runtime})", r.precision or "fp32",
                f"{r.batch_size}", _f(r.prompt_len, ".0f"), _f(r.output_len, ".0f"),
                f"{r.intra_threads}", _f(r.round_no, ".0f"), r.status]
        if _missing(r.ttft_p50_ms):
            rows.append(head + ["-"] * 8 + [(r.reason or "")[:80]])
            continue
        rows.append(head + [
            f"{r.ttft_p50_ms:.2f} [{r.ttft_p99_ms:.2f}]", f"{r.tpot_p50_ms:.3f} [{r.tpot_p99_ms:.3f}]",
            f"{_f(r.itl_p50_ms, '.3f')} [{_f(r.itl_p99_ms, '.3f')}]",
            f"{r.e2e_p50_ms:.2f} [{r.e2e_p99_ms:.2f}]",
            f"{r.prefill_tok_s:,.0f} / {r.decode_tok_s:,.0f} / {r.output_tok_s:,.1f}",
            f"{r.agreement:.2f} of {r.agreement_tokens}", _f(r.build_s, ".1f"), _energy(r),
            (r.validity or "") if r.status == "ok" else (r.reason or "")[:80]])
    return format_table(["model", "runtime", "precision", "batch", "prompt", "output",
                         "threads", "round", "status", "TTFT ms p50 [p99]",
                         "TPOT ms p50 [p99]", "ITL ms p50 [p99]", "E2E ms p50 [p99]",
                         "tok/s prefill / decode / output", "agreement", "build s",
                         "J / 1K out tok", "verdict / reason"], rows)


def _energy(r) -> str:
    """The run's joules per 1 K output tokens; "absent" (energy_notes says why) or "-" (not
    asked)."""
    v = getattr(r, "energy_j_per_1k_tokens", None)
    if not _missing(v):
        return f"{v:.4g}"
    return "absent" if not _missing(getattr(r, "energy_absent", None)) else "-"


def energy_notes(df) -> list[str]:
    """Each distinct energy reading's source or reason, in words, once: what the table's
    energy column stands on ("measured (RAPL) from package-0 (intel-rapl:0)", "energy
    absent: no RAPL on this machine ...")."""
    out = []
    for r in df.itertuples():
        src, why = getattr(r, "energy_source", None), getattr(r, "energy_absent", None)
        if not _missing(src):
            line = f"energy {src} from {r.energy_counters}"
        elif not _missing(why):
            line = f"energy absent: {why}"
        else:
            continue
        if line not in out:
            out.append(line)
    return out


def timeline_table(df, reps: int = 1) -> str:
    """A run's readings for its first `reps` calls: step, ms since the call's start, gap
    since the step before (the first step's is its TTFT: prefill and the first step)."""
    rows = []
    for r in df.itertuples():
        if r.rep >= reps:
            break
        gap = "TTFT" if _missing(r.gap_ns) else f"{r.gap_ns / 1e6:.3f}"
        rows.append([str(r.rep), str(r.step), f"{r.t_ns / 1e6:.3f}", gap, r.reading])
    return format_table(["call", "step", "ms since start", "gap ms", "reading"], rows)
