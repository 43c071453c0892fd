"""The worker protocol (engine/core/protocol.py, and each kind's messages.py joined by the
registry): every message survives encode/decode with its values, a line of another version
or kind is refused in words, a worker that writes one leaves a failed row instead of a
traceback, the kind names live in those modules alone (checked from the source, with a
planted violation to show the check bites), and a real worker's run is stored with the
columns a run had before the protocol was typed."""

from __future__ import annotations

import ast
import json
import os
from dataclasses import fields
from pathlib import Path

import pytest

from engine.core import MeasurementPolicy
from engine.scenarios.inference.spec import RunSpec
from engine.core.model_source import DeclaredInput
from engine.core.protocol import (PROTOCOL_VERSION, Armed, Assign, BlockTimed, Calibrated,
                                  DeclaredInputs, Failed, Go, More, Progress, ProtocolError,
                                  Ready, RunNext, RunOrder, Started, Stats, Stop, TimeBlock,
                                  encode)
from engine.scenarios import MESSAGES, decode
from engine.scenarios.dataload.messages import LoadResult
from engine.scenarios.inference.messages import InferenceResult
from engine.scenarios.serving.messages import ReplicaDone, ReplicaWarm, ServeResult
from engine.scenarios.generation.messages import GenResult
from engine.scenarios.genserve.messages import GenServeResult
from engine.scenarios.training.messages import TrainResult
from engine.run.process.runner import Runner
from tests.conftest import ROOT

_RESULT = dict(load_s=0.5, first_forward_s=0.02, warmup_ns=(9_000_000, 5_000_000),
               samples_ns=(2_010_000, 1_990_000), warmup_s=0.014, measured_s=0.004,
               stop_reason="policy met", params=11_689_512, params_trainable=11_689_512,
               flops_per_sample=None, flops_method="none", device_peak_bytes=None,
               prepare_s=0.1, gc_disabled=True, block_calls=3,
               interference={"steal_frac": 0.0, "cores": [0, 1], "pinned": True},
               ended_at=1_700_000_000.5, rss_before_bytes=1, peak_rss_bytes=2,
               peak_rss_method="VmHWM", profile_ops=({"op": "aten::conv", "calls": 4},),
               profile_step_s=0.25, trace_path="/tmp/t.json", model_sha256="ab",
               model_bytes=3, flags=("skewed",), broken=None)

