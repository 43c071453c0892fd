"""Generation on the pages (issue 37), on seeds.records.seed_generation's sweep: the Run
page's form and its refusals (typed and crafted), Compare's generation view (its table,
failures, verdicts, charts, glossary and link), Results' per-token timeline, Cost per 1 M
tokens; and the present and analysis functions behind them, on fixed values."""

import pytest

from engine.analysis.cost import custom_machine
from engine.analysis.generation_cost import token_cost_rows
from engine.present.generation_frames import config_frame, generation_plan, timeline_frame
from engine.run.jobs.generation_request import GenRequest
from seeds.records import GEN_SWEEP, seed_generation, seed_sweep
from tests.test_crafted import LONG, crafted, errors
from tests.test_pages import FakeManager, page


def frame(at, column):
    """The page's table that has this column (AppTest finds a dataframe by index only)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture
def gen_db(db_path):
    seed_generation(db_path)
    return db_path


# ---- Run page -------------------------------------------------------------------------

def test_the_run_page_queues_a_generation_sweep_from_its_form(db_path, monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="gen_models").set_value(["gpt2", "smollm2_135m"])
    at.multiselect(key="gen_runtimes").set_value(["eager", "compile"])
    at.text_input(key="gen_prompt").set_value("128, 512")
    at.text_input(key="gen_output").set_value("64")
    at.text_input(key="gen_batch").set_value("1 4")
    at.number_input(key="gen_rounds").set_value(2)
    at.run()
    # 2 models x 2 runtimes x 2 prompts x 1 output x 2 batches; 8 x (1 + 4) x 64 tokens
    assert any(i.value.startswith("**16 configurations × 2 rounds = 32 runs** of gpt2, "
                                  "smollm2_135m; 2,560 output tokens") for i in at.info)
    at.number_input(key="gen_max_rounds").set_value(5)
    at.checkbox(key="gen_energy").check()
    at.run()
    at.button(key="gen_launch").click().run()
    (req,) = fake.submitted
    assert isinstance(req, GenRequest)
    assert (req.models, req.runtimes, req.prompt_lens, req.output_lens, req.batch_sizes,
            req.threads, req.precisions, req.rounds) == (
        ("gpt2", "smollm2_135m"), ("eager", "compile"), (128, 512), (64,), (1, 4), (1,),
        ("fp32",), 2)
    # rounds until decided up to 5, energy measured; no OpenVINO GenAI, so no backend option
    assert (req.max_rounds, req.policy.energy_s, dict(req.options)) == (5, 10.0, {})
    assert "Generation job 1 starts now." in [s.value for s in at.success]


def test_the_run_page_gives_openvino_genai_its_attention_backend(db_path, monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="gen_runtimes").set_value(["eager", "openvino_genai"])
    at.selectbox(key="gen_attention").set_value("PA")
    at.run()
    at.button(key="gen_launch").click().run()
    (req,) = fake.submitted
    assert dict(req.options) == {"attention_backend": "PA"}
    specs, _ = req.expand()
    assert {(s.runtime, tuple(s.options.items())) for s in specs} == {
        ("eager", ()), ("openvino_genai", (("attention_backend", "PA"),))}


def test_max_rounds_below_rounds_is_refused_naming_both(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.number_input(key="gen_rounds").set_value(4)
    at.number_input(key="gen_max_rounds").set_value(3).run()
    assert errors(at) == ["max_rounds: 3 is below rounds 4; allowed: 4..100"]
    assert at.button(key="gen_launch").disabled is True


@pytest.mark.parametrize("key, value, message", [
    ("gen_prompt", "0", "prompt_len: 0 is out of range; allowed: integer 1..131072"),
    ("gen_batch", "65", "batch_size: 65 is out of range; allowed: integer 1..64"),
    ("gen_output", "1", "output_len: 1 is out of range; allowed: integer 2..131072"),
])
def test_a_bad_generation_field_is_named_and_disables_its_launch(key, value, message,
                                                                 db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.text_input(key=key).set_value(value).run()
    assert errors(at) == [message]
    assert at.button(key="gen_launch").disabled is True
    assert at.button(key="launch").disabled is False  # the inference sweep is unaffected


def test_a_prompt_and_output_past_the_models_positions_is_the_specs_refusal(db_path,
                                                                           monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="gen_models").set_value(["gpt2"])
    at.text_input(key="gen_prompt").set_value("1000").run()
    (msg,) = errors(at)
    assert msg.startswith("output_len: prompt_len + output_len = 1128 exceeds gpt2's 1024 "
                          "positions; allowed: output_len 2..24 at prompt_len 1000")
    assert at.button(key="gen_launch").disabled is True


@pytest.mark.parametrize("kind, key, value, field", [
    ("multiselect", "gen_models", dict(string_array_value=["gpt5"]), "model"),
    ("multiselect", "gen_runtimes", dict(string_array_value=["vllm"]), "runtime"),
    ("multiselect", "gen_precisions", dict(string_array_value=["fp8"]), "precision"),
    ("multiselect", "gen_threads", dict(string_array_value=["999"]), "threads"),
    ("text_input", "gen_prompt", dict(string_value=LONG), "prompt_len"),
])
def test_a_crafted_generation_value_launches_nothing(kind, key, value, field, db_path,
                                                     monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    crafted(at, kind, key, click="gen_launch", **value)
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith(f"{field}: ") and " allowed: " in msg, msg
    assert fake.submitted == [] and not at.success


# ---- Compare ---------------------------------------------------------------------------

def test_compare_shows_a_generation_sweep_with_its_failures_and_verdicts(gen_db, monkeypatch):
    at = page("views/compare.py", gen_db, monkeypatch)
    # no inference run stored: the page opens on text generation
    assert at.radio(key="work").value == "generate"
    assert at.selectbox(key="gen_sweep").value == GEN_SWEEP
    table = frame(at, "agreement")
    # 3 runtimes x 2 prompts x 2 batches, plus the refused and the invalid configuration
    assert len(table) == 14
    eager = table[(table.contender == "torch (eager)") & (table.prompt_len == 128)
                  & (table.batch_size == 1)].iloc[0]
    # round p50s 20.2065 and 20.6105 ms (seeds.records: 20 ms x 1.00 / 1.02, + 0.2 ms / 31)
    assert eager.tpot_p50_ms == pytest.approx((20.2 + 20.604) / 2 + 0.2 / 31)
    assert (eager.status, eager.rounds, eager.agreement) == ("2 ok", 2, 1.0)
    refused = table[table.contender == "torch (onnxruntime_genai)"].iloc[0]
    assert refused.status == "1 error" and refused.reason == (
        "Refused: ONNX Runtime GenAI's builder has no GPT-2 architecture")
    invalid = table[table.contender == "tensorflow (keras_hub)"].iloc[0]
    assert invalid.status == "1 invalid" and "on 41.0% of 32 positions" in invalid.reason
    lines = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert ("- smollm2_135m · prompt 128 · output 32 · batch 1 · 2 threads: torch "
            "(openvino_genai) has 2.52x lower TPOT than torch (eager) (97.5 % sequential "
            "interval 1.45-4.40, 2 rounds)") in lines
    assert len(at.get("plotly_chart")) == 2
    assert len(frame(at, "definition")) == 7
    at.radio(key="cg_metric").set_value("output tokens/s").run()
    assert not at.exception and at.query_params["metric"] == "output tokens/s"


def test_a_generation_compare_link_reopens_beside_inference(db_path, monkeypatch):
    seed_sweep(db_path)
    seed_generation(db_path)
    at = page("views/compare.py", db_path, monkeypatch)
    assert at.radio(key="work").value == "inference"  # inference first where it is stored
    at = page("views/compare.py", db_path, monkeypatch, {
        "work": "generate", "sweep": "sweep-gen", "metric": "TPOT", "batch": "4",
        "prompt": "512"})
    assert [w.value for w in at.warning] == []
    assert at.selectbox(key="gen_sweep").value == GEN_SWEEP
    assert (at.selectbox(key="cg_batch").value, at.selectbox(key="cg_prompt").value,
            at.radio(key="cg_metric").value) == (4, 512, "TPOT")
    q = dict(at.query_params)
    assert (q["work"], q["sweep"], q["batch"], q["prompt"], q["metric"]) == (
        "generate", GEN_SWEEP, "4", "512", "TPOT")


def test_a_crafted_work_value_is_named(gen_db, monkeypatch):
    at = page("views/compare.py", gen_db, monkeypatch)
    crafted(at, "radio", "work", string_value="training")
    assert not at.exception
    (msg,) = errors(at)
    assert msg.startswith("work: ") and "allowed: one of inference, generate" in msg


# ---- Results ---------------------------------------------------------------------------

def test_results_shows_a_generation_runs_timeline(gen_db, monkeypatch):
    at = page("views/results.py", gen_db, monkeypatch, {"run": "g-eager-128-1-1"})
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["TTFT p50 / p90 / p99 [ms]"] == "12.93 / 13.03 / 13.05"
    assert metrics["TPOT p50 / p90 / p99 [ms]"] == "20.206 / 20.366 / 20.402"
    assert metrics["agreement with the reference"] == "100.0% of 32 tokens"
    readings = frame(at, "ms_since_start")
    # the first call: TTFT 0.1 ms x 128 = 12.8 ms, then a token every 20 ms
    assert len(readings) == 32
    assert readings.gap_ms.tolist()[:3] == [12.8, 20.0, 20.0]
    assert readings.phase.tolist()[:2] == ["prefill + first token", "decode"]
    assert readings.ms_since_start.iloc[-1] == pytest.approx(12.8 + 31 * 20.0)
    at.selectbox(key="gen_rep").set_value(2).run()
    assert frame(at, "ms_since_start").gap_ms.iloc[0] == pytest.approx(12.8 * 1.02)


def test_results_shows_an_invalid_generation_run_with_its_reason(gen_db, monkeypatch):
    at = page("views/results.py", gen_db, monkeypatch, {"run": "g-keras-invalid"})
    assert any("41.0% of 32 positions" in e.value for e in [*at.error, *at.warning])


# ---- Cost ------------------------------------------------------------------------------

def test_cost_prices_generation_per_million_tokens(gen_db, monkeypatch):
    at = page("views/cost.py", gen_db, monkeypatch)
    assert at.radio(key="work").value == "generate"
    assert [t.value for t in at.title] == ["Cost of text generation"]
    assert (at.selectbox(key="gc_contender").value, at.selectbox(key="gc_prompt").value,
            at.selectbox(key="gc_batch").value) == ("torch (compile)", 128, 1)
    at.selectbox(key="gc_shape").set_value("AWS c6i.8xlarge").run()
    m = {x.label: x.value for x in at.metric}
    # compile, prompt 128, batch 1: output tokens/s 82.845 and 78.902 over the rounds, median
    # 80.874 on 1 core (2 threads, 2 per core), x 16 cores = 1,293.98; $1.36/h on c6i.8xlarge
    assert m["output tokens/s on this machine (estimate)"] == "1,294.0"
    assert m["USD per 1 M output tokens"] == "$0.2920"
    # prefill tokens/s 12,376.2 and 11,786.9 -> 12,081.6 x 16 = 193,305: $0.0020 per 1 M
    assert m["USD per 1 M input tokens"] == "$0.0020"
    [caveat] = [c.value for c in at.caption if c.value.startswith("Like for like")]
    assert caveat.startswith("Like for like: estimate: measured with 2 threads x 1 replica "
                             "(1 physical core) on Test CPU @ 2 GHz; c6i.8xlarge has 32 vCPUs "
                             "(16 cores)")
    table = frame(at, "caveat")
    assert len(table) == 20 and table.estimate.all()
    assert any(c.value.startswith("Per 1 M output tokens: the whole call") for c in at.caption)


# ---- present and analysis --------------------------------------------------------------

def test_token_cost_is_the_hourly_price_over_tokens_per_hour():
    row = {"selected": True, "threads": 2, "replicas": 1, "runs": 2, "threads_per_core": 2,
           "output_tok_s": 100.0, "prefill_tok_s": 1000.0, "throughput": 100.0,
           "machine_shape": None, "system_id": "s", "platform": "Linux-x86_64",
           "cpu_model": "CPU"}
    # $0.36/h for 2 vCPUs = 1 core, as measured: 100 tokens/s = 360,000 tokens/h
    (r,) = token_cost_rows([custom_machine(0.36, 2)], [row])
    assert r["usd_per_m_output"] == pytest.approx(1.0)
    assert r["usd_per_m_input"] == pytest.approx(0.1)
    assert r["output_tok_s"] == pytest.approx(100.0) and r["estimate"] is True
    (r,) = token_cost_rows([custom_machine(0.36, 8)], [row])  # 4 cores: 4x the tokens
    assert r["usd_per_m_output"] == pytest.approx(0.25)
    assert "priced as 4x those cores" in r["caveat"]


def test_a_shape_measured_whole_is_priced_from_its_runs():
    from engine.analysis.cost import load_catalog

    c6i = next(m for m in load_catalog() if m.shape == "c6i.8xlarge")
    row = {"selected": False, "threads": 32, "replicas": 1, "runs": 3, "threads_per_core": 2,
           "output_tok_s": 400.0, "prefill_tok_s": 20000.0, "throughput": 400.0,
           "machine_shape": "c6i.8xlarge", "system_id": "x", "platform": "Linux-x86_64",
           "cpu_model": "Xeon"}
    (r,) = token_cost_rows([c6i], [row])
    assert r["estimate"] is False and r["output_tok_s"] == 400.0
    assert r["usd_per_m_output"] == pytest.approx(c6i.usd_per_hour / (400 * 3600) * 1e6)
    assert r["caveat"] == ("measured: 32 threads x 1 replica (16 physical cores) on "
                           "c6i.8xlarge; c6i.8xlarge has 32 vCPUs (16 cores)")


def test_config_frame_keeps_every_configuration_and_the_timeline_its_steps(tmp_path):
    from store.db import open_db
    from store.generation import generation_runs, token_timeline

    db = tmp_path / "g.duckdb"
    seed_generation(db)
    with open_db(db) as con:
        runs = generation_runs(con, GEN_SWEEP)
        timeline = token_timeline(con, "g-openvino_genai-512-4-1")
    frame = config_frame(runs)
    assert len(frame) == 14 and frame.status.value_counts().to_dict() == {
        "2 ok": 12, "1 error": 1, "1 invalid": 1}
    ov = frame[(frame.contender == "torch (openvino_genai)") & (frame.prompt_len == 512)
               & (frame.batch_size == 4)].iloc[0]
    # no drift for OpenVINO in the seed: both rounds alike; TTFT 0.05 ms x 512 x 4 x 1.01
    assert ov.ttft_p50_ms == pytest.approx(103.424)
    t = timeline_frame(timeline, 0)
    # decode gap 8 ms x (1 + 0.1 x 3) at batch 4
    assert (len(t), t.gap_ms.iloc[0], t.gap_ms.iloc[1]) == (32, 102.4, 10.4)


def test_the_plan_line_counts_runs_and_tokens():
    # 2 prompts x (1 + 2) rows x 8 tokens
    specs, _ = GenRequest(models=("tiny_llama",), runtimes=("eager",), prompt_lens=(16, 32),
                          output_lens=(8,), batch_sizes=(1, 2), rounds=2).expand()
    assert generation_plan(specs, 2).startswith(
        "**4 configurations × 2 rounds = 8 runs** of tiny_llama; 48 output tokens per round")


# ---- report ----------------------------------------------------------------------------

def test_a_generation_sweep_has_its_report_from_the_cli_and_the_page(gen_db, tmp_path,
                                                                     monkeypatch, capsys):
    from engine.cli import main

    out = tmp_path / "gen.md"
    assert main(["report", "sweep-gen", "--out", str(out), "--db", str(gen_db)]) == 0
    md = out.read_text()
    assert md.startswith("# Text generation report: sweep sweep-generate\n\n`python -m "
                         "engine generate --models smollm2_135m")
    rows = [line for line in md.splitlines() if line.startswith("| smollm2_135m |")]
    assert len(rows) == 14  # every configuration, the refused and the invalid one included
    assert ("| smollm2_135m | torch (onnxruntime_genai) | 128 | 32 | 1 | 2 | 1 error | - | - "
            "| - | - | - | - | Refused: ONNX Runtime GenAI's builder has no GPT-2 "
            "architecture |") in rows
    assert ("- smollm2_135m · prompt 128 · output 32 · batch 1 · 2 threads: torch "
            "(openvino_genai) has 2.52x lower TPOT than torch (eager) (97.5 % sequential "
            "interval 1.45-4.40, 2 rounds)") in md
    assert "| TPOT | time per output token after the first" in md
    html_out = tmp_path / "gen.html"
    assert main(["report", GEN_SWEEP, "--out", str(html_out), "--db", str(gen_db)]) == 0
    doc = html_out.read_text()
    assert doc.count("<tr>") == 15 + 8 and "TPOT vs prompt length" in doc
    at = page("views/compare.py", gen_db, monkeypatch)
    at.radio(key="gen_report_format").set_value("md").run()
    at.button(key="gen_prepare_report").click().run()
    assert at.session_state["gen_report"][2] == md.encode("utf-8")


# ---- exports ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_an_export_carries_generation_figures_and_readings_back(fmt, gen_db, tmp_path):
    from store.db import open_db
    from store.generation import generation_runs, token_timeline
    from store.ingest import export_runs, import_file

    out = tmp_path / f"gen.{fmt}"
    with open_db(gen_db) as con:
        assert export_runs(con, out, fmt, sweep_id=GEN_SWEEP) == 26
        before = generation_runs(con, GEN_SWEEP)
        readings = token_timeline(con, "g-compile-512-4-2")
    with open_db(tmp_path / "fresh.duckdb") as con:
        assert import_file(con, out)[:2] == (26, 0)
        after = generation_runs(con, GEN_SWEEP)
        assert token_timeline(con, "g-compile-512-4-2").equals(readings)
    assert len(readings) == 96
    cols = ["run_id", "status", "tpot_p50_ms", "output_tok_s", "agreement", "prompt_len"]
    assert after[cols].equals(before[cols])
    eager = after[after.run_id == "g-eager-128-1-1"].iloc[0]
    assert eager.tpot_p50_ms == pytest.approx(20.2 + 0.2 / 31)


# ---- regression gate -------------------------------------------------------------------

def _sweeps(runs, factor: float, names, jitter=(1.0, 1.01)):
    """The seeded runs as stored by several sweeps: each a copy under its own sweep id,
    TPOT and TTFT scaled by factor x its jitter, output tokens/s divided by them."""
    out = []
    for name, j in zip(names, jitter):
        for r in runs:
            f = factor * j
            out.append({**r, "sweep_id": name, "run_id": f"{name}-{r['run_id']}",
                        "tpot_p50_ms": r["tpot_p50_ms"] * f, "ttft_p50_ms": r["ttft_p50_ms"] * f,
                        "output_tok_s": r["output_tok_s"] / f})
    return out


def test_the_gate_flags_a_slower_tpot_and_keeps_lengths_apart(tmp_path):
    from engine.analysis.generation_regress import compare_generation_sets, gate_metric
    from engine.analysis.regress import NOT_COMPARABLE, REGRESSION
    from store.db import open_db
    from store.generation import generation_runs

    db = tmp_path / "g.duckdb"
    seed_generation(db)
    with open_db(db) as con:
        runs = generation_runs(con, GEN_SWEEP).to_dict("records")
    base = _sweeps(runs, 1.0, ["b1", "b2"])
    cand = _sweeps(runs, 1.3, ["c1", "c2"])
    cmp = compare_generation_sets(base, cand, gate_metric("tpot"))
    verdicts = [c.decision.verdict for c in cmp.changes]
    # 12 configurations measured, prompt 128 and 512 apart; the refused and invalid ones
    # have no successful round on either side
    assert len(cmp.changes) == 14
    assert verdicts.count(REGRESSION) == 12 and verdicts.count(NOT_COMPARABLE) == 2
    eager = next(c for c in cmp.changes if c.config.model == "smollm2_135m · prompt 512 · "
                 "output 32" and c.config.runtime == "eager" and c.config.batch_size == 4)
    assert eager.candidate_ms / eager.baseline_ms == pytest.approx(1.3)
    same = compare_generation_sets(base, _sweeps(runs, 1.0, ["c1", "c2"], (1.01, 1.0)),
                                   gate_metric("output_tok_s"))
    assert REGRESSION not in [c.decision.verdict for c in same.changes]
    with pytest.raises(Exception, match="metric: 'itl' is not a generation metric"):
        gate_metric("itl")


def test_the_gate_command_judges_generation_sweeps(gen_db, capsys):
    from engine.cli import main

    code = main(["compare", "--baseline", "sweep-gen", "--candidate", GEN_SWEEP, "--metric",
                 "tpot", "--db", str(gen_db)])
    out = capsys.readouterr().out
    assert out.startswith("generation gate on TPOT (ms)\nbaseline sweep-gen (26 runs) · "
                          "candidate sweep-generate (26 runs)")
    # the same sweep on both sides, round by round: every configuration unchanged
    assert code == 0 and out.splitlines()[-1] == (
        "regression gate: no configuration slower than 1.1x among 12 compared: exit 0")
    assert "0 regression, 0 improvement, 12 no change, 2 not comparable" in out
    assert main(["compare", "--baseline", "nope", "--candidate", GEN_SWEEP, "--metric",
                 "tpot", "--db", str(gen_db)]) == 2
    assert "baseline: 'nope' names no single generation sweep" in capsys.readouterr().err
