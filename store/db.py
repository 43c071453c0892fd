"""The DuckDB file: where it is, opening it, and its ordered, named migrations.

Only this package writes SQL, always with bound parameters. The dashboard and the CLI open
the file per operation and close it, because DuckDB lets only one process hold a writable
file: holding it for a whole sweep would lock the dashboard out.
"""

from __future__ import annotations

import os
import re
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from engine.core.errors import UserError
from engine.scenarios import KIND_TABLES
from store.kinds import create_kind_tables

__all__ = ["default_db_path", "resolve_db_path", "connect", "open_db", "MIGRATIONS",
           "applied_migrations", "writer_waiting", "close"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_db_path() -> Path:
    return PROJECT_ROOT / "data" / "bench.duckdb"


def resolve_db_path(path: str | os.PathLike | None = None) -> Path:
    """--db beats BENCH_DB, which beats ./data/bench.duckdb under the project."""
    if path:
        return Path(path)
    env = os.environ.get("BENCH_DB")
    return Path(env) if env else default_db_path()


# -- migrations: append only; a migration never changes once it has shipped ------------------

def m001_initial(con) -> None:
    con.execute("""
        CREATE TABLE systems (
            system_id VARCHAR PRIMARY KEY, hostname VARCHAR, cpu_model VARCHAR,
            physical_cores INTEGER, logical_cores INTEGER, usable_cores INTEGER,
            sockets INTEGER, memory_bytes BIGINT, accelerator VARCHAR,
            accelerator_count INTEGER, accelerator_driver VARCHAR, os VARCHAR,
            platform VARCHAR, python VARCHAR, first_seen TIMESTAMP)""")
    con.execute("""
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY, sweep_id VARCHAR,
            model VARCHAR NOT NULL, framework VARCHAR NOT NULL, runtime VARCHAR NOT NULL,
            batch_size INTEGER, intra_threads INTEGER, inter_threads INTEGER,
            precision VARCHAR, image_size INTEGER, device VARCHAR, weight_policy VARCHAR,
            warmup_iters INTEGER, min_time_s DOUBLE, min_iters INTEGER, max_time_s DOUBLE,
            status VARCHAR NOT NULL, reason VARCHAR, exit_code INTEGER, signal VARCHAR,
            stderr_tail VARCHAR, validity VARCHAR, validity_reason VARCHAR,
            stop_reason VARCHAR, started_at TIMESTAMP, ended_at TIMESTAMP,
            import_s DOUBLE, load_s DOUBLE, first_forward_s DOUBLE, warmup_s DOUBLE,
            measured_s DOUBLE, iterations INTEGER,
            mean_ms DOUBLE, median_ms DOUBLE, p90_ms DOUBLE, p95_ms DOUBLE, p99_ms DOUBLE,
            min_ms DOUBLE, max_ms DOUBLE, std_ms DOUBLE, iqr_ms DOUBLE, cv DOUBLE,
            throughput DOUBLE, params BIGINT, params_trainable BIGINT,
            flops_per_sample BIGINT, flops_method VARCHAR, gflops_per_s DOUBLE,
            rss_before_bytes BIGINT, peak_rss_bytes BIGINT, peak_rss_method VARCHAR,
            device_peak_bytes BIGINT, memory_cap_bytes BIGINT, timeout_s DOUBLE,
            load_avg_1m DOUBLE, git_commit VARCHAR, system_id VARCHAR,
            versions JSON, threads_effective JSON, env JSON, source VARCHAR NOT NULL,
            extra JSON,
            CHECK (status IN ('ok', 'error', 'timeout', 'oom', 'killed', 'invalid')))""")
    # Raw samples, one row each: DuckDB computes quantiles over them when a page needs
    # them, and a run's samples arrive in one INSERT ... SELECT unnest(list).
    con.execute("""
        CREATE TABLE samples (
            run_id VARCHAR NOT NULL, phase VARCHAR NOT NULL, idx INTEGER NOT NULL,
            latency_ns BIGINT NOT NULL,
            CHECK (phase IN ('warmup', 'measure')))""")
    con.execute("""
        CREATE TABLE model_info (
            model VARCHAR NOT NULL, framework VARCHAR NOT NULL, image_size INTEGER NOT NULL,
            framework_version VARCHAR NOT NULL, params BIGINT, params_trainable BIGINT,
            flops_per_sample BIGINT, flops_method VARCHAR, measured_at TIMESTAMP,
            PRIMARY KEY (model, framework, image_size, framework_version))""")
    con.execute("CREATE INDEX runs_started ON runs (started_at)")
    con.execute("CREATE INDEX samples_run ON samples (run_id)")


def m002_rounds(con) -> None:
    """Sweeps run in rounds: each run knows its round; a sweep records its plan and seed."""
    con.execute("ALTER TABLE runs ADD COLUMN round_no INTEGER")
    con.execute("""
        CREATE TABLE sweeps (
            sweep_id VARCHAR PRIMARY KEY, created_at TIMESTAMP NOT NULL,
            rounds INTEGER NOT NULL, seed BIGINT NOT NULL, configurations INTEGER NOT NULL,
            plan JSON NOT NULL, command VARCHAR)""")


def m003_price_updates(con) -> None:
    """Imported price lists: they override the shipped catalog (prices/*.csv) per key."""
    con.execute("""
        CREATE TABLE price_updates (
            kind VARCHAR NOT NULL, key VARCHAR NOT NULL, data JSON NOT NULL,
            source VARCHAR NOT NULL, as_of VARCHAR NOT NULL, imported_at TIMESTAMP NOT NULL,
            PRIMARY KEY (kind, key),
            CHECK (kind IN ('unit_rate', 'machine')))""")


def m004_prepare_time(con) -> None:
    """Runtimes beyond eager pay a preparation (trace, export, compile): kept apart."""
    con.execute("ALTER TABLE runs ADD COLUMN prepare_s DOUBLE")


def m005_training_dataload_profiles(con) -> None:
    """Training and data-loading runs share `runs` (one row per attempt, same statuses);
    what only they have lives in tables of its own, as do profiles."""
    con.execute("ALTER TABLE runs ADD COLUMN kind VARCHAR DEFAULT 'inference'")
    con.execute("UPDATE runs SET kind = 'inference' WHERE kind IS NULL")
    con.execute("ALTER TABLE runs ADD COLUMN dataset VARCHAR")
    con.execute("ALTER TABLE runs ADD COLUMN workers INTEGER")
    con.execute("""
        CREATE TABLE train_epochs (
            run_id VARCHAR NOT NULL, epoch INTEGER NOT NULL, steps INTEGER NOT NULL,
            samples INTEGER NOT NULL, wall_s DOUBLE NOT NULL, samples_per_s DOUBLE,
            train_loss DOUBLE, train_acc DOUBLE, test_loss DOUBLE, test_acc DOUBLE,
            eval_s DOUBLE, PRIMARY KEY (run_id, epoch))""")
    # step: the global step (0-based, warm-up steps included); its time is in samples.
    con.execute("""
        CREATE TABLE train_steps (
            run_id VARCHAR NOT NULL, step INTEGER NOT NULL, loss DOUBLE,
            PRIMARY KEY (run_id, step))""")
    con.execute("""
        CREATE TABLE profile_ops (
            run_id VARCHAR NOT NULL, rank INTEGER NOT NULL, op VARCHAR NOT NULL,
            device VARCHAR, calls BIGINT, self_ms DOUBLE, total_ms DOUBLE,
            PRIMARY KEY (run_id, rank))""")
    con.execute("""
        CREATE TABLE profile_traces (
            run_id VARCHAR PRIMARY KEY, format VARCHAR NOT NULL, bytes BIGINT NOT NULL,
            data BLOB NOT NULL)""")


def m006_user_models(con) -> None:
    """A user's model names exactly what was measured: format, origin, inputs, and the
    SHA-256 and size of the file the worker loaded (NULL for catalog models)."""
    for column, kind in (("model_format", "VARCHAR"), ("model_origin", "VARCHAR"),
                         ("model_inputs", "VARCHAR"), ("model_sha256", "VARCHAR"),
                         ("model_bytes", "BIGINT")):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


def m007_machine_identity(con) -> None:
    """Which machine a run ran on beyond the systems row: its catalog shape (when given),
    SMT threads per core, the CPU flags that change speed, the frequency governor; and how
    many replicas shared it (inference: identical workers timed over one window)."""
    for column, kind in (("machine_shape", "VARCHAR"), ("threads_per_core", "INTEGER"),
                         ("cpu_flags", "VARCHAR"), ("governor", "VARCHAR"),
                         ("replicas", "INTEGER")):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


def m008_cluster_nodes(con) -> None:
    """A run on a Ray cluster names its node (Ray node id and hostname); its system_id is
    that node's systems row."""
    for column in ("node_id", "node_host"):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} VARCHAR")