# One of every message, each field given a value of its own (no defaults left standing
# where a value could be lost on the way).
EVERY_MESSAGE = [
    Assign(scenario="inference", runs=(RunOrder("r1", {"model": "identity"}, None),
                                       RunOrder("r2", {"model": "x"}, {"params": 1})),
           memory_cap_bytes=2**30, mode="stats", trace_dir="/tmp/tr", sync="blocks",
           held=True, cgroup="/sys/fs/cgroup/memory/bench-worker-1", cores=(2, 3),
           calibration={"threads": 2, "sizes": [64, 128]}),  # a calibration's plan (7)
    More((RunOrder("r3", {"model": "identity", "batch_size": 4}, {"params": 2}),)),
    Go(1_000, 2_000), RunNext(), TimeBlock(0.25), Stop(),
    Ready(pid=42, import_s=1.5, versions={"torch": "2.1"}, threads={"torch_intra_op": 1},
          machine={"cores_used": 2, "cpu_flags": ["avx2"]}, env={"OMP_NUM_THREADS": "1"},
          node={"node_id": "n1", "hostname": "h"}),
    Started("r1", 1_700_000_000.25),
    Progress("r1", "serve", 0, completed=1234, per_s=412.5, unit="query", tail_pct=99.0,
             tail_ms=23.1),  # a serving test's live figures (protocol 5)
    Armed("r1", 123_456),
    BlockTimed("r1", iters=5, elapsed_ns=250_000_000, met=True, maxed=False),
    InferenceResult("r1", **_RESULT, model_reused=True, output_rel_diff=1e-6,
                    first_forward_from="a timed call", sample_ends_ns=(5, 6), blocks=2,
                    window_s=0.995, replica_throughputs=(200.0, 199.5),
                    window_start_skew_ms=5.0, window_end_skew_ms=4.0, window_skew_frac=0.005,
                    interleaved={"with": ["b"], "blocks": 2, "block_s": 0.25},
                    sequential="alone"),
    TrainResult("r1", **_RESULT, epochs=({"epoch": 1, "test_acc": 0.5},),
                step_losses=(2.3, 2.1), data_description="digits", feed_sha256="cd"),
    LoadResult("r1", **_RESULT, check_error=0.5, bytes_on_disk=1024, batches_per_sample=2),
    GenResult("r1", **_RESULT, batch_size=2, prompt_len=16, output_len=3,
              token_ns=(10, 20, 30, 11, 22, 33), ttft_ns=(), timing_source="streamer",
              agreement=0.9375, agreement_tokens=16, agreement_reference="ref", build_s=2.5,
              kv_cache_bytes=4096, runtime_versions={"torch": "2.14"}),
    GenServeResult("r1", **_RESULT, scenario="server", prompt_len=16, output_len=4,
                   ttft_bound_ms=2000.0, tpot_bound_ms=100.0, target_qps=2.5, users=1,
                   req_sample=(0, 3), req_issue_ns=(0, 10), req_first_ns=(50, 60),
                   req_done_ns=(80, 100), req_tokens=(4, 4), summary_log="Result is : VALID",
                   detail_log=":::MLLOG {}", loadgen_version="6.0.17", build_s=1.5,
                   engine_settings={"max_num_seqs": 4}, engine_stats={"ignored": 0},
                   runtime_versions={"openvino": "2026.4"}, agreement=1.0,
                   agreement_tokens=4, front_cpu_s=0.25),
    ServeResult("r1", **_RESULT, summary_log="Result is : VALID", detail_log=":::MLLOG {}",
                loadgen_version="6.0.17", expected_latency_ns=5_000, queries=9,
                model_calls=4, replica_cpus=("0,1", "2,3"), replica_calls=(3, 1)),
    Failed("r1", "error", "ValueError: boom", ended_at=1.5, traceback="Traceback ...",
           exit_code=-9, signal="SIGKILL", model_sha256="ab", model_bytes=3),
    Stats("r1", model="resnet18", framework="torch", image_size=224, versions={"torch": "2"},
          params=1, params_trainable=1, flops_per_sample=2, flops_method="counter"),
    DeclaredInputs("r1", (DeclaredInput("image", (None, 64, 64, 3), "float32"),
                          DeclaredInput("mask", (8,), None)), why="read"),
    # a serving replica to its front (protocol 6)
    ReplicaWarm("r1", **_RESULT),
    ReplicaDone("r1", calls=12, peak_rss_bytes=2**28),
    # the machine's ceilings (protocol 7)
    Calibrated("r1", threads=2, cpus=(0, 1), machine={"cores": 2, "cpu_mhz": 2596.1},
               versions={"torch": "2.14.1"}, sizes=(64, 128), repeats=3,
               fp32_gflops=(50.5, 120.25), bf16_gflops=(), bf16_absent="no avx512_bf16",
               llc_bytes=2**25, llc_source="sysfs: L3", triad_array_bytes=2**27,
               triad_gbs=(20.5, 21.0), seconds={"gemm_fp32": 1.5, "triad": 0.5}),
]


def test_every_message_type_round_trips_with_its_values():
    assert sorted(type(m).kind for m in EVERY_MESSAGE) == sorted(MESSAGES)
    for msg in EVERY_MESSAGE:
        line = encode(msg)
        assert "\n" not in line
        assert json.loads(line)["v"] == PROTOCOL_VERSION
        assert json.loads(line)["kind"] == type(msg).kind
        assert decode(line) == msg
        assert decode(line.encode()) == msg  # as the parent reads a pipe: bytes


def test_every_message_is_a_frozen_dataclass_with_a_unique_kind():
    for cls in MESSAGES.values():
        assert cls.__dataclass_params__.frozen
        assert {f.name for f in fields(cls)}.isdisjoint({"v", "kind"})
    with pytest.raises(AttributeError):
        EVERY_MESSAGE[1].start_ns = 5


