"""The Python-vs-C++ study's stored figures (issue 28 part 8): torch training in Python
(`eager`) and in the LibTorch C++ trainer (`libtorch`), and the inference latency of the
same model from each inference path of each language (eager, TorchScript and AOTInductor
from Python; the LibTorch runner's TorchScript and AOTInductor from C++).

Two named queries; engine/present/study_text.py joins them into the page's one table.
Inference is matched to training on everything that changes the work or the machine
(model, intra- and inter-op threads, image size, device, systems row, shape), at fp32, from
dedicated runs only (no neighbour, default wait policy), as store.queries' inference
figures for training are.
"""

from __future__ import annotations

import pandas as pd

from engine.scenarios import INFERENCE, TRAINING
from store.queries import QUIET, setting_params, setting_sql

__all__ = ["STUDY_TRAIN_RUNTIMES", "STUDY_INFERENCE_RUNTIMES", "study_training",
           "study_inference"]

STUDY_TRAIN_RUNTIMES = ("eager", "libtorch")
STUDY_INFERENCE_RUNTIMES = ("eager", "torchscript", "aoti", "libtorch", "libtorch_aoti")

# The columns that tie an inference figure to a training configuration.
KEY = ("model", "threads", "image_size", "device", "inter_threads", "system_id",
       "machine_shape")


def study_training(con, sweep_id: str | None, setting: tuple | None = None) -> pd.DataFrame:
    """Per torch training configuration of the selection (ok runs; eager or libtorch): the
    median over its runs (rounds) of the mean epoch time, samples/s, and the last epoch's
    train and test loss and accuracy."""
    return con.execute(
        "SELECT r.model, r.runtime, r.batch_size, r.intra_threads AS threads, r.image_size, "
        "r.device, r.inter_threads, r.system_id, coalesce(r.machine_shape, '') AS "
        "machine_shape, count(*) AS train_runs, max(e.epochs) AS epochs, "
        "median(e.s_per_epoch) AS s_per_epoch, median(r.throughput) AS samples_per_s, "
        "median(l.train_loss) AS train_loss, median(l.train_acc) AS train_acc, "
        "median(l.test_loss) AS test_loss, median(l.test_acc) AS test_acc "
        "FROM runs r "
        "JOIN (SELECT run_id, avg(wall_s) AS s_per_epoch, max(epoch) AS epochs "
        "      FROM train_epochs GROUP BY run_id) e ON e.run_id = r.run_id "
        "JOIN train_epochs l ON l.run_id = r.run_id AND l.epoch = e.epochs "
        "WHERE r.kind = ? AND r.status = 'ok' AND r.framework = 'torch' "
        "AND list_contains(?, r.runtime) AND (?::VARCHAR IS NULL OR r.sweep_id = ?) AND "
        + setting_sql("r.") +
        " GROUP BY ALL ORDER BY r.model, r.batch_size, threads, r.runtime",
        [TRAINING.kind, list(STUDY_TRAIN_RUNTIMES), sweep_id, sweep_id,
         *setting_params(setting)]).df()


def study_inference(con, sweep_id: str | None, setting: tuple | None = None,
                    batch_size: int = 1) -> pd.DataFrame:
    """For every training configuration study_training returns: the fp32 inference p50
    latency at `batch_size` of each study runtime, the median over its stored ok runs (of
    any sweep), with how many runs that is; a runtime never measured is absent."""
    return con.execute(
        "SELECT t.model, t.threads, t.image_size, t.device, t.inter_threads, t.system_id, "
        "t.machine_shape, i.runtime, median(i.median_ms) AS p50_ms, count(*) AS runs "
        "FROM (SELECT DISTINCT model, intra_threads AS threads, image_size, device, "
        "      inter_threads, system_id, coalesce(machine_shape, '') AS machine_shape "
        "      FROM runs WHERE kind = ? AND status = 'ok' AND framework = 'torch' "
        "      AND list_contains(?, runtime) AND (?::VARCHAR IS NULL OR sweep_id = ?) AND "
        + setting_sql() + ") t "
        "JOIN runs i ON i.kind = ? AND i.status = 'ok' AND i.framework = 'torch' "
        "AND i.precision = 'fp32' AND list_contains(?, i.runtime) AND i.batch_size = ? "
        "AND i.model = t.model AND i.intra_threads = t.threads "
        "AND i.image_size = t.image_size AND i.device = t.device "
        "AND i.inter_threads = t.inter_threads "
        "AND i.system_id IS NOT DISTINCT FROM t.system_id "
        "AND coalesce(i.machine_shape, '') = t.machine_shape "
        f"AND {QUIET.format(p='i.')} "
        "GROUP BY ALL ORDER BY t.model, t.threads, i.runtime",
        [TRAINING.kind, list(STUDY_TRAIN_RUNTIMES), sweep_id, sweep_id,
         *setting_params(setting), INFERENCE.kind, list(STUDY_INFERENCE_RUNTIMES),
         batch_size]).df()
