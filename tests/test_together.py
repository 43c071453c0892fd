"""Contenders timed alternately in blocks, their workers warm at once (issue 24 point 4), and
replicas sharing one window (point 5): plans on fixed specs, windows on fixed sample times,
and real selftest workers for the protocol, its failures and its fallbacks."""

from dataclasses import replace

import pytest

from engine.core.protocol import (Armed, BlockTimed, Failed, Ready,
                                  RunNext, Started, Stop, TimeBlock)
from engine.scenarios.inference.messages import InferenceResult
from engine.run.process.drive import Timing, WorkerEvent
from engine.run.process.executors import window_times
from engine.run.process.neighbour import _phases
from engine.run.process.replicas import combine_replicas, replica_window_s
from engine.run.process.runner import Runner
from engine.run.process.together import plan_together
from engine.core import MeasurementPolicy
from engine.scenarios.inference.expand import expand_sweep
from seeds.records import spec

TORCH_TF = expand_sweep(["mobilenet_v3_small"], ["torch", "tensorflow"], [1, 8], [1], cores=2)


def label(phase):
    return [(w, s.framework, s.runtime, s.batch_size) for w, s in phase]


def test_each_contest_is_a_phase_of_its_contenders_workers_first_mover_first():
    plan, left, why = plan_together(TORCH_TF)
    assert (left, why) == ([], "")
    assert [label(p) for p in plan.phases] == [
        [(0, "torch", "eager", 1), (1, "tensorflow", "tf_function", 1)],
        [(0, "torch", "eager", 8), (1, "tensorflow", "tf_function", 8)]]
    assert [[(s.framework, s.batch_size) for s in w] for w in plan.workers] == [
        [("torch", 1), ("torch", 8)], [("tensorflow", 1), ("tensorflow", 8)]]
    # a reversed round: TensorFlow's batch 8 comes first, and goes first
    plan, _, _ = plan_together(list(reversed(TORCH_TF)))
    assert [label(p) for p in plan.phases] == [
        [(0, "tensorflow", "tf_function", 8), (1, "torch", "eager", 8)],
        [(0, "tensorflow", "tf_function", 1), (1, "torch", "eager", 1)]]


def test_two_contenders_of_one_worker_take_turns_against_the_other():
    specs = expand_sweep(["mobilenet_v3_small"], ["torch", "tensorflow"], [1], [1], cores=2,
                         runtimes=["eager", "channels_last", "tf_function"])
    plan, _, _ = plan_together(specs)
    assert [label(p) for p in plan.phases] == [
        [(0, "torch", "eager", 1), (1, "tensorflow", "tf_function", 1)],
        [(0, "torch", "channels_last", 1)]]
    # At the next batch size the model the torch worker holds (channels_last) goes first
    specs = expand_sweep(["mobilenet_v3_small"], ["torch", "tensorflow"], [1, 8], [1], cores=2,
                         runtimes=["eager", "channels_last", "tf_function"])
    plan, _, _ = plan_together(specs)
    assert [label(p) for p in plan.phases] == [
        [(0, "torch", "eager", 1), (1, "tensorflow", "tf_function", 1)],
        [(0, "torch", "channels_last", 1)],
        [(0, "torch", "channels_last", 8), (1, "tensorflow", "tf_function", 8)],
        [(0, "torch", "eager", 8)]]


def test_what_cannot_interleave_is_left_one_after_another_with_the_reason():
    libtorch = spec(runtime="libtorch")
    replicas = spec(replicas=2, intra_threads=1, model="identity", framework="selftest")
    plan, left, why = plan_together(TORCH_TF + [libtorch, replicas])
    assert len(plan.phases) == 2 and left == [libtorch, replicas]
    assert why == "replicas share a window of their own; the LibTorch runner times itself"
    torch_only = [s for s in TORCH_TF if s.framework == "torch"]
    assert plan_together(torch_only) == (None, torch_only, "")  # no contest at all
    eager_script = expand_sweep(["mobilenet_v3_small"], ["torch"], [1], [1], cores=2,
                                runtimes=["eager", "torchscript"])
    assert plan_together(eager_script) == (None, eager_script,
                                           "each contest's contenders share one worker")
    # workers that would not fit in memory together run one after another
    plan, left, why = plan_together(TORCH_TF, available_bytes=4 * 2**30)
    assert plan is None and left == TORCH_TF
    assert why == ("the 2 workers need about 3.3 GiB together, over 75% of the 4.0 GiB "
                   "available: one after another")
    # what the runs measured before replaces the guess
    small = {("torch", 1, 1, "cpu", 0, 1, ""): 2**30, ("tensorflow", 1, 1, "cpu", 0, 1, ""): 2**30}
    assert plan_together(TORCH_TF, available_bytes=4 * 2**30, peak_bytes=small)[0] is not None


