"""One stored run as the Results page shows it: its title, why it failed, its headline
metrics (each with why to doubt it), the profile's caption and the timing and provenance
panels. Built from store.queries.run_detail's dict; no Streamlit."""

from __future__ import annotations

import pandas as pd

from engine.analysis.stats import P99_MIN_SAMPLES, p99_confident
from engine.core.catalog import size_noun, tokens_per_s, tokens_per_sample
from engine.core.energy import energy_words
from engine.core.settle import median_interval
from engine.present.tables import ms_text
from engine.present.values import missing

__all__ = ["run_title", "failure_text", "stderr_tail", "run_metrics", "with_tokens",
           "throughput_label", "size_label", "profile_caption",
           "run_timings", "run_provenance", "energy_text", "energy_lines", "numerics_text",
           "TIMING_KEYS",
           "MACHINE_KEYS"]

STDERR_SHOWN = 3000  # characters of a failed run's stderr tail on the page
TIMING_KEYS = ("import_s", "load_s", "prepare_s", "first_forward_s", "warmup_s",
               "measured_s", "stop_reason", "peak_rss_bytes", "peak_rss_method", "model_peak_bytes",
               "model_baseline_bytes", "reference_bytes", "params",
               "params_trainable", "flops_per_sample", "flops_method", "gflops_per_s",
               "load_avg_1m", "git_commit")
MACHINE_KEYS = ("machine_shape", "threads_per_core", "cpu_flags", "governor", "node_id",
                "node_host")


def run_title(run: dict) -> str:
    return (f"{run['kind']} · {run['model']} · {run['framework']} ({run['runtime']}) · batch "
            f"{run['batch_size']} · {run['intra_threads']} threads · {run['status']}")


def failure_text(run: dict) -> str | None:
    """Why a run did not succeed, with its exit code or signal; None for an ok run."""
    if run["status"] == "ok":
        return None
    return (f"**{run['status']}**: {run['reason']}"
            + (f" (exit code {run['exit_code']})" if run["exit_code"] is not None else "")
            + (f" (signal {run['signal']})" if run["signal"] else ""))


def stderr_tail(run: dict) -> str:
    return (run["stderr_tail"] or "")[-STDERR_SHOWN:]


def run_metrics(run: dict) -> list[tuple[str, str, str | None]]:
    """(label, value, help) for the run's headline figures: a p99 from too few samples is
    labelled low confidence, and iterations timed in blocks of calls say so."""
    low = not p99_confident(run["iterations"])
    blocks = (run["extra"] or {}).get("block_calls")
    size = None if missing(run.get("image_size")) else run["image_size"]
    tps = tokens_per_s(run["model"], size, run["throughput"])
    # a token model's sample is a sequence: named so, and its tokens/s beside it
    rate = ([("sequences/s", f"{run['throughput']:,.1f}",
              "sequences processed over the total measured time"),
             ("tokens/s", f"{tps:,.0f}", f"sequences/s x the sequence length, {size} tokens")]
            if tps is not None else
            [("samples/s", f"{run['throughput']:,.1f}",
              "samples processed over the total measured time")])
    return [
        ("p50", ms_text(run["median_ms"]), None),
        ("p90", ms_text(run["p90_ms"]), None),
        ("p99" + (" (low confidence)" if low else ""), ms_text(run["p99_ms"]),
         f"from {run['iterations']} samples: below {P99_MIN_SAMPLES}, p99 is one of the "
         "largest few samples" if low else None),
        ("IQR", ms_text(run["iqr_ms"]), None),
        *rate,
        ("iterations" if not blocks else f"iterations (blocks of {blocks} calls)",
         f"{run['iterations']}",
         "calls under 1 ms are timed in blocks; each sample is a block's time over its calls"
         if blocks else None)]


def with_tokens(table: pd.DataFrame) -> pd.DataFrame:
    """Results' table (store.queries.results_table) with a tokens_per_s column where any
    row is a token model's (empty for the others); the table as it was otherwise."""
    tps = [tokens_per_s(r.model, None if missing(r.image_size) else r.image_size,
                        None if missing(r.throughput) else r.throughput)
           for r in table.itertuples()]
    if all(t is None for t in tps):
        return table
    return table.assign(tokens_per_s=[float("nan") if t is None else t for t in tps])


def throughput_label(table: pd.DataFrame) -> tuple[str, str]:
    """(name, help) of Results' throughput column: a token model's sample is a sequence,
    so the column says sequences/s where every row shown is a token model's."""
    tokens = [tokens_per_sample(r.model, None if missing(r.image_size) else r.image_size)
              is not None for r in table.itertuples()]
    why = "processed over the total measured time"
    if tokens and all(tokens):
        return "sequences/s", f"sequences {why}"
    if any(tokens):
        return "samples/s", f"samples {why}; a token model's sample is one sequence"
    return "samples/s", f"samples {why}"


def size_label(table: pd.DataFrame) -> str:
    """Results' input-size column name: "image px", "tokens" (a token model's sequence
    length) or both named where the rows shown mix them."""
    return size_noun(table.model.unique()) if "model" in table else "image px"


