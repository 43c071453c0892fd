"""Cost per token of a generation configuration on every catalog machine: USD per 1 M output
tokens and per 1 M input tokens, from the same figures and the same pricing as inference's
cost per 1 M inferences (engine/analysis/cost.py's cost_per_million, cost_machines' basis
and figure: measured on a shape where runs name it, else estimated per physical core from
the selected machine, with the assumption stated).

Two throughputs, each a measured one:
  per 1 M output tokens = hourly price / (output tokens/s x 3600) x 1e6, output tokens/s =
                          batch x output / E2E: the whole call, prefill included;
  per 1 M input tokens  = hourly price / (prefill tokens/s x 3600) x 1e6, prefill tokens/s
                          = batch x prompt / TTFT: the prompt's processing alone.
They are not to be added: the output figure already pays for the prefill of its prompts.
The input figure is what a prompt-heavy workload (long prompts, few tokens out) pays per
prompt token.

Like for like: a figure is one configuration (model, runtime, precision, prompt, output,
batch) at the split it was measured at; how its threads compare with the machine's vCPUs,
and on which machine it was measured, is stated beside every figure. No framework import.
"""

from __future__ import annotations

from engine.analysis.cost import Machine, cost_per_million
from engine.analysis.cost_machines import Basis, Figure, basis, figure, physical_cores

__all__ = ["token_bases", "token_cost_rows", "like_for_like", "per_token_assumption"]


def token_bases(rows: list[dict]) -> tuple[Basis, Basis]:
    """(output tokens/s basis, prefill tokens/s basis) from store.generation_views.
    generation_throughput records of one configuration."""
    return (basis([{**r, "throughput": r["output_tok_s"]} for r in rows]),
            basis([{**r, "throughput": r["prefill_tok_s"]} for r in rows]))


def per_token_assumption(f: Figure, unit: str) -> str:
    """cost_machines' assumption sentence in tokens: its figures are in `unit` (it words
    every throughput as samples/s, the inference figure it was written for)."""
    return f.assumption.replace("samples/s", unit)


def like_for_like(f: Figure, m: Machine, source_name: str) -> str:
    """The caveat beside a machine's figure: the threads it was measured with against the
    shape's vCPUs, and where it was measured."""
    s = f.split
    cores = physical_cores(m)
    measured = (f"{s.config} ({s.cores:g} physical core{'' if s.cores == 1 else 's'}) on "
                + (m.shape if not f.estimate and s.shape == m.shape else
                   (s.shape or source_name)))
    if not f.estimate:
        return f"measured: {measured}; {m.shape} has {m.vcpus} vCPUs ({cores:g} cores)"
    return (f"estimate: measured with {measured}; {m.shape} has {m.vcpus} vCPUs "
            f"({cores:g} cores), priced as {cores / s.cores:g}x those cores serving as many "
            "tokens/s each. Decoding a small batch is held back by memory bandwidth more "
            "than by cores, so on a shape much larger than the one measured this is likely "
            "optimistic")


def token_cost_rows(machines: list[Machine], rows: list[dict]) -> list[dict]:
    """Per machine with a figure: output and input (prefill) tokens/s, USD per 1 M output and
    per 1 M input tokens, measured or estimated (with the assumption and the like-for-like
    caveat). The keys engine.present.charts.cost_bars reads (machine, provider, estimate,
    assumption) are there, with cost_per_million the output figure."""
    out_b, in_b = token_bases(rows)
    source = out_b.source_name
    out = []
    for m in machines:
        fo, fi = figure(out_b, m), figure(in_b, m)
        if fo is None or fi is None:
            continue
        per_out = cost_per_million(m.usd_per_hour, fo.throughput)
        per_in = cost_per_million(m.usd_per_hour, fi.throughput)
        out.append({"provider": m.provider, "shape": m.shape, "machine": m.label,
                    "vcpus": m.vcpus, "cores": physical_cores(m),
                    "memory_gb": m.memory_gb, "usd_per_hour": m.usd_per_hour,
                    "output_tok_s": fo.throughput, "input_tok_s": fi.throughput,
                    "usd_per_m_output": per_out, "usd_per_m_input": per_in,
                    "cost_per_million": per_out, "estimate": fo.estimate,
                    "assumption": per_token_assumption(fo, "output tokens/s"),
                    "config": fo.split.config, "threads": fo.split.threads,
                    "caveat": like_for_like(fo, m, source),
                    "if_hyperthreads": fo.if_hyperthreads, "secondary": m.secondary,
                    "as_of": m.as_of, "threads_inferred": m.threads_inferred})
    return out
