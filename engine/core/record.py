"""RunRecord: one attempted benchmark, as the store keeps it. No framework imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["RunRecord", "STATUSES", "OOM_MARKERS", "MEMORY_CAP_MARKER"]

STATUSES = ("ok", "error", "timeout", "oom", "killed", "invalid")
# Lower-case phrases by which torch, TensorFlow, NumPy and the C++ runtime report running
# out of memory: the worker (from the exception) and the runner (from stderr) use the same.
OOM_MARKERS = ("std::bad_alloc", "memoryerror", "cannot allocate memory",
               "can't allocate memory", "out of memory", "resourceexhausted",
               "oom when allocating")
# A line of a worker's stderr saying its memory cap ended it, and why (engine/worker/memcap.py
# writes it for its watchdog, engine/run/process/executors.py for the kernel's cgroup OOM kill).
MEMORY_CAP_MARKER = "memory cap: "


@dataclass(frozen=True)
class RunRecord:
    """One attempted benchmark: its spec, how it ended, and (when it ran) what it measured.

    Statistics are derived from samples_ns by engine.analysis.stats; the raw samples travel with the
    record and are stored beside it.
    """

    run_id: str
    sweep_id: str | None
    model: str
    framework: str
    runtime: str
    batch_size: int | None
    intra_threads: int | None
    inter_threads: int | None
    precision: str | None
    image_size: int | None
    device: str | None
    weight_policy: str | None
    warmup_iters: int | None
    min_time_s: float | None
    min_iters: int | None
    max_time_s: float | None
    status: str
    reason: str = ""
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    validity: str | None = None
    validity_reason: str = ""
    stop_reason: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    import_s: float | None = None
    load_s: float | None = None
    first_forward_s: float | None = None
    prepare_s: float | None = None  # trace / export / compile of the runtime, apart
    warmup_s: float | None = None
    measured_s: float | None = None
    iterations: int | None = None
    mean_ms: float | None = None
    median_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    std_ms: float | None = None
    iqr_ms: float | None = None
    cv: float | None = None
    throughput: float | None = None  # samples per second, from the median latency
    params: int | None = None
    params_trainable: int | None = None
    flops_per_sample: int | None = None
    flops_method: str | None = None
    gflops_per_s: float | None = None
    rss_before_bytes: int | None = None
    peak_rss_bytes: int | None = None
    peak_rss_method: str | None = None
    device_peak_bytes: int | None = None
    # inference: the peak less the resident set before the model was built and less the
    # eager reference kept apart for the output check (engine.core.protocol.Result)
    model_peak_bytes: int | None = None
    model_baseline_bytes: int | None = None
    reference_bytes: int | None = None
    memory_cap_bytes: int | None = None
    timeout_s: float | None = None
    load_avg_1m: float | None = None
    git_commit: str | None = None
    system_id: str | None = None
    versions: dict = field(default_factory=dict)
    threads_effective: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    source: str = "engine"
    round_no: int | None = None  # which round of its sweep (1-based); None for imports
    extra: dict = field(default_factory=dict)
    kind: str = "inference"  # inference | train | dataload | serve
    dataset: str | None = None  # train: digits | synthetic; dataload: the generated set
    workers: int | None = None  # dataload: the pipeline's parallel workers
    # A user's model (issue #14): its format, where it came from (file path or
    # module:function), its inputs as --input takes them, and the SHA-256 and size of the
    # bytes the worker loaded (a factory: of its module's source file). None: catalog.
    model_format: str | None = None
    model_origin: str | None = None
    model_inputs: str | None = None
    model_sha256: str | None = None
    model_bytes: int | None = None
    # The machine (issue #15): the catalog shape it is, when the user said so
    # (--machine-shape, BENCH_MACHINE_SHAPE), and what its worker read of it: threads per
    # core (2: a thread is a hyperthread), the CPU flags that change speed, the governor.
    machine_shape: str | None = None
    threads_per_core: int | None = None
    cpu_flags: str | None = None
    governor: str | None = None
    replicas: int | None = None  # inference: identical workers timed over one window
    # inference (issue 24): beside a controlled neighbour ("steady", "onoff"; "none"), and
    # torch's OpenMP wait policy ("passive"; "": the default)
    contention: str | None = None
    wait_policy: str | None = None
    # A run on a cluster node (issue #15's Ray executor): its Ray node id and hostname;
    # system_id, git_commit and the worker's machine facts are then that node's.
    node_id: str | None = None
    node_host: str | None = None
    # inference (issue 28): the energy loop's reading (engine.core.energy.EnergyReading):
    # a figure with its source tag, or the reason it is absent; None throughout: not asked.
    # And the numerics the worker set and read back (engine/worker/numerics.py).
    energy_source: str | None = None
    energy_absent: str | None = None
    energy_j_per_sample: float | None = None
    energy_kwh_per_million: float | None = None
    energy_loop_s: float | None = None
    energy_samples: int | None = None
    energy_counters: str | None = None  # the zones or devices read, comma-separated
    numerics: dict = field(default_factory=dict)
    # inference, issue 28: a reduced-precision run's outputs against the fp32 reference on
    # generated inputs: max |diff|, that over the reference's max magnitude, the fraction of
    # inputs whose top-1 class agrees, and how many inputs were counted (m015)
    output_max_abs: float | None = None
    output_max_rel: float | None = None
    top1_agreement: float | None = None
    top1_inputs: int | None = None
    # Not columns of `runs`: stored in their own tables, beside the row.
    warmup_ns: tuple = ()
    samples_ns: tuple = ()
    epochs: tuple = ()  # train: one dict per epoch (see store.runs.EPOCH_COLUMNS)
    step_losses: tuple = ()  # train: the training loss of every step, warm-up included
    profile_ops: tuple = ()  # profiled runs: top operators by self time (dicts)
    trace_gz: bytes | None = None  # profiled runs: the gzipped Chrome trace
    node_system: dict | None = None  # a node's systems row (None: this machine's)
    # serve (issue 27): LoadGen's summary as engine.scenarios.serving.loadgen.parse_summary
    # reads it, and its logs as (file name, bytes, gzipped bytes)
    serving: dict | None = None
    loadgen_logs: tuple = ()
    # a kind's rows for its own tables, {table: [row dict]} (engine.scenarios.tables), as
    # its Scenario.result_columns gives them
    kind_rows: dict | None = None