def m009_sweep_rule(con) -> None:
    """A sweep keeps the rule its verdicts are judged by: the looks its budget allowed
    (minimum and max rounds), the practical margin and the error rate (issue 24). NULL on
    older sweeps: their verdicts use the defaults, widened to the rounds they ran."""
    for column, kind in (("min_rounds", "INTEGER"), ("max_rounds", "INTEGER"),
                         ("margin", "DOUBLE"), ("alpha", "DOUBLE")):
        con.execute(f"ALTER TABLE sweeps ADD COLUMN {column} {kind}")


def m010_contention(con) -> None:
    """An inference run says whether it ran beside a controlled neighbour (steady, onoff;
    none) and torch's OpenMP wait policy (passive; '' the default): a setting of its own.
    NULL on older runs, which ran without a neighbour of ours."""
    for column in ("contention", "wait_policy"):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} VARCHAR")


def m011_model_memory(con) -> None:
    """What an inference run's model adds to memory, beside the process peak (issue 26): the
    peak less the resident set before the model was built (framework imported) and less the
    eager reference kept apart for the output check; with both raw figures. NULL on older
    runs and on training and data-loading runs, which measure no baseline."""
    for column in ("model_peak_bytes", "model_baseline_bytes", "reference_bytes"):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} BIGINT")


