"""Serving a language model: a LoadGen test in token-latency mode (Server, Offline,
SingleStream) or a closed loop of N users against one engine; LoadGen's verdict and error
count decide a LoadGen test's row, and every request's readings are kept."""

from __future__ import annotations

from dataclasses import replace

from engine.scenarios.base import Scenario, phase_of
from engine.scenarios.genserve.engines import engine_row
from engine.scenarios.genserve.messages import MESSAGES, GenServeResult
from engine.scenarios.genserve.spec import GenServeSpec
from engine.scenarios.genserve.table import GENSERVE_RESULTS, TABLES, kind_rows

__all__ = ["GenServing", "GENSERVING", "READINGS_SOURCE"]

READINGS_SOURCE = ("the SUT's clock (time.perf_counter_ns in the worker's front): issue at "
                   "LoadGen's IssueQuery call (the closed loop's send), first token and "
                   "completion as the front reports them to LoadGen; LoadGen's own "
                   "percentiles count from its scheduled issue times")


class GenServing(Scenario):
    kind = GenServeSpec.kind
    spec_type = GenServeSpec
    worker_body = "engine.worker.genserve.body"
    messages = MESSAGES
    tables = TABLES
    title = "Deploy"
    sample_unit = "request"
    step_noun = "request"
    runner_replicates = False
    worker_imports_framework = False  # the engine process does (engine_proc.py)

    def worker_cpus(self, spec) -> int:
        """The worker holds every engine process: replicas x threads CPUs, split among them."""
        return spec.intra_threads * spec.replicas

    def record_columns(self, spec) -> dict:
        return {"replicas": spec.replicas}

    def config_extra(self, spec: GenServeSpec) -> dict:
        row = engine_row(spec.runtime)
        extra = {"scenario": spec.scenario, "prompt_len": spec.prompt_len,
                 "output_len": spec.output_len, "ttft_bound_ms": spec.ttft_bound_ms,
                 "tpot_bound_ms": spec.tpot_bound_ms, "preset": spec.preset,
                 "target_qps": spec.target_qps, "max_num_seqs": spec.max_num_seqs,
                 "kv_blocks": spec.kv_blocks_resolved if row and row.continuous else None,
                 "max_batched_tokens": spec.max_batched_tokens or None,
                 "performance_sample_count": spec.samples, "seed": spec.seed,
                 "engine": row.label if row else spec.runtime,
                 "batching": ("continuous" if row and row.continuous
                              else "one request at a time")}
        if spec.scenario == "closed-loop":
            extra.update(users=spec.users, requests=spec.min_query_count)
        else:
            extra.update(min_duration_s=spec.loadgen_min_duration_s,
                         min_query_count=spec.loadgen_min_queries)
            if spec.query_count:
                extra["query_count"] = spec.query_count
        return extra

    def result_extra(self, res: GenServeResult) -> dict:
        extra = {"build_s": res.build_s, "readings": READINGS_SOURCE}
        if res.loadgen_version:
            extra["loadgen_version"] = res.loadgen_version
        if res.runtime_versions:
            extra["runtime_versions"] = dict(res.runtime_versions)
        return extra

    def result_columns(self, res: GenServeResult) -> dict:
        return {"kind_rows": kind_rows(res)}

    def throughput(self, spec, res: GenServeResult, samples_ns) -> float | None:
        """Output tokens per second of the machine over the test's span."""
        rows = kind_rows(res)[GENSERVE_RESULTS.name]
        return rows[0].get("output_tok_s") if rows else None

    def finish_record(self, rec, res: GenServeResult):
        """A LoadGen test is ok only when LoadGen says VALID and counted no error (it does
        not fail a test for the SUT's errors, such as a request under 2 tokens); any test
        is invalid when a request came back short or the engine dropped one."""
        g = ((rec.kind_rows or {}).get(GENSERVE_RESULTS.name) or [{}])[0]
        why = []
        if res.summary_log:
            if g.get("loadgen_result") != "VALID":
                failed = g.get("failed_rules") or "[]"
                why.append(f"LoadGen: {g.get('loadgen_result') or 'no result'}"
                           + (f" ({failed.strip('[]').replace(chr(34), '').lower()} not "
                              "satisfied)" if failed != "[]" else ""))
            if g.get("loadgen_errors"):
                why.append(f"LoadGen counted {g['loadgen_errors']} SUT errors (see its "
                           "detail log)")
        short = sum(1 for n in res.req_tokens if n != res.output_len)
        if short:
            why.append(f"{short} of {len(res.req_tokens)} requests did not return "
                       f"{res.output_len} tokens")
        if g.get("ignored"):
            why.append(f"the engine dropped {g['ignored']} requests (they did not fit its "
                       "KV cache)")
        if not why:
            return replace(rec, status="ok", reason="", validity="valid",
                           validity_reason="")
        text = "; ".join(why)
        return replace(rec, status="invalid", reason=text, validity="invalid",
                       validity_reason=text)

    def run_label(self, rec) -> str:
        extra = rec.extra or {}
        who = (f" {extra.get('users')} users" if extra.get("scenario") == "closed-loop"
               else f" at {extra.get('target_qps'):g} req/s"
               if extra.get("target_qps") else "")
        prec = f" {rec.precision}" if rec.precision not in (None, "fp32") else ""
        reps = f" x{rec.replicas}" if (getattr(rec, "replicas", 1) or 1) > 1 else ""
        return (f"{extra.get('scenario')}{who} {rec.model} ({rec.runtime}){prec} "
                f"seqs{rec.batch_size} p{extra.get('prompt_len')} n{extra.get('output_len')} "
                f"t{rec.intra_threads}{reps}")

    def describe_event(self, spec, ev) -> str:
        return (f"{spec.scenario} {spec.model} {spec.runtime} seqs{spec.max_num_seqs} "
                f"t{spec.intra_threads}: {phase_of(ev)}")

    def figure(self, rec) -> str | None:
        rows = (rec.kind_rows or {}).get(GENSERVE_RESULTS.name) or []
        if not rows or not rows[0].get("requests"):
            return None
        g = rows[0]
        head = f"LoadGen {g['loadgen_result']}, " if g.get("loadgen_result") else ""
        return (f"{head}{g['requests_per_s']:.3g} req/s, {g['output_tok_s']:,.1f} output "
                f"tok/s, TTFT p99 {g['ttft_p99_ms']:,.1f} ms, TPOT p99 "
                f"{g['tpot_p99_ms']:,.2f} ms, goodput {g['goodput_req_s']:.3g} req/s "
                f"({g['good_share']:.0%} within {g['ttft_bound_ms']:g}/"
                f"{g['tpot_bound_ms']:g} ms)")


GENSERVING = GenServing()
