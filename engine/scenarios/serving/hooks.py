"""Serving: one MLPerf LoadGen test (SingleStream, MultiStream, Server, Offline) against a
warm model, LoadGen's verdict and figures kept with its logs."""

from __future__ import annotations

import gzip
from dataclasses import replace

from engine.core.model_source import describe_inputs
from engine.core.protocol import Event
from engine.scenarios.serving.messages import MESSAGES, ServeResult
from engine.scenarios.serving.table import TABLES, table_rows
from engine.scenarios.serving.loadgen import detail_value, parse_summary
from engine.scenarios.serving.spec import SCENARIO_PERCENTILE, ServeSpec, early_stopping_note
from engine.scenarios.base import Scenario, phase_of

__all__ = ["Serving", "SERVING", "LATENCY_SOURCE"]

# Where a serving run's raw samples come from: LoadGen 6.0.17 logs percentiles, not a
# per-query list (its detail log has none in PerformanceOnly; the trace is off, as a
# trace would cost every query time), so the SUT records each query's own span.
LATENCY_SOURCE = ("the SUT's clock: from LoadGen's IssueQuery call to just before "
                  "QuerySamplesComplete, one per query (Offline: one per sample, from its "
                  "query's issue); LoadGen's percentiles count from its scheduled issue time")


