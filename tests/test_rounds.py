"""Rounds until decided: which round runs next, and the budget's refusals (fixed records, an
injected elapsed time; nothing is timed)."""

from dataclasses import replace
from datetime import timedelta

import pytest

from engine.cli import main
from engine.run.jobs.sweep import config_key, next_round
from engine.core.budget import RoundBudget, default_max_rounds, round_floor_s
from engine.core.errors import UserError
from seeds.records import ok_record, spec

EAGER, SCRIPT = spec(runtime="eager"), spec(runtime="torchscript")


def rec(s, round_no, ms, took_s=10.0, minute=None):
    # one after another by default: eager in the round's first minute, torchscript in the next
    minute = (2 * round_no + (s.runtime != "eager")) if minute is None else minute
    r = ok_record(f"{s.runtime}-{round_no}", samples=(int(ms * 1e6),) * 3, runtime=s.runtime,
                  minute=minute)
    return replace(r, round_no=round_no, ended_at=r.started_at + timedelta(seconds=took_s))


def rounds_of(pairs):
    return [rec(EAGER, i, a) for i, (a, _) in enumerate(pairs, 1)] + \
        [rec(SCRIPT, i, b) for i, (_, b) in enumerate(pairs, 1)]


def test_the_minimum_rounds_always_run_every_configuration():
    budget = RoundBudget(3, 6)
    step, why = next_round([], [EAGER, SCRIPT], budget, 0, 0.0, seed=1)
    assert (step.round_no, step.why, why) == (1, "minimum", "")
    assert [s.runtime for s in step.specs] == ["eager", "torchscript"]
    step, _ = next_round(rounds_of([(10, 20)]), [EAGER, SCRIPT], budget, 1, 5.0, seed=1)
    assert step.round_no == 2 and [s.runtime for s in step.specs] == ["torchscript", "eager"]


def test_a_decided_contest_stops_and_an_undecided_one_gets_another_round():
    specs = [EAGER, SCRIPT]
    clear = rounds_of([(10, 20), (10.2, 20.4), (10.1, 19.8)])
    assert next_round(clear, specs, RoundBudget(3, 6), 3, 60.0, seed=1) == (
        None, "every contest decided after 3 rounds")
    tie = rounds_of([(10, 10.5), (10.4, 10.0), (10.1, 10.2)])
    step, _ = next_round(tie, specs, RoundBudget(3, 6), 3, 60.0, seed=1)
    assert step.round_no == 4 and step.why == "2 undecided configurations"
    assert {config_key(s) for s in step.specs} == {config_key(EAGER), config_key(SCRIPT)}
    assert next_round(tie, specs, RoundBudget(3, 3), 3, 60.0, seed=1) == (
        None, "max_rounds (3) reached with 2 configurations undecided")


def test_a_fleet_contest_between_machines_runs_its_configuration_again_on_each():
    """Two node kinds measured one spec; their contest is undecided, so the next round
    runs that spec (the fleet runs it on every node): the machine suffix of the contender
    ("@c6i.4xlarge") is not part of the spec's key."""
    tie = [replace(rec(EAGER, i, ms), run_id=f"{shape}-{i}", machine_shape=shape)
           for i, (a, b) in enumerate([(10, 10.5), (10.4, 10.0), (10.1, 10.2)], 1)
           for shape, ms in (("c6i.4xlarge", a), ("m6i.4xlarge", b))]
    step, why = next_round(tie, [EAGER], RoundBudget(3, 6), 3, 60.0, seed=1)
    assert (step.round_no, step.why, why) == (4, "1 undecided configurations", "")
    assert [config_key(s) for s in step.specs] == [config_key(EAGER)]


def test_only_the_undecided_configurations_run_again():
    b8 = [spec(runtime="eager", batch_size=8), spec(runtime="torchscript", batch_size=8)]
    records = rounds_of([(10, 20), (10.2, 20.4), (10.1, 19.8)])  # batch 1: decided
    for i, (a, b) in enumerate([(30, 31), (31, 30), (30.5, 30.4)], 1):  # batch 8: a tie
        records += [replace(rec(s, i, ms), batch_size=8, run_id=f"{s.runtime}-8-{i}")
                    for s, ms in zip(b8, (a, b))]
    step, _ = next_round(records, [EAGER, SCRIPT, *b8], RoundBudget(3, 6), 3, 0.0, seed=1)
    assert sorted(s.batch_size for s in step.specs) == [8, 8]