@pytest.mark.parametrize("line, says", [
    ('{"v": 0, "kind": "started", "run_id": "r", "started_at": 1.0}',
     f"protocol version 0 where this side speaks {PROTOCOL_VERSION}: parent and worker run "
     "different checkouts"),
    ('{"kind": "started", "run_id": "r", "started_at": 1.0}',
     f"protocol version None where this side speaks {PROTOCOL_VERSION}"),
    ('{"v": %d, "kind": "result", "run_id": "r"}' % PROTOCOL_VERSION,
     f"unknown message kind 'result' in protocol version {PROTOCOL_VERSION} (known: assign,"),
    ('{"v": %d, "kind": "started", "run_id": "r"}' % PROTOCOL_VERSION,
     "a 'started' message that does not fit version"),
    ('{"v": %d, "kind": "go", "start_ns": 1, "end_ns": 2, "late": 1}' % PROTOCOL_VERSION,
     "unexpected keyword argument 'late'"),
    ("hello from a library's print", "not a protocol line (not JSON): \"hello from a"),
    ("[1, 2]", "not a protocol line (not an object)"),
])
def test_a_line_of_another_version_or_kind_is_refused_in_words(line, says):
    with pytest.raises(ProtocolError) as err:
        decode(line)
    assert says in str(err.value)


def test_a_worker_that_speaks_another_version_leaves_a_failed_row_not_a_traceback(
        worker_env, tmp_path):
    """A real subprocess in the worker's place (as a node with another checkout would be):
    its first line is of version 0; every run gets one error row saying so."""
    other = tmp_path / "python"
    other.write_text('#!/bin/sh\necho \'{"v": 0, "kind": "ready", "pid": 1}\'\n'
                     "exec sleep 30\n")
    other.chmod(0o755)
    spec = RunSpec("identity", "selftest", 1, 1).validate(cores=2)
    records = Runner(timeout_s=20, python=str(other)).run([spec, spec],
                                                          on_record=lambda r: None)
    assert [(r.status, r.signal) for r in records] == [("error", "SIGKILL")] * 2
    assert records[0].reason == (
        "worker failed during start-up: the worker broke the protocol: protocol version 0 "
        f"where this side speaks {PROTOCOL_VERSION}: parent and worker run different "
        "checkouts")


# ----------------------------------------------------- the kind names live in one module

PROTOCOL_MODULE = "engine/core/protocol.py"
# A kind's own messages are defined in its package, the one other home of their names.
KIND_MESSAGES = "engine/scenarios/*/messages.py"
# Lines of another protocol that happen to share a word: the LibTorch C++ runner and
# trainer (engine/worker/cpp) write their own JSON events to the Python worker.
OTHER_PROTOCOLS = {"engine/worker/backends/torch_libtorch.py",
                   "engine/worker/backends/train_libtorch.py"}
SKIP = {".venv", "tests", "build", "data", ".git", "node_modules", "test-artifacts"}
# Every kind, and the names the untyped dict protocol used before it ("result", "timing"),
# so that none creeps back.
KIND_NAMES = frozenset(MESSAGES) | {"result", "timing"}
KIND_KEYS = {"event", "kind"}


def _names_a_kind(node) -> bool:
    """ev["event"], ev.get("kind"), msg.kind, or a variable called event or kind."""
    if isinstance(node, ast.Subscript):
        s = node.slice
        return isinstance(s, ast.Constant) and s.value in KIND_KEYS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (node.func.attr == "get" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in KIND_KEYS)
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_KEYS
    return isinstance(node, ast.Name) and node.id in KIND_KEYS


