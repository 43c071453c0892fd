"""The generation kind (issue 37): its spec's validation and expansion, the figures derived
from fixed readings, the agreement share on fixed arrays, the per-metric contests on fixed
round figures, the CLI's refusals, and one real sweep of the tiny Llama on torch eager and
torch.compile through the CLI into a DuckDB file (slow: worker subprocesses; nothing timed
is asserted, only what was stored)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis.generation_verdicts import judge_generation
from engine.cli import main
from engine.core.errors import UserError
from engine.present.generation_text import GLOSSARY, contest_sentences, glossary_text
from engine.scenarios import SCENARIOS
from engine.scenarios.generation.agreement import agreement_share, threshold
from engine.scenarios.generation.messages import GenResult
from engine.scenarios.generation.metrics import rep_figures, run_figures
from engine.scenarios.generation.spec import GenSpec, expand_generation
from engine.scenarios.generation.table import kind_rows
from engine.worker.errors import OutputMismatch
from engine.worker.generation.agree import check_agreement

BF16 = ("avx512_bf16",)


def _spec(**kw):
    base = dict(model="tiny_llama", framework="torch", runtime="eager", batch_size=1,
                prompt_len=16, output_len=8, intra_threads=1)
    return GenSpec(**{**base, **kw})


@pytest.mark.parametrize("kw, field, says", [
    ({"batch_size": 65}, "batch_size", "allowed: integer 1..64"),
    ({"batch_size": 0}, "batch_size", "allowed: integer 1..64"),
    ({"output_len": 1}, "output_len", "allowed: integer 2..511"),
    ({"prompt_len": 0}, "prompt_len", "allowed: integer 1..510"),
    ({"prompt_len": 500, "output_len": 20}, "output_len",
     "prompt_len + output_len = 520 exceeds tiny_llama's 512 positions; allowed: output_len "
     "2..12 at prompt_len 500"),
    ({"model": "gpt5"}, "model", "allowed: gpt2, smollm2_135m"),
    ({"runtime": "vllm"}, "runtime", "allowed: eager, compile, keras_hub"),
    ({"runtime": "keras_hub"}, "framework", "allowed: tensorflow"),
    ({"runtime": "onnxruntime_genai", "precision": "bf16"}, "precision",
     "no bfloat16 kernel for the model builder's bf16 model"),
    ({"precision": "int4"}, "precision", "allowed: fp32, bf16"),
    ({"precision": "fp8"}, "precision", "allowed: fp32, bf16, int8, int4"),
    ({"device": "cuda"}, "device", "allowed: cpu"),
])
def test_a_bad_field_is_refused_naming_it_and_its_range(kw, field, says):
    with pytest.raises(UserError, match=None) as err:
        _spec(**kw).validate(cores=4)
    assert err.value.field == field
    assert says in str(err.value)


def test_a_spec_round_trips_and_keys_every_dimension():
    s = _spec(runtime="compile", batch_size=2, prompt_len=32).validate(cores=4)
    assert SCENARIOS["generate"].spec_from_dict(s.to_dict()) == s
    assert s.key() == ("tiny_llama", "torch", "compile", 2, 32, 8, 1, 1, "fp32", "cpu", 0, ())
    # 2 layers x keys and values x 2 KV heads x 16 dims x 4 bytes, x batch 2 x (32 + 8)
    assert s.kv_cache_bytes == 2 * 2 * 2 * 16 * 4 * 2 * 40 == 40_960


def test_a_sweep_expands_every_combination_grouped_by_framework():
    specs, skipped = expand_generation(
        ["tiny_llama", "tiny_gpt2"], ["eager", "keras_hub", "compile"], [16, 32], [8],
        [1, 2], [1, 2], ["fp32", "bf16"], flags=BF16, cores=4)
    assert len(specs) == 2 * 3 * 2 * 1 * 2 * 2 * 2 == 96 and skipped == []
    assert [s.framework for s in specs] == ["torch"] * 64 + ["tensorflow"] * 32
    assert len({s.key() for s in specs}) == 96
    # the same sweep on a CPU without bf16 instructions: bf16 skipped with the reason
    specs, skipped = expand_generation(["tiny_llama"], ["eager", "onnxruntime_genai"], [16],
                                       [8], [1], [1], ["fp32", "bf16"], flags=(), cores=4)
    assert [(s.runtime, s.precision) for s in specs] == [("eager", "fp32"),
                                                        ("onnxruntime_genai", "fp32")]
    assert skipped == [
        "eager bf16: this CPU has neither avx512_bf16 nor amx_bf16: bf16 would be emulated "
        "in fp32 instructions, slower than fp32",
        "onnxruntime_genai bf16: ONNX Runtime 1.31's CPU execution provider has no bfloat16 "
        "kernel for the model builder's bf16 model (measured: \"Could not find an "
        "implementation for Where(16) node with name '/model/attn_mask_reformat/"
        "input_ids_subgraph/Where_2'\")"]
    with pytest.raises(UserError, match="nothing of this sweep runs here") as err:
        expand_generation(["tiny_llama"], ["eager"], [16], [8], [1], [1], ["int8"], cores=4)
    assert err.value.field == "precision"
    with pytest.raises(UserError, match="pick at least one value"):
        expand_generation(["tiny_llama"], ["eager"], [], [8], [1], [1], cores=4)


def test_keras_hub_runs_keras_weight_only_int8_and_int4_and_torch_still_refuses_them():
    specs, skipped = expand_generation(["tiny_llama"], ["eager", "keras_hub"], [16], [8], [1],
                                       [1], ["int8", "int4"], cores=4)
    assert [(s.framework, s.runtime, s.precision) for s in specs] == [
        ("tensorflow", "keras_hub", "int8"), ("tensorflow", "keras_hub", "int4")]
    assert skipped == [f"eager {p}: Hugging Face generate in torch has no weight-only "
                       "int8/int4 path in this project (torchao is not installed)"
                       for p in ("int8", "int4")]


def test_figures_derive_from_fixed_readings_exactly():
    # batch 2, prompt 16, 4 tokens: readings at 10, 14, 19, 25 ms; the call returns at 26 ms
    ms = 1_000_000
    rep = rep_figures((10 * ms, 14 * ms, 19 * ms, 25 * ms), 26 * ms, batch=2, prompt_len=16,
                      output_len=4)
    assert rep.ttft_ns == 10 * ms and rep.e2e_ns == 26 * ms
    assert rep.tpot_ns == 16 * ms / 3  # (E2E - TTFT) / (N - 1), vLLM's
    assert rep.itl_ns == (4 * ms, 5 * ms, 6 * ms)
    assert rep.prefill_tok_s == 2 * 16 / 0.010 == 3200.0
    assert rep.decode_tok_s == 2 * 3 / 0.016 == 375.0
    assert rep.output_tok_s == 2 * 4 / 0.026
    # a one-call runtime: no readings, its separately measured TTFT, no ITL
    one = rep_figures((), 30 * ms, batch=1, prompt_len=8, output_len=4, ttft_ns=6 * ms)
    assert (one.ttft_ns, one.tpot_ns, one.itl_ns) == (6 * ms, 8 * ms, ())
    second = rep_figures((12 * ms, 15 * ms, 21 * ms, 27 * ms), 28 * ms, batch=2,
                         prompt_len=16, output_len=4)
    f = run_figures([rep, second])
    assert f["ttft_p50_ms"] == 11.0 and f["ttft_p90_ms"] == pytest.approx(11.8)
    assert f["tpot_p50_ms"] == pytest.approx(16 / 3)  # both calls: 16 ms over 3 gaps
    # ITL pooled over both calls: 4, 5, 6, 3, 6, 6 ms
    assert f["itl_p50_ms"] == 5.5 and f["itl_p99_ms"] == pytest.approx(6.0)
    assert f["e2e_p50_ms"] == 27.0
    assert f["output_tok_s"] == pytest.approx((8 / 0.026 + 8 / 0.028) / 2)


def test_a_run_keeps_every_reading_and_its_figures_in_its_own_tables():
    ms = 1_000_000
    res = GenResult("r1", load_s=1.0, first_forward_s=0.1, warmup_ns=(40 * ms,),
                    samples_ns=(26 * ms, 28 * ms), warmup_s=0.04, measured_s=0.054,
                    stop_reason="policy met", batch_size=2, prompt_len=16, output_len=4,
                    token_ns=(10 * ms, 14 * ms, 19 * ms, 25 * ms,  # two calls of 4 tokens
                              12 * ms, 15 * ms, 21 * ms, 27 * ms),
                    timing_source="streamer", agreement=1.0, agreement_tokens=8,
                    agreement_reference="ref", build_s=2.5, kv_cache_bytes=40_960)
    rows = kind_rows(res)
    run = rows["generation_runs"][0]
    assert (run["reps"], run["ttft_p50_ms"], run["e2e_p50_ms"], run["per_token"]) == \
        (2, 11.0, 27.0, True)
    assert [(t["rep"], t["step"], t["t_ns"]) for t in rows["generation_tokens"]][:5] == [
        (0, 0, 10 * ms), (0, 1, 14 * ms), (0, 2, 19 * ms), (0, 3, 25 * ms), (1, 0, 12 * ms)]
    # the throughput hook: output tokens over every timed call
    spec = _spec(batch_size=2, output_len=4)
    assert SCENARIOS["generate"].throughput(spec, res, res.samples_ns) == 16 / 0.054


def test_agreement_is_the_share_of_equal_positions_over_the_first_32_tokens():
    ref = np.arange(80).reshape(2, 40)
    tokens = ref.copy()
    tokens[0, 10:] = 0  # row 0 follows the reference for 10 of its first 32 tokens
    assert agreement_share(tokens, ref) == (42 / 64, 64)
    assert agreement_share(tokens[:, :8], ref) == (1.0, 16)  # N = 8: 8 positions a row
    assert threshold("fp32") == 0.9 and threshold("bf16") == 0.0
    with pytest.raises(OutputMismatch, match="65.6% of 64 positions .* under the 90% "
                                             "threshold for fp32"):
        check_agreement(tokens, ref, "fp32")
    assert check_agreement(tokens, ref, "bf16") == (42 / 64, 64)


def _round_rows():
    rows = []
    for rt, tpot, ttft, tok in (("eager", (10.0, 10.4, 9.8), (20.0, 21.0, 19.0),
                                 (100.0, 96.0, 102.0)),
                                ("compile", (5.0, 5.1, 5.0), (19.8, 21.2, 19.1),
                                 (180.0, 178.0, 185.0))):
        for i in range(3):
            rows.append(dict(run_id=f"{rt}{i}", round_no=i + 1, model="tiny_llama",
                             framework="torch", runtime=rt, precision="fp32", device="cpu",
                             batch_size=1, intra_threads=1, inter_threads=1, prompt_len=16,
                             output_len=8, status="ok", validity="valid", tpot_p50_ms=tpot[i],
                             ttft_p50_ms=ttft[i], output_tok_s=tok[i], system_id="s"))
    return rows


def test_each_metric_is_a_contest_under_the_sequential_rule():
    rule, contests = judge_generation(_round_rows())
    assert (rule.plan.first, rule.plan.last, rule.margin) == (3, 6, 0.02)
    by = {mc.metric.name: mc for mc in contests}
    assert contest_sentences(by["TPOT"]) == [
        "torch (compile) has 2.00x lower TPOT than torch (eager) (95 % sequential interval "
        "1.88-2.13, 3 rounds)"]
    assert contest_sentences(by["output tokens/s"]) == [
        "torch (compile) has 1.82x higher output tokens/s than torch (eager) (95 % "
        "sequential interval 1.73-1.91, 3 rounds)"]
    assert round(by["output tokens/s"].value("torch (compile)"), 2) == 180.98
    ttft = contest_sentences(by["TTFT"])[0]
    assert ttft.startswith("TTFT: no decision between torch (eager) and torch (compile)")
    assert "95 % sequential interval 0.97-1.04 over 3 rounds" in ttft
    # a run that failed in a round is a failure of every metric's contest, not a figure
    rows = _round_rows()
    rows[3] = {**rows[3], "status": "invalid", "tpot_p50_ms": None}
    _, contests = judge_generation(rows)
    tpot = next(mc for mc in contests if mc.metric.name == "TPOT")
    assert tpot.contest.cells["torch (compile)"].failed == ("invalid",)


def test_the_glossary_names_every_tool_for_every_figure():
    tools = {"vLLM bench serve", "AIPerf", "guidellm", "optimum-benchmark",
             "OpenVINO GenAI PerfMetrics"}
    assert all(set(v) == tools for v in GLOSSARY.values())
    assert GLOSSARY["TPOT"]["AIPerf"].startswith("inter token latency (ITL): its ITL is our")
    assert "counts the first token" in GLOSSARY["TPOT"]["guidellm"]
    assert glossary_text().splitlines()[0].startswith("ours")


def test_the_command_refuses_bad_input_naming_the_field(capsys, tmp_path):
    db = str(tmp_path / "g.duckdb")
    assert main(["generate", "--models", "tiny_llama", "--prompt-lens", "500",
                 "--output-lens", "20", "--db", db]) == 2
    assert "error: output_len: prompt_len + output_len = 520 exceeds" in capsys.readouterr().err
    with pytest.raises(SystemExit) as out:
        main(["generate", "--models", "tiny_llama", "--prompt-lens", "16", "--output-lens",
              "8", "--batches", "1,65", "--db", db])
    assert out.value.code == 2
    assert "batch_size: 65 is out of range; allowed: integer 1..64" in capsys.readouterr().err
    assert not (tmp_path / "g.duckdb").exists()  # refused before anything was stored


# ------------------------------------------------- one real sweep, eager and compile

@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory):
    """tiny_llama, prompt 16, output 8, batch 2 (two rows: a batch's readings and its
    agreement over both), torch eager and compile, one round of 3 calls each, in one worker:
    each compiled shape costs ~20-40 s on a 2-core machine, so one shape and one round (a
    second would compile it again in its fresh worker)."""
    from store.db import open_db
    from store.generation import generation_contests, generation_runs, token_timeline

    tmp = tmp_path_factory.mktemp("gen")
    db = str(tmp / "g.duckdb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCH_MODEL_DIR", str(tmp / "models"))
        code = main(["generate", "--models", "tiny_llama", "--runtimes", "eager,compile",
                     "--prompt-lens", "16", "--output-lens", "8", "--batches", "2",
                     "--threads", "1", "--rounds", "1", "--warmup", "1", "--min-reps", "3",
                     "--min-time", "0", "--db", db])
    with open_db(db) as con:
        df = generation_runs(con)
        timelines = {r: token_timeline(con, r) for r in df["run_id"]}
        contests = generation_contests(con, str(df["sweep_id"].iloc[0]))
    return code, df, timelines, contests


@pytest.mark.slow
def test_a_real_sweep_stores_every_run_its_readings_and_its_contests(real_sweep):
    code, df, timelines, (rule, contests) = real_sweep
    assert code == 0
    assert len(df) == 2 and set(df["status"]) == {"ok"}
    assert sorted(df.groupby("runtime").size().items()) == [("compile", 1), ("eager", 1)]
    assert set(df["agreement"]) == {1.0}  # fp32: the reference's own tokens
    assert set(df["agreement_tokens"]) == {16}  # 2 rows x 8 tokens
    assert set(df["reps"]) == {3} and df["per_token"].all()
    for r in df.itertuples():
        t = timelines[r.run_id]
        assert len(t) == 3 * 8 and set(t["reading"]) == {"token"}  # a step stamps the batch
        assert t.groupby("rep")["t_ns"].is_monotonic_increasing.all()
        assert r.ttft_p50_ms > 0 and r.tpot_p50_ms > 0 and r.output_tok_s > 0
        # the stored KV cache estimate: 512 bytes a token x batch x (16 + 8)
        assert r.kv_cache_bytes == 512 * r.batch_size * 24
    assert (df[df.runtime == "compile"]["build_s"] > df[df.runtime == "eager"]["build_s"]
            .max()).all()  # compile time is build time, kept apart
    assert sorted((mc.metric.name, mc.batch_size) for mc in contests) == [
        ("TPOT", 2), ("TTFT", 2), ("output tokens/s", 2)]
    for mc in contests:  # one round: each gap as measured, no interval yet
        (cmp,) = mc.contest.comparisons.values()
        assert cmp.state == "single round" and cmp.rounds == 1
        assert "from a single round; no interval (run at least 2 rounds)" in \
            contest_sentences(mc)[0]


def test_the_seeded_sweep_reads_back_with_its_figures_failures_and_contests(tmp_path):
    """seeds.records.seed_generation: what the dashboard's pages are built against."""
    from seeds.records import seed_generation
    from store.db import open_db
    from store.generation import generation_contests, generation_runs, token_timeline

    db = tmp_path / "seed.duckdb"
    seed_generation(db)
    with open_db(db) as con:
        df = generation_runs(con, "sweep-generate")
        t = token_timeline(con, "g-eager-128-1-1")
        _, contests = generation_contests(con, "sweep-generate")
    assert len(df) == 26 and df.groupby("status").size().to_dict() == {
        "error": 1, "invalid": 1, "ok": 24}
    r = df[df.run_id == "g-eager-128-1-1"].iloc[0]
    # TTFT 0.1 ms x 128 tokens x 1.01 (the middle call); TPOT 20.2 ms + 0.2 ms / 31
    assert (r.ttft_p50_ms, r.reps, r.prompt_len) == (12.928, 3, 128)
    assert r.tpot_p50_ms == pytest.approx(20.2 + 0.2 / 31)
    assert len(t) == 96 and t["gap_ns"].iloc[1] == 20_000_000 and pd_isna(t["gap_ns"].iloc[0])
    tpot = next(mc for mc in contests if mc.metric.name == "TPOT" and mc.prompt_len == 128
                and mc.batch_size == 1)
    assert contest_sentences(tpot) == [
        "torch (openvino_genai) has 2.52x lower TPOT than torch (eager) (97.5 % sequential "
        "interval 1.45-4.40, 2 rounds)",
        "TPOT: no decision between torch (openvino_genai) and torch (compile): torch "
        "(openvino_genai) measured 1.54x faster than torch (compile), 95 % sequential "
        "interval 0.77-3.05 over 2 rounds; 2 rounds give a very wide interval: 3 or more "
        "narrow it; at this spread (±3.5 % per round) a sweep of up to 4 rounds would decide "
        "it with 80 % probability (--max-rounds 4; the Run page's Max rounds)"]