def _aa(models=("identity",), min_time=0.3):
    # the minimums alone (median_tol 0): whether a selftest call's median is precise within
    # the tolerance would decide the block count these tests assert
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=min_time, min_iters=5,
                               median_tol=0.0)
    one = expand_sweep(list(models), ["selftest"], [1], [1], policy=policy, cores=2)
    return one + [replace(s, replica=1) for s in one]


def test_an_aa_contest_is_timed_in_alternating_blocks_by_real_workers(worker_env):
    notices = []
    recs = Runner().run(_aa(), on_record=lambda r: None, on_event=notices.append)
    assert [n.mode for n in notices if isinstance(n, Timing)] == ["interleaved"]
    events = [n for n in notices if isinstance(n, WorkerEvent)]
    assert [(r.status, r.stop_reason) for r in recs] == [("ok", "policy met")] * 2
    for rec in recs:
        assert rec.extra["interleaved"]["block_s"] == 0.25
        assert rec.extra["interleaved"]["blocks"] == 2  # 0.3 s in blocks of 0.25 s
        assert rec.measured_s >= 0.3 and rec.iterations >= 5
    assert sorted(r.extra["interleaved"]["with"][0] for r in recs) == [
        "selftest (python)", "selftest (python) #2"]
    # the blocks in turn: A B, then B A
    a, b = (e.spec.replica for e in events if isinstance(e.event, Started))
    order = [e.spec.replica for e in events if isinstance(e.event, BlockTimed)]
    assert order == [a, b, b, a]


def test_a_contender_that_dies_leaves_one_row_and_its_rest_runs_one_after_another(
        worker_env):
    recs = Runner().run(_aa(("fault_exit", "identity"), min_time=0.05),
                        on_record=lambda r: None)
    got = sorted((r.model, r.status, bool(r.extra.get("sequential"))) for r in recs)
    assert got == [("fault_exit", "killed", False), ("fault_exit", "killed", False),
                   ("identity", "ok", True), ("identity", "ok", True)]
    assert {r.extra["sequential"] for r in recs if r.model == "identity"} == {
        "its interleaved worker ended early"}


def test_a_hanging_contender_times_out_in_one_row_each(worker_env):
    recs = Runner(timeout_s=2).run(_aa(("fault_hang",), min_time=0.05),
                                   on_record=lambda r: None)
    assert [(r.model, r.status) for r in recs] == [("fault_hang", "timeout")] * 2
    assert recs[0].reason.startswith("exceeded the 2 s wall-time limit per run (interleaved")


def test_replicas_count_only_what_fell_inside_the_window_they_all_covered():
    ms = 1_000_000

    def replica(start, calls):  # back-to-back 10 ms samples from `start` (ms)
        ends = tuple((start + 10 * (i + 1)) * ms for i in range(calls))
        return InferenceResult("r", load_s=0.1, first_forward_s=0.01, warmup_ns=(ms,),
                               samples_ns=(10 * ms,) * calls, sample_ends_ns=ends,
                               measured_s=calls / 100, warmup_s=0.001, stop_reason="window",
                               peak_rss_bytes=100, peak_rss_method="VmHWM")
    # replica 1 from 0 to 1000 ms; replica 2 from 5 ms to 1005 ms: common 5..1000 ms
    res = combine_replicas([replica(0, 100), replica(5, 100)], batch_size=2)
    assert res.window_s == pytest.approx(0.995) and res.measured_s == 1.0
    # 99.5 calls of each inside 995 ms: 100 calls/s each, times batch 2
    assert [round(t, 6) for t in res.replica_throughputs] == [200.0, 200.0]
    assert (res.window_start_skew_ms, res.window_end_skew_ms) == (5.0, 5.0)
    assert round(res.window_skew_frac, 4) == 0.005 and res.flags == ()  # under 1 %
    assert res.sample_ends_ns is None and res.broken is None
    skewed = combine_replicas([replica(0, 100), replica(50, 100)], batch_size=1)
    assert skewed.flags == ("replica windows apart by 5.3% of the common window (flag "
                            "above 1%): the summed throughput counts only the common "
                            "window",)
    assert len(skewed.samples_ns) == 200 and skewed.peak_rss_bytes == 200
    apart = combine_replicas([replica(0, 10), replica(500, 10)], batch_size=1)
    assert apart.broken == ("the replicas' windows did not overlap: no common window to "
                            "sum their throughput over")


