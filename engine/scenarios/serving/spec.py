"""What to run for serving: a frozen `ServeSpec` (one MLPerf LoadGen test against a warm
system under test), its expansion's rules and the refusals it states; what LoadGen writes
back (its logs, a test's live figures) is read in loadgen.py.

A serving run is one LoadGen test in PerformanceOnly mode, in a worker subprocess,
against a model built the way inference builds it (`sut`, a RunSpec: catalog model or a
user's file, any runtime; its batch_size is the largest batch the SUT calls the model
with). LoadGen owns the arrival schedule, the timing and the verdict; the SUT only
answers (engine/worker/serving/body.py).

Framework-free: LoadGen is imported only in the worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from engine.core.catalog import CATALOG, IMAGE_MODELS

from engine.core.errors import UserError
from engine.scenarios.inference.spec import RunSpec
from engine.core.limits import (SEARCH_QUERIES_RANGE, SERVE_BATCH_RANGE, SERVE_BOUND_MS_RANGE,
                                SERVE_DURATION_RANGE, SERVE_QPS_RANGE, SERVE_QUERIES_RANGE,
                                SERVE_SAMPLES_RANGE, SERVE_WAIT_MS_RANGE, SEED_RANGE, choice,
                                float_range, int_range, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import ROWS
from engine.scenarios.serving.loadgen import rate_text

__all__ = ["ServeSpec", "SERVE_SCENARIOS", "LOADGEN_SCENARIO", "MULTI_STREAM_SAMPLES",
           "DEFAULT_MIN_DURATION_S", "DEFAULT_MIN_QUERIES", "OFFICIAL_MIN_DURATION_S",
           "DEFAULT_SERVER_BOUND_MS", "DEFAULT_SAMPLES", "SCENARIO_PERCENTILE",
           "EARLY_STOPPING_MIN_QUERIES", "default_min_queries", "early_stopping_note",
           "LIVE_PROGRESS_S", "CLOSED_LOOP_HEADROOM", "check_reachable", "REPLICATED_SCENARIOS",
           "UNSERVED_RUNTIMES", "fixed_batch_allowed", "ScenarioInputs", "SCENARIO_INPUTS"]

# Our names (the CLI's) -> LoadGen's TestScenario names.
LOADGEN_SCENARIO = {"single-stream": "SingleStream", "multi-stream": "MultiStream",
                    "server": "Server", "offline": "Offline"}
SERVE_SCENARIOS = tuple(LOADGEN_SCENARIO)
# The latency percentile each scenario is judged on (LoadGen's defaults).
SCENARIO_PERCENTILE = {"single-stream": 90.0, "multi-stream": 99.0, "server": 99.0,
                       "offline": None}
# MLPerf's MultiStream query: 8 samples, answered by one model call of batch 8.
MULTI_STREAM_SAMPLES = 8
# LoadGen's own defaults are ours; "official" is MLPerf's 600 s (a submission's minimum).
DEFAULT_MIN_DURATION_S = 10.0
DEFAULT_MIN_QUERIES = 100
OFFICIAL_MIN_DURATION_S = 600.0
DEFAULT_SERVER_BOUND_MS = 100.0  # LoadGen's server_target_latency_ns default
DEFAULT_SAMPLES = 64  # performance_sample_count: generated inputs kept in memory
# The fewest queries LoadGen's early stopping judges a scenario's percentile on (99 %
# confidence, none over the bound), as LoadGen 6.0.17 prints them in its summary:
# SingleStream's p90 "Need to process at least 64 queries for early stopping", MultiStream's
# p99 662, Server's p99 "Processed 10 queries. Would need to run at least 449 more" (459).
# Fewer makes the test INVALID at any rate; Offline has no early stopping.
EARLY_STOPPING_MIN_QUERIES = {"single-stream": 64, "multi-stream": 662, "server": 459}
# How often the worker reports a test's live figures (engine/worker/serving/body.py).
LIVE_PROGRESS_S = 1.0
# The scenarios a queue feeds (R replicas take whichever batch is next); the streams wait for
# each query before issuing the next, so one replica answers them.
REPLICATED_SCENARIOS = ("server", "offline")


@dataclass(frozen=True)
class ScenarioInputs:
    """What a test of one scenario takes from a request (a serving job's expansion, the
    forms and the CLI read it here, never from the names): a latency bound (Server's p99 it
    is held to, SingleStream's p90 it is reported against), a target rate (Server's Poisson
    arrivals, Offline's expected QPS), and the samples a query is answered with (None: the
    batcher's max batch)."""

    bound: bool
    rate: bool
    query_batch: int | None = None


SCENARIO_INPUTS = {"single-stream": ScenarioInputs(bound=True, rate=False, query_batch=1),
                   "multi-stream": ScenarioInputs(bound=False, rate=False,
                                                  query_batch=MULTI_STREAM_SAMPLES),
                   "server": ScenarioInputs(bound=True, rate=True),
                   "offline": ScenarioInputs(bound=False, rate=True)}
def fixed_batch_allowed(fixed: int, option: str = "--max-batch") -> str:
    """What a serving test may run with a user's file whose batch axis is fixed at `fixed`,
    as its refusal says it: a Server or Offline batcher calls every batch from 1 to its max
    batch, so only a file fixed at 1 serves, at max batch 1."""
    return (f"a file with an open batch axis, or one fixed at 1 with {option} 1 (a Server or "
            f"Offline batcher calls every batch from 1 to its max batch; this file takes only "
            f"{fixed})")


# Runtimes that cannot answer LoadGen's queries, and why (their rows say so).
UNSERVED_RUNTIMES = {r.name: r.unserved for r in ROWS if r.unserved}
# A Server target above this many times the closed loop's samples/s on this machine is
# refused: a closed loop (no queueing, the best batch) is the most a SUT serves, and a
# target ten times over it only fills memory with a backlog until the timeout.
CLOSED_LOOP_HEADROOM = 10.0


def default_min_queries(scenario: str) -> int:
    """A test's minimum query count when the user names none: LoadGen's default, raised to
    what early stopping needs for Server (a Server test under 459 queries is INVALID at any
    rate). The streams keep LoadGen's 100: MultiStream's 662 would make a test minutes long
    at a slow model, and its INVALID verdict says why."""
    if scenario == "server":
        return max(DEFAULT_MIN_QUERIES, EARLY_STOPPING_MIN_QUERIES["server"])
    return DEFAULT_MIN_QUERIES


def early_stopping_note(scenario: str, min_query_count: int) -> str | None:
    """Why a minimum query count under early stopping's may make the test INVALID (the run
    keeps the user's value); None when it is enough, or the scenario has none."""
    need = EARLY_STOPPING_MIN_QUERIES.get(scenario)
    if need is None or min_query_count >= need:
        return None
    pct = SCENARIO_PERCENTILE[scenario]
    return (f"min queries {min_query_count}: LoadGen's early stopping cannot judge p{pct:g} "
            f"under {need} queries (a test that runs fewer is INVALID at any rate)")


@dataclass(frozen=True)
class ServeSpec:
    """One LoadGen test. The record's common columns (model, runtime, threads, ...) are the
    SUT's; batch_size is the largest batch the model is called with (SingleStream 1,
    MultiStream 8, Server and Offline the batcher's max batch)."""

    sut: RunSpec
    scenario: str
    min_duration_s: float = DEFAULT_MIN_DURATION_S
    min_query_count: int = DEFAULT_MIN_QUERIES
    target_qps: float | None = None  # Server: the Poisson arrival rate; Offline: expected
    bound_ms: float | None = None  # Server: p99 bound (LoadGen's); SingleStream: reported
    max_wait_ms: float = 0.0  # Server's batcher: the oldest query waits at most this long
    samples: int = DEFAULT_SAMPLES  # LoadGen's performance_sample_count
    replicas: int = 1  # Server, Offline: processes of sut.intra_threads each, one queue
    seed: int = 0  # LoadGen's qsl, sample-index and schedule seeds
    official: bool = False  # the run was asked for with the official preset
    # Server: exactly this many queries (a search's probes, a tuning's confirmations), so
    # every probe is held to one early-stopping strictness (engine/core/early_stopping.py):
    # LoadGen's min_query_count, with no minimum duration to raise it (min_duration_s is
    # then not LoadGen's); None: min_duration_s and min_query_count as LoadGen takes them.
    query_count: int | None = None
    kind = "serve"  # class constant, not a field: the runs table's `kind`
    profile_steps = 0

    # The record's common columns are the system under test's.
    model = property(lambda self: self.sut.model)
    framework = property(lambda self: self.sut.framework)
    runtime = property(lambda self: self.sut.runtime)
    batch_size = property(lambda self: self.sut.batch_size)
    intra_threads = property(lambda self: self.sut.intra_threads)
    inter_threads = property(lambda self: self.sut.inter_threads)
    precision = property(lambda self: self.sut.precision)
    image_size = property(lambda self: self.sut.image_size)
    device = property(lambda self: self.sut.device)
    weight_policy = property(lambda self: self.sut.weight_policy)
    user_model = property(lambda self: self.sut.user_model)

    @property
    def loadgen_min_duration_s(self) -> float:
        """The minimum duration LoadGen is given: none for a fixed query count (LoadGen then
        generates exactly min_query_count queries, GenerateQueries in its loadgen.cc, and a
        Server test issues every one)."""
        return 0.0 if self.query_count else self.min_duration_s

    @property
    def loadgen_min_queries(self) -> int:
        return self.query_count or self.min_query_count

    @property
    def policy(self) -> MeasurementPolicy:
        """The common columns' policy: LoadGen's minimum duration and query count (a fixed
        count: its queries' scheduled span at the target rate)."""
        span = (self.query_count / self.target_qps if self.query_count and self.target_qps
                else self.loadgen_min_duration_s)
        return MeasurementPolicy(warmup_iters=self.sut.policy.warmup_iters,
                                 min_time_s=span, min_iters=self.loadgen_min_queries,
                                 max_time_s=max(span, 0.001))

    @property
    def server_target_latency_ns(self) -> int:
        return int(round((self.bound_ms or DEFAULT_SERVER_BOUND_MS) * 1e6))

    def key(self) -> tuple:
        return (*self.sut.key(), self.scenario, self.target_qps, self.bound_ms,
                self.max_wait_ms, self.replicas)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ServeSpec":
        d = dict(d)
        d["sut"] = RunSpec.from_dict(d["sut"])
        return cls(**d)

    def validate(self, cores: int | None = None) -> "ServeSpec":
        """Return the spec with the SUT's defaults resolved, or UserError naming the field
        and the allowed range."""
        choice("scenario", self.scenario, SERVE_SCENARIOS)
        float_range("min_duration_s", self.min_duration_s, *SERVE_DURATION_RANGE)
        int_range("min_query_count", self.min_query_count, *SERVE_QUERIES_RANGE)
        if self.query_count is not None:
            int_range("query_count", self.query_count, *SEARCH_QUERIES_RANGE,
                      hint=" (the fewest LoadGen's early stopping judges a p99 on)")
            if self.scenario != "server":
                raise UserError(f"query_count: a fixed query count holds a Server test's "
                                f"p99 to one early-stopping strictness; {self.scenario} has "
                                "none; allowed: none, or scenario server", field="query_count")
        if self.target_qps is not None:
            float_range("target_qps", self.target_qps, *SERVE_QPS_RANGE)
        elif self.scenario == "server":
            raise UserError(f"target_qps: the server scenario needs a target QPS (its Poisson "
                            f"arrival rate); allowed: number {SERVE_QPS_RANGE[0]:g}.."
                            f"{SERVE_QPS_RANGE[1]:g}", field="target_qps")
        if self.bound_ms is not None:
            float_range("bound_ms", self.bound_ms, *SERVE_BOUND_MS_RANGE)
        float_range("max_wait_ms", self.max_wait_ms, *SERVE_WAIT_MS_RANGE)
        int_range("samples", self.samples, *SERVE_SAMPLES_RANGE)
        int_range("seed", self.seed, *SEED_RANGE)
        int_range("max_batch", self.sut.batch_size, *SERVE_BATCH_RANGE)
        want = SCENARIO_INPUTS[self.scenario].query_batch
        if want is not None and self.sut.batch_size != want:
            raise UserError(f"max_batch: {self.scenario} calls the model with {want} "
                            f"sample(s) a query; allowed: {want} (the batcher's max batch "
                            "is for server and offline)", field="max_batch")
        if self.sut.profile_steps or self.sut.replicas != 1:
            raise UserError("sut: a serving run's model is profiled and replicated by the "
                            "serving run itself; allowed: profile_steps 0, replicas 1",
                            field="sut")
        if self.sut.user_model is None and self.sut.model not in IMAGE_MODELS \
                and self.sut.model in CATALOG:
            # its sample library draws images: token ids would need a library of their own
            raise UserError(f"model: serving draws image samples; {self.sut.model} is a "
                            f"transformer encoder, measured by the inference kind here; "
                            f"allowed: {', '.join(IMAGE_MODELS)}", field="model")
        sut = self.sut.validate(cores)
        if sut.runtime in UNSERVED_RUNTIMES:
            raise UserError(f"runtime: {sut.runtime} {UNSERVED_RUNTIMES[sut.runtime]}; "
                            f"allowed: any other runtime of {sut.framework}",
                            field="runtime")
        self._check_replicas(sut, cores or logical_cores())
        return replace(self, sut=sut)

    def _check_replicas(self, sut: RunSpec, cores: int) -> None:
        """R replicas behind one queue: R processes of `threads` threads, each on cores of
        its own, fed by the batcher (Server, Offline); what cannot be replicated so is
        refused with the reason."""
        int_range("replicas", self.replicas, 1, cores,
                  hint=f" (this machine has {cores} logical cores)")
        if self.replicas == 1:
            return
        if self.scenario not in REPLICATED_SCENARIOS:
            raise UserError(f"replicas: {self.scenario} issues one query at a time (LoadGen "
                            "waits for each), so a second replica would only wait; allowed: "
                            f"1, or replicas with {' or '.join(REPLICATED_SCENARIOS)}",
                            field="replicas")
        if self.replicas * sut.intra_threads > cores:
            raise UserError(f"replicas: {self.replicas} replicas x {sut.intra_threads} "
                            f"threads = {self.replicas * sut.intra_threads} threads; allowed: "
                            f"at most {cores} (this machine's logical cores, one core per "
                            "thread): lower --replicas or --threads", field="replicas")
        if sut.device != "cpu":
            raise UserError(f"replicas: {self.replicas} replicas split the CPU's cores; one "
                            f"{sut.device} device is not split here; allowed: 1",
                            field="replicas")


def check_reachable(target_qps: float | None, closed_loop: float | None,
                    replicas: int = 1, *, field: str = "target_qps",
                    of: str = "this configuration") -> None:
    """UserError naming `field` when target_qps is over CLOSED_LOOP_HEADROOM times the
    closed loop's samples/s of the same configuration on this machine (the store's, None: no
    such run, nothing to judge by), times the replicas that share the queue (each serves one
    such closed loop at most). of: whose closed loop that is, as the message says it (a
    tuning's start rate is judged by its fastest candidate's)."""
    if target_qps is None or not closed_loop:
        return
    most = CLOSED_LOOP_HEADROOM * closed_loop * replicas
    if target_qps > most:
        reps = f" x {replicas} replicas" if replicas > 1 else ""
        raise UserError(f"{field}: {rate_text(target_qps)} QPS cannot be reached: the closed "
                        f"loop of {of} on this machine did {rate_text(closed_loop)} samples/s; "
                        f"allowed: up to {CLOSED_LOOP_HEADROOM:g}x the closed loop's "
                        f"{rate_text(closed_loop)} samples/s{reps}, i.e. {rate_text(most)}",
                        field=field)