def _kind_constants(node) -> list[str]:
    """The kind names a node spells: a string, or a tuple/list/set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and n.value in KIND_NAMES]


def kind_literal_hits(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) for a kind name used as a message kind: compared with, assigned to or
    put under an event/kind key, passed as event=/kind=, or as emit()'s first argument."""
    hits = []
    for node in ast.walk(tree):
        found: list[str] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_a_kind(s) for s in sides):
                found = [k for s in sides for k in _kind_constants(s)]
        elif isinstance(node, ast.Dict):
            found = [k for key, v in zip(node.keys, node.values)
                     if isinstance(key, ast.Constant) and key.value in KIND_KEYS
                     for k in _kind_constants(v)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(_names_a_kind(t) for t in targets):
                found = _kind_constants(node.value)
        elif isinstance(node, ast.Call):
            found = [k for kw in node.keywords if kw.arg in KIND_KEYS
                     for k in _kind_constants(kw.value)]
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name == "emit" and node.args:
                found += _kind_constants(node.args[0])
        hits += [(node.lineno, k) for k in found]
    return hits


def kind_literals(root: Path) -> list[str]:
    """'file:line: name' for every kind name used as a kind outside the protocol module."""
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP)
        for name in sorted(n for n in names if n.endswith(".py")):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if (rel == PROTOCOL_MODULE or rel in OTHER_PROTOCOLS
                    or Path(rel).match(KIND_MESSAGES)):
                continue
            out += [f"{rel}:{line}: {kind}"
                    for line, kind in kind_literal_hits(ast.parse(path.read_text()))]
    return sorted(out)


def test_kind_names_appear_only_in_the_protocol_module():
    assert kind_literals(ROOT) == []
    # the protocol module and the kinds' messages are where they are: the check would see
    # them there
    homes = [ROOT / PROTOCOL_MODULE, *sorted(ROOT.glob(KIND_MESSAGES))]
    assert {k for home in homes
            for _, k in kind_literal_hits(ast.parse(home.read_text()))} == set(MESSAGES)


def test_the_kind_check_finds_a_planted_violation_and_nothing_else(tmp_path):
    def write(rel, text):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    write("engine/run/loop.py",
          'def on(ev, emit):\n'
          '    if ev["event"] == "started":\n'                 # 2: compared, dict protocol
          '        pass\n'
          '    if ev.get("kind") in ("progress", "armed"):\n'  # 4: two in a tuple
          '        pass\n'
          '    emit("failed", run_id=1)\n'                     # 6: emit's first argument
          '    out = {"event": "result", "n": 1}\n'            # 7: the old result's name
          '    msg = dict(kind="ready")\n'                     # 8: kind=
          '    ev["kind"] = "stop"\n'                          # 9: assigned under a key
          '    if msg.kind != "block":\n'                      # 10: an attribute
          '        pass\n'
          '    return out\n')
    write("engine/run/fine.py",
          '"""A worker is ready when it has started; its result or failed event."""\n'
          'STATUS = "failed"\n'                               # a status, not a kind
          'def f(phase, spec):\n'
          '    if phase == "ready":\n'                         # a variable of another name
          '        return {"status": "failed", "mode": "stop"}\n'
          '    return spec.kind == "train", print("started")\n')
    write(PROTOCOL_MODULE, 'class Started:\n    kind = "started"\n')
    write("engine/worker/backends/torch_libtorch.py",
          'def read(ev):\n    return ev["event"] == "progress"\n')
    write("tests/test_x.py", 'assert {"event": "started"}\n')
    assert kind_literals(tmp_path) == [
        "engine/run/loop.py:10: block", "engine/run/loop.py:2: started",
        "engine/run/loop.py:4: armed", "engine/run/loop.py:4: progress",
        "engine/run/loop.py:6: failed", "engine/run/loop.py:7: result",
        "engine/run/loop.py:8: ready", "engine/run/loop.py:9: stop"]


# ----------------------------------------------- a real run, stored as runs were before

POLICY = MeasurementPolicy(warmup_iters=2, min_time_s=0.05, min_iters=5)
# Columns that depend on the machine or the checkout, not on the protocol.
MACHINE_COLUMNS = {"git_commit", "governor", "cpu_flags", "threads_per_core"}
# What a selftest run's row left NULL before the protocol was typed (dumped from the
# previous commit's sweep of the same two runs), machine-dependent columns aside.
NULL_WHEN_OK = {"dataset", "device_peak_bytes", "exit_code", "gflops_per_s",
                "machine_shape", "memory_cap_bytes", "model_bytes", "model_format",
                "model_inputs", "model_origin", "model_sha256", "node_host", "node_id",
                "signal", "workers",
                # protocol 7: an energy reading, NULL where none was asked
                "energy_source", "energy_absent", "energy_j_per_sample",
                "energy_kwh_per_million", "energy_loop_s", "energy_samples",
                "energy_counters",
                # protocol 7: a reduced-precision run's error against fp32 (an fp32 run here)
                "output_max_abs", "output_max_rel", "top1_agreement", "top1_inputs"}
