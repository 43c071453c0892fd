"""Framework profilers, run inside a benchmark worker subprocess: an op table and a trace.

Each helper takes the backend's `step` (one forward or training step that makes its result
real), runs it once outside the profiler (so one-time work such as tf.function tracing,
cuDNN autotuning or lazy allocation is not profiled), then `steps` times under the
framework's profiler. It writes a Chrome trace (plain JSON; the caller gzips it) and returns
the top TOP_OPS operators by self time plus the wall seconds per profiled step, so the caller
can compare that with the unprofiled step time and report the profiler's overhead.

Only the standard library is imported here: the worker imports exactly one framework, and
`torch` / `tensorflow` are imported lazily inside the function for that framework.

Self times are totals over all profiled steps (not per step), in milliseconds. On CPU they
add up to roughly wall-per-step x steps; they can exceed it where the framework runs ops on
several threads at once (TensorFlow's inter-op pool), and on GPU the "cuda" rows overlap the
"cpu" rows in time.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["TOP_OPS", "OpStat", "profile_pass", "profile_torch", "profile_tf",
           "TF_EXCLUDED_EVENTS"]

TOP_OPS = 30

# Picoseconds (XPlane's unit) per millisecond and per microsecond (Chrome trace's unit).
_PS_PER_MS = 1_000_000_000
_PS_PER_US = 1_000_000


@dataclass(frozen=True)
class OpStat:
    name: str        # operator name, e.g. "aten::convolution" or TF op type "_MklNativeFusedConv2D"
    calls: int
    self_ms: float   # total self time over the profiled steps, milliseconds
    total_ms: float  # total inclusive time over the profiled steps, milliseconds
    device: str      # "cpu" or "cuda"


def _top(stats: Iterable[OpStat]) -> list[OpStat]:
    # TOP_OPS is read at call time so a caller (or a check) can raise it for a full table.
    # Ties broken by name so the table is stable from run to run.
    return sorted(stats, key=lambda s: (-s.self_ms, s.name))[:TOP_OPS]


def profile_pass(framework: str, step: Callable[[], Any], steps: int, trace_path: str, *,
                 cuda: bool = False) -> dict:
    """The profiling pass of a run (inference or training), as result fields: the top
    operators (dicts with the profile_ops table's columns), the wall seconds per profiled
    step and where the Chrome trace was written."""
    if framework == "torch":
        ops, per_step = profile_torch(step, steps, trace_path, cuda=cuda)
    else:
        import tempfile
        with tempfile.TemporaryDirectory(prefix="tfprof-") as logdir:  # the raw XSpace
            ops, per_step = profile_tf(step, steps, trace_path, logdir)
    return {"profile_ops": tuple({"op": o.name, "device": o.device, "calls": o.calls,
                                  "self_ms": o.self_ms, "total_ms": o.total_ms} for o in ops),
            "profile_step_s": per_step, "trace_path": trace_path}


# ----------------------------------------------------------------------------- PyTorch


def profile_torch(step: Callable[[], Any], steps: int, trace_path: str, *,
                  cuda: bool = False) -> tuple[list[OpStat], float]:
    """Run step() `steps` times under torch.profiler.profile (CPU activity, plus CUDA when
    cuda=True), one warm call first outside the profiler. Write the Chrome trace to
    trace_path (plain JSON). Return the top TOP_OPS operators by self time (CPU ops by
    self_cpu_time_total, CUDA kernels/memcpys by self device time) and the wall seconds per
    profiled step."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if steps < 1:
        raise ValueError("steps must be >= 1")
    activities = [ProfilerActivity.CPU]
    if cuda:
        activities.append(ProfilerActivity.CUDA)

    def sync() -> None:
        # The step is meant to synchronise itself; this makes sure queued kernels of the warm
        # call do not run inside the profiled window, nor profiled ones outside the timer.
        if cuda:
            torch.cuda.synchronize()

    step()
    sync()
    # No record_shapes / profile_memory / with_stack: they add overhead and split the
    # key_averages() rows, and the table is grouped by operator name only.
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        wall = time.perf_counter() - t0
    prof.export_chrome_trace(trace_path)

    stats = []
    # key_averages() times are in MICROseconds (and already summed over all calls).
    for ev in prof.key_averages():
        if ev.device_type == DeviceType.CUDA:
            # Kernels and memcpys recorded by CUPTI: their time is device time.
            self_us = _first_attr(ev, "self_device_time_total", "self_cuda_time_total")
            total_us = _first_attr(ev, "device_time_total", "cuda_time_total")
            device = "cuda"
        else:
            self_us, total_us, device = ev.self_cpu_time_total, ev.cpu_time_total, "cpu"
        if self_us <= 0 and total_us <= 0:
            continue
        stats.append(OpStat(name=ev.key, calls=int(ev.count), self_ms=self_us / 1e3,
                            total_ms=total_us / 1e3, device=device))
    return _top(stats), wall / steps


def _first_attr(obj: Any, *names: str) -> float:
    # The device-time attributes were renamed (cuda_* -> device_*) across torch versions.
    for n in names:
        v = getattr(obj, n, None)
        if v is not None:
            return float(v)
    return 0.0


# ----------------------------------------------------------------------------- TensorFlow

# Host events whose self time is not work of the step's own, left out of the op table (they
# stay in the trace, except the markers, see _TRACE_SKIP_PREFIXES):
#  - ThreadpoolListener::* are zero-length markers (thread-pool region start/stop and
#    producer/consumer links), i.e. bookkeeping with no duration.
#  - KernelAndDeviceFunc::Run is the caller (Python) thread blocking while a tf.function's
#    graph runs on the inter-op threads: its self time is waiting, and counting it would
#    count the graph's op time twice.
TF_EXCLUDED_EVENTS = ("ThreadpoolListener::", "KernelAndDeviceFunc::Run")

# Zero-length markers dropped from the Chrome trace: thousands of them, meaningless without
# flow arrows, and they are most of the file.
_TRACE_SKIP_PREFIXES = ("ThreadpoolListener::",)

# TF kernels appear on host threads as "<node name>:<op type>" (what TensorFlow's own
# tf_op_utils parses), e.g. "model/conv/BiasAdd:_MklNativeFusedConv2D". Runtime events like
# "ExecutorState::Process" or "EagerLocalExecute: __inference_f_12" do not match.
_TF_OP_RE = re.compile(r"^([A-Za-z0-9.][\w.\-/>]*):([A-Za-z_][\w]*)$")

# Lines of a GPU plane that TensorFlow derives from the stream lines (step, op and
# module summaries); they repeat the kernels' time, so only the stream lines are counted.
_DERIVED_LINE_NAMES = ("Steps", "TensorFlow Name Scope", "TensorFlow Ops", "XLA Modules",
                       "XLA Ops", "XLA TraceMe", "Framework Name Scope", "Framework Ops",
                       "Source code", "Launch Stats")


def profile_tf(step: Callable[[], Any], steps: int, trace_path: str, logdir: str, *,
               group_by: str = "type") -> tuple[list[OpStat], float]:
    """Run step() `steps` times under tf.profiler.experimental.start(logdir) / stop(), one
    warm call first outside the profiler; parse the XSpace the profiler writes
    (logdir/plugins/profile/<run>/<host>.xplane.pb), compute per-event self time per thread,
    write it as a Chrome trace to trace_path, and return the top TOP_OPS by self time and the
    wall seconds per profiled step.

    TF kernels are grouped by op type (group_by="type", e.g. "_MklNativeFusedConv2D", like
    torch's aten:: rows) or by full "node:type" name (group_by="name", one row per layer op).
    Runtime events (executor, eager dispatch, the tf.function Python call) get rows of their
    own by event name; TF_EXCLUDED_EVENTS are left out."""
    import tensorflow as tf

    if steps < 1:
        raise ValueError("steps must be >= 1")
    if group_by not in ("type", "name"):
        raise ValueError("group_by must be 'type' or 'name'")
    runs_root = os.path.join(logdir, "plugins", "profile")
    before = set(glob.glob(os.path.join(runs_root, "*")))

    step()
    # Python tracer off: Python frames would swamp the table and cost a lot of overhead.
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=1)
    tf.profiler.experimental.start(logdir, options=options)
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - t0
    finally:
        tf.profiler.experimental.stop()

    xspaces = [_read_xspace(p) for p in _new_xplane_files(runs_root, before)]
    stats = _tf_op_stats(xspaces, group_by)
    _write_xspace_chrome_trace(xspaces, trace_path)
    return _top(stats), wall / steps


