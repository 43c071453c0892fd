"""Every range a user's value is held to, defined once, and the checks that enforce them.

The CLI's argument parsers, the dashboard's widgets and the specs' own validation all read
these, so a limit cannot drift between them. A refused value raises `UserError` naming the
field and the allowed range.
"""

from __future__ import annotations

import math
import os

from engine.core.errors import UserError

__all__ = ["BATCH_RANGE", "IMAGE_RANGE", "PROFILE_RANGE", "ROUNDS_RANGE", "TRAIN_BATCH_RANGE",
           "EPOCH_RANGE", "DEFAULT_ROUNDS", "DEFAULT_MAX_ROUNDS", "TIME_BUDGET_RANGE",
           "DEFAULT_VERDICT_MARGIN", "VERDICT_MARGIN_RANGE",
           "STEPS_RANGE", "SYNTHETIC_RANGE", "WARMUP_STEPS_RANGE",
           "LOAD_COUNT_RANGE", "LOAD_SIZE_RANGE", "WORKERS_RANGE", "SEED_RANGE",
           "MEMORY_CAP_MB_MIN", "MEMORY_CAP_MB_RANGE", "P99_BOUND_MS_RANGE", "MARGIN_RANGE",
           "THRESHOLD_RANGE", "FAIL_ABOVE_RANGE", "CONFIRM_RANGE", "LOOKBACK_RANGE",
           "BASELINE_SWEEPS_RANGE", "MISSING_AFTER_RANGE", "MARK_TEXT_MAX",
           "WEBHOOK_TRIES_RANGE",
           "SERVE_BATCH_RANGE", "SERVE_QPS_RANGE", "SERVE_BOUND_MS_RANGE",
           "SERVE_DURATION_RANGE", "SERVE_QUERIES_RANGE", "SERVE_WAIT_MS_RANGE",
           "SERVE_SAMPLES_RANGE", "QPS_PRECISION_RANGE", "QPS_PROBES_RANGE",
           "SERVE_RATE_RANGE", "SEARCH_QUERIES_RANGE", "ENERGY_S_RANGE", "DEFAULT_ENERGY_S",
           "logical_cores", "int_range", "float_range",
           "choice", "parse_int_list", "unique", "require_values"]

BATCH_RANGE = (1, 4096)
# An inference run's energy loop, after its timed one (0: none): 10 s by default, as
# optimum-benchmark's energy tracker runs, since counters read through sysfs or NVML tick
# every 1-100 ms; under 0.1 s a reading is mostly granularity, and past 5 min the loop
# would crowd a run's deadline (600 s by default) for no better figure.
ENERGY_S_RANGE = (0.1, 300.0)
DEFAULT_ENERGY_S = 10.0
# Keras applications refuse inputs under 32 px; above 1024 px a batch of EfficientNet-B7
# activations no longer fits a 24 GiB machine, so larger sizes are refused up front.
IMAGE_RANGE = (32, 1024)
# Profiled iterations in the extra, untimed pass: 0 switches profiling off. A handful of
# steps shows every operator; hundreds only grow the trace.
PROFILE_RANGE = (0, 50)
# Each round is a whole sweep in fresh processes: a hundred is already hours.
ROUNDS_RANGE = (1, 100)
# Three rounds: the fewest whose median of round medians ignores one outlier process, and
# enough for a paired interval (2 degrees of freedom). Each round costs a full sweep.
DEFAULT_ROUNDS = 3
# Rounds until decided: an undecided contest gets more rounds, up to this many in all by
# default (twice the minimum: with 6 paired rounds the t quantile is 2.57, against 4.30
# with 3, so an interval narrows by 2.4x for the same noise).
DEFAULT_MAX_ROUNDS = 6
# A verdict's practical margin (a fraction of the ratio): a contest names a winner only when
# its interval clears +-margin and calls the pair equivalent when the interval lies inside
# it. 2 %: below what a user would act on, above the ~1 % two processes never agree within.
DEFAULT_VERDICT_MARGIN = 0.02
VERDICT_MARGIN_RANGE = (0.0, 0.5)
# A sweep's time budget, in seconds: a day at most.
TIME_BUDGET_RANGE = (1.0, 86_400.0)
TRAIN_BATCH_RANGE = (1, 1024)
EPOCH_RANGE = (1, 1000)
STEPS_RANGE = (1, 1_000_000)
SYNTHETIC_RANGE = (16, 1_000_000)
WARMUP_STEPS_RANGE = (0, 100)
LOAD_COUNT_RANGE = (8, 100_000)
LOAD_SIZE_RANGE = (16, 4096)
WORKERS_RANGE = (0, 64)
SEED_RANGE = (0, 2**31 - 1)
# Below 64 MiB of added resident memory not even a first call of a framework fits.
MEMORY_CAP_MB_MIN = 64
# The batch search's memory cap as the Run page asks for it (0: 75 % of RAM): up to 1 TiB,
# more than any machine this runs on has.
MEMORY_CAP_MB_RANGE = (0, 1_048_576)
# The batch search's p99 bound (0: none): an hour per batch is no latency bound any more.
P99_BOUND_MS_RANGE = (0.0, 3_600_000.0)
# The throughput gain a batch-size doubling must bring for the search to go on.
MARGIN_RANGE = (0.0, 1.0)
# A regression check's threshold (a fraction of the baseline's latency; asv's default is
# 10 %): under 1 % no pair of processes agrees, and past 100 % nothing is a regression.
THRESHOLD_RANGE = (0.01, 1.0)
# The latency ratio (candidate / baseline) a regression gate fails above: over 1 (a ratio
# of 1 is no change) and at most 100x.
FAIL_ABOVE_RANGE = (1.0, 100.0)
# A configuration's state over its sweeps (engine/analysis/states.py): the consecutive
# violations that make a regression (one is only suspicious: PyTorch's HUD asks for two);
# how many judged points back an earlier violation still makes it suspicious; the baseline
# sweeps judged against (at least the 2 the gate needs to estimate a sweep-to-sweep
# spread; at most 60, two months of daily sweeps); how many sweeps in a row measured a
# configuration before the newest's silence makes it missing.
CONFIRM_RANGE = (2, 10)
LOOKBACK_RANGE = (1, 30)
BASELINE_SWEEPS_RANGE = (2, 60)
MISSING_AFTER_RANGE = (1, 30)
# Who marked a state and why: a name or e-mail and a sentence, not a document.
MARK_TEXT_MAX = 500
# A webhook's tries per change in one update (the first and its retries).
WEBHOOK_TRIES_RANGE = (1, 10)

