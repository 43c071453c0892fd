from engine.worker.measure import STOP_MAX_ITERS, STOP_MAX_TIME, STOP_POLICY_MET, time_loop
from engine.core import MeasurementPolicy
from engine.core.policy import STOP_IMPRECISE, WARM_ITERS, WARM_MAX_S, WARM_SETTLED


class FakeClock:
    """Advances by a fixed step on every read: a step() costs one tick between reads."""

    def __init__(self, tick_ns):
        self.t = 0
        self.tick = tick_ns

    def __call__(self):
        self.t += self.tick
        return self.t


def test_stops_when_both_min_time_and_min_iters_are_met():
    # Each iteration reads the clock twice: 10 ms per read, one sample = 10 ms.
    policy = MeasurementPolicy(warmup_iters=3, min_time_s=1.0, min_iters=30)
    res = time_loop(lambda: None, policy, clock=FakeClock(10_000_000))
    assert len(res.warmup_ns) == 3
    assert set(res.samples_ns) == {10_000_000}
    # the loop start is one read; elapsed after n iterations = 2n * 10 ms: 1 s at n = 50.
    assert len(res.samples_ns) == 50
    assert res.stop_reason == STOP_POLICY_MET


def test_min_iters_dominates_for_slow_steps():
    policy = MeasurementPolicy(warmup_iters=0, min_time_s=0.1, min_iters=30)
    res = time_loop(lambda: None, policy, clock=FakeClock(50_000_000))
    assert len(res.samples_ns) == 30 and res.stop_reason == STOP_POLICY_MET
    assert res.warmup_ns == ()


def test_max_time_stops_before_min_iters():
    policy = MeasurementPolicy(warmup_iters=0, min_time_s=1.0, min_iters=30, max_time_s=2.0)
    res = time_loop(lambda: None, policy, clock=FakeClock(200_000_000))
    # elapsed 2n * 0.2 s >= 2 s at n = 5
    assert len(res.samples_ns) == 5 and res.stop_reason == STOP_MAX_TIME


def test_max_iters_caps_fast_steps():
    # No warm-up: nothing to size a block from, so each sample is one call.
    policy = MeasurementPolicy(warmup_iters=0, min_time_s=5.0, min_iters=10, max_iters=100)
    res = time_loop(lambda: None, policy, clock=FakeClock(1000))
    assert len(res.samples_ns) == 100 and res.stop_reason == STOP_MAX_ITERS


def test_device_measured_durations_replace_the_cpu_clock():
    # A CUDA step returns its event-measured duration: that, not the CPU delta, is stored.
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=0.0, min_iters=5)
    res = time_loop(lambda: 4242, policy, clock=FakeClock(1_000_000))
    assert res.samples_ns == (4242,) * 5 and res.warmup_ns == (4242, 4242)


def test_progress_is_reported_between_iterations():
    seen = []
    policy = MeasurementPolicy(warmup_iters=0, min_time_s=1.0, min_iters=1)
    time_loop(lambda: None, policy, clock=FakeClock(100_000_000),
              on_progress=lambda n, ns: seen.append(n))
    # reads at 100 ms steps; reports at most every 250 ms of loop time
    assert seen == [2, 4]


def test_warm_up_ends_early_once_its_time_budget_is_spent():
    # 0.4 s per read: after the 2nd warm-up iteration 1.6 s have passed (>= 1 s budget).
    policy = MeasurementPolicy(warmup_iters=10, warmup_max_s=1.0, min_time_s=0.0, min_iters=2)
    res = time_loop(lambda: None, policy, clock=FakeClock(400_000_000))
    assert len(res.warmup_ns) == 2
    assert len(res.samples_ns) == 2


def test_garbage_collector_is_off_while_timing_and_restored_after():
    import gc

    import pytest
    seen = []
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=0.0, min_iters=3)
    assert gc.isenabled()
    res = time_loop(lambda: seen.append(gc.isenabled()), policy, clock=FakeClock(2_000_000))
    assert seen == [False] * 5 and res.gc_disabled is True
    assert gc.isenabled()

    def boom():
        raise RuntimeError("step failed")
    with pytest.raises(RuntimeError):
        time_loop(boom, policy, clock=FakeClock(1_000))
    assert gc.isenabled()  # a failed run leaves the worker's collector as it found it


class CallClock:
    """Time moves only inside a call: each step() costs `per_call` ns; reads are free."""

    def __init__(self, per_call):
        self.t, self.per_call, self.calls = 0, per_call, 0

    def __call__(self):
        return self.t

    def step(self):
        self.t += self.per_call
        self.calls += 1