def _xplane_pb2():
    # The XSpace proto ships inside TensorFlow; its module moved between releases.
    # TF 2.21: tensorflow.tsl.profiler.protobuf.xplane_pb2.
    import importlib
    for mod in ("tensorflow.tsl.profiler.protobuf.xplane_pb2",
                "tsl.profiler.protobuf.xplane_pb2",
                "tensorflow.core.profiler.protobuf.xplane_pb2",
                "tensorboard_plugin_profile.protobuf.xplane_pb2"):
        try:
            return importlib.import_module(mod)
        except ImportError:
            continue
    raise ImportError("no xplane_pb2 module found (looked in tensorflow.tsl, tsl, "
                      "tensorflow.core.profiler, tensorboard_plugin_profile)")


def _new_xplane_files(runs_root: str, before: set[str]) -> list[str]:
    # Each start/stop writes a new <timestamp> run folder with one <host>.xplane.pb per host.
    # A logdir reused across calls holds older runs, so take the folder this call created
    # (or, if its name collided with an old one in the same second, the newest).
    runs = [r for r in glob.glob(os.path.join(runs_root, "*")) if os.path.isdir(r)]
    new = [r for r in runs if r not in before]
    if not new and runs:
        new = [max(runs, key=os.path.getmtime)]
    files = sorted(f for r in new for f in glob.glob(os.path.join(r, "*.xplane.pb")))
    if not files:
        raise RuntimeError(f"TensorFlow profiler wrote no .xplane.pb under {runs_root}")
    return files