def m012_serving(con) -> None:
    """A serving run (issue 27: one MLPerf LoadGen test) keeps LoadGen's word beside its
    row: the scenario, VALID/INVALID, each failed rule as its summary names it, its
    recommendations, the early-stopping percentile estimates, its latency percentiles and
    figures; and its summary and detail logs, gzipped, to download later. Every query's
    latency goes to `samples` like any run's. Only runs whose test ran have these rows."""
    con.execute("""
        CREATE TABLE serving_results (
            run_id VARCHAR PRIMARY KEY, scenario VARCHAR NOT NULL, result VARCHAR,
            failed_rules JSON NOT NULL, recommendations JSON NOT NULL,
            early_stopping JSON NOT NULL, percentiles_ns JSON NOT NULL, figures JSON NOT NULL,
            query_count BIGINT, samples_per_query BIGINT, summary JSON NOT NULL)""")
    con.execute("""
        CREATE TABLE loadgen_logs (
            run_id VARCHAR NOT NULL, name VARCHAR NOT NULL, bytes BIGINT NOT NULL,
            format VARCHAR NOT NULL, data BLOB NOT NULL, PRIMARY KEY (run_id, name))""")


def m013_calibration(con) -> None:
    """The machine's measured ceilings (issue 28 part 1), per systems row and thread count:
    one row per kind (gemm_fp32, gemm_bf16, triad) of one calibration (calibration_id),
    every calibration kept (a page reads the newest). figure: the ceiling (GFLOP/s or GB/s;
    NULL with absent_reason where it was not measured) and how it was derived from the raw
    figures kept beside it: each GEMM size's best (sizes, size_best) or each triad repeat
    (repeat_figures); the triad's arrays against the last-level cache; the cores, clock and
    flags a theoretical peak needs; what it ran on and when, and how long it took."""
    con.execute("""
        CREATE TABLE calibrations (
            calibration_id VARCHAR NOT NULL, system_id VARCHAR NOT NULL,
            threads INTEGER NOT NULL, kind VARCHAR NOT NULL, figure DOUBLE, unit VARCHAR NOT NULL,
            absent_reason VARCHAR, how VARCHAR, sizes INTEGER[], size_best DOUBLE[],
            repeats INTEGER, min_repeat_s DOUBLE, repeat_figures DOUBLE[], llc_bytes BIGINT,
            llc_source VARCHAR, array_bytes BIGINT, bytes_per_element INTEGER, cpus INTEGER[],
            cores INTEGER, cpu_flags VARCHAR, cpu_mhz DOUBLE, mhz_source VARCHAR,
            torch_version VARCHAR, git_commit VARCHAR, measured_at TIMESTAMP NOT NULL,
            seconds DOUBLE, PRIMARY KEY (calibration_id, kind),
            CHECK (kind IN ('gemm_fp32', 'gemm_bf16', 'triad')))""")