def test_the_time_budget_stops_a_round_that_would_not_fit():
    tie = rounds_of([(10, 10.5), (10.4, 10.0), (10.1, 10.2)])  # each run took 10 s
    # another round: two runs of 10 s plus one torch start (1 s) = 21 s
    step, why = next_round(tie, [EAGER, SCRIPT], RoundBudget(3, 6, 200.0), 3, 180.0, seed=1)
    assert step is None and why == ("time budget (200 s) would be exceeded: 180 s spent, "
                                    "another round takes about 21 s")
    step, _ = next_round(tie, [EAGER, SCRIPT], RoundBudget(3, 6, 200.0), 3, 170.0, seed=1)
    assert step.round_no == 4
    # interleaved, the two runs of a round overlap: their time counts once (10 s + 1 s)
    together = [replace(r, started_at=r.started_at.replace(minute=0),
                        ended_at=r.started_at.replace(minute=0) + timedelta(seconds=10))
                for r in tie]
    step, why = next_round(together, [EAGER, SCRIPT], RoundBudget(3, 6, 200.0), 3, 185.0,
                           seed=1)
    assert step.round_no == 4 and why == ""


def test_round_budget_refusals_name_the_field_and_the_range():
    specs = [EAGER, SCRIPT]
    assert round_floor_s(specs) == 1.0  # one torch worker, min_time 0 in these specs
    with pytest.raises(UserError) as e:
        RoundBudget(4, 3).validate(specs)
    assert (e.value.field, str(e.value)) == (
        "max_rounds", "max_rounds: 3 is out of range; allowed: integer 4..100 (at least "
                      "rounds, 4)")
    for bad in (0.0, -5.0):
        with pytest.raises(UserError) as e:
            RoundBudget(3, 6, bad).validate(specs)
        assert e.value.field == "time_budget_s"
    timed = [replace(s, policy=replace(s.policy, min_time_s=2.0)) for s in specs]
    assert round_floor_s(timed) == 5.0  # and 2 s of timing per run
    with pytest.raises(UserError) as e:
        RoundBudget(3, 6, 4.5).validate(timed)
    assert str(e.value).startswith("time_budget_s: 4.5 s is too small for one round")
    assert RoundBudget(3, 6, 5.0).validate(timed).time_budget_s == 5.0
    assert [default_max_rounds(r) for r in (1, 2, 3, 8)] == [1, 6, 6, 8]


@pytest.mark.parametrize("argv, field", [
    (["--rounds", "4", "--max-rounds", "3"], "max_rounds: 3 is out of range"),
    (["--time-budget", "0"], "time_budget_s: 0.0 is out of range"),
    (["--time-budget", "-1"], "time_budget_s: -1.0 is out of range"),
    # one run of at least 2 s (the default min_time) after a torch start of 1 s
    (["--time-budget", "2.5"], "time_budget_s: 2.5 s is too small for one round"),
])
def test_the_cli_refuses_a_bad_budget_before_anything_runs(db_path, capsys, argv, field):
    rc = main(["run", "--model", "resnet18", "--framework", "torch", "--db", str(db_path),
               *argv])
    assert rc == 2 and capsys.readouterr().err.startswith(f"error: {field}")
    assert not db_path.exists()  # nothing ran, nothing was stored


def test_an_aa_test_runs_a_copy_in_its_own_worker_and_extends_only_while_undecided(
        db_path, worker_env, capsys):
    from store.db import open_db
    rc = main(["run", "--model", "identity", "--framework", "selftest", "--aa-test",
               "--rounds", "2", "--max-rounds", "3", "--min-time", "0.05", "--min-iters", "5",
               "--warmup", "2", "--seed", "5", "--db", str(db_path)])
    out = capsys.readouterr().out
    assert rc == 0
    with open_db(db_path) as con:
        [(rounds,)] = con.execute("SELECT rounds FROM sweeps").fetchall()
        per_round = con.execute(
            "SELECT round_no, list(coalesce(extra->>'$.replica', '0')) FROM runs "
            "GROUP BY round_no ORDER BY round_no").fetchall()
    # two contenders (the configuration and its copy) in every round, each a stored run
    assert all(sorted(replicas) == ["0", "1"] for _, replicas in per_round), per_round
    assert "selftest (python) #2" in out
    # a third round only if two rounds left the tie undecided; the sweep row says which
    assert rounds == len(per_round) and rounds in (2, 3)
    assert ("round 3: shuffled order, 2 undecided configurations" in out) == (rounds == 3)


