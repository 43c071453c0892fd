"""The Python-vs-C++ study table (issue 28 part 8), built from fixed stored rows: torch
training in Python and C++, and inference from each path of each language. No framework in
this process, no worker."""

from dataclasses import replace

import math

from engine.present.study_text import STUDY_COLUMNS, study_table
from store.db import open_db
from store.runs import save_record
from store.study import study_inference, study_training
from seeds.records import SYSTEM, ok_record, train_record

MS = 1_000_000  # ns


def _seed(con):
    # Python trains at 2.0 s then 1.0 s per epoch, C++ at 1.0 s and 0.5 s (two epochs each)
    py = train_record("t-py", "torch", [2.0, 1.0], [0.5, 0.8])
    cpp = replace(train_record("t-cpp", "torch", [1.0, 0.5], [0.4, 0.7]), runtime="libtorch")
    for rec in (py, cpp):
        save_record(con, replace(rec, sweep_id="sweep-study", round_no=1), SYSTEM)
    # inference at the training's image size (32) and threads (1): two rounds of eager,
    # one of each other path; batch 8 and a bf16 run must stay out of batch 1's figures
    lat = {"eager": (4, 6), "torchscript": (5,), "aoti": (3,), "libtorch": (7,),
           "libtorch_aoti": (2,)}
    n = 0
    for rt, medians in lat.items():
        for m in medians:
            n += 1
            save_record(con, ok_record(f"i-{n}", samples=(m * MS,) * 3, minute=n, runtime=rt,
                                       image_size=32), SYSTEM)
    save_record(con, ok_record("i-b8", samples=(90 * MS,) * 3, runtime="aoti", image_size=32,
                               batch_size=8), SYSTEM)
    save_record(con, ok_record("i-bf16", samples=(1 * MS,) * 3, runtime="eager",
                               image_size=32, precision="bf16"), SYSTEM)
    # another image size: a different model input, never matched
    save_record(con, ok_record("i-64", samples=(50 * MS,) * 3, runtime="libtorch",
                               image_size=64), SYSTEM)


def test_the_study_table_joins_training_and_every_inference_path_per_language(db_path):
    with open_db(db_path) as con:
        _seed(con)
        training = study_training(con, "sweep-study")
        inference = study_inference(con, "sweep-study", batch_size=1)
        at_8 = study_inference(con, "sweep-study", batch_size=8)
    table = study_table(training, inference)
    assert list(table.columns) == STUDY_COLUMNS
    assert table.language.tolist() == ["Python", "C++ (LibTorch)"]
    py, cpp = table.to_dict("records")
    assert (py["model"], py["batch_size"], py["threads"], py["image_size"]) == \
        ("resnet18", 32, 1, 32)
    # the mean epoch time of each run, samples/s and the last epoch's figures
    assert py["s_per_epoch"] == 1.5 and cpp["s_per_epoch"] == 0.75
    assert (py["epochs"], py["test_acc"], cpp["test_acc"]) == (2, 0.8, 0.7)
    assert py["train_loss"] == 1.5 and py["train_acc"] == 0.5
    assert py["samples_per_s"] > 0 and cpp["samples_per_s"] == py["samples_per_s"]
    # p50 per path: eager the median over its two runs; C++ has no eager
    assert (py["eager p50 [ms]"], py["TorchScript p50 [ms]"], py["AOTInductor p50 [ms]"]) == \
        (5.0, 5.0, 3.0)
    assert math.isnan(cpp["eager p50 [ms]"])
    assert (cpp["TorchScript p50 [ms]"], cpp["AOTInductor p50 [ms]"]) == (7.0, 2.0)
    # at batch 8 only aoti was measured: the other paths are absent, not zero
    assert at_8[["runtime", "p50_ms"]].values.tolist() == [["aoti", 90.0]]
    py8 = study_table(training, at_8).to_dict("records")[0]
    assert py8["AOTInductor p50 [ms]"] == 90.0 and math.isnan(py8["eager p50 [ms]"])


def test_a_language_that_did_not_train_keeps_its_inference_row_and_no_training_is_empty(
        db_path):
    with open_db(db_path) as con:
        save_record(con, replace(train_record("t-py", "torch", [2.0], [0.5]),
                                 sweep_id="sweep-py", round_no=1), SYSTEM)
        save_record(con, ok_record("i-1", samples=(2 * MS,) * 3, runtime="libtorch_aoti",
                                   image_size=32), SYSTEM)
        table = study_table(study_training(con, "sweep-py"),
                            study_inference(con, "sweep-py"))
        empty = study_table(study_training(con, "no-such-sweep"),
                            study_inference(con, "no-such-sweep"))
    assert table.language.tolist() == ["Python", "C++ (LibTorch)"]
    cpp = table.to_dict("records")[1]
    assert math.isnan(cpp["s_per_epoch"]) and cpp["AOTInductor p50 [ms]"] == 2.0
    assert empty.empty and list(empty.columns) == STUDY_COLUMNS