def _read_xspace(path: str):
    xs = _xplane_pb2().XSpace()
    with open(path, "rb") as f:
        xs.ParseFromString(f.read())
    return xs


def _plane_device(plane) -> str | None:
    """'cpu' for the host plane, 'cuda' for GPU planes, None for planes without op events
    (e.g. 'Task Environment', or CUPTI/driver side planes)."""
    name = plane.name
    if name.startswith("/host:CPU"):
        return "cpu"
    if name.startswith("/device:GPU:"):
        return "cuda"
    return None


def _line_events_with_self(line) -> list[tuple[Any, int]]:
    """(event, self_ps) for a line's events. Events on one thread nest properly, so with
    events sorted by start (longest first on ties) a stack of open intervals gives each
    event's direct parent; self = duration - sum of direct children's durations."""
    evs = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
    ends = [e.offset_ps + e.duration_ps for e in evs]
    self_ps = [e.duration_ps for e in evs]
    stack: list[int] = []  # indices of the open (enclosing) events, innermost last
    for i, e in enumerate(evs):
        start, end = e.offset_ps, ends[i]
        # Drop events that ended before this one starts, and any that only partly overlap
        # it (timestamp rounding); the one left on top encloses it: its direct parent.
        while stack and (ends[stack[-1]] <= start or ends[stack[-1]] < end):
            stack.pop()
        if stack:
            self_ps[stack[-1]] -= e.duration_ps
        stack.append(i)
    return [(e, max(s, 0)) for e, s in zip(evs, self_ps)]


def _stat_lookup(plane, stat_name: str) -> int | None:
    for k, v in plane.stat_metadata.items():
        if v.name == stat_name:
            return k
    return None


