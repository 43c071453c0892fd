"""The worker protocol: every message between the parent and a worker subprocess, typed.

A worker (`python -m engine.worker`) reads one `Assign` line on stdin, then, when the parent
holds it at a gate, one command a line (`Go`, `RunNext`, `TimeBlock`, `Stop`); it writes
its events one a line on stdout (`Ready`, then per run `Started`, `Progress`, `Armed`,
`BlockTimed`, exactly one result or `Failed`; `Stats` in the catalog's counting mode,
`DeclaredInputs` when only asked what a user's model file declares, `Calibrated` in mode
calibrate). Each kind of work defines its own result (a `Result` subclass) and events in
its package (engine/scenarios/<kind>/messages.py: a serving worker's `ReplicaWarm` and
`ReplicaDone` to its replicas too), and the registry joins them with these into the one map
`decode` reads with (engine.scenarios.decode). Both sides import this module and the
registry and nothing else of each other; `encode` writes and `decode` reads every line, here,
so a field renamed on one side cannot go unread on the other.

A line is one JSON object: {"v": PROTOCOL_VERSION, "kind": KIND, ...the message's fields}.
A line of another version (a cluster node running another checkout), of an unknown kind
or with fields its kind does not have decodes to a `ProtocolError` that says so; the
parent ends that worker and its run becomes a failed row with that reason. Framework-free:
the standard library and engine.core only; it knows no kind of work.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import ClassVar

from engine.core.model_source import DeclaredInput
from engine.core.wire import clip, hints, plain, typed

__all__ = ["PROTOCOL_VERSION", "ProtocolError", "Message", "Command", "Event", "RunOrder",
           "Assign", "More", "Go", "RunNext", "TimeBlock", "Stop", "Ready", "Started",
           "Progress", "Armed", "BlockTimed", "Result", "Failed", "Stats", "DeclaredInputs",
           "Calibrated", "CORE_MESSAGES", "message_types", "WINDOW", "BLOCKS", "REPLICA",
           "CALIBRATE", "encode", "decode"]

# Raised with any change to a message's fields or meaning: both sides must agree on it.
# 2: a result's memory the model adds (model_baseline_bytes, reference_bytes, model_peak_bytes).
# 3: a held worker (Assign.held, More), a resident-memory cap (Assign.cgroup), and
#    DeclaredInputs, the reply to an Assign of mode "declared" (issue 26 parts 4 and 8).
# 4: a serving run's result (ServeResult: LoadGen's logs and the SUT's per-query latencies).
# 5: a serving test's live figures on Progress (completed, per_s, unit, tail_pct, tail_ms).
# 6: serving replicas (Assign.cores, ReplicaWarm, ReplicaDone: a serving worker's own).
# 7: issue 28: a calibration (Assign.calibration, mode CALIBRATE; Calibrated); a result's
#    energy, numerics, error against fp32 and runtime_settings; RunSpec.tf32 and .ov_hint.
# 8: RunSpec.options (its runtime's own settings, engine.core.runtimes) replaces .ov_hint.
PROTOCOL_VERSION = 8

# The gates a parent can hold a worker's timed loop with (Assign.sync): one window for
# every replica of a run, or blocks handed to interleaved contenders in turn.
WINDOW, BLOCKS = "window", "blocks"
# The Assign mode of a serving replica: a process a serving worker starts (never the parent)
# to answer its batches on the cores it is given (engine/worker/serving/replica.py).
REPLICA = "replica"
# A worker that only measures the machine's ceilings (engine/worker/calibrate.py)
CALIBRATE = "calibrate"


class ProtocolError(ValueError):
    """A line that is not a message of this protocol version, in words."""


@dataclass(frozen=True)
class Message:
    kind: ClassVar[str]  # its name on the wire; unique across both directions
    version: ClassVar[int] = PROTOCOL_VERSION


class Command(Message):
    """Parent to worker."""


class Event(Message):
    """Worker to parent."""


# ---------------------------------------------------------------- parent -> worker


@dataclass(frozen=True)
class RunOrder:
    """One run a worker is given: the spec as its scenario's to_dict() wrote it, and the
    params and FLOPs the store already holds for its model (so the worker skips counting)."""

    run_id: str
    spec: dict
    known_stats: dict | None = None


@dataclass(frozen=True)
class Assign(Command):
    """The worker's first line: its runs, all of one scenario and one framework."""

    kind = "assign"
    scenario: str  # engine.scenarios' kind: which worker body runs the group
    runs: tuple[RunOrder, ...]
    memory_cap_bytes: int | None = None
    # or "stats": only count params and FLOPs (the catalog); or "declared": only read what
    # each run's user model file declares about its inputs (nothing loaded, no framework)
    mode: str = "bench"
    trace_dir: str | None = None  # where profiled runs leave their Chrome traces
    sync: str | None = None  # WINDOW (a replica) or BLOCKS (an interleaved contender)
    held: bool = False  # after its runs, wait warm for More until the parent closes stdin
    # The memory cgroup the parent made for this worker alone (engine/run/process/cgroups.py): the
    # kernel holds each run to memory_cap_bytes of resident memory over what the worker held
    # when the run began. None: the worker's own watchdog does (engine/worker/memcap.py).
    cgroup: str | None = None
    # A replica's own CPUs (mode REPLICA), pinned before its framework starts a thread
    cores: tuple[int, ...] | None = None
    # Mode CALIBRATE: engine.core.calibration.CalibrationPlan.to_dict()
    calibration: dict | None = None


