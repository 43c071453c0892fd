"""The worker protocol (engine/core/protocol.py): every message survives encode/decode with
its values, and a line of another version or kind is refused in words."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from engine.core.protocol import (MESSAGES, PROTOCOL_VERSION, Armed, Assign, BlockTimed,
                                  Failed, Go, InferenceResult, LoadResult, Progress,
                                  ProtocolError, Ready, RunNext, RunOrder, Started, Stats,
                                  Stop, TimeBlock, TrainResult, decode, encode)

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
           memory_cap_bytes=2**30, mode="stats", trace_dir="/tmp/tr", sync="blocks"),
    Go(1_000, 2_000), RunNext(), TimeBlock(0.25), Stop(),
    Ready(pid=42, import_s=1.5, versions={"torch": "2.1"}, threads={"torch_intra_op": 1},
          machine={"cores_used": 2, "cpu_flags": ["avx2"]}, env={"OMP_NUM_THREADS": "1"},
          node={"node_id": "n1", "hostname": "h"}),
    Started("r1", 1_700_000_000.25), Progress("r1", "measure", 12), Armed("r1", 123_456),
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
    Failed("r1", "error", "ValueError: boom", ended_at=1.5, traceback="Traceback ...",
           exit_code=-9, signal="SIGKILL", model_sha256="ab", model_bytes=3),
    Stats("r1", model="resnet18", framework="torch", image_size=224, versions={"torch": "2"},
          params=1, params_trainable=1, flops_per_sample=2, flops_method="counter"),
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