def test_the_replicas_window_fits_the_slowest_replicas_min_iters():
    policy = MeasurementPolicy(min_time_s=2.0, min_iters=30, max_time_s=60.0)
    assert replica_window_s(policy, 10_000_000) == 2.11  # 30 x 10 ms fit in 2 s (+5 %)
    assert replica_window_s(policy, 100_000_000) == pytest.approx(3.6)  # 1.2 x 30 x 0.1 s
    assert replica_window_s(policy, 10_000_000_000) == 60.0  # at most max_time
    assert window_times(2.0, 1_000_000_000) == (1_050_000_000, 3_050_000_000)


def test_a_neighbours_phases_come_and_go_from_its_seed():
    onoff = _phases("onoff", 3, (3.0, 8.0), (4.0, 12.0))
    first = [next(onoff) for _ in range(4)]
    assert [busy for busy, _ in first] == [True, False, True, False]
    assert all(3 <= s <= 8 for busy, s in first if busy)
    assert all(4 <= s <= 12 for busy, s in first if not busy)
    again = _phases("onoff", 3, (3.0, 8.0), (4.0, 12.0))
    assert [next(again) for _ in range(4)] == first  # seeded
    assert next(_phases("steady", 0, (1, 2), (1, 2))) == (True, 3600.0)


class _Handle:
    """A worker as the runner sees it, scripted: answers commands with protocol events."""

    def __init__(self, runs, hangs: bool):
        import queue
        self.events, self.runs, self.hangs = queue.Queue(), [r.run_id for r in runs], hangs
        self.killed = False
        self.events.put(Ready(1, 0.1, {}, {}, {}, {}))

    def command(self, cmd):
        rid = self.runs[0]
        if isinstance(cmd, RunNext):
            self.events.put(Started(rid, 0.0))
            if not self.hangs:
                self.events.put(Armed(rid, 1))

    def kill(self):
        # a killed worker's last words can still be in its pipe: a result for its run
        self.killed = True
        self.events.put(Failed(self.runs[0], "error", "late"))
        self.events.put(None)

    def close(self):
        return -9 if self.killed else 0

    def stderr_tail(self):
        return ""

    def classify(self, rc):
        return "killed", "killed", "SIGKILL"


def test_a_timed_out_phase_leaves_one_row_per_run_whatever_its_workers_still_send():
    from engine.run.process.together import plan_together, run_together

    class Executor:
        interleaves = True

        def __init__(self):
            self.handles = []

        def start(self, runs, first, cap, sync=None, trace_dir=None):
            self.handles.append(_Handle(runs, hangs=len(self.handles) == 1))
            return self.handles[-1]

        def core_ids(self):
            return [0, 1]

    class Clock:  # every read a minute later: the phase's deadline passes at once
        t = 0.0

        def __call__(self):
            self.t += 60.0
            return self.t

    runner = Runner(executor=Executor(), clock=Clock(), timeout_s=5)
    rows = []
    plan, _, _ = plan_together(_aa())
    left = run_together(runner, plan, {"sweep_id": "s", "round_no": 1}, rows.append,
                        lambda ev: None, lambda spec: None)
    assert left == []
    assert sorted(r.status for r in rows) == ["timeout", "timeout"]
    assert len({r.run_id for r in rows}) == 2  # the late "failed" made no second row



def test_a_phases_rows_are_written_reference_counter_first_whoever_finished_first():
    """TensorFlow's GFLOP/s is computed on the torch FLOP count stored with torch's row: a
    phase holds its results and writes torch's first even when TensorFlow's came first."""
    from engine.run.process.together import plan_together, run_together
    handles = {}

    class Handle(_Handle):
        def command(self, cmd):
            rid = self.runs[0]
            if isinstance(cmd, TimeBlock):
                self.events.put(BlockTimed(rid, 5, 1_000_000, met=True, maxed=False))
            elif isinstance(cmd, Stop) and self is handles["tensorflow"]:  # TensorFlow's first
                for h in (self, handles["torch"]):
                    h.events.put(InferenceResult(h.runs[0], None, None, (), (1,), 0.0, 0.0,
                                                 "policy met"))
            else:
                super().command(cmd)

    class Executor:
        interleaves = True

        def start(self, runs, first, cap, sync=None, trace_dir=None):
            handles[first.framework] = Handle(runs, hangs=False)
            return handles[first.framework]

        def core_ids(self):
            return [0, 1]

    runner = Runner(executor=Executor(), timeout_s=5)
    runner._record = lambda rid, spec, tags, ev, ctx, h: (spec.framework, ev.kind)
    specs = expand_sweep(["mobilenet_v3_small"], ["torch", "tensorflow"], [1], [1], cores=2)
    plan, _, _ = plan_together(specs)
    rows = []
    left = run_together(runner, plan, {"sweep_id": "s", "round_no": 1}, rows.append,
                        lambda ev: None, lambda spec: None)
    assert left == []
    assert rows == [("torch", InferenceResult.kind), ("tensorflow", InferenceResult.kind)]