@dataclass(frozen=True)
class More(Command):
    """A held worker's next runs (same scenario and framework as its Assign's)."""

    kind = "more"
    runs: tuple[RunOrder, ...]


@dataclass(frozen=True)
class Go(Command):
    """A replica's window, on the machine's monotonic clock."""

    kind = "go"
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class RunNext(Command):
    """An interleaved worker may start its next run (load, prepare, warm up): never while
    another contender is timed."""

    kind = "run"


@dataclass(frozen=True)
class TimeBlock(Command):
    """An interleaved contender times one block of this many seconds."""

    kind = "time_block"
    seconds: float


@dataclass(frozen=True)
class Stop(Command):
    """Interleaved timing is over: the contender ends its loop and reports its result."""

    kind = "stop"


# ---------------------------------------------------------------- worker -> parent


@dataclass(frozen=True)
class Ready(Event):
    """The worker imported its framework: what a record says of the process and machine."""

    kind = "ready"
    pid: int
    import_s: float
    versions: dict
    threads: dict  # the thread counts the framework reports, not the ones asked for
    machine: dict  # engine.worker.machine.machine_facts: cores used, SMT, flags, governor
    env: dict  # the thread environment it was started with
    node: dict | None = None  # a cluster node's identity, added by its host (node_host)
    # how the process began: "spawn" (it imported its framework: import_s), or "fork" from
    # a fork server that had imported it (engine/worker/zygote.py; import_s is then ~0)
    start: str = "spawn"


@dataclass(frozen=True)
class Started(Event):
    kind = "started"
    run_id: str
    started_at: float  # epoch seconds


@dataclass(frozen=True)
class Progress(Event):
    kind = "progress"
    run_id: str
    phase: str  # load, prepare, first forward, warmup, measure, profile, epoch i/n, ...
    iters: int
    # A serving test's live figures, every ~1 s of LoadGen's test (engine/worker/serving/body.py);
    # None for every other progress: what completed so far (unit "query"; Offline's one
    # query: "sample"), its rate since the test began, and the scenario's tail percentile
    # (p90 SingleStream, else p99; None for Offline) of the SUT's own latencies so far
    # (engine.scenarios.serving.loadgen.LatencyHistogram: within 4.4 %).
    completed: int | None = None
    per_s: float | None = None
    unit: str | None = None
    tail_pct: float | None = None
    tail_ms: float | None = None


@dataclass(frozen=True)
class Armed(Event):
    """Warm and waiting at its gate for the parent's command."""

    kind = "armed"
    run_id: str
    per_sample_ns: int  # a sample's length from warm-up: what a replicas' window must fit


@dataclass(frozen=True)
class BlockTimed(Event):
    """An interleaved contender timed one block."""

    kind = "block"
    run_id: str
    iters: int
    elapsed_ns: int  # timed over its blocks so far
    met: bool  # its measurement policy is met
    maxed: bool  # it hit max_iters or max_time: it times nothing more


@dataclass(frozen=True)
class Result(Event):
    """A run that measured: what every kind reports. The parent derives statistics and the
    verdict from the raw samples (engine.run.process.records). Subclasses add each kind's own."""

    run_id: str
    load_s: float | None
    first_forward_s: float | None
    warmup_ns: tuple[int, ...]
    samples_ns: tuple[int, ...]  # per call: a block's time over block_calls
    warmup_s: float
    measured_s: float
    stop_reason: str
    warmup_stop: str = ""  # why warm-up ended (engine/core/policy.py's WARM_*); "": not said
    params: int | None = None
    params_trainable: int | None = None
    flops_per_sample: int | None = None
    flops_method: str | None = None
    device_peak_bytes: int | None = None
    prepare_s: float | None = None
    gc_disabled: bool | None = None  # None: no Python loop timed it
    block_calls: int = 1  # calls per timed sample
    interference: dict | None = None  # engine.worker.interference over the measured window
    # The frame's (engine.worker.harness): when it ended and the worker's memory. A body
    # sets peak_rss_bytes only when a process of its own did the work (the LibTorch runner
    # and trainer report theirs); the frame reads VmHWM otherwise.
    ended_at: float | None = None
    rss_before_bytes: int | None = None
    peak_rss_bytes: int | None = None
    peak_rss_method: str | None = None
    # The memory the model adds over a baseline measured the same way in the same process
    # (issue 26): the body sets the resident set before the model was built (framework
    # imported, the last model freed; the LibTorch runner's own with libtorch loaded, before
    # its input and model) and the bytes of the eager reference a runtime keeps for its
    # output check beside a model that does not share them (counted apart); the frame sets
    # the peak less both. None where a body measures no baseline (training, data loading).
    model_baseline_bytes: int | None = None
    reference_bytes: int | None = None
    model_peak_bytes: int | None = None
    # A profiled run's pass after the timed one (engine.worker.profiling)
    profile_ops: tuple[dict, ...] = ()
    profile_step_s: float | None = None
    trace_path: str | None = None
    # What exactly a user's model file was (engine.worker.user_models.source_digest)
    model_sha256: str | None = None
    model_bytes: int | None = None
    # Set by the parent on a result it derived (replicas combined): what it saw of the run.
    flags: tuple[str, ...] = ()  # reasons to read the figure as noisy
    broken: str | None = None  # a rule broken: the run is invalid