NULL_WHEN_FAILED = NULL_WHEN_OK | {
    "cv", "first_forward_s", "flops_method", "flops_per_sample", "iqr_ms",
    "iterations", "load_s", "max_ms", "mean_ms", "measured_s", "median_ms", "min_ms",
    "p90_ms", "p95_ms", "p99_ms", "params", "params_trainable", "peak_rss_bytes",
    "peak_rss_method", "prepare_s", "rss_before_bytes", "std_ms", "stop_reason",
    "throughput", "validity", "warmup_s",
    # protocol 2: what the model adds, measured by an inference run that measured
    "model_peak_bytes", "model_baseline_bytes", "reference_bytes"}
EXTRA_WHEN_OK = ["block_calls", "cores_used", "first_forward_from", "gc_disabled",
                 "gflops_basis", "interference", "model_reused", "output_rel_diff",
                 "warmup_stop"]


def test_a_real_workers_runs_are_stored_with_the_columns_they_had(worker_env, db_path):
    from engine.run.jobs.sweep import run_sweep
    from store.db import open_db

    specs = [RunSpec(m, "selftest", 1, 1, policy=POLICY).validate(cores=2)
             for m in ("identity", "fault_raise")]
    run_sweep(specs, db=db_path, rounds=1, seed=1, runner=Runner(timeout_s=60), command="t")
    with open_db(db_path) as con:
        cur = con.execute("SELECT * FROM runs ORDER BY model DESC")
        cols = [d[0] for d in cur.description]
        ok, failed = [dict(zip(cols, row)) for row in cur.fetchall()]
        phases = dict(con.execute("SELECT phase, count(*) FROM samples WHERE run_id = ? "
                                  "GROUP BY phase", [ok["run_id"]]).fetchall())

    def nulls(row):
        return {c for c, v in row.items() if v is None} - MACHINE_COLUMNS
    assert (ok["model"], ok["status"], failed["model"], failed["status"]) == (
        "identity", "ok", "fault_raise", "error")
    assert nulls(ok) == NULL_WHEN_OK
    assert nulls(failed) == NULL_WHEN_FAILED
    # whether the machine is a VM, where its CPU flags say (an x86 guest's `hypervisor`)
    from pathlib import Path

    from engine.worker.machine import hypervisor_of
    guest = hypervisor_of(Path("/proc/cpuinfo").read_text())
    extra = json.loads(ok["extra"])
    assert sorted(extra) == sorted(EXTRA_WHEN_OK + ([] if guest is None else ["hypervisor"]))
    assert extra.get("hypervisor") == guest
    assert sorted(json.loads(failed["extra"])) == ["cores_used"] + (
        [] if guest is None else ["hypervisor"])
    # the worker's resident set before the model, and what the run added over it (the
    # selftest model keeps no reference apart)
    assert ok["reference_bytes"] == 0
    assert 20 * 2**20 < ok["model_baseline_bytes"] < ok["peak_rss_bytes"]
    assert 0 <= ok["model_peak_bytes"] == ok["peak_rss_bytes"] - ok["model_baseline_bytes"]
    assert (ok["kind"], ok["framework"], ok["runtime"]) == ("inference", "selftest", "python")
    # the loop's own reason: a selftest call's spread decides whether its median was precise
    assert ok["stop_reason"] in ("policy met", "precise_max reached")
    assert (ok["params"], ok["flops_method"], ok["replicas"], ok["contention"]) == (
        0, "none (diagnostic model)", 1, "none")
    assert ok["peak_rss_method"] == "VmHWM, reset per run via /proc/self/clear_refs"
    assert phases == {"warmup": 2, "measure": ok["iterations"]}
    assert failed["reason"] == "ValueError: fault_raise: this diagnostic model fails while loading"
    assert "ValueError" in failed["stderr_tail"]
