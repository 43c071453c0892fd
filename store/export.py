"""Write stored inference runs into a directory in two other tools' formats:

- `perfzero`: one PerfZero summary JSON per run (tensorflow/benchmarks, perfzero/lib/perfzero/
  report_utils.py), failed runs included with succeeded=false; `store.ingest.import_file`
  reads it back to the same run.
- `pytorch-benchmark`: one YAML per configuration and its batch sizes, shaped like the
  results of LukasHedegaard/pytorch-benchmark 0.3.x (`benchmark()` printed with yaml.dump);
  its timing metrics are computed from the raw samples of every ok run of a batch size.

Only the runs whose scenario lists the format (Scenario.exports: inference) are written:
both formats describe a model's inference. A configuration
is everything but the batch size: model, framework, runtime, precision, device, image size,
threads and machine (store.queries.SETTING_COLUMNS: never blended).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from engine.core.errors import UserError
from engine.scenarios import SCENARIOS
from store.ingest import (PERFZERO_EXTRAS, PERFZERO_FLAGS, PERFZERO_HARNESS, PERFZERO_METRICS,
                           run_rows)

__all__ = ["export_dir", "DIR_FORMATS", "DirExport", "perfzero_summary",
           "pytorch_benchmark_results", "to_yaml"]

DIR_FORMATS = ("perfzero", "pytorch-benchmark")
# Statuses PerfZero would have seen as an exception in the benchmark method (has_exception);
# an invalid run finished but broke a measurement rule: succeeded=false without exception.
_RAISED = ("error", "timeout", "oom", "killed")
# pytorch-benchmark's `flops` is ptflops' count, multiply-accumulates. Only torch's
# FlopCounterMode count converts exactly (2 FLOPs per MAC of convolutions and matmuls);
# TensorFlow's profiler also counts elementwise ops, so no MAC count is derived from it.
_MAC_COUNTER = "FlopCounterMode"
_MAC_BASIS = ("multiply-accumulates of convolutions and matmuls: torch FlopCounterMode's "
              "count / 2 (ptflops, which pytorch-benchmark uses, also counts normalisation, "
              "activation and pooling layers)")
_GROUP_KEY = ("model", "framework", "runtime", "precision", "device", "image_size",
              "intra_threads", "inter_threads", "system_id")


@dataclass(frozen=True)
class DirExport:
    """What export_dir wrote: the files, the runs whose figures they hold, and the selected
    runs the format has no place for, with why."""
    files: tuple[Path, ...]
    runs: int
    left_out: int
    left_out_why: str


def export_dir(con, out_dir: str | Path, fmt: str, sweep_id: str | None = None) -> DirExport:
    """Write the chosen inference runs (a sweep, or all stored) into out_dir in fmt."""
    if fmt not in DIR_FORMATS:
        raise UserError(f"format: {fmt!r} is not a one-file-per-run format; allowed: "
                        f"{', '.join(DIR_FORMATS)}", field="format")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"out: {out} is a file; {fmt} writes several files, so allowed: a "
                        "directory (new or existing)", field="out")
    rows = run_rows(con, sweep_id)
    inference = [r for r in rows if fmt in SCENARIOS[r["kind"]].exports]
    which = f"{sweep_id!r} holds" if sweep_id else "none given, and the database holds"
    if not inference:
        held = f"{len(rows)} runs, none of them inference" if rows else "no runs"
        raise UserError(f"sweep: {which} {held}; allowed: a stored sweep id with inference "
                        "runs (see `python -m engine sweeps`)", field="sweep")
    if fmt == "perfzero":
        docs = [(f"{_safe(r['run_id'])}.json", json.dumps(perfzero_summary(r), indent=2), 1)
                for r in inference]
    else:
        docs = [(name, to_yaml(doc), n) for name, doc, n in _pytorch_benchmark_files(inference)]
        if not docs:
            raise UserError(f"sweep: {which} no ok inference run ({len(inference)} failed or "
                            "invalid); pytorch-benchmark results hold measured runs only, so "
                            "allowed: a sweep with ok runs, or --format perfzero (which keeps "
                            "failures)", field="sweep")
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, text, _ in docs:
        (out / name).write_text(text)
        files.append(out / name)
    used = sum(n for _, _, n in docs)
    why = "not inference" if fmt == "perfzero" else \
        "not inference, or not ok: pytorch-benchmark results hold measured runs only"
    return DirExport(tuple(files), used, len(rows) - used, why)


# -- PerfZero -------------------------------------------------------------------------------

def perfzero_summary(row: dict) -> dict:
    """One exported run row as a PerfZero execution summary. The execution id is the sweep
    (a run outside any sweep: its run id), the timestamp the run's start."""
    system, versions = row.get("system") or {}, row.get("versions") or {}
    fw = row["framework"]
    metrics = [{"name": key, "value": row[col]} for key, col in PERFZERO_METRICS
               if row.get(col) is not None]
    framework_info = {"name": fw, "version": versions.get(fw)}
    system_info = {
        "platform_name": system.get("platform"), "cpu_model": system.get("cpu_model"),
        "physical_cpu_count": system.get("physical_cores"),
        "logical_cpu_count": system.get("logical_cores"),
        "cpu_socket_count": system.get("sockets"),
        "accelerator_model": system.get("accelerator"),
        "accelerator_count": system.get("accelerator_count"),
        "accelerator_driver_version": system.get("accelerator_driver"),
        "hostname": system.get("hostname"),
        # Not PerfZero's: what our importer needs to put the run back on the same machine.
        "system_id": system.get("system_id"), "usable_cores": system.get("usable_cores"),
        "memory_bytes": system.get("memory_bytes"), "os": system.get("os"),
        "python": system.get("python")}
    summary = {
        "ml_framework_info": framework_info,
        "execution_timestamp": _epoch(row.get("started_at")),
        "execution_id": row.get("sweep_id") or row["run_id"],
        "benchmark_info": {
            "harness_name": PERFZERO_HARNESS,
            "harness_info": {"hash": row.get("git_commit")},
            "has_exception": row["status"] in _RAISED,
            "site_package_info": {k: {"version": v} for k, v in sorted(versions.items())},
            "flags": {k: row.get(k) for k in PERFZERO_FLAGS},
            "env_vars": row.get("env") or {}},
        "system_info": system_info,
        "benchmark_result": {
            "name": _perfzero_name(row),
            # PerfZero's value for a method that never reported one.
            "wall_time": row["measured_s"] if row.get("measured_s") is not None else -1,
            "metrics": metrics,
            "succeeded": row["status"] == "ok",
            "extras": {k: row.get(k) for k in PERFZERO_EXTRAS}},
    }
    if row.get("peak_rss_bytes") is not None:
        # PerfZero samples max_vms and max_cpu_percent too; we measure neither, so say nothing.
        summary["process_info"] = {"max_rss": row["peak_rss_bytes"]}
    return summary