class Serving(Scenario):
    kind = ServeSpec.kind
    spec_type = ServeSpec
    worker_body = "engine.worker.serving.body"
    messages = MESSAGES
    tables = TABLES
    title = "Serve"
    sample_unit = "query"
    step_noun = "query"
    runner_replicates = False  # its replicas are the worker's own processes, one queue

    def worker_cpus(self, spec) -> int:
        """The worker holds every replica: replicas x threads CPUs, split among them."""
        return spec.intra_threads * spec.replicas

    def record_columns(self, spec) -> dict:
        src = spec.user_model
        common = {"replicas": spec.replicas}
        if src is None:
            return common
        return {"model_format": src.format, "model_origin": src.factory or src.path,
                "model_inputs": describe_inputs(src.inputs), **common}

    def config_extra(self, spec) -> dict:
        """What the test was asked for, kept on every row (failed ones included)."""
        extra = {"scenario": spec.scenario, "min_duration_s": spec.loadgen_min_duration_s,
                 "min_query_count": spec.loadgen_min_queries, "target_qps": spec.target_qps,
                 "bound_ms": spec.bound_ms, "max_wait_ms": spec.max_wait_ms,
                 "performance_sample_count": spec.samples, "loadgen_seed": spec.seed}
        if spec.official:
            extra["preset"] = "official"
        if spec.query_count:  # a search's probe: exactly this many, no minimum duration
            extra["query_count"] = spec.query_count
        if spec.user_model is not None and spec.user_model.trust_code:
            extra["trust_model_code"] = True
        return extra

    def result_extra(self, res: ServeResult) -> dict:
        extra = {"loadgen_version": res.loadgen_version,
                 "expected_latency_ns": res.expected_latency_ns,
                 "model_calls": res.model_calls, "latency_source": LATENCY_SOURCE}
        if res.replica_cpus:  # R processes behind one queue: where each one ran, how much
            extra["replica_cpus"] = list(res.replica_cpus)
            extra["replica_calls"] = list(res.replica_calls)
        return extra

    def result_columns(self, res: ServeResult) -> dict:
        """LoadGen's summary parsed (its verdict, failed rules, early-stopping estimates,
        figures) and both logs gzipped, for the store's tables of their own."""
        summary = parse_summary(res.summary_log)
        summary["query_count"] = detail_value(res.detail_log, "result_query_count")
        # Server: the queries over the bound as LoadGen counts them (latency from the
        # scheduled issue), what its early stopping judged; None for the other scenarios
        summary["overlatency_count"] = detail_value(res.detail_log,
                                                    "result_overlatency_query_count")
        summary["samples_per_query"] = detail_value(res.detail_log,
                                                    "generated_samples_per_query")
        logs = tuple((name, len(text.encode()), gzip.compress(text.encode(), 6))
                     for name, text in (("mlperf_log_summary.txt", res.summary_log),
                                        ("mlperf_log_detail.txt", res.detail_log)) if text)
        return {"serving": summary, "loadgen_logs": logs}

    def throughput(self, spec, res: ServeResult, samples_ns) -> float | None:
        """LoadGen's figure, in samples per second: Offline's samples/s, Server's completed
        samples/s, the streams' QPS (with LoadGen's overhead) times samples per query."""
        figures = parse_summary(res.summary_log)["figures"]
        for key in ("samples_per_s", "completed_samples_per_s"):
            if key in figures:
                return figures[key]
        qps = figures.get("qps_with_loadgen_overhead")
        if qps is not None:
            return qps * (figures.get("samples_per_query") or 1)
        # MultiStream reports latency alone: its samples over the queries' own time
        return super().throughput(spec, res, samples_ns)

    def table_rows(self, rec) -> dict[str, list[dict]]:
        return table_rows(rec)

    def finish_record(self, rec, res: ServeResult):
        """LoadGen's verdict is the run's: INVALID makes the row `invalid` with the failed
        rules and LoadGen's recommendations as its reason; every figure is kept."""
        s = rec.serving or {}
        if s.get("result") == "VALID":
            return replace(rec, status="ok", reason="", validity="valid", validity_reason="")
        why = "LoadGen: " + (s.get("result") or "no result in its summary")
        if s.get("failed_rules"):
            why += " (" + ", ".join(r.lower() for r in s["failed_rules"]) + " not satisfied)"
        if s.get("recommendations"):
            why += ": " + " ".join(s["recommendations"])
        extra = rec.extra or {}
        note = (early_stopping_note(extra.get("scenario", ""), extra["min_query_count"])
                if "Early stopping" in s.get("failed_rules", ())
                and extra.get("min_query_count") is not None else None)
        if note:  # the user asked for fewer queries than early stopping judges on
            why += f"; {note}"
        return replace(rec, status="invalid", reason=why, validity="invalid",
                       validity_reason=why)

    def progress_units(self, ev: Event) -> int | None:
        return None

    def describe_event(self, spec, ev: Event) -> str:
        replicas = f" x{spec.replicas}" if spec.replicas > 1 else ""
        return (f"{spec.scenario} {spec.model} {spec.runtime} t{spec.intra_threads}{replicas}: "
                f"{phase_of(ev)}")

    def run_label(self, rec) -> str:
        scenario = (rec.extra or {}).get("scenario", "?")
        replicas = f" x{rec.replicas}" if (rec.replicas or 1) > 1 else ""
        return (f"{scenario} {rec.model} {rec.framework} ({rec.runtime}) b{rec.batch_size} "
                f"t{rec.intra_threads}{replicas}")

    def describe_record(self, rec) -> str:
        s = rec.serving or {}
        head = f"{self.run_label(rec)}: {rec.status}"
        if not s:
            return f"{head} - {rec.reason[:160]}"
        failed = (f" ({', '.join(r.lower() for r in s['failed_rules'])} not satisfied)"
                  if s.get("failed_rules") else "")
        return f"{head}, LoadGen {s.get('result')}{failed} - {self.figure(rec)}"

    def figure(self, rec) -> str | None:
        s = rec.serving or {}
        if not s:
            return None
        figures, scenario = s.get("figures", {}), (rec.extra or {}).get("scenario")
        parts = []
        if scenario == "server":
            parts.append(f"{figures.get('completed_samples_per_s', 0):,.1f} samples/s "
                         f"at target {figures.get('target_qps', 0):,.1f} QPS")
        elif scenario == "offline":
            parts.append(f"{figures.get('samples_per_s', 0):,.1f} samples/s")
        elif scenario == "multi-stream":  # LoadGen reports its latency, no QPS
            parts.append(f"{s.get('samples_per_query')} samples a query")
        else:
            parts.append(f"{figures.get('qps_with_loadgen_overhead', 0):,.1f} QPS "
                         f"({figures.get('qps_without_loadgen_overhead', 0):,.1f} w/o "
                         "loadgen overhead)")
        pct = SCENARIO_PERCENTILE.get(scenario)
        latencies = s.get("percentiles_ns", {})
        if pct is not None and f"{pct:g}" in latencies:
            parts.append(f"p{pct:g} {latencies[f'{pct:g}'] / 1e6:.3f} ms")
            bound = (rec.extra or {}).get("bound_ms")
            if scenario == "single-stream" and bound:
                within = latencies[f"{pct:g}"] / 1e6 <= bound
                parts.append(f"{'within' if within else 'over'} the {bound:g} ms bound")
            elif scenario == "server":
                parts.append(f"bound {figures.get('target_latency_ns', 0) / 1e6:g} ms")
        early = s.get("early_stopping", {})
        if pct is not None and f"{pct:g}" in early:
            parts.append(f"early-stopping p{pct:g} estimate {early[f'{pct:g}'] / 1e6:.3f} ms")
        parts.append(f"{s.get('query_count')} queries")
        return ", ".join(parts)


SERVING = Serving()