def test_the_plan_names_every_kind_of_spec_and_only_inference_has_replicas():
    """A data-loading or training sweep goes through the same driver: its plan labels must
    not ask for an inference-only field (a data-loading job once failed on `replica`)."""
    from engine.run.jobs.sweep import plan_labels
    from engine.scenarios.dataload.spec import LoadSpec
    from engine.scenarios.training.spec import TrainSpec

    load = LoadSpec("png", "pillow", "numpy", "loop", 8)
    train = TrainSpec("resnet18", "torch", 32, 1)
    assert plan_labels([[load, train, EAGER, replace(EAGER, replica=1)]]) == [[
        "png/numpy/loop:pillow+numpy/b8/t1/i1/256px",
        "resnet18/torch/None/b32/t1/i1/Nonepx",
        "resnet18/torch/eager/b1/t1/i1/64px", "resnet18/torch/eager/b1/t1/i1/64px/#2"]]
    # a generation spec is told apart by its prompt and output lengths, not an image size
    from engine.scenarios.generation.spec import GenSpec
    gens = [GenSpec("tiny_llama", "torch", "eager", 2, p, 8, 1) for p in (16, 64)]
    assert plan_labels([gens]) == [["tiny_llama/torch/eager/b2/t1/i1/p16/o8",
                                    "tiny_llama/torch/eager/b2/t1/i1/p64/o8"]]


# ------------------------------------------ generation: a contest per metric and prompt

def gen_spec(runtime, prompt_len):
    from engine.core import MeasurementPolicy
    from engine.scenarios.generation.spec import GenSpec

    policy = MeasurementPolicy(warmup_iters=1, min_time_s=0.0, min_iters=3)
    return GenSpec("tiny_llama", "torch", runtime, 1, prompt_len, 8, 1,
                   policy=policy).validate(cores=64)


def gen_rec(s, round_no, ttft_ms, tpot_ms, minute=0):
    """A generation run of 3 identical calls: its first token at ttft_ms, then one every
    tpot_ms, the call ending 0.1 ms after its last token (figures derived by the engine)."""
    from engine.run.process.records import config_extra, record_from_result
    from engine.scenarios import GENERATION
    from engine.scenarios.generation.messages import GenResult
    from seeds.records import base_fields

    ttft, step = int(ttft_ms * 1e6), int(tpot_ms * 1e6)
    call = tuple(ttft + k * step for k in range(s.output_len))
    rid = f"{s.runtime}-p{s.prompt_len}-{round_no}"
    res = GenResult(rid, load_s=0.5, first_forward_s=0.01, warmup_s=0.01,
                    samples_ns=(call[-1] + 100_000,) * 3, warmup_ns=(call[-1],),
                    measured_s=0.1, stop_reason="policy met", batch_size=1,
                    prompt_len=s.prompt_len, output_len=s.output_len, token_ns=call * 3,
                    agreement=1.0, agreement_tokens=8)
    base = {**base_fields(s, rid, minute), "kind": GENERATION.kind, "extra": config_extra(s),
            "round_no": round_no}
    return record_from_result(base, res, s)


# prompt 16: compile clearly faster at both figures, every round alike (decided after 3);
# prompt 64: compile's TTFT clearly lower, its TPOT a tie within noise (undecided)
GEN_ROUNDS = {16: [((2.0, 10.0), (1.0, 5.0)), ((2.04, 10.2), (1.01, 5.05)),
                   ((2.02, 10.1), (1.0, 5.02))],
              64: [((8.0, 10.0), (4.0, 10.5)), ((8.1, 10.4), (4.05, 10.0)),
                   ((8.05, 10.1), (4.0, 10.2))]}


def gen_records(rounds=3, prompts=(16, 64)):
    out = []
    for p in prompts:
        for rnd, pair in enumerate(GEN_ROUNDS[p][:rounds], 1):
            for runtime, (ttft, tpot) in zip(("eager", "compile"), pair):
                out.append(gen_rec(gen_spec(runtime, p), rnd, ttft, tpot))
    return out


GEN_SPECS = [gen_spec(r, p) for p in (16, 64) for r in ("eager", "compile")]