def _perfzero_name(row: dict) -> str:
    """A benchmark method's dotted name: model, framework, runtime and the settings."""
    parts = [row["model"], row["framework"], row["runtime"], f"batch_{row['batch_size']}",
             f"threads_{row['intra_threads']}x{row['inter_threads']}"]
    parts += [str(row[k]) for k in ("precision", "device") if row.get(k)]
    return ".".join(parts)


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    ts = datetime.fromisoformat(iso)
    return (ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)).timestamp()  # stored UTC


# -- pytorch-benchmark ----------------------------------------------------------------------

def _pytorch_benchmark_files(rows: list[dict]) -> list[tuple[str, dict, int]]:
    """(file name, results, ok runs used) per configuration with at least one ok run."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["status"] == "ok" and r["samples_ns"]:
            groups.setdefault(tuple(r.get(k) for k in _GROUP_KEY), []).append(r)
    out, names = [], set()
    for key, runs in groups.items():
        batches = sorted({r["batch_size"] for r in runs})
        name = "-".join([*(str(v) for v in key[:5]), f"{key[5]}px",
                         f"threads{key[6]}x{key[7]}",
                         "batch" + "_".join(str(b) for b in batches)])
        if name in names:  # same configuration on another machine
            name += f"-{key[8]}"
        names.add(name)
        out.append((_safe(name) + ".yaml", pytorch_benchmark_results(runs), len(runs)))
    return out


def pytorch_benchmark_results(runs: list[dict]) -> dict:
    """pytorch-benchmark's results dict for the ok runs of one configuration: per batch size,
    the statistics of seconds per batch (one sample is one call on a batch) and of its
    inverse over the raw samples of all those runs (every round), as numpy computes them
    (population standard deviation). Memory is CUDA allocated memory there; a CPU run's peak
    RSS goes to the `dl_bench_dashboard` block, beside where each figure came from."""
    first = runs[0]
    system = first.get("system") or {}
    results: dict = {"machine_info": _machine_info(system), "device": first.get("device")}
    params = next((r["params_trainable"] for r in runs if r.get("params_trainable")), None)
    if params is not None:
        results["params"] = params  # pytorch-benchmark counts parameters with requires_grad
    counted = next((r for r in runs if r.get("flops_per_sample")), None)
    if counted and _MAC_COUNTER in (counted.get("flops_method") or ""):
        results["flops"] = counted["flops_per_sample"] // 2
    timing, memory, provenance = {}, {}, {}
    for batch in sorted({r["batch_size"] for r in runs}):
        chosen = [r for r in runs if r["batch_size"] == batch]
        seconds = [ns / 1e9 for r in chosen for ns in r["samples_ns"]]
        timing[f"batch_size_{batch}"] = {"on_device_inference": _timing(seconds)}
        device_peaks = [r["device_peak_bytes"] for r in chosen
                        if r.get("device_peak_bytes") is not None]
        if first.get("device") == "cuda" and device_peaks:
            # pre/post-inference allocations are not measured here, so they are left out.
            memory[f"batch_size_{batch}"] = {"max_inference_bytes": max(device_peaks),
                                             "max_inference": _num(max(device_peaks), True)}
        rss = [r["peak_rss_bytes"] for r in chosen if r.get("peak_rss_bytes") is not None]
        provenance[f"batch_size_{batch}"] = {
            "run_ids": [r["run_id"] for r in chosen],
            "rounds": [r.get("round_no") for r in chosen], "samples": len(seconds),
            "peak_rss_bytes": max(rss) if rss else None}
    if memory:
        results["memory"] = memory
    results["timing"] = timing
    results["dl_bench_dashboard"] = {
        "framework": first["framework"], "runtime": first["runtime"],
        "precision": first.get("precision"), "image_size": first.get("image_size"),
        "intra_threads": first.get("intra_threads"),
        "inter_threads": first.get("inter_threads"),
        "sweep_ids": sorted({r["sweep_id"] for r in runs if r.get("sweep_id")}),
        "versions": first.get("versions") or {},
        "flops_per_sample": counted["flops_per_sample"] if counted else None,
        "flops_method": counted.get("flops_method") if counted else None,
        "flops_basis": _MAC_BASIS if "flops" in results else
        "not written: no torch FlopCounterMode count to derive multiply-accumulates from",
        "batches": provenance}
    return results


def _timing(seconds: list[float]) -> dict:
    # A zero sample (a call under the clock's resolution) is an infinite rate, as numpy's
    # 1 / s gives it in pytorch-benchmark, rather than a crash of the whole export.
    per_s = [1 / s if s else math.inf for s in seconds]
    m = {"batches_per_second_mean": statistics.fmean(per_s),
         "batches_per_second_std": statistics.pstdev(per_s),
         "batches_per_second_min": min(per_s), "batches_per_second_max": max(per_s),
         "seconds_per_batch_mean": statistics.fmean(seconds),
         "seconds_per_batch_std": statistics.pstdev(seconds),
         "seconds_per_batch_min": min(seconds), "seconds_per_batch_max": max(seconds)}
    readable = {
        "batches_per_second": f"{_num(m['batches_per_second_mean'])} +/- "
                              f"{_num(m['batches_per_second_std'])} "
                              f"[{_num(m['batches_per_second_min'])}, "
                              f"{_num(m['batches_per_second_max'])}]",
        "batch_latency": f"{_time(m['seconds_per_batch_mean'])} +/- "
                         f"{_time(m['seconds_per_batch_std'])} "
                         f"[{_time(m['seconds_per_batch_min'])}, "
                         f"{_time(m['seconds_per_batch_max'])}]"}
    return {"metrics": m, "human_readable": readable}


def _machine_info(system: dict) -> dict:
    """pytorch-benchmark's machine_info from our stored machine. What we never recorded
    (CPU architecture and frequency, memory in use at the time, GPU memory) is null."""
    os_name, _, release = (system.get("os") or "").partition(" ")
    gpus = ([{"name": system["accelerator"], "memory": None}] *
            (system.get("accelerator_count") or 1)) if system.get("accelerator") else None
    return {
        "system": {"system": os_name or None, "node": system.get("hostname"),
                   "release": release or None},
        "cpu": {"model": system.get("cpu_model"), "architecture": None,
                "cores": {"physical": system.get("physical_cores"),
                          "total": system.get("logical_cores")},
                "frequency": None},
        "memory": {"total": _num(system["memory_bytes"], True)
                   if system.get("memory_bytes") else None, "used": None, "available": None},
        "gpus": gpus}


def _num(value: float, as_bytes: bool = False) -> str:
    """pytorch-benchmark's number format: 2 decimals, K/M/G/T/P by 1000 (1024 for bytes)."""
    factor = 1024 if as_bytes else 1000
    units = ["", " K", " M", " G", " T", " P"]
    for unit in units[:-1]:
        if value < factor:
            break
        value /= factor
    else:
        unit = units[-1]
    return f"{value:.2f}{unit}{'B' if as_bytes else ''}"