def profile_caption(run: dict, unit: str) -> str:
    """The profile's pass against the timed one; unit: the scenario's step noun."""
    extra = run["extra"] or {}
    return (f"{extra.get('profile_steps')} {unit}s profiled in a separate pass after the timed "
            f"one, so the profiler never touched the figures above: "
            f"{extra.get('profile_step_ms', float('nan')):,.2f} ms per profiled {unit} against "
            f"a p50 of {run['median_ms']:,.2f} ms unprofiled (the difference is the profiler's "
            "own overhead). Self time: time in the operator itself, its children excluded.")


def energy_text(run: dict) -> str:
    """The energy loop's reading with its tag, or why it is absent, and what the loop ran;
    "" for a run that asked for none (issue 28)."""
    words = energy_words(run.get("energy_source"), run.get("energy_absent"),
                         run.get("energy_j_per_sample"), run.get("energy_kwh_per_million"))
    if not words:
        return ""
    loop = (f" (a loop of its own after the timed one: {run['energy_loop_s']:.1f} s, "
            f"{run['energy_samples']:,} inferences"
            + (f"; read {run['energy_counters']}" if run.get("energy_counters") else "")
            + ")") if run.get("energy_loop_s") is not None else ""
    return "Energy: " + words + loop


def numerics_text(run: dict) -> str:
    """The numerics the worker set and read back (engine/worker/numerics.py), in one line;
    "" for a run that records none (selftest, imports, older runs)."""
    n = run.get("numerics") or {}
    if not n:
        return ""
    parts = [f"denormals {'flushed' if n.get('denormals_flushed') else 'NOT flushed'} "
             f"({n.get('policy')})"]
    if "cuda_matmul_fp32_precision" in n:
        parts.append(f"fp32 CUDA matmul {n['cuda_matmul_fp32_precision']}, convolution "
                     f"{n.get('cudnn_conv_fp32_precision')} (TF32 "
                     f"{'asked' if n.get('tf32_asked') else 'not asked'}; "
                     f"{n.get('tf32_scope')}), cudnn.benchmark "
                     f"{'on' if n.get('cudnn_benchmark') else 'off'}")
    elif "tf32_enabled" in n:
        parts.append(f"TF32 {'on' if n['tf32_enabled'] else 'off'} ({n.get('tf32_scope')})")
    if n.get("denormals_note"):
        parts.append(n["denormals_note"])
    return "Numerics: " + "; ".join(parts)


def energy_lines(readings) -> list[str]:
    """A report's energy lines, one per configuration and source (store.provenance.
    sweep_energy): the median reading with its tag beside it, or why it is absent."""
    lines = []
    for r in readings.itertuples():
        words = energy_words(r.energy_source, r.absent, _num(r.j_per_sample),
                             _num(r.kwh_per_million))
        rounds = f" (median of {r.runs} runs)" if r.energy_source and r.runs > 1 else ""
        lines.append(f"energy, {r.model} {r.framework} ({r.runtime}) b{r.batch_size} "
                     f"t{r.intra_threads} {r.precision} {r.device}: {words}{rounds}")
    return lines


def _num(v) -> float | None:
    return None if missing(v) else float(v)  # NaN, NA: none


def run_timings(run: dict) -> dict:
    """The "Timings and model" panel: where the run's time went (import, build, the
    benchmark's BatchNorm calibration where the worker made it, prepare, first call,
    warm-up, timing), how its worker started and how its weights came, why warm-up and
    timing ended,
    and how sure its median is (the distribution-free 95 % interval, engine/core/settle.py,
    derived from the stored samples)."""
    extra = run.get("extra") or {}
    out = {k: run.get(k) for k in TIMING_KEYS}
    out["worker_start"] = extra.get("worker_start", "spawn")
    if extra.get("fork_server_import_s") is not None:  # the import it waited for, once
        out["fork_server_import_s"] = extra["fork_server_import_s"]
    if extra.get("weights_from"):  # a catalog model's weights: calibrated here, or read
        out["weights_from"] = extra["weights_from"]
        if extra.get("calibrate_s") is not None:  # outside load_s (engine/worker/weights.py)
            out["calibrate_s"] = extra["calibrate_s"]
    if extra.get("warmup_stop"):
        out["warmup_stop"] = extra["warmup_stop"]
    samples = run.get("samples_ns")
    ci = median_interval(samples) if samples is not None and len(samples) else None
    if ci is not None and run.get("median_ms"):
        m = run["median_ms"] * 1e6
        out["median_95pct_interval"] = (f"-{100 * (m - ci[0]) / m:.2f} % / "
                                        f"+{100 * (ci[1] - m) / m:.2f} %")
    return out


def run_provenance(run: dict) -> dict:
    """The "Provenance" panel: the system, the machine facts, versions, threads, env."""
    machine = {k: run.get(k) for k in MACHINE_KEYS}
    if (run.get("extra") or {}).get("left_to_ray"):  # a cluster node's run
        machine["left_to_ray"] = run["extra"]["left_to_ray"]
    return {"system": run["system"], "machine": machine,
            "versions": run["versions"], "threads_effective": run["threads_effective"],
            "env": run["env"],
            # TF32, cudnn.benchmark and denormal flushing as the worker read them back
            "numerics": run.get("numerics") or {}}
