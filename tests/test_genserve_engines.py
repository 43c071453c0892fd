"""The serving engines of issue 38, for real, on the tiny Llama (2 layers, width 64): PyTorch
eager one request at a time, OpenVINO GenAI's ContinuousBatchingPipeline and transformers'
continuous batching each take three requests of different prompt and output lengths at once
and emit every request's growing count, done exactly once at its length, with PyTorch eager
batch-1 greedy's tokens; with a one-block cache, a request that can never fit is dropped and
counted, and the one that fits still gives the reference's tokens.

The engines run in a subprocess (tests/genserve_probe.py), so this process imports no
framework. Nothing here asserts a duration: only counts, order and tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engine.worker.generation.prepare import ensure
from tests.conftest import ROOT
from tests.genserve_probe import ENGINES, REQUESTS, TIGHT

pytestmark = pytest.mark.slow

CB = ("sut_openvino_cb", "sut_transformers_cb")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    root, work = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("exports")
    folder, _ = ensure("tiny_llama", 0, [], root=root)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    done = subprocess.run([sys.executable, "-m", "tests.genserve_probe", str(folder),
                           str(work)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("PROBE "):])


def _check_emits(emits, requests) -> None:
    for rid, _, n in requests:
        mine = [(k, d) for r, k, d in emits if r == rid]
        counts = [k for k, _ in mine]
        assert counts == sorted(counts) and counts[0] >= 1, (rid, counts)
        assert [d for _, d in mine] == [False] * (len(mine) - 1) + [True]
        assert counts[-1] == n


@pytest.mark.parametrize("engine", ENGINES)
def test_every_request_is_emitted_growing_and_done_once_at_its_length(probe, engine):
    got = probe[engine]
    _check_emits(got["emits"], REQUESTS)
    assert {r for r, _, _ in got["emits"]} == {rid for rid, _, _ in REQUESTS}
    assert got["stats"]["ignored"] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_tokens_equal_eager_batch_1_greedy_per_prompt(probe, engine):
    ref = probe["reference"]
    assert [len(ref[str(rid)]) for rid, _, _ in REQUESTS] == [n for _, _, n in REQUESTS]
    assert probe[engine]["tokens"] == {str(rid): ref[str(rid)] for rid, _, _ in REQUESTS}


def test_the_eager_baseline_runs_one_request_at_a_time_in_arrival_order(probe):
    got = probe["sut_torch_eager"]
    order = [r for r, _, _ in got["emits"]]
    assert order == [rid for rid, _, n in REQUESTS for _ in range(n)]
    assert got["stats"]["steps"] == 3 and got["settings"]["max_num_seqs"] == 1


@pytest.mark.parametrize("engine", CB)
def test_continuous_batching_decodes_the_three_together(probe, engine):
    got = probe[engine]
    # the first three emits are the three first tokens: one step prefilled them together
    assert got["emits"][:3] == [[rid, 1, False] for rid, _, _ in REQUESTS]
    # the longest request's 12 tokens took 12 steps, the others' rode along
    assert got["stats"]["steps"] == 12


@pytest.mark.parametrize("engine", CB)
def test_a_request_that_never_fits_the_cache_is_dropped_and_counted(probe, engine):
    got = probe[engine]["tight"]
    fits, never = TIGHT
    assert [e for e in got["emits"] if e[0] == never[0]] == [[never[0], 0, True]]
    _check_emits(got["emits"], [fits])
    assert got["stats"]["ignored"] == 1
    assert got["tokens"] == {str(fits[0]): probe["reference"][str(fits[0])],
                             str(never[0]): []}


# Spec(): max_num_seqs 4 x ceil((23 + 12) / 32) = 4 x 2 blocks of 32 tokens; transformers'
# FIFO scheduler admits no new prefill while under 20 % of its blocks are free: 8 / 0.8
BLOCKS = {"sut_openvino_cb": (8, "computed: max_num_seqs 4 x ceil((prompt 23 + output 12) / "
                                 "32) = 4 x 2"),
          "sut_transformers_cb": (10, "computed: max_num_seqs 4 x ceil((prompt 23 + output "
                                      "12) / 32) = 8, / (1 - the FIFO scheduler's 0.2 safety "
                                      "margin) = 10")}


@pytest.mark.parametrize("engine", CB)
def test_the_cache_is_fixed_in_32_token_blocks_and_said_so(probe, engine):
    s = probe[engine]["settings"]
    blocks, how = BLOCKS[engine]
    assert (s["num_kv_blocks"], s["kv_block_tokens"], s["max_num_batched_tokens"]) == (
        blocks, 32, 256)
    assert s["num_kv_blocks_source"] == how
    assert s["kv_cache"] == f"fixed: {blocks} blocks x 32 tokens = {blocks * 32} tokens"
    assert probe[engine]["tight"]["stats"]["max_cache_usage_pct"] == 100.0


def test_openvino_pins_its_precisions_and_reads_its_block_back(probe):
    got = probe["sut_openvino_cb"]
    s = got["settings"]
    assert (s["inference_precision_hint"], s["kv_cache_precision"],
            s["inference_num_threads"]) == ("f32", "f32", 1)
    assert (s["dynamic_split_fuse"], s["enable_prefix_caching"]) == (True, False)
    # 8 blocks x 32 tokens x 512 bytes a token (2 layers x 2 KV heads x 16 x K and V x f32)
    assert got["stats"]["kv_cache_bytes"] == 8 * 32 * 512
    assert got["stats"]["kv_block_tokens_read_back"] == 32.0


def test_transformers_says_its_attention_is_dense_sdpa_over_the_packed_batch(probe):
    s = probe["sut_transformers_cb"]["settings"]
    assert s["attention"].startswith("paged|sdpa: ")
    assert "one dense masked scaled_dot_product_attention over the packed batch" in (
        s["attention"])
    assert (s["allow_block_sharing"], s["use_cuda_graph"], s["scheduler"],
            s["scheduler_safety_margin"]) == (False, False, "fifo", 0.2)
    got = probe["sut_transformers_cb"]["stats"]
    # its cache holds 2 blocks more than asked: (10 + 2) x 32 tokens x 512 bytes a token
    assert (got["preempted"], got["kv_cache_bytes"]) == (0, 12 * 32 * 512)