@dataclass(frozen=True)
class Failed(Event):
    """A run that ended without a result: the worker's word, or the parent's (an exit, a
    timeout, a broken line), which alone sets exit_code and signal."""

    kind = "failed"
    run_id: str
    status: str  # error, oom, invalid, timeout, killed (engine.core.record)
    reason: str
    ended_at: float | None = None
    traceback: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    model_sha256: str | None = None  # a user's model: the bytes it failed on
    model_bytes: int | None = None


@dataclass(frozen=True)
class Stats(Event):
    """The catalog's counts of one model (Assign.mode "stats"): nothing timed."""

    kind = "stats"
    run_id: str
    model: str
    framework: str
    image_size: int
    versions: dict
    params: int | None
    params_trainable: int | None
    flops_per_sample: int | None
    flops_method: str | None


@dataclass(frozen=True)
class DeclaredInputs(Event):
    """What a user's model file declares about its inputs (Assign.mode "declared"), read as
    data: nothing loaded, no framework imported. inputs None: its format declares none that
    is read, or the file's description could not be read (why says so)."""

    kind = "declared_inputs"
    run_id: str
    inputs: tuple[DeclaredInput, ...] | None
    why: str | None = None




@dataclass(frozen=True)
class Calibrated(Event):
    """A calibration's figures (engine.core.calibration counts them): per GEMM size its best
    GFLOP/s (bf16 empty, bf16_absent saying why), each triad repeat's GB/s; machine: what a
    theoretical peak needs; seconds: each kind's time taken."""

    kind = "calibrated"
    run_id: str
    threads: int
    cpus: tuple[int, ...]  # the CPUs it was pinned to
    machine: dict
    versions: dict
    sizes: tuple[int, ...]
    repeats: int
    fp32_gflops: tuple[float, ...]
    bf16_gflops: tuple[float, ...]
    bf16_absent: str | None
    llc_bytes: int | None
    llc_source: str
    triad_array_bytes: int
    triad_gbs: tuple[float, ...]
    seconds: dict


# The messages every kind speaks; each kind adds its own results and events (its
# messages.py), and the registry (engine/scenarios/__init__.py) joins them with
# message_types into the map decode() reads with.
CORE_MESSAGES: tuple[type[Message], ...] = (
    Assign, More, Go, RunNext, TimeBlock, Stop, Ready, Started, Progress, Armed, BlockTimed,
    Failed, Stats, DeclaredInputs, Calibrated)
_ENVELOPE = ("v", "kind")


def message_types(*groups) -> dict[str, type[Message]]:
    """Wire name -> message type over the groups, in order; ValueError for a name two
    types share or a field named like the envelope (it would be lost on the way)."""
    out: dict[str, type[Message]] = {}
    for cls in (c for group in groups for c in group):
        if cls.kind in out:
            raise ValueError(f"message kind {cls.kind!r} is taken by {out[cls.kind].__name__}")
        if any(f.name in _ENVELOPE for f in dataclasses.fields(cls)):
            raise ValueError(f"{cls.__name__} has a field named like the envelope "
                             f"({', '.join(_ENVELOPE)})")
        out[cls.kind] = cls
    return out


def encode(msg: Message) -> str:
    """One JSON line (without its newline)."""
    fields = {f.name: plain(getattr(msg, f.name)) for f in dataclasses.fields(msg)}
    return json.dumps({"v": msg.version, "kind": msg.kind, **fields})


def decode(line: str | bytes, *, messages: dict[str, type[Message]]) -> Message:
    """The message a line holds, of one of `messages` (wire name -> type: the registry's,
    engine.scenarios.MESSAGES, through engine.scenarios.decode); ProtocolError, saying why,
    for anything else."""
    try:
        obj = json.loads(line)
    except ValueError:
        raise ProtocolError(f"not a protocol line (not JSON): {clip(line)}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"not a protocol line (not an object): {clip(line)}")
    version, kind = obj.pop("v", None), obj.pop("kind", None)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version!r} where this side speaks "
                            f"{PROTOCOL_VERSION}: parent and worker run different checkouts")
    cls = messages.get(kind)
    if cls is None:
        raise ProtocolError(f"unknown message kind {kind!r} in protocol version "
                            f"{PROTOCOL_VERSION} (known: {', '.join(messages)})")
    fields = hints(cls)
    try:
        return cls(**{k: typed(fields.get(k), v) for k, v in obj.items()})
    except TypeError as exc:  # a missing field, or one its kind does not have
        raise ProtocolError(f"a {kind!r} message that does not fit version "
                            f"{PROTOCOL_VERSION}: {exc}") from None
