
import pytest

from engine.cli import main
from store.db import open_db
from store.runs import list_runs


def test_bad_fields_are_refused_before_anything_runs(capsys, db_path):
    with pytest.raises(SystemExit) as exit_:  # argparse refuses a range at parse time
        main(["run", "--model", "resnet18", "--batch", "0", "--db", str(db_path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith(
        "error: argument --batch: batch_size: 0 is out of range; allowed: integer 1..4096")
    assert main(["run", "--model", "vgg", "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith("error: model: unknown 'vgg'; allowed: ")
    assert main(["run", "--model", "resnet18", "--threads", "999", "--db", str(db_path)]) == 2
    assert "intra_threads: 999 is out of range; allowed: integer 1.." in capsys.readouterr().err
    assert not db_path.exists()  # nothing ran, nothing was written


def test_non_integer_batch_names_the_field(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--model", "resnet18", "--batch", "big"])
    assert info.value.code == 2
    assert "batch_size: 'big' is not an integer; allowed: integer 1..4096" in \
        capsys.readouterr().err


def test_runs_on_an_empty_database_says_what_to_do(capsys, db_path):
    assert main(["runs", "--db", str(db_path)]) == 0
    assert capsys.readouterr().out.startswith("no runs stored yet: try `python -m engine run")


def test_runs_lists_a_run_whose_integer_columns_are_empty(capsys, db_path):
    """A user's model stores no image size (a NULL INTEGER, pd.NA in the frame): `runs`
    shows the cell empty instead of raising on NA's truth value."""
    from dataclasses import replace

    from seeds.records import SYSTEM, ok_record
    from store.db import open_db
    from store.runs import save_record

    with open_db(db_path) as con:
        save_record(con, replace(ok_record("user-1", samples=(2_000_000,) * 3),
                                 image_size=None, model="net.onnx", model_format="onnx"), SYSTEM)
    assert main(["runs", "--db", str(db_path)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if "net.onnx" in line]
    assert "user-1" in row and " 2.000 " in row


def test_selftest_sweep_through_the_cli_stores_each_run_and_prints_the_table(
        capsys, db_path, worker_env):
    rc = main(["run", "--model", "identity", "fault_raise", "--framework", "selftest",
               "--batch", "1", "2", "--min-time", "0.05", "--min-iters", "5", "--warmup", "1",
               "--rounds", "1", "--db", str(db_path)])
    assert rc == 1  # a sweep with a crashed run fails the CI step that ran it
    out = capsys.readouterr().out
    assert sum(l.startswith("stored ") for l in out.splitlines()) == 4
    assert "median latency per batch [ms], lower is better" in out
    assert f"\n4 runs stored in {db_path}; 2 not ok: 2 error\n" in out
    assert "one round: differences are not tested for significance" in out
    # where the time went: the ok runs' timing is its measuring share, over 4 runs
    [split] = [l for l in out.splitlines() if l.startswith("wall ")]
    assert " over 4 runs, measuring " in split and "import " in split
    with open_db(db_path) as con:
        runs = list_runs(con)
    assert sorted(zip(runs.model, runs.batch_size, runs.status)) == [
        ("fault_raise", 1, "error"), ("fault_raise", 2, "error"),
        ("identity", 1, "ok"), ("identity", 2, "ok")]
    assert runs.sweep_id.nunique() == 1


def test_stored_sweep_can_be_listed_and_compared_again(capsys, db_path, worker_env):
    assert main(["run", "--model", "identity", "--framework", "selftest", "--batch", "1", "2",
                 "--min-time", "0.02", "--min-iters", "5", "--warmup", "1", "--rounds", "2",
                 "--seed", "11", "--no-table", "--db", str(db_path)]) == 0
    first = capsys.readouterr().out
    assert sum(l.startswith("stored ") for l in first.splitlines()) == 4
    assert first.endswith(f"\n4 runs stored in {db_path}; all ok\n")
    assert "round 1: forward order" in first and "round 2: reversed order" in first
    assert main(["sweeps", "--db", str(db_path)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 3  # header, rule, one sweep
    date, time, sweep_id, rounds, configs, runs, ok, seed = listing[2].split()
    assert (rounds, configs, runs, seed) == ("2", "2", "4", "11")
    assert main(["compare", sweep_id[:8], "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sweep {sweep_id}: 4 runs")
    assert "identity 32px" in out
    # Every measured round counts (none is dropped for dispersion): two rounds of two
    # configurations give the noise pairing leaves; with no rival in a row there is no
    # contest to extend, so the sweep stopped at its minimum.
    assert "\nmeasurement noise ±" in out
    assert "stopped: 2 rounds run; no two contenders side by side" in first
    assert main(["compare", "zzz", "--db", str(db_path)]) == 2
    assert "sweep: 'zzz' matches 0 sweeps; allowed: a unique id prefix" in capsys.readouterr().err


def test_compare_prints_the_noise_and_the_drift_of_fixed_rounds(capsys, db_path):
    """Seeded rounds 100 us apart: every configuration a little slower in round 2 (drift,
    which pairing cancels), by a share that differs with its median (noise it leaves)."""
    from seeds.records import seed_sweep
    from tests.conftest import seed_once

    seed_once(seed_sweep, db_path)
    assert main(["compare", "sweep-seeded", "--db", str(db_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [l for l in lines if l.startswith(("measurement noise", "the machine drifted"))] == [
        "measurement noise ±0.5 %: what pairing leaves (residual of configuration + round on "
        "log round medians, 8 configurations x 2 rounds, 7 degrees of freedom)",
        "the machine drifted 0.6 % between rounds (round 2 against round 1; pairing cancels "
        "it); no interference was recorded for these runs"]
    assert not any(l.startswith("each configuration over its own rounds") for l in lines)
    # --raw: each configuration's own round medians after the tables
    assert main(["compare", "sweep-seeded", "--raw", "--db", str(db_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("each configuration over its own rounds (raw round medians [ms], not "
                     "drift-adjusted):")
    assert lines[at + 1].split() == ["model", "batch", "threads", "contender", "rounds",
                                     "geometric", "mean", "[ms]", "round", "1", "[ms]",
                                     "round", "2", "[ms]"]


@pytest.mark.parametrize("argv, message", [
    (["run", "--model", "resnet18", "--rounds", "0"],
     "argument --rounds: rounds: 0 is out of range; allowed: integer 1..100"),
    (["batch-search", "--model", "resnet18", "--max-batch", "0"],
     "argument --max-batch: max_batch: 0 is out of range; allowed: integer 1..4096"),
    (["train", "--model", "resnet18", "--epochs", "1001"],
     "argument --epochs: epochs: 1001 is out of range; allowed: integer 1..1000"),
    (["dataload", "--workers", "-1"],
     "argument --workers: workers: -1 is out of range; allowed: integer 0..64"),
])
def test_out_of_range_arguments_are_refused_before_anything_runs(argv, message, db_path,
                                                                 capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv + ["--db", str(db_path)])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not db_path.exists()  # nothing was stored, not even an empty sweep