def m014_energy(con) -> None:
    """An inference run's energy (issue 28 part 3), from a loop of its own after the timed
    one: joules per sample and kWh per 1 M inferences with their source ("measured (RAPL)",
    "measured (NVML)"), or NULL figures and the reason where no counter was read; the loop's
    seconds and inferences and the counters read. NULL throughout where none was asked.
    And the numerics the worker set and read back (part 7: TF32, cudnn.benchmark, denormal
    flushing), a JSON object: '{}' on older runs and where a kind records none."""
    for column, kind in (("energy_source", "VARCHAR"), ("energy_absent", "VARCHAR"),
                         ("energy_j_per_sample", "DOUBLE"),
                         ("energy_kwh_per_million", "DOUBLE"), ("energy_loop_s", "DOUBLE"),
                         ("energy_samples", "BIGINT"), ("energy_counters", "VARCHAR"),
                         ("numerics", "JSON")):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


def m015_output_error(con) -> None:
    """A reduced-precision run (bf16, int8; issue 28) keeps how far its outputs are from the
    fp32 reference on the generated inputs: max absolute and relative error, the fraction of
    inputs whose top-1 class agrees and how many inputs that was counted on. NULL on fp32
    runs and older ones. A runtime's own settings (OpenVINO's hint, streams, precision) sit
    in `extra`, as every runtime's do."""
    for column, kind in (("output_max_abs", "DOUBLE"), ("output_max_rel", "DOUBLE"),
                         ("top1_agreement", "DOUBLE"), ("top1_inputs", "INTEGER")):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


def m016_states(con) -> None:
    """Benchmark states (issue 42): store/states.py says what each table keeps."""
    con.execute("CREATE TABLE state_groups (group_name TEXT NOT NULL, sweep_id TEXT NOT NULL, "
                "source TEXT, added_at TIMESTAMP NOT NULL, PRIMARY KEY (group_name, sweep_id))")
    con.execute("CREATE TABLE state_marks (mark_id TEXT PRIMARY KEY, group_name TEXT NOT NULL, "
                "config_key TEXT, kind TEXT NOT NULL, state TEXT, sweep_id TEXT, who TEXT NOT "
                "NULL, marked_at TIMESTAMP NOT NULL, why TEXT NOT NULL, withdrawn_by TEXT, "
                "withdrawn_at TIMESTAMP, CHECK (kind IN ('acknowledged', 'ignored', 'distribution "
                "change')))")
    con.execute("CREATE TABLE state_changes (change_id TEXT PRIMARY KEY, group_name TEXT NOT NULL,"
                " config_key TEXT NOT NULL, configuration TEXT, sweep_id TEXT NOT NULL, old_state "
                "TEXT, new_state TEXT NOT NULL, since TEXT, alert BOOL NOT NULL, note TEXT, points"
                " JSON, policy JSON, recorded_at TIMESTAMP NOT NULL)")
    con.execute("CREATE TABLE alert_deliveries (change_id TEXT NOT NULL, target TEXT NOT NULL, "
                "attempt INT NOT NULL, tried_at TIMESTAMP NOT NULL, status INT, error TEXT, ok "
                "BOOL NOT NULL, final BOOL NOT NULL, PRIMARY KEY (change_id, target, attempt))")


MIGRATIONS = [m001_initial, m002_rounds, m003_price_updates, m004_prepare_time,
              m005_training_dataload_profiles, m006_user_models, m007_machine_identity,
              m008_cluster_nodes, m009_sweep_rule, m010_contention, m011_model_memory,
              m012_serving, m013_calibration,
              m014_energy, m015_output_error, m016_states]


def _migrate(con) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS migrations "
                "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)")
    done = {r[0] for r in con.execute("SELECT name FROM migrations").fetchall()}
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            fn(con)
            con.execute("INSERT INTO migrations VALUES (?, ?)",
                        [fn.__name__, datetime.now(timezone.utc).replace(tzinfo=None)])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    _kind_tables(con)