def test_calls_under_a_millisecond_are_timed_in_blocks():
    from engine.worker.measure import BLOCK_TARGET_NS, block_size

    clock = CallClock(100_000)  # 0.1 ms per call
    policy = MeasurementPolicy(warmup_iters=3, min_time_s=0.0, min_iters=5)
    res = time_loop(clock.step, policy, clock=clock)
    # warm-up's median call is 0.1 ms: blocks of 10 calls fill the 1 ms target
    assert BLOCK_TARGET_NS == 1_000_000 and res.block_calls == 10
    assert res.samples_ns == (100_000,) * 5  # each sample: a block's time over its calls
    assert clock.calls == 3 + 5 * 10
    assert res.wall_ns == 5 * 10 * 100_000
    # a call of 1 ms or more, or nothing to size from, is one call per sample
    assert [block_size(w) for w in ([1_000_000], [], [3_000_000, 3_000_000, 10])] == [1, 1, 1]
    assert block_size([300_000, 300_000, 2_000_000]) == 4  # ceil(1 ms / 0.3 ms)


def test_device_timed_steps_are_never_blocked():
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=0.0, min_iters=3)
    res = time_loop(lambda: 500, policy, clock=FakeClock(10))
    assert res.block_calls == 1 and res.samples_ns == (500,) * 3


def test_a_maxed_interleaved_contender_times_nothing_more_and_its_interference_skips_those_turns():
    """Blocks of 1 ms on a clock of 1 ms per read: each block is one sample; max_iters 2
    maxes the contender after its second block, and its third turn times nothing."""
    import queue
    from types import SimpleNamespace

    from engine.core.protocol import BlockTimed, Stop, TimeBlock, encode
    from engine.worker.harness import Gate

    commands, emitted = queue.Queue(), []
    for cmd in (TimeBlock(0.001), TimeBlock(0.001), TimeBlock(0.001), Stop()):
        commands.put(encode(cmd))
    frame = SimpleNamespace(sync="blocks", commands=commands, emit=emitted.append)
    gate = Gate(frame, "r1")
    policy = MeasurementPolicy(warmup_iters=1, min_time_s=0.0, min_iters=1, max_iters=2)
    res = time_loop(lambda: None, policy, clock=FakeClock(1_000_000), gate=gate)
    assert (len(res.samples_ns), res.blocks, res.stop_reason) == (2, 2, STOP_MAX_ITERS)
    blocks = [ev for ev in emitted if isinstance(ev, BlockTimed)]
    assert [(b.iters, b.elapsed_ns, b.maxed) for b in blocks] == [
        (1, 2_000_000, False), (2, 4_000_000, True), (2, 4_000_000, True)]
    assert len(gate.blocks) == 2  # the idle third turn is not its own block


def test_after_warmup_runs_once_between_warm_up_and_the_first_timed_call():
    """Where a backend resets its device peak: warm-up's calls before it, every timed call
    after it, and nothing counted on the clock for it."""
    calls = []
    policy = MeasurementPolicy(warmup_iters=3, min_time_s=0.0, min_iters=4)
    res = time_loop(lambda: calls.append("call") or 1_000, policy, clock=FakeClock(10),
                    after_warmup=lambda: calls.append("reset"))
    assert calls == ["call"] * 3 + ["reset"] + ["call"] * 4
    assert res.warmup_ns == (1_000,) * 3 and res.samples_ns == (1_000,) * 4


def test_after_warmup_precedes_an_interleaved_contenders_first_block():
    import queue
    from types import SimpleNamespace

    from engine.core.protocol import Stop, TimeBlock, encode
    from engine.worker.harness import Gate

    calls, commands = [], queue.Queue()
    for cmd in (TimeBlock(0.001), Stop()):
        commands.put(encode(cmd))
    frame = SimpleNamespace(sync="blocks", commands=commands,
                            emit=lambda ev: calls.append(type(ev).__name__))
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=0.0, min_iters=1)
    time_loop(lambda: calls.append("call"), policy, clock=FakeClock(1_000_000),
              gate=Gate(frame, "r1"), after_warmup=lambda: calls.append("reset"))
    # warm-up, the reset, then the parent asked (Armed) and one block timed
    assert calls == ["call", "call", "reset", "Armed", "call", "BlockTimed"]


class ScriptedSteps:
    """A step that takes the next of `durations` (ns, the last one repeated) on a clock
    that moves only when a step runs."""

    def __init__(self, durations):
        self.t, self.durations, self.i = 0, list(durations), 0

    def clock(self):
        return self.t

    def step(self):
        self.t += self.durations[min(self.i, len(self.durations) - 1)]
        self.i += 1