# Serving (LoadGen): the largest batch the dynamic batcher or Offline may make (every size
# up to it is warmed before the test, so a compiling runtime pays each once); a target
# QPS above zero and at most ten million (LoadGen pre-generates a query per arrival); a
# latency bound from 1 us to 10 min; a test's minimum duration up to a day (the official
# preset is 600 s) and query count; the batcher's longest wait; the samples LoadGen's
# query sample library keeps in memory (MLPerf's small-model counts are 64 to 1024).
SERVE_BATCH_RANGE = (1, 256)
SERVE_QPS_RANGE = (0.001, 10_000_000.0)
SERVE_BOUND_MS_RANGE = (0.001, 600_000.0)
SERVE_DURATION_RANGE = (0.01, 86_400.0)
SERVE_QUERIES_RANGE = (1, 100_000_000)
SERVE_WAIT_MS_RANGE = (0.0, 10_000.0)
SERVE_SAMPLES_RANGE = (1, 1024)
# The max-QPS search (engine/run/search/max_qps.py) bisects until its bracket [VALID, INVALID) is
# this close, as a fraction of the VALID end: 0.5 % is finer than two LoadGen runs of one
# target agree here, and a bracket wider than 50 % says little. Its probes: at least the
# first one and one more; each is a whole LoadGen test, so a search stops at 40.
QPS_PRECISION_RANGE = (0.005, 0.5)
QPS_PROBES_RANGE = (2, 40)
# The queries every probe of a search runs (engine/core/early_stopping.py): at least the
# 459 LoadGen's early stopping judges a p99 on (fewer is INVALID at any rate), at most a
# million (up to 9,768 over the bound allowed, a p99.02; a probe stays under its time cap
# only at 3,333 QPS and above).
SEARCH_QUERIES_RANGE = (459, 1_000_000)
# The request rate a monthly bill is sized for, in requests (samples) per second.
SERVE_RATE_RANGE = (0.001, 1e9)


# The cores this process had before engine/run/process/pinning.parent_off kept every thread of it
# off a timed worker's cores (None: not held). While a run is timed the parent's own mask is
# narrowed, and a form drawn meanwhile must still offer the machine's cores, not what the
# parent is lent for the moment.
PROCESS_CORES: dict[str, set | None] = {"held": None}


def logical_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers narrow), as it
    was before a timed run kept the process off its worker's cores."""
    if PROCESS_CORES["held"]:
        return len(PROCESS_CORES["held"])
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def int_range(name, value, lo, hi, hint=""):
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name}: {value!r} is not an integer; allowed: integer {lo}..{hi}{hint}",
                        field=name)
    if not lo <= value <= hi:
        raise UserError(f"{name}: {value} is out of range; allowed: integer {lo}..{hi}{hint}",
                        field=name)


def float_range(name, value, lo, hi):
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or not lo <= value <= hi):
        raise UserError(f"{name}: {value!r} is out of range; allowed: number {lo:g}..{hi:g}",
                        field=name)


def choice(name, value, allowed):
    if value not in allowed:
        raise UserError(f"{name}: {value!r} is not supported; allowed: {', '.join(allowed)}",
                        field=name)


def parse_int_list(text: str, name: str, lo: int, hi: int) -> list[int]:
    """'1, 8 32' -> [1, 8, 32]; a bad entry is refused naming the field and the range."""
    values = []
    for tok in text.replace(",", " ").split():
        try:
            v = int(tok)
        except ValueError:
            raise UserError(f"{name}: {tok!r} is not an integer; allowed: integer {lo}..{hi}",
                            field=name) from None
        int_range(name, v, lo, hi)
        values.append(v)
    return values


def unique(values) -> list:
    return list(dict.fromkeys(values))


def require_values(**named) -> None:
    """Each named list must hold at least one value (a sweep over nothing is refused)."""
    for name, values in named.items():
        if not values:
            raise UserError(f"{name}: pick at least one value", field=name)
