"""Generation: greedy decoding of a fixed number of tokens, timed call by call with a reading
per token; its figures derived in the parent from the raw readings (metrics.py)."""

from __future__ import annotations

from engine.scenarios.base import Scenario, phase_of
from engine.scenarios.generation.agreement import AGREE_TOKENS, threshold
from engine.scenarios.generation.contests import METRICS, contest_label, metric_rows, record_row
from engine.scenarios.generation.messages import MESSAGES, GenResult
from engine.scenarios.generation.spec import GenSpec
from engine.scenarios.generation.table import GENERATION_RUNS, TABLES, kind_rows

__all__ = ["Generation", "GENERATION", "PROMPTS_TEXT", "energy_text"]

PROMPTS_TEXT = ("random token ids drawn from the seed (ids 3 and up), the same for every "
                "runtime; no tokenizer in the timed path; greedy; the end-of-sequence token "
                "ignored, so every call generates exactly output_len tokens")


class Generation(Scenario):
    kind = GenSpec.kind
    spec_type = GenSpec
    worker_body = "engine.worker.generation.body"
    messages = MESSAGES
    tables = TABLES
    title = "Generate"
    sample_unit = "generate call"
    step_noun = "call"
    # Its contests are per metric (TTFT, TPOT, output tokens/s) and per (model, prompt,
    # output, batch, threads) (contests.py): a sweep runs more rounds, for the configurations
    # of the contests still undecided, as every sweep with contests does.
    decides_contests = True
    # Not timed in blocks: its body times whole generate calls with no gate (a call lasts
    # up to seconds, longer than a block), so a round's contenders run one after another.
    interleaves = False

    def config_extra(self, spec: GenSpec) -> dict:
        return {"prompt_len": spec.prompt_len, "output_len": spec.output_len,
                "seed": spec.seed, "prompts": PROMPTS_TEXT,
                "agreement_threshold": threshold(spec.precision),
                "agreement_positions": min(spec.output_len, AGREE_TOKENS),
                **dict(spec.options)}

    def result_extra(self, res: GenResult) -> dict:
        extra = {"build_s": res.build_s, "timing_source": res.timing_source}
        if res.runtime_versions:
            extra["runtime_versions"] = dict(res.runtime_versions)
        return extra

    def result_columns(self, res: GenResult) -> dict:
        return {"kind_rows": kind_rows(res)}

    def contest_fields(self, x) -> dict:
        """A GenSpec or a record: its prompt and output length in the model label, so a
        contest never mixes two of them (batch and threads are the row's, precision the
        contender's)."""
        extra = getattr(x, "extra", None) or {}
        p = getattr(x, "prompt_len", extra.get("prompt_len"))
        n = getattr(x, "output_len", extra.get("output_len"))
        return {**vars(x), "model": contest_label(x.model, p, n), "image_size": None}

    def contest_rows(self, records) -> list[list[dict]]:
        """One family of contests per metric, each run's figure for it as what is judged."""
        rows = [record_row(r) for r in records]
        return [metric_rows(rows, m) for m in METRICS]

    def throughput(self, spec, res: GenResult, samples_ns) -> float | None:
        """Output tokens per second over every timed call: B x N tokens a call."""
        total = sum(samples_ns)
        return spec.batch_size * spec.output_len * len(samples_ns) / (total / 1e9) \
            if total else None

    def run_label(self, rec) -> str:
        extra = rec.extra or {}
        prec = f" {rec.precision}" if rec.precision not in (None, "fp32") else ""
        return (f"{rec.model} {rec.framework} ({rec.runtime}){prec} b{rec.batch_size} "
                f"p{extra.get('prompt_len')} n{extra.get('output_len')} "
                f"t{rec.intra_threads}")

    def describe_event(self, spec, ev) -> str:
        return (f"{spec.model} {spec.runtime} b{spec.batch_size} p{spec.prompt_len} "
                f"n{spec.output_len}: {phase_of(ev)}")

    def figure(self, rec) -> str | None:
        rows = (rec.kind_rows or {}).get(GENERATION_RUNS.name) or []
        if not rows:
            return f"E2E p50 {rec.median_ms:.2f} ms, {rec.validity}"
        g = rows[0]
        energy = energy_text(g.get("energy_source"), g.get("energy_absent"),
                             g.get("energy_j_per_1k_tokens"))
        return (f"TTFT p50 {g['ttft_p50_ms']:.2f} ms, TPOT p50 {g['tpot_p50_ms']:.3f} ms, "
                f"{g['output_tok_s']:,.1f} output tok/s, agreement {g['agreement']:.2f}, "
                f"{rec.validity}" + (f"; {energy}" if energy else ""))


def energy_text(source, absent, j_per_1k) -> str:
    """A run's energy in words, its tag beside the figure: "41.2 J per 1 K output tokens,
    measured (RAPL)", "energy absent: <reason>", or "" when none was asked."""
    if source and j_per_1k is not None and j_per_1k == j_per_1k:
        return f"{j_per_1k:.4g} J per 1 K output tokens, {source}"
    if absent and absent == absent:  # a stored NULL reads back as NaN in a frame
        return f"energy absent: {absent}"
    return ""


GENERATION = Generation()