def _kind_tables(con) -> None:
    """Every registered kind's own tables (engine.scenarios.KIND_TABLES), after the
    migrations: a kind added or grown creates its tables or columns here, never a migration
    of `runs`."""
    con.execute("BEGIN TRANSACTION")
    try:
        create_kind_tables(con, KIND_TABLES)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def applied_migrations(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM migrations ORDER BY name").fetchall()]


_LOCK_PID = re.compile(r"PID (\d+)")
WRITER_WAIT_S = 30.0  # a sweep's record must not be lost to a dashboard that was reading
READER_WAIT_S = 5.0


# DuckDB keeps one database instance per file in a process; opening a connection while
# another thread closes the instance's last one failed with "Unique file handle conflict".
# Every open and close in this process (pages, the job thread, the CLI) takes this lock.
_INSTANCE = threading.Lock()
MARKER_MAX_AGE_S = WRITER_WAIT_S + 5  # a writer gives up after WRITER_WAIT_S


def close(con) -> None:
    with _INSTANCE:
        con.close()


def _marker(p: Path, pid: int) -> Path:
    return p.with_name(f"{p.name}.writer-waiting.{pid}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def writer_waiting(path: str | os.PathLike) -> int | None:
    """The pid of another live process waiting to write this file, if any. DuckDB's lock
    has no queue: readers that keep overlapping (eight dashboard sessions refreshing after a
    write) could hold the file forever, so a writer that finds it locked leaves a marker and
    readers that yield (the dashboard's) start nothing new until it is gone."""
    p = Path(path)
    for m in p.parent.glob(f"{p.name}.writer-waiting.*"):
        try:
            pid = int(m.name.rsplit(".", 1)[1])
        except ValueError:
            continue
        try:
            age = time.time() - m.stat().st_mtime
        except FileNotFoundError:
            continue
        # A writer killed while waiting leaves its marker; its pid may even be reused. No
        # writer waits longer than WRITER_WAIT_S, so an older marker means nothing.
        if not _alive(pid) or age > MARKER_MAX_AGE_S:
            m.unlink(missing_ok=True)
            continue
        if pid != os.getpid():
            return pid
    return None


def _busy(p: Path, who: str) -> UserError:
    return UserError(f"database: {p} is in use by {who} (DuckDB allows one writing process). "
                     "Wait for it to finish, stop it, or pass --db PATH to use another file.",
                     field="db")


def connect(path: str | os.PathLike | None = None, *, read_only: bool = False,
            wait_s: float | None = None, yield_to_writers: bool = False,
            clock=time.monotonic, pause=time.sleep):
    """Open (creating and migrating) the database; a clear UserError if another process
    holds it past wait_s. A reader that yields to writers (the dashboard) first waits while
    another process waits to write; a writer marks that it waits. clock and pause are
    injectable so the wait is testable."""
    p = resolve_db_path(path)
    memory = str(p) == ":memory:"
    if not memory:
        if read_only and not p.exists():
            raise UserError(f"database: {p} does not exist yet; run a benchmark first "
                            "(python -m engine run ...) or pass --db PATH", field="db")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"database: cannot create folder {p.parent}: {exc.strerror}; "
                            "pass --db PATH or set BENCH_DB to a writable file",
                            field="db") from exc
    if wait_s is None:
        wait_s = READER_WAIT_S if yield_to_writers else WRITER_WAIT_S
    deadline = clock() + wait_s
    marker = None
    try:
        while True:
            if yield_to_writers and not memory:
                pid = writer_waiting(p)
                if pid is not None:
                    if clock() >= deadline:
                        raise _busy(p, f"process {pid}, which is writing")
                    pause(0.05)
                    continue
            try:
                with _INSTANCE:
                    con = duckdb.connect(str(p), read_only=read_only)
                break
            except duckdb.IOException as exc:
                msg = str(exc)
                if "lock" not in msg.lower():
                    raise UserError(f"database: cannot open {p}: {msg}", field="db") from exc
                if clock() >= deadline:
                    pid = _LOCK_PID.search(msg)
                    raise _busy(p, f"process {pid.group(1)}" if pid
                                else "another process") from exc
                if not yield_to_writers and marker is None and not memory:
                    marker = _marker(p, os.getpid())
                    marker.touch()
                pause(0.1)
            except duckdb.Error as exc:
                raise UserError(f"database: {p} is not a usable DuckDB file: {exc}",
                                field="db") from exc
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)
    if not read_only:
        _migrate(con)
    return con


@contextmanager
def open_db(path=None, *, read_only: bool = False):
    con = connect(path, read_only=read_only)
    try:
        yield con
    finally:
        close(con)