def test_warm_up_ends_once_the_last_three_calls_median_is_within_one_percent_of_the_three_before():
    ms = 1_000_000
    s = ScriptedSteps([30 * ms, 18 * ms, 12 * ms, 10.1 * ms, 10 * ms, 9.95 * ms, 10.04 * ms,
                       10.02 * ms, 9.98 * ms, 10 * ms])
    policy = MeasurementPolicy(warmup_iters=10, warmup_max_s=5.0, min_time_s=0.1, min_iters=5)
    res = time_loop(s.step, policy, clock=s.clock)
    # call 7: median(10, 9.95, 10.04) = 10 against median(18, 12, 10.1) = 12, not within;
    # call 8: median(9.95, 10.04, 10.02) = 10.02 against median(12, 10.1, 10) = 10.1, within
    assert (len(res.warmup_ns), res.warmup_stop) == (8, WARM_SETTLED)
    # the caps as before: still falling, it runs all of warmup_iters, or until warmup_max_s
    s = ScriptedSteps([int(20 * ms * 0.95 ** i) for i in range(20)])
    res = time_loop(s.step, policy, clock=s.clock)
    assert (len(res.warmup_ns), res.warmup_stop) == (10, WARM_ITERS)
    s = ScriptedSteps([400 * ms, 300 * ms, 700 * ms])
    res = time_loop(s.step, MeasurementPolicy(min_time_s=0.1, min_iters=2), clock=s.clock)
    assert (len(res.warmup_ns), res.warmup_stop) == (3, WARM_MAX_S)
    off = MeasurementPolicy(warmup_iters=10, warmup_max_s=5.0, min_time_s=0.1, min_iters=5,
                            settle_warmup=False)
    flat = ScriptedSteps([10 * ms])
    res = time_loop(flat.step, off, clock=flat.clock)
    assert (len(res.warmup_ns), res.warmup_stop) == (10, WARM_ITERS)


def test_timing_goes_on_past_the_minimums_until_the_medians_interval_is_within_its_tolerance():
    ms = 1_000_000
    # 10 ms calls, every 4th one 10.5 ms: the minimums (0.3 s, 30 calls) are met at 30
    # calls, where the interval (x_(10), x_(21)) is (10, 10) -> precise at once
    calm = ScriptedSteps([10 * ms] * 10 + [10 * ms, 10 * ms, 10 * ms, 10.5 * ms] * 100)
    policy = MeasurementPolicy(warmup_iters=10, min_time_s=0.3, min_iters=30)
    res = time_loop(calm.step, policy, clock=calm.clock)
    assert (len(res.samples_ns), res.stop_reason) == (30, STOP_POLICY_MET)
    # alternating 10 and 12 ms: the median's interval spans both values for ever, so timing
    # ends at precise_max_x (2) x min_time_s = 0.6 s, the run valid and said imprecise
    wide = ScriptedSteps([10 * ms, 12 * ms] * 500)
    res = time_loop(wide.step, policy, clock=wide.clock)
    assert res.stop_reason == STOP_IMPRECISE
    assert 0.6e9 <= res.wall_ns < 0.6e9 + 0.1e9 + 12 * ms  # checked every 100 ms at most
    # tolerance 0: the minimums alone, as before issue 39
    wide = ScriptedSteps([10 * ms, 12 * ms] * 500)
    res = time_loop(wide.step, MeasurementPolicy(warmup_iters=10, min_time_s=0.3,
                                                 min_iters=30, median_tol=0.0),
                    clock=wide.clock)
    assert (len(res.samples_ns), res.stop_reason) == (30, STOP_POLICY_MET)


def test_an_interleaved_contender_is_met_only_once_its_median_is_precise_or_capped():
    import queue
    from types import SimpleNamespace

    from engine.core.protocol import BlockTimed, Stop, TimeBlock, encode
    from engine.worker.harness import Gate

    ms = 1_000_000
    commands, emitted = queue.Queue(), []
    for cmd in [TimeBlock(0.1)] * 8 + [Stop()]:
        commands.put(encode(cmd))
    frame = SimpleNamespace(sync="blocks", commands=commands, emit=emitted.append)
    wide = ScriptedSteps([10 * ms, 12 * ms] * 500)
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=0.2, min_iters=10)
    res = time_loop(wide.step, policy, clock=wide.clock, gate=Gate(frame, "r1"))
    met = [b.met for b in emitted if isinstance(b, BlockTimed)]
    # blocks of ~0.1 s: the minimums at block 2, imprecise until 0.4 s (2 x 0.2 s) at block 4
    assert met == [False, False, False, True, True, True, True, True]
    assert res.stop_reason == STOP_IMPRECISE


def test_the_new_policy_fields_are_checked():
    import pytest

    from engine.core.errors import UserError

    for bad in (dict(median_tol=-0.1), dict(median_tol=0.6), dict(precise_max_x=0.5),
                dict(settle_warmup="yes")):
        with pytest.raises(UserError) as e:
            MeasurementPolicy(**bad).validate()
        assert e.value.field == next(iter(bad))
