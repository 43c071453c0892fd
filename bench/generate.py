"""Issue 37's generation measures, side by side in one run, each runtime through the
product's own session module (engine/worker/generation/gen_<runtime>.py, opened as
body.py opens it, with its workdir) in a subprocess of its own started with the worker's
thread environment (torch and TensorFlow never share a process):

1. overhead: our timed generate (PyTorch eager, the streamer stamping each step) against
   the same transformers generate untimed (no streamer), A B then B A in fresh processes, one
   per leg, the same model, prompt and threads. Per pair: E2E per output token of each leg
   (the median of its calls; the untimed leg has no per-token readings, so E2E per token
   is the figure both legs have) and their ratio; over the pairs, the paired geometric
   mean with its 95 % interval. Beside it, the streamer's put() itself timed in a loop
   against our TPOT. Target: ratio <= 1.01.
2. perfmetrics: OpenVINO GenAI's TTFT and TPOT from our readings against its own
   PerfMetrics of the same calls. At batch 1 ours come from a streamer on our clock, an
   independent reading; at batch 2 (no streamer there) our token readings ARE its raw
   timestamps, so the ratio checks our start/end placement and our arithmetic only.
   Target: 0.95-1.05.
3. table: llama-bench's pp512 and tg128 per runtime: pp = B x P / TTFT of a generate of
   one token on a P-token prompt; tg = B x (N - 1) / (E2E - TTFT) of an N-token generate
   on a --tg-prompt prompt (llama-bench gives tg one token). One persistent process per
   runtime opens and warms each shape once (exports, compiles and XLA kept out of every
   figure and printed), then rounds in alternating order (forward, reversed); per round
   each runtime's median over its reps, and its ratio to torch eager in the same round;
   printed as median [min-max] over rounds.

Random-weight models from the catalog (no download), tokens ignored but for an agreement
check against eager. Figures on a shared machine are noisy: read the spread.

    .venv/bin/python bench/generate.py [--measure overhead perfmetrics table]
        [--model smollm2_135m] [--threads 2] [--pairs 4] [--pp 512] [--tg 128]
        [--skip keras_hub] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate_child import REPLY  # noqa: E402  (framework-free: the child imports them)

__all__ = ["parse_args", "spread", "paired_ratio", "pp_tok_s", "tg_tok_s", "round_order",
           "verdict", "main"]

MEASURES = ("overhead", "perfmetrics", "table")
RUNTIMES = ("eager", "compile", "keras_hub", "openvino_genai", "onnxruntime_genai")


# ---------------------------------------------------------------- arithmetic (tested)
def spread(values) -> tuple[float, float, float]:
    """(median, min, max)."""
    xs = sorted(values)
    return statistics.median(xs), xs[0], xs[-1]


def paired_ratio(a, b) -> tuple[float, float, float]:
    """Geometric mean of a[i] / b[i] and its 95 % Student-t interval over the pairs
    (the interval is (nan, nan) with fewer than two pairs)."""
    logs = [math.log(x / y) for x, y in zip(a, b)]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    from engine.analysis.compare import t975

    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def verdict(lo: float, hi: float, low: float, high: float) -> str:
    """Where a 95 % interval lies against the target [low, high]."""
    if math.isnan(lo):
        return "undecided (one pair: no interval)"
    if low <= lo and hi <= high:
        return "meets the target"
    if hi < low or lo > high:
        return "MISSES the target"
    return "undecided within the noise (the interval straddles the target's edge)"


def pp_tok_s(batch: int, prompt_len: int, ttft_ns: float) -> float:
    return batch * prompt_len / (ttft_ns / 1e9)


def tg_tok_s(batch: int, new_tokens: int, e2e_ns: float, ttft_ns: float) -> float:
    return batch * (new_tokens - 1) / ((e2e_ns - ttft_ns) / 1e9)


def round_order(names, rnd: int) -> list:
    """Forward on even rounds, reversed on odd: each runtime's place in the round
    (first after an idle spell, or after a heavy neighbour) alternates."""
    return list(names) if rnd % 2 == 0 else list(reversed(names))


def _ttft(call: dict) -> float:
    return call["token_ns"][0] if call["token_ns"] else call["ttft_ns"]


# ---------------------------------------------------------------- the parent's side
class Leg:
    """One child process: `ask` sends a command and waits for its reply (or the timeout)."""

    def __init__(self, model: str, runtime: str, threads: int, folder: Path):
        from engine.run.process.executors import thread_env
        from engine.scenarios.generation.runtimes import gen_row
        from engine.scenarios.generation.spec import GenSpec

        row = gen_row(runtime)
        self.spec = GenSpec(model, row.framework, runtime, 1, 2, 2, threads).validate()
        self.folder = folder
        env = {**os.environ, **thread_env(self.spec), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_VERBOSITY": "error",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "generate_child.py"), row.framework,
             str(threads), "1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
            env=env)
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                self.lines.put(json.loads(line[len(REPLY):]))
        self.lines.put({"error": f"the child exited ({self._tail()})"})

    def _tail(self) -> str:
        self.err.seek(0)
        return " ".join(self.err.read().strip().splitlines()[-3:])[-400:]

    def ask(self, timeout_s: float, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            self.close()
            return {"error": f"no reply in {timeout_s:.0f} s"}

    def open(self, timeout_s: float) -> dict:
        return self.ask(timeout_s, op="open", spec=self.spec.to_dict(),
                        folder=str(self.folder))

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=10)  # it reads err's tail at the child's end
        self.err.close()


def _folder(model: str, seed: int = 0) -> Path:
    from engine.worker.generation.prepare import ensure

    return ensure(model, seed, [])[0]


def _failed(reply: dict) -> str:
    return reply.get("refused") or reply.get("error") or ""


def measure_overhead(args) -> None:
    m, p, n = args.overhead_model or args.model, args.prompt, args.output
    print(f"\n== 1. per-token timing overhead: {m}, prompt {p}, {n} new tokens, batch 1, "
          f"{args.threads} threads; {args.pairs} pairs of fresh processes (timed first, then "
          f"untimed first, alternately), "
          f"each {args.warmup} warm-up + {args.reps} calls ==")
    folder = _folder(m)
    legs = {"timed": [], "untimed": []}
    tpot, put_ns, tokens = [], [], {}
    for i in range(args.pairs):
        row = []
        # A B, then B A: a drift of the machine's load between the two legs of a pair
        # does not favour one leg
        for name in ("timed", "untimed") if i % 2 == 0 else ("untimed", "timed"):
            leg = Leg(m, "eager", args.threads, folder)
            r = leg.open(args.timeout)
            if not _failed(r):
                r = leg.ask(args.timeout, op="gen", batch=1, prompt=p, new=n,
                            warmup=args.warmup, reps=args.reps, untimed=name == "untimed",
                            put_cost=name == "timed")
            leg.close()
            if _failed(r):
                print(f"pair {i + 1} {name}: {_failed(r)}")
                return
            legs[name].append(statistics.median(c["e2e_ns"] for c in r["calls"]) / n)
            tokens.setdefault(name, r["calls"][0]["tokens"])
            row.append(f"{name} {legs[name][-1] / 1e6:8.3f}")
            if name == "timed":
                tpot.append(statistics.median(
                    (c["e2e_ns"] - c["token_ns"][0]) / (n - 1) for c in r["calls"]))
                put_ns.append(r["put_ns"])
        row.sort(key=lambda x: not x.startswith("timed"))
        print(f"pair {i + 1}: E2E per token ms: {row[0]}  {row[1]}   timed/untimed "
              f"{legs['timed'][-1] / legs['untimed'][-1]:.4f}   our TPOT "
              f"{tpot[-1] / 1e6:.3f} ms", flush=True)
    g, lo, hi = paired_ratio(legs["timed"], legs["untimed"])
    med, mn, mx = spread(a / b for a, b in zip(legs["timed"], legs["untimed"]))
    print(f"timed/untimed E2E per token: median {med:.4f} [{mn:.4f}-{mx:.4f}] over "
          f"{len(legs['timed'])} pairs; geometric mean {g:.4f}, 95 % interval "
          f"{lo:.4f}-{hi:.4f}: {verdict(lo, hi, 0.0, 1.01)} (<= 1.01)")
    # The same comparison within one process, call by call (A B A B): no process-to-process
    # spread, so a small cost shows where the pairs of processes cannot resolve it
    leg = Leg(m, "eager", args.threads, folder)
    r = leg.open(args.timeout)
    if not _failed(r):
        r = leg.ask(args.timeout, op="gen", batch=1, prompt=p, new=n, warmup=args.warmup,
                    reps=2 * args.reps, interleave=True)
    leg.close()
    if _failed(r):
        print(f"interleaved: {_failed(r)}")
    else:
        a = [c["e2e_ns"] for c in r["calls"]]
        u = [c["e2e_ns"] for c in r["untimed_calls"]]
        g, lo, hi = paired_ratio(a, u)
        med, mn, mx = spread(x / y for x, y in zip(a, u))
        print(f"one process, timed and untimed calls alternated ({len(a)} pairs): median "
              f"{med:.4f} [{mn:.4f}-{mx:.4f}]; geometric mean {g:.4f}, 95 % interval "
              f"{lo:.4f}-{hi:.4f}: {verdict(lo, hi, 0.0, 1.01)}")
    put = statistics.median(put_ns)
    print(f"the streamer's put() alone: {put:.0f} ns a step = {put / statistics.median(tpot):.2e}"
          f" of our TPOT ({statistics.median(tpot) / 1e6:.3f} ms); tokens of both legs "
          f"{'identical' if tokens.get('timed') == tokens.get('untimed') else 'DIFFER'}")


def measure_perfmetrics(args) -> None:
    m, p, n = args.model, args.prompt, args.output
    print(f"\n== 2. OpenVINO GenAI: our readings against its PerfMetrics on the same calls: "
          f"{m}, prompt {p}, {n} new tokens, {args.threads} threads, {args.reps} calls a "
          f"batch ==")
    leg = Leg(m, "openvino_genai", args.threads, _folder(m))
    try:
        r = leg.open(args.timeout)
        if _failed(r):
            print(f"openvino_genai: {_failed(r)}")
            return
        print(f"opened in {r['open_s']:.1f} s (export or cached IR, and compile)")
        for b in (1, 2):
            r = leg.ask(args.timeout, op="gen", batch=b, prompt=p, new=n, warmup=args.warmup,
                        reps=args.reps)
            if _failed(r):
                print(f"batch {b}: {_failed(r)}")
                continue
            _perf_rows(r["calls"], b, n)
    finally:
        leg.close()


def _perf_rows(calls: list, b: int, n: int) -> None:
    source = calls[0]["metrics"].get("token_times")
    ttft, tpot, tpot_raw = [], [], []
    for c in calls:
        if not c["token_ns"]:
            print(f"batch {b}: no per-token readings ({source})")
            return
        ours_ttft = c["token_ns"][0] / 1e6
        ours_tpot = (c["e2e_ns"] - c["token_ns"][0]) / (n - 1) / 1e6
        mt = c["metrics"]
        ttft.append(ours_ttft / mt["ttft_ms"])
        # its TPOT divides a step by the batch (gen_openvino_genai.py): ours is per step
        tpot.append(ours_tpot / (mt["tpot_ms"] * b))
        tpot_raw.append(ours_tpot / mt["tpot_ms"])
    c = calls[len(calls) // 2]
    print(f"batch {b} (our token readings: {source}): e.g. ours TTFT "
          f"{c['token_ns'][0] / 1e6:.3f} ms, TPOT "
          f"{(c['e2e_ns'] - c['token_ns'][0]) / (n - 1) / 1e6:.3f} ms; its TTFT "
          f"{c['metrics']['ttft_ms']:.3f} ms, TPOT {c['metrics']['tpot_ms']:.3f} ms")
    for name, xs in (("TTFT ours/its", ttft),
                     (f"TPOT ours/(its x {b})" if b > 1 else "TPOT ours/its", tpot)):
        med, lo, hi = spread(xs)
        ok = "meets" if 0.95 <= lo and hi <= 1.05 else (
            "median meets" if 0.95 <= med <= 1.05 else "MISSES")
        print(f"  {name:<22} median {med:.4f} [{lo:.4f}-{hi:.4f}] over {len(xs)} calls: "
              f"{ok} 0.95-1.05")
    if b > 1:
        print(f"  (TPOT ours/its unscaled: median {statistics.median(tpot_raw):.4f}: its TPOT "
              f"is a step over the batch; at batch {b} both figures read its own step "
              "timestamps, so this checks our start/end and arithmetic, not its clock)")


def measure_table(args) -> None:
    m, b = args.model, args.batch
    names = [r for r in RUNTIMES if r not in args.skip]
    print(f"\n== 3. llama-bench style: {m}, batch {b}, {args.threads} threads: pp{args.pp} "
          f"(B x P / TTFT of a 1-token generate) and tg{args.tg} (B x (N-1) / (E2E - TTFT), "
          f"{args.tg_prompt}-token prompt); {args.rounds} rounds in alternating order, "
          f"{args.pp_reps} pp and {args.tg_reps} tg calls a runtime a round ==")
    for r in args.skip:
        print(f"skipped: {r} (--skip)")
    folder = _folder(m)
    legs, notes, eager_tokens = {}, {}, None
    try:
        for name in names:  # open and warm every shape once: builds kept out of the rounds
            t = time.perf_counter()
            leg = Leg(m, name, args.threads, folder)
            r = leg.open(args.timeout)
            for shape in ((args.pp, 1), (args.tg_prompt, args.tg)):
                if not _failed(r):
                    r = leg.ask(args.timeout, op="gen", batch=b, prompt=shape[0],
                                new=shape[1], warmup=1, reps=1)
            if _failed(r):
                print(f"{name}: {_failed(r)}")
                leg.close()
                continue
            legs[name] = leg
            toks = r["calls"][0]["tokens"]
            eager_tokens = toks if name == "eager" else eager_tokens
            agree = (f"{sum(x == y for x, y in zip(toks, eager_tokens)) / len(toks):.0%}"
                     if eager_tokens else "-")
            notes[name] = agree
            print(f"{name}: ready in {time.perf_counter() - t:.1f} s (build/compile "
                  f"{r['build_s']:.1f} s); tg tokens agree with eager: {agree}", flush=True)
        pp, tg = {n: [] for n in legs}, {n: [] for n in legs}
        for rnd in range(args.rounds):
            for name in round_order(legs, rnd):
                rp = legs[name].ask(args.timeout, op="gen", batch=b, prompt=args.pp, new=1,
                                    warmup=0, reps=args.pp_reps)
                rt = legs[name].ask(args.timeout, op="gen", batch=b, prompt=args.tg_prompt,
                                    new=args.tg, warmup=0, reps=args.tg_reps)
                if _failed(rp) or _failed(rt):
                    print(f"round {rnd + 1} {name}: {_failed(rp) or _failed(rt)}")
                    pp[name].append(None), tg[name].append(None)
                    continue
                pp[name].append(statistics.median(pp_tok_s(b, args.pp, _ttft(c))
                                                  for c in rp["calls"]))
                tg[name].append(statistics.median(tg_tok_s(b, args.tg, c["e2e_ns"], _ttft(c))
                                                  for c in rt["calls"]))
            print(f"round {rnd + 1} of {args.rounds} done", flush=True)
    finally:
        for leg in legs.values():
            leg.close()
    _print_table(pp, tg, notes, args)


def _print_table(pp: dict, tg: dict, notes: dict, args) -> None:
    print(f"\n{'runtime':<19}{'pp' + str(args.pp) + ' tok/s':>24}{'x eager':>20}"
          f"{'tg' + str(args.tg) + ' tok/s':>24}{'x eager':>20}{'agree':>7}")
    print("  (tok/s: median [min-max] of the rounds' medians; x eager: the same round's "
          "ratio, median [min-max] over rounds; above 1: faster; agree: tg tokens equal to "
          "eager's)")

    def cell(xs, base):
        pairs = [(x, e) for x, e in zip(xs, base or []) if x and e]
        if not pairs:
            return f"{'failed':>24}{'-':>20}"
        med, lo, hi = spread(x for x, _ in pairs)
        rmed, rlo, rhi = spread(x / e for x, e in pairs)
        return (f"{med:,.1f} [{lo:,.0f}-{hi:,.0f}]".rjust(24)
                + f"{rmed:.2f} [{rlo:.2f}-{rhi:.2f}]".rjust(20))

    for name in pp:
        print(f"{name:<19}{cell(pp[name], pp.get('eager'))}{cell(tg[name], tg.get('eager'))}"
              f"{notes.get(name, '-'):>7}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", nargs="+", choices=MEASURES, default=list(MEASURES))
    ap.add_argument("--model", default="smollm2_135m", help="every measure's model")
    ap.add_argument("--overhead-model", default=None, help="measure 1's, if another")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128, help="measures 1 and 2")
    ap.add_argument("--output", type=int, default=64, help="measures 1 and 2")
    ap.add_argument("--pairs", type=int, default=4, help="measure 1's A B pairs")
    ap.add_argument("--reps", type=int, default=5, help="timed calls a leg (1) or batch (2)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--tg-prompt", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1, help="measure 3's")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pp-reps", type=int, default=3)
    ap.add_argument("--tg-reps", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], choices=RUNTIMES)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds a child's reply")
    args = ap.parse_args(argv)
    if "eager" in args.skip and "table" in args.measure:
        ap.error("--skip eager: the table's ratios are to torch eager")
    if args.output < 2 or args.tg < 2:
        ap.error("--output and --tg must be >= 2 (TPOT needs a second token)")
    for name in ("pairs", "reps", "rounds", "pp_reps", "tg_reps", "pp", "prompt", "tg_prompt",
                 "threads", "batch"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    print(f"bench/generate.py: {', '.join(args.measure)}; a shared machine's figures are noisy "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start)")
    t = time.perf_counter()
    for name in args.measure:
        {"overhead": measure_overhead, "perfmetrics": measure_perfmetrics,
         "table": measure_table}[name](args)
    print(f"\ntook {time.perf_counter() - t:.0f} s; load average at the end "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
