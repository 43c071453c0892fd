"""A real MLPerf LoadGen test in token-latency mode against a SUT with no model: each sample
gets its first token FIRST_TOKEN_S after LoadGen issues it and completes with its n_tokens
DONE_S after, both from one answering thread (LoadGen logs per thread, so a sample's two
calls from two threads could be processed out of order). Offline never reports a first
token, as LoadGen expects there. Run in-process, as tests/test_early_stopping.py runs
LoadGen; it returns LoadGen's two logs as text and what the SUT completed.

    python -m tests.token_probe server|offline|single-stream [tpot_ns=1 ...]   # its summary
"""

from __future__ import annotations

import heapq
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

__all__ = ["TokenRun", "run_token_test", "n_tokens_of"]

# The SUT's own fixed delays: a first token 1 ms after issue, the last one 3 ms after
FIRST_TOKEN_S = 0.001
DONE_S = 0.003


def n_tokens_of(sample_index: int) -> int:
    """2..5 tokens by sample index (LoadGen refuses fewer than 2: TPOT divides by n - 1),
    so a test's token count differs from a multiple of its sample count."""
    return 2 + sample_index % 4


@dataclass(frozen=True)
class TokenRun:
    summary: str
    detail: str
    samples: int  # the samples the SUT completed
    tokens: int  # the tokens it reported for them


class _Answerer:
    """One thread answering every sample at its due times (a heap of deadlines): the first
    token at issue + FIRST_TOKEN_S (not in Offline), completion at issue + DONE_S."""

    def __init__(self, lg, first_token: bool, tokens):
        self.lg, self.first_token, self.tokens_of = lg, first_token, tokens
        self.due: list = []
        self.cv = threading.Condition()
        self.stopping = False
        self.samples = self.tokens = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def issue(self, queries) -> None:
        now = time.perf_counter()
        with self.cv:
            for q in queries:
                if self.first_token:
                    heapq.heappush(self.due, (now + FIRST_TOKEN_S, 0, q.id, 0))
                heapq.heappush(self.due, (now + DONE_S, 1, q.id, self.tokens_of(q.index)))
            self.cv.notify()

    def _loop(self) -> None:
        lg = self.lg
        while True:
            with self.cv:
                while not self.stopping and (
                        not self.due or self.due[0][0] > time.perf_counter()):
                    self.cv.wait(timeout=self.due[0][0] - time.perf_counter()
                                 if self.due else None)
                if self.stopping:
                    return
                _, step, qid, n = heapq.heappop(self.due)
            if step == 0:
                lg.FirstTokenComplete([lg.QuerySampleResponse(qid, 0, 0)])
            else:
                self.samples += 1
                self.tokens += n
                lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, 0, 0, n)])

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify()
        self.thread.join()


def run_token_test(scenario: str, *, ttft_ns: int = 1_000_000_000,
                   tpot_ns: int = 1_000_000_000, target_qps: float = 2000.0,
                   min_queries: int = 500, min_duration_ms: int = 200,
                   tokens=n_tokens_of, token_mode: bool = True) -> TokenRun:
    """One PerformanceOnly token-mode test of at least min_queries queries and
    min_duration_ms: Server at target_qps (early stopping passes none under 459 queries),
    SingleStream one query at a time, Offline one query of min_queries samples (its
    expected QPS is set to 1 so the count decides). tokens(sample_index) is each sample's
    n_tokens. token_mode False runs the same SUT as today's tests do: no first token."""
    import mlperf_loadgen as lg

    answer = _Answerer(lg, token_mode and scenario != "offline", tokens)
    sut = lg.ConstructSUT(answer.issue, lambda: None)
    qsl = lg.ConstructQSL(64, 64, lambda s: None, lambda s: None)
    ts = lg.TestSettings()
    ts.scenario = {"server": lg.TestScenario.Server, "offline": lg.TestScenario.Offline,
                   "single-stream": lg.TestScenario.SingleStream}[scenario]
    ts.mode = lg.TestMode.PerformanceOnly
    ts.use_token_latencies = token_mode
    ts.ttft_latency, ts.tpot_latency = ttft_ns, tpot_ns
    ts.min_duration_ms, ts.min_query_count = min_duration_ms, min_queries
    ts.server_target_qps = target_qps
    # Offline's one query holds max(min_query_count, 1.1 x expected QPS x min duration)
    ts.offline_expected_qps = 1.0
    ts.single_stream_expected_latency_ns = int(DONE_S * 1e9)
    with tempfile.TemporaryDirectory() as out:
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        try:
            lg.StartTestWithLogSettings(sut, qsl, ts, log)
        finally:
            answer.stop()
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        texts = []
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
            with open(os.path.join(out, name)) as f:
                texts.append(f.read())
    return TokenRun(texts[0], texts[1], answer.samples, answer.tokens)


if __name__ == "__main__":
    run = run_token_test(sys.argv[1], **{k: int(v) for k, v in
                                         (a.split("=") for a in sys.argv[2:])})
    print(run.summary)
    print(f"SUT: {run.samples} samples, {run.tokens} tokens", file=sys.stderr)