def _time(seconds: float) -> str:
    """pytorch-benchmark's time format: 3 decimals in s, ms or us."""
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.3f} us"


# -- YAML -----------------------------------------------------------------------------------
# The results are nested mappings of plain names to None, bools, numbers and strings, and
# one list of mappings (gpus): block YAML for these is short to write exactly, so PyYAML is
# not a dependency. Strings are double-quoted JSON strings (valid YAML escapes); floats
# always carry a dot and a signed exponent, which YAML 1.1 loaders (PyYAML) need to read
# 1e-05 as a number rather than a string.

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Words YAML 1.1 reads as booleans or null when unquoted.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
# Characters a quoted string may not hold raw, \u-escaped: those outside YAML's printable
# set, and NEL, LS, PS and the BOM, which YAML reads as line breaks (folded to a space) or a
# byte-order mark. JSON already escaped the ASCII controls.
_ESCAPE = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd"
                     "\U00010000-\U0010ffff]")


def to_yaml(doc: dict) -> str:
    lines: list[str] = []
    _mapping(doc, 0, lines)
    return "\n".join(lines) + "\n"


def _mapping(doc: dict, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key, value in doc.items():
        k = _key(key)
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{k}:")
            _mapping(value, indent + 2, lines)
        elif isinstance(value, (list, tuple)) and value:
            lines.append(f"{pad}{k}:")
            for item in value:
                if isinstance(item, dict) and item:
                    sub: list[str] = []
                    _mapping(item, indent + 4, sub)
                    sub[0] = f"{pad}  - {sub[0][indent + 4:]}"
                    lines.extend(sub)
                else:
                    lines.append(f"{pad}  - {_scalar(item)}")
        else:
            lines.append(f"{pad}{k}: {_scalar(value)}")


def _key(key) -> str:
    text = str(key)
    if _PLAIN_KEY.match(text) and text.lower() not in _RESERVED:
        return text
    return _string(text)


def _scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        mantissa, _, exponent = repr(value).partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        if exponent and exponent[0] not in "+-":
            exponent = "+" + exponent
        return f"{mantissa}e{exponent}" if exponent else mantissa
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return _string(str(value))


def _string(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return _ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _safe(name: str) -> str:
    """A file name from ids and settings: anything but letters, digits, . _ - becomes _."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)