def test_a_generation_contest_still_undecided_gets_another_round_and_decided_ones_do_not():
    from engine.analysis.sequential import VerdictRule
    from engine.run.jobs.sweep import judged

    records = gen_records()
    rows = judged(records, GEN_SPECS, VerdictRule.of(3, 6, 0.02))
    # a contest per metric per prompt length, each of eager and compile only: prompt
    # lengths are never one contest's contenders
    assert sorted((c.row[0], len(c.cells)) for c in rows) == sorted(
        [("tiny_llama · prompt 16 · output 8", 2)] * 3
        + [("tiny_llama · prompt 64 · output 8", 2)] * 3)
    # the families in METRICS' order, each its prompt lengths in the order they ran
    states = {(c.row[0].split(" · ")[1], m): next(iter(c.comparisons.values())).state
              for c, m in zip(rows, ["TTFT", "TTFT", "TPOT", "TPOT", "tok/s", "tok/s"])}
    assert states == {("prompt 16", "TTFT"): "winner", ("prompt 16", "TPOT"): "winner",
                      ("prompt 16", "tok/s"): "winner", ("prompt 64", "TTFT"): "winner",
                      ("prompt 64", "TPOT"): "undecided", ("prompt 64", "tok/s"): "undecided"}
    step, why = next_round(records, GEN_SPECS, RoundBudget(3, 6), 3, 60.0, seed=1)
    assert (step.round_no, step.why, why) == (4, "2 undecided configurations", "")
    assert sorted((s.runtime, s.prompt_len) for s in step.specs) == [("compile", 64),
                                                                    ("eager", 64)]
    # at max_rounds: TPOT and tokens/s undecided for the same two configurations, counted once
    assert next_round(records, GEN_SPECS, RoundBudget(3, 3), 3, 60.0, seed=1) == (
        None, "max_rounds (3) reached with 2 configurations undecided")
    # prompt 16 alone: every metric decided, no further round
    only16 = [s for s in GEN_SPECS if s.prompt_len == 16]
    assert next_round(gen_records(prompts=(16,)), only16, RoundBudget(3, 6), 3, 60.0,
                      seed=1) == (None, "every contest decided after 3 rounds")


def test_configurations_differing_only_in_prompt_length_are_separate_contests():
    a, b = gen_spec("eager", 16), gen_spec("eager", 64)
    assert config_key(a) == ("tiny_llama · prompt 16 · output 8", None, 1, 1, "none",
                             "torch (eager)")
    assert config_key(b) != config_key(a)
    # a record keys as the spec it ran: prompt and output length read from what it was asked
    assert config_key(gen_rec(b, 1, 8.0, 10.0)) == config_key(b)
    bf16 = replace(a, precision="bf16")
    assert config_key(bf16)[-1] == "torch (eager) bf16"  # precision: a contender of its own


class FakeRunner:
    """Returns the fixed records of GEN_ROUNDS for the specs it is handed, round by round
    (round 4 onwards repeats round 3's figures), storing each as a real runner does."""

    def __init__(self):
        import threading

        self.cancel = threading.Event()
        self.asked: list[list[tuple]] = []

    def run(self, specs, *, on_record, sweep_id, round_no, on_event, known_stats):
        self.asked.append([(s.runtime, s.prompt_len) for s in specs])
        out = []
        for s in specs:
            pair = GEN_ROUNDS[s.prompt_len][min(round_no, 3) - 1]
            ttft, tpot = pair[s.runtime == "compile"]
            r = replace(gen_rec(s, round_no, ttft, tpot, minute=round_no),
                        sweep_id=sweep_id)
            on_record(r)
            out.append(r)
        return out


def test_a_generation_sweep_runs_rounds_until_decided_and_its_verdicts_say_how_many(
        db_path, capsys):
    from engine.run.jobs.sweep import run_sweep
    from store.db import open_db
    from store.generation import generation_contests

    runner, stops = FakeRunner(), []
    records = run_sweep(GEN_SPECS, db=db_path, rounds=RoundBudget(3, 4), seed=1,
                        runner=runner, command="test", on_stop=stops.append)
    assert [len(a) for a in runner.asked] == [4, 4, 4, 2]
    assert sorted(runner.asked[3]) == [("compile", 64), ("eager", 64)]
    # after round 4 the TPOT and tokens/s ties are futile within 4 rounds: the sweep stops
    assert stops == ["every contest settled after 4 rounds: 4 with a winner, 2 not decidable "
                     "within 4 rounds at their spread"]
    assert len(records) == 14
    sweep_id = records[0].sweep_id
    with open_db(db_path) as con:
        [(rounds,)] = con.execute("SELECT rounds FROM sweeps").fetchall()
        rule_, contests = generation_contests(con, sweep_id)
    assert rounds == 4 and (rule_.plan.first, rule_.plan.last) == (3, 4)
    ttft = {mc.prompt_len: mc for mc in contests if mc.metric.name == "TTFT"}
    assert ttft[16].contest.sentences[0].endswith(", 3 rounds)")
    assert ttft[64].contest.sentences[0].endswith(", 4 rounds)")
    assert main(["compare", sweep_id, "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert ("tiny_llama prompt 64 output 8 b1 t1: torch (compile) has 2.01x lower TTFT than "
            "torch (eager) (95 % sequential interval") in out
    assert "contests per metric (3-4 rounds, margin ±2 %)" in out
