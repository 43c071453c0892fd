"""Serving a language model under MLPerf LoadGen, measured (issue 38's measures); run by
`bench/serve.py --generation` or directly:

1. What LoadGen and our reporting cost per output token, at the max rate the search found:
   the front's CPU time over its test per output token (LoadGen's threads, the readers
   that make its first-token and completion calls, the live report; they share the
   engine's cores) plus the engine process's own time writing each token's line, against
   the test's median TPOT. Target: at most 1 % of TPOT.
2. Our p99 TTFT and p99 TPOT against LoadGen's own summary at that test. Ours count from
   the moment the front was handed a request, LoadGen's from its scheduled time. Target:
   within 2 %.
3. Continuous batching against one request at a time (PyTorch eager): the max request rate
   under the same bounds, each a full search (every probe LoadGen VALID with early
   stopping on both bounds, `--queries` requests each), the two engines alternated in
   `--pairs` pairs (CB first in odd pairs, eager first in even ones) so drift falls on both;
   the ratio per pair, its geometric mean and range.

    .venv/bin/python bench/serve_generation.py [--model smollm2_135m] [--threads 2]
        [--prompt-len 32] [--output-len 16] [--seqs 8] [--ttft-ms 2000] [--tpot-ms 200]
        [--queries 459] [--pairs 3] [--precision 0.1]

Nothing is stored (the runs' records are read as they end); nothing is timed in tests. A probe of N requests at
q requests/s runs N / q seconds (an INVALID one longer: its queue drains after the last
arrival). On this 2-core machine (2026-11-28) CB's search took 19 min (6 probes, max 3.96
req/s), but eager serves one request in ~1.7 s (closed loop ~0.58 req/s) and was INVALID
at 0.405 req/s (p99 TTFT 7.5 s): a one-at-a-time server meets a 2 s TTFT bound only at
about a third of its capacity, so each VALID eager probe of 459 requests runs ~45 min, one
eager search 3-4 h, and measure 3's three pairs 10 h or more of a quiet machine.
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.run.process.runner import Runner  # noqa: E402
from engine.run.search.gen_max_rate import figures_of, search_in  # noqa: E402
from engine.scenarios.genserve.spec import GenServeSpec  # noqa: E402


START_SHARE = 0.7


def _closed(runner, base, users: int, requests: int):
    spec = GenServeSpec(**{**base, "scenario": "closed-loop", "users": users,
                           "min_query_count": requests}).validate()
    [rec] = runner.run([spec], on_record=lambda r: None)
    g = figures_of(rec)
    if rec.status != "ok" or not g.get("requests_per_s"):
        raise SystemExit(f"{spec.runtime} closed loop: {rec.status}: {rec.reason[:300]}")
    return g["requests_per_s"]


def search(runner, base: dict, args) -> tuple:
    """(the search, its closed-loop estimate): a closed loop at the engine's full batch is
    the most a Server test can sustain, and Poisson arrivals at that rate queue without
    end; the first target is START_SHARE of it (a lower first target costs a longer probe:
    N requests at q requests/s run N / q seconds)."""
    start = START_SHARE * _closed(runner, base, base["max_num_seqs"],
                                  max(16, 2 * base["max_num_seqs"]))
    spec = GenServeSpec(**{**base, "scenario": "server", "target_qps": start,
                           "query_count": args.queries}).validate()

    def run(s):
        [rec] = runner.run([s], on_record=lambda r: None)
        g = figures_of(rec)
        print(f"    {s.runtime} {s.target_qps:.3g} req/s: {rec.status} "
              f"{g.get('loadgen_result')} p99 TTFT {g.get('loadgen_ttft_p99_ms')} ms, "
              f"p99 TPOT {g.get('loadgen_tpot_p99_ms')} ms", flush=True)
        return rec
    return search_in(spec, run, start_qps=start, query_count=args.queries,
                     precision=args.precision, max_probes=args.max_probes), start


def overhead(rec) -> dict:
    g = figures_of(rec)
    stats = json.loads(g["engine_stats"]) if isinstance(g.get("engine_stats"), str) \
        else (g.get("engine_stats") or {})
    emits = stats.get("emits") or 0
    emit_us = stats.get("emit_ns", 0) / emits / 1e3 if emits else float("nan")
    tpot_ms = g["tpot_p50_ms"]
    per_token_us = g["front_cpu_us_per_token"] + emit_us
    return {"front_us": g["front_cpu_us_per_token"], "emit_us": emit_us,
            "tpot_ms": tpot_ms, "share": per_token_us / (tpot_ms * 1e3),
            "ttft": (g["ttft_p99_ms"], g["loadgen_ttft_p99_ms"]),
            "tpot": (g["tpot_p99_ms"], g["loadgen_tpot_p99_ms"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2_135m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--ttft-ms", type=float, default=2000.0)
    ap.add_argument("--tpot-ms", type=float, default=200.0)
    ap.add_argument("--queries", type=int, default=459)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--precision", type=float, default=0.1)
    ap.add_argument("--max-probes", type=int, default=10)
    ap.add_argument("--skip-eager", action="store_true",
                    help="measures 1 and 2 only (one CB search)")
    args = ap.parse_args()
    runner = Runner(timeout_s=7200)
    common = dict(model=args.model, prompt_len=args.prompt_len, output_len=args.output_len,
                  intra_threads=args.threads, ttft_bound_ms=args.ttft_ms,
                  tpot_bound_ms=args.tpot_ms, preset="custom")
    cb = {**common, "runtime": "openvino_genai_cb", "max_num_seqs": args.seqs}
    eager = {**common, "runtime": "eager", "max_num_seqs": 1}
    print(f"{args.model}, {args.threads} threads, prompt {args.prompt_len}, output "
          f"{args.output_len}, bounds p99 TTFT {args.ttft_ms:g} ms / p99 TPOT "
          f"{args.tpot_ms:g} ms, {args.queries} requests a probe", flush=True)
    ratios, first = [], None
    for pair in range(1 if args.skip_eager else args.pairs):
        order = [("cb", cb), ("eager", eager)]
        if pair % 2:
            order.reverse()
        found = {}
        for name, base in order[:1] if args.skip_eager else order:
            print(f"pair {pair + 1}: {name} search", flush=True)
            res, start = search(runner, base, args)
            found[name] = res
            print(f"  {name}: first target {start:.3g} req/s; max {res.max_qps} req/s "
                  f"({res.stop_reason})", flush=True)
        if first is None and found["cb"].best is not None:
            first = overhead(found["cb"].best)
        if not args.skip_eager and found["cb"].max_qps and found["eager"].max_qps:
            ratios.append(found["cb"].max_qps / found["eager"].max_qps)
            print(f"  ratio CB / eager: {ratios[-1]:.2f}", flush=True)
    print("\n1. LoadGen and our reporting per output token, at CB's max rate:")
    if first is None:
        print("   no VALID rate found: nothing to measure at")
    else:
        print(f"   front CPU {first['front_us']:.1f} us + engine line {first['emit_us']:.1f} us"
              f" per token against median TPOT {first['tpot_ms']:.2f} ms: "
              f"{100 * first['share']:.3f} % (target <= 1 %)")
        print("2. ours against LoadGen's p99 (ours from the front's receipt, LoadGen's from "
              "its schedule):")
        for what in ("ttft", "tpot"):
            ours, theirs = first[what]
            print(f"   p99 {what.upper()} ours {ours:.2f} ms, LoadGen {theirs:.2f} ms: "
                  f"{ours / theirs:.4f} (target within 2 %)")
    if ratios:
        gm = math.exp(statistics.fmean(math.log(r) for r in ratios))
        print(f"3. max requests/s under the same bounds, CB / eager, {len(ratios)} pairs: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}; geometric mean {gm:.2f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}]")


if __name__ == "__main__":
    main()