def _event_key(plane, event, name: str, device: str, group_by: str, ids: dict) -> str:
    """The table row an event counts in."""
    m = _TF_OP_RE.match(name)
    if m:
        return m.group(2) if group_by == "type" else name
    if device == "cuda":
        # GPU kernels carry the TF op that launched them ("tf_op" stat, "node:type"); group
        # by that op's type/name like host ops, falling back to the kernel name.
        tf_op_id = ids.get("tf_op")
        if tf_op_id is not None:
            for st in list(event.stats) + list(plane.event_metadata[event.metadata_id].stats):
                if st.metadata_id == tf_op_id:
                    v = _stat_value(plane, st)
                    mm = _TF_OP_RE.match(str(v))
                    if mm:
                        return mm.group(2) if group_by == "type" else str(v)
        return name
    # The Python-level event of a tf.function call is named after the Python function
    # ("<lambda>", "train_step"): say what it is.
    fcall = ids.get("tf_function_call")
    if fcall is not None and any(st.metadata_id == fcall for st in event.stats):
        return f"tf.function call ({name})"
    return name


def _tf_op_stats(xspaces, group_by: str) -> list[OpStat]:
    acc: dict[tuple[str, str], list] = {}  # (key, device) -> [calls, self_ps, total_ps]
    for xs in xspaces:
        for plane in xs.planes:
            device = _plane_device(plane)
            if device is None:
                continue
            ids = {"tf_op": _stat_lookup(plane, "tf_op"),
                   "tf_function_call": _stat_lookup(plane, "tf_function_call")}
            for line in plane.lines:
                lname = line.display_name or line.name
                if device == "cuda" and lname.startswith(_DERIVED_LINE_NAMES):
                    continue
                for ev, self_ps in _line_events_with_self(line):
                    name = plane.event_metadata[ev.metadata_id].name
                    if name.startswith(TF_EXCLUDED_EVENTS):
                        continue
                    key = _event_key(plane, ev, name, device, group_by, ids)
                    row = acc.setdefault((key, device), [0, 0, 0])
                    row[0] += 1
                    row[1] += self_ps
                    row[2] += ev.duration_ps
    return [OpStat(name=k, calls=c, self_ms=s / _PS_PER_MS, total_ms=t / _PS_PER_MS, device=d)
            for (k, d), (c, s, t) in acc.items() if t > 0]


def _stat_value(plane, st) -> Any:
    which = st.WhichOneof("value")
    if which is None:
        return None
    v = getattr(st, which)
    if which == "ref_value":
        # A string stored once in stat_metadata and referenced by id.
        md = plane.stat_metadata.get(v)
        return md.name if md is not None else v
    if which == "bytes_value":
        return f"<{len(v)} bytes>"
    return v


def _trace_name(plane, ev) -> str:
    md = plane.event_metadata[ev.metadata_id]
    return md.display_name or md.name


def _write_xspace_chrome_trace(xspaces, path: str) -> None:
    """XSpace -> Chrome trace JSON: one process per plane, one thread per line, complete
    ('X') events with ts/dur in microseconds, names via 'M' metadata events. Small
    sequential pids/tids, since XLine ids are 64-bit and JSON readers lose precision past
    2**53."""
    out: list[dict] = []
    pid = 0
    for xs in xspaces:
        host = xs.hostnames[0] if len(xs.hostnames) else ""
        for plane in xs.planes:
            if not plane.lines:
                continue
            pid += 1
            pname = f"{host} {plane.name}".strip()
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": pname}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                        "args": {"sort_index": pid}})
            stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
            tid = 0
            for line in plane.lines:
                events = [ev for ev in line.events if not _trace_name(plane, ev).startswith(
                    _TRACE_SKIP_PREFIXES)]
                if not events:
                    # E.g. the Eigen intra-op threads, which only carry the skipped markers.
                    continue
                tid += 1
                out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                            "args": {"name": line.display_name or line.name}})
                out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                            "args": {"sort_index": tid}})
                # An event's absolute time is its line's timestamp plus its own offset.
                base_ps = line.timestamp_ns * 1000
                for ev in events:
                    rec = {"ph": "X", "name": _trace_name(plane, ev), "pid": pid, "tid": tid,
                           "ts": (base_ps + ev.offset_ps) / _PS_PER_US,
                           "dur": ev.duration_ps / _PS_PER_US}
                    if ev.stats:
                        rec["args"] = {stat_names.get(st.metadata_id, str(st.metadata_id)):
                                       _stat_value(plane, st) for st in ev.stats}
                    out.append(rec)
    with open(path, "w") as f:
        json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f, separators=(",", ":"))
