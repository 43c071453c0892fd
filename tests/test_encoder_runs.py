"""The tiny transformer encoders through the real CLI (issue 37): torch eager against
keras-hub in TensorFlow, one round, each in its own worker. Nothing here times anything:
it checks what is stored and printed."""

import re

import pytest

from engine.cli import main
from engine.core.encoders import encoder_flops
from store.db import open_db

pytestmark = pytest.mark.slow

# From the configurations (engine/core/encoders.py); equal on both sides by construction
PARAMS = {"tiny_bert": 136_896, "tiny_vit": 80_576}


def test_tiny_bert_and_vit_run_in_both_frameworks_with_equal_params(db_path, worker_env,
                                                                    capsys):
    rc = main(["run", "--model", "tiny_bert", "tiny_vit", "--framework", "torch",
               "tensorflow", "--runtime", "eager", "keras", "--rounds", "1",
               "--max-rounds", "1", "--min-time", "0.05", "--min-iters", "3",
               "--warmup", "1", "--db", str(db_path)])
    assert rc == 0
    out = capsys.readouterr().out
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT model, framework, runtime, image_size, status, params, "
            "flops_per_sample, throughput FROM runs ORDER BY model, framework").fetchall()
    assert [r[:5] for r in rows] == [
        ("tiny_bert", "tensorflow", "keras", 32, "ok"), ("tiny_bert", "torch", "eager", 32, "ok"),
        ("tiny_vit", "tensorflow", "keras", 32, "ok"), ("tiny_vit", "torch", "eager", 32, "ok")]
    for model, _, _, size, _, params, flops, _ in rows:
        assert params == PARAMS[model]
        assert flops == encoder_flops(model, size)
    # an encoder has no BatchNorm: nothing calibrated, no weights file written or read
    with open_db(db_path) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE extra->>'$.weights_from' IS NOT "
                           "NULL OR extra->>'$.calibrate_s' IS NOT NULL").fetchone() == (0,)
    # each stored line of a token model gives tokens/s = samples/s x its 32 tokens
    lines = re.findall(r"tiny_bert \w+ \(\w+\) b1 t1: ok - p50 [\d.]+ ms, ([\d,.]+) samples/s "
                       r"\(([\d,]+) tokens/s\)", out)
    assert len(lines) == 2
    for samples, tokens in lines:
        assert int(tokens.replace(",", "")) == pytest.approx(
            float(samples.replace(",", "")) * 32, abs=32 * 0.05 + 0.5)
    assert not re.search(r"tiny_vit .* tokens/s", out)
    assert "tiny_bert 32 tok" in out and "tiny_vit 32px" in out
    assert "throughput [tokens/s] = samples/s x sequence length" in out