def pd_isna(v) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


def test_compare_prints_a_generation_sweeps_figures_and_contests(tmp_path, capsys):
    """`compare` on a generation sweep delegates to the generation command's output (it
    used to refuse it as not an inference sweep); another kind is still refused."""
    from seeds.records import seed_generation, seed_workloads

    db = tmp_path / "seed.duckdb"
    seed_generation(db)
    assert main(["compare", "sweep-gen", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "generation sweep sweep-generate: 26 runs" in out
    assert ("smollm2_135m prompt 512 output 32 b4 t2: torch (openvino_genai) has 2.40x higher "
            "output tokens/s than torch (eager) (97.5 % sequential interval 1.38-4.19, 2 "
            "rounds)") in out
    assert "contests per metric (2-6 rounds, margin ±2 %)" in out
    seed_workloads(db)
    assert main(["compare", "sweep-train", "--db", str(db)]) == 2
    assert "allowed: an inference or generate sweep" in capsys.readouterr().err


def test_energy_is_joules_per_1k_output_tokens_or_the_stored_reason(tmp_path):
    """An energy loop's reading per output token: stored as J per 1 K output tokens where
    a counter moved, as the reason where none exists (no RAPL here)."""
    from dataclasses import asdict, replace

    from engine.core import MeasurementPolicy
    from engine.scenarios.generation.hooks import GENERATION, energy_text
    from engine.worker.energy import energy_loop, measure_energy
    from seeds.records import SYSTEM, gen_record
    from store.db import open_db
    from store.generation import generation_runs
    from store.runs import save_record

    class Meter:  # 2 J a read, read after every call (the fake clock moves 1 s a read)
        source, counters = "measured (RAPL)", ("package-0 (intel-rapl:0)",)

        def __init__(self):
            self.n = 0

        def read(self):
            self.n += 1
            return (self.n,)

        def joules(self, before, after):
            return 2.0 * (after[0] - before[0])

    ticks = iter(range(100))
    calls = []
    # batch 4 x 32 output tokens a call: 128 tokens a call, 3 calls in a 3 s loop
    reading = energy_loop(lambda: calls.append(1), Meter(), 3.0, 4 * 32,
                          clock=lambda: float(next(ticks)))
    assert (len(calls), reading.samples, reading.j_per_sample) == (3, 384, 6.0 / 384)
    spec = _spec(policy=MeasurementPolicy(min_time_s=0.0, min_iters=3, energy_s=1.0))
    missing = measure_energy(lambda: None, spec, root=str(tmp_path / "none"), per_call=8)
    assert missing.source is None and missing.absent.startswith(
        "no RAPL on this machine: ") and missing.absent.endswith(
        "is absent (most cloud VMs expose no power counters)")

    rec = gen_record("g-energy", "eager", 128, 4, 1)
    db = tmp_path / "e.duckdb"
    with open_db(db) as con:
        for rid, energy in (("g-measured", reading), ("g-absent", missing)):
            rows = GENERATION.result_columns(replace(_result_of(rec), run_id=rid,
                                                     energy=asdict(energy)))
            save_record(con, replace(rec, run_id=rid, kind_rows=rows["kind_rows"]), SYSTEM)
        df = generation_runs(con).set_index("run_id")
    m, a = df.loc["g-measured"], df.loc["g-absent"]
    assert m.energy_j_per_1k_tokens == pytest.approx(1000 * 6.0 / 384)  # 15.625 J
    assert (m.energy_source, m.energy_tokens, m.energy_counters) == (
        "measured (RAPL)", 384, "package-0 (intel-rapl:0)")
    assert pd_isna(a.energy_j_per_1k_tokens) and a.energy_absent == missing.absent
    assert energy_text(m.energy_source, m.energy_absent, m.energy_j_per_1k_tokens) == \
        "15.62 J per 1 K output tokens, measured (RAPL)"
    assert energy_text(None, a.energy_absent, None) == f"energy absent: {missing.absent}"


def _result_of(rec):
    """The GenResult a stored-looking record was made from, rebuilt from its readings."""
    from engine.scenarios.generation.messages import GenResult

    runs = rec.kind_rows["generation_runs"][0]
    tokens = tuple(t["t_ns"] for t in rec.kind_rows["generation_tokens"])
    return GenResult(rec.run_id, load_s=1.0, first_forward_s=0.1, warmup_s=0.1,
                     samples_ns=tuple(rec.samples_ns), warmup_ns=(), measured_s=1.0,
                     stop_reason="policy met", batch_size=rec.batch_size,
                     prompt_len=runs["prompt_len"], output_len=runs["output_len"],
                     token_ns=tokens, agreement=1.0, agreement_tokens=128)


def test_a_database_made_before_the_energy_columns_gains_them_on_open(tmp_path):
    """generation_runs as the first release of the kind made it (no energy columns): the
    registry's create_kind_tables adds the declared columns, nullable, to rows kept."""
    from seeds.records import SYSTEM, gen_record
    from store.db import open_db
    from store.generation import generation_runs
    from store.runs import save_record

    db = tmp_path / "old.duckdb"
    energy = ("energy_source", "energy_absent", "energy_j_per_1k_tokens", "energy_loop_s",
              "energy_tokens", "energy_counters")
    with open_db(db) as con:
        save_record(con, gen_record("g-old", "eager", 128, 1, 1), SYSTEM)
        for c in energy:
            con.execute(f"ALTER TABLE generation_runs DROP COLUMN {c}")
    with open_db(db) as con:
        cols = [r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'generation_runs' ORDER BY ordinal_position").fetchall()]
        df = generation_runs(con)
    assert tuple(cols[-6:]) == energy
    assert list(df["run_id"]) == ["g-old"] and df["energy_absent"].isna().all()
