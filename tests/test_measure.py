from engine.worker.measure import STOP_MAX_ITERS, STOP_MAX_TIME, STOP_POLICY_MET, time_loop
from engine.core import MeasurementPolicy


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
