"""Generation: greedy decoding of a fixed number of tokens, timed call by call with a reading
per token; its figures derived in the parent from the raw readings (metrics.py)."""

from __future__ import annotations

from engine.scenarios.base import Scenario, phase_of
from engine.scenarios.generation.agreement import AGREE_TOKENS, threshold
from engine.scenarios.generation.messages import MESSAGES, GenResult
from engine.scenarios.generation.spec import GenSpec
from engine.scenarios.generation.table import GENERATION_RUNS, TABLES, kind_rows

__all__ = ["Generation", "GENERATION", "PROMPTS_TEXT"]

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
    # Its contests are per metric (TTFT, TPOT, tokens/s) over a sweep's rounds
    # (engine/analysis/generation_verdicts.py), judged after the rounds asked for: the sweep
    # driver's rounds-until-decided and interleaving read inference's latency figure.
    decides_contests = False

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
        return (f"TTFT p50 {g['ttft_p50_ms']:.2f} ms, TPOT p50 {g['tpot_p50_ms']:.3f} ms, "
                f"{g['output_tok_s']:,.1f} output tok/s, agreement {g['agreement']:.2f}, "
                f"{rec.validity}")


GENERATION = Generation()
