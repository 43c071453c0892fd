"""A token model's throughput on Compare and Results: sequences/s and tokens/s beside its
latency (catalog.tokens_per_s), on a seeded bert_base sweep of fixed samples; an image
sweep's pages keep samples/s alone."""

import json

import pytest

from engine.core.catalog import tokens_per_s
from seeds.records import TOKEN_SWEEP, seed_sweep, seed_tokens
from tests.conftest import seed_once
from tests.test_pages import page


def test_tokens_per_s_is_sequences_per_s_times_the_sequence_length():
    assert tokens_per_s("bert_base", 128, 100.0) == 12_800.0
    assert tokens_per_s("resnet18", 224, 100.0) is None
    assert tokens_per_s("bert_base", 128, float("nan")) is None
    assert tokens_per_s("bert_base", None, 100.0) is None


@pytest.fixture
def tokens_db(db_path):
    seed_once(seed_sweep, db_path)  # an image sweep beside it: its rows stay as they were
    seed_once(seed_tokens, db_path)
    return db_path


def _labels(frame) -> dict:
    """Each column's shown name (its column_config label) by field."""
    config = json.loads(frame.proto.columns or "{}")
    return {k: v.get("label") for k, v in config.items()}


def test_compare_shows_a_token_models_sequences_and_tokens_per_second(tokens_db, monkeypatch):
    at = page("views/compare.py", tokens_db, monkeypatch, {"sweep": TOKEN_SWEEP})
    assert at.multiselect(key="models").value == ["bert_base"]
    latency, seqs, toks = (at.dataframe[i].value for i in range(3))
    assert latency.iloc[0].tolist() == ["bert_base 128 tok", 1, 1, "★ 10.00 [10.00-10.00]",
                                        "20.00 [20.00-20.00]"]
    # 5 samples summing to 50 ms a round at batch 1: 100.0 sequences/s, x 128 tokens
    assert seqs.iloc[0].tolist() == ["bert_base 128 tok", 1, 1, "★ 100.0 [100.0-100.0]",
                                     "50.0 [50.0-50.0]"]
    assert toks.iloc[0].tolist() == ["bert_base 128 tok", 1, 1,
                                     "★ 12,800.0 [12,800.0-12,800.0]",
                                     "6,400.0 [6,400.0-6,400.0]"]
    titles = [m.value for m in at.markdown if m.value.startswith("**Throughput")]
    assert [t.split(" over")[0].split(" =")[0] for t in titles] == [
        "**Throughput [sequences/s]", "**Throughput [tokens/s]"]


def test_compare_shows_no_token_tables_for_an_image_sweep(tokens_db, monkeypatch):
    at = page("views/compare.py", tokens_db, monkeypatch, {"sweep": "sweep-seeded"})
    assert at.multiselect(key="models").value == ["mobilenet_v3_small"]
    assert not [m.value for m in at.markdown if m.value.startswith("**Throughput")]
    table, raw = at.dataframe[0].value, at.dataframe[1].value
    assert table.shape == (5, 5) and "contender" in raw.columns


def test_results_shows_a_token_runs_sequences_and_tokens_per_second(tokens_db, monkeypatch):
    at = page("views/results.py", tokens_db, monkeypatch, {"model": "bert_base"})
    df = at.dataframe[0].value
    assert sorted(df.run_id) == ["bert-tensorflow-1", "bert-tensorflow-2", "bert-torch-1",
                                 "bert-torch-2"]
    by_run = df.set_index("run_id")
    assert by_run.loc["bert-torch-1", ["throughput", "tokens_per_s"]].tolist() == [100.0,
                                                                                   12_800.0]
    assert by_run.loc["bert-tensorflow-2", "tokens_per_s"] == 6_400.0
    labels = _labels(at.dataframe[0])
    assert (labels["throughput"], labels["tokens_per_s"]) == ("sequences/s", "tokens/s")
    assert labels["image_size"] == "tokens"  # a sequence length, not pixels
    at.query_params["run"] = "bert-torch-1"
    at.run()
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["p50"], metrics["sequences/s"], metrics["tokens/s"]) == (
        "10.00 ms", "100.0", "12,800")
    assert "samples/s" not in metrics


def test_results_of_image_runs_show_samples_per_second_and_no_tokens(tokens_db, monkeypatch):
    at = page("views/results.py", tokens_db, monkeypatch, {"model": "mobilenet_v3_small"})
    df = at.dataframe[0].value
    assert len(df) == 17 and "tokens_per_s" not in df.columns
    assert _labels(at.dataframe[0])["throughput"] == "samples/s"
    assert _labels(at.dataframe[0])["image_size"] == "image px"
    # both kinds shown: one column, named for samples, tokens/s empty on the image rows
    at.multiselect(key="f_model").set_value([]).run()
    df = at.dataframe[0].value.set_index("run_id")
    assert df.tokens_per_s.notna().sum() == 4 and df.loc["torch-1-1-1", "tokens_per_s"] != \
        df.loc["torch-1-1-1", "tokens_per_s"]
    assert _labels(at.dataframe[0])["throughput"] == "samples/s"
    assert _labels(at.dataframe[0])["image_size"] == "size (px or tokens)"


def test_the_throughput_charts_count_a_token_models_samples_as_sequences():
    import pandas as pd

    from engine.present.charts import (latency_vs_batch, scaling_vs_threads,
                                       speedup_heatmap, throughput_vs_batch)

    rows = [{"model": m, "contender": "torch (eager)", "batch_size": 1, "threads": t,
             "throughput": 100.0 * t} for m in ("bert_base", "resnet18") for t in (1, 2)]
    df = pd.DataFrame(rows)
    bert = df[df.model == "bert_base"]
    fig = throughput_vs_batch(bert, 1)
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == (
        "batch size [sequences]", "throughput [sequences/s]")
    lat = bert.assign(p50_ms=10.0, p10_ms=9.0, p90_ms=11.0)
    assert latency_vs_batch(lat, 1).layout.xaxis.title.text == "batch size [sequences]"
    two = pd.concat([lat, lat.assign(contender="torch (compile)", p50_ms=5.0)])
    heat = speedup_heatmap(two, "bert_base", "torch (compile)", "torch (eager)")
    assert heat.layout.yaxis.title.text == "batch size [sequences]"
    fig, eff = scaling_vs_threads(bert, 1)
    assert fig.layout.yaxis.title.text == "throughput [sequences/s]"
    assert eff["throughput [sequences/s]"].tolist() == [100.0, 200.0]
    # an image model among them: a sample is a sample
    assert throughput_vs_batch(df, 1).layout.yaxis.title.text == "throughput [samples/s]"
    assert list(scaling_vs_threads(df, 1)[1].columns)[3] == "throughput [samples/s]"
