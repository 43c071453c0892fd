"""Words and tables for serving a language model's searches (issue 38): a max-rate search's
probes and conclusion with the goodput at the max, a concurrency sweep's points and Pareto
front, and what a token costs per machine. Framework-free; the CLI and the pages print
these."""

from __future__ import annotations

__all__ = ["probe_rows", "rate_summary", "concurrency_rows", "concurrency_summary",
           "cost_rows_text", "BOUNDS_TEXT", "tuning_rows", "tuning_summary", "pruned_rows",
           "front_rows", "cost_rows", "reproduce_command"]

BOUNDS_TEXT = ("a probe is ok when LoadGen says VALID (p99 TTFT and p99 TPOT within their "
               "bounds, early stopping met on each) and counted no SUT error")


def _f(v, fmt: str = "{:,.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def probe_rows(res, figures_of) -> list[dict]:
    """One row per probe: target, status, LoadGen's p99 TTFT/TPOT, goodput, why missed."""
    rows = []
    for q, rec in res.probes:
        g = figures_of(rec)
        rows.append({"target req/s": f"{q:.3g}", "status": rec.status,
                     "LoadGen": g.get("loadgen_result") or "-",
                     "p99 TTFT ms": _f(g.get("loadgen_ttft_p99_ms")),
                     "p99 TPOT ms": _f(g.get("loadgen_tpot_p99_ms"), "{:,.2f}"),
                     "done req/s": _f(g.get("requests_per_s"), "{:.3g}"),
                     "output tok/s": _f(g.get("output_tok_s")),
                     "goodput req/s": _f(g.get("goodput_req_s"), "{:.3g}"),
                     "run": rec.run_id[:8], "why": rec.reason[:70]})
    return rows


def rate_summary(res, figures_of, ttft_ms: float, tpot_ms: float) -> str:
    """The conclusion: the max rate under both bounds (a lower bound when capped) and the
    goodput and token rates at it; or why there is none."""
    bounds = f"p99 TTFT <= {ttft_ms:g} ms and p99 TPOT <= {tpot_ms:g} ms"
    if res.max_qps is None:
        return f"no rate met {bounds}: {res.stop_reason}"
    g = figures_of(res.best)
    least = "at least " if res.capped else ""
    return (f"max rate under {bounds}: {least}{res.max_qps:.3g} requests/s (LoadGen VALID, "
            f"{res.query_count} requests a probe); there: {g.get('output_tok_s', 0):,.1f} "
            f"output tok/s, goodput {g.get('goodput_req_s', 0):.3g} req/s "
            f"({g.get('good_share', 0):.1%} of requests met both bounds on the SUT's clock), "
            f"LoadGen p99 TTFT {_f(g.get('loadgen_ttft_p99_ms'))} ms, p99 TPOT "
            f"{_f(g.get('loadgen_tpot_p99_ms'), '{:,.2f}')} ms")


def concurrency_rows(points, figures_of, front) -> list[dict]:
    rows = []
    for users, rec in points:
        g = figures_of(rec)
        rows.append({"users": users, "status": rec.status,
                     "tok/s per user": _f(g.get("user_tok_s")),
                     "tok/s machine": _f(g.get("output_tok_s")),
                     "req/s": _f(g.get("requests_per_s"), "{:.3g}"),
                     "p99 TTFT ms": _f(g.get("ttft_p99_ms")),
                     "p99 TPOT ms": _f(g.get("tpot_p99_ms"), "{:,.2f}"),
                     "Pareto": "yes" if users in front else "", "run": rec.run_id[:8]})
    return rows


def concurrency_summary(c, figures_of) -> str:
    best = max(((u, figures_of(r)) for u, r in c.points if r.status == "ok"),
               key=lambda p: p[1].get("output_tok_s") or 0, default=None)
    if best is None:
        return f"no closed loop completed: {c.stop_reason}"
    u, g = best
    return (f"most output tokens/s at {u} users: {g['output_tok_s']:,.1f} tok/s for the "
            f"machine, {_f(g.get('user_tok_s'))} tok/s per user (1 / median TPOT); Pareto "
            f"front at users {', '.join(map(str, c.front))}; stopped: {c.stop_reason}")


def cost_rows_text(rows: list[dict], lower_bound: bool = False) -> list[str]:
    """A line per machine: USD per 1 M output and input tokens at the bound and flat out,
    and the bill for the target, with measured/estimate and its assumption."""
    most = "at most " if lower_bound else ""
    lines = []
    for r in rows:
        flat = (f"; flat out ${r['usd_per_m_output_flat']:,.4f} per 1 M output"
                if r.get("usd_per_m_output_flat") is not None else "; flat out: no Offline "
                                                                    "test")
        bill = (f"; {r['machines']} machine{'s' * (r['machines'] != 1)} = "
                f"${r['monthly']:,.0f} a month" if r.get("machines") else "")
        lines.append(f"  {r['provider']} {r['shape']} (${r['usd_per_hour']:,.4f}/h, "
                     f"{r['as_of']}): {most}${r['usd_per_m_output']:,.4f} per 1 M output "
                     f"tokens, {most}${r['usd_per_m_input']:,.4f} per 1 M input tokens at "
                     f"the bound{flat}{bill} [{'estimate' if r['estimate'] else 'measured'}:"
                     f" {r['assumption'].removeprefix('estimate: ')}]")
    return lines


def tuning_rows(t) -> list[dict]:
    """A row per candidate: its closed loop, then pruned (why) or confirmed (max req/s, USD
    per 1 M output tokens at it), the default and the winner marked."""
    confirmed = {c.candidate: c for c in (*t.confirmed, t.default)}
    pruned = dict(t.pruned)
    rows = []
    for cand, f in t.closed:
        c = confirmed.get(cand)
        role = ("winner" if t.winner is not None and cand == t.winner.candidate else
                "default" if cand == t.default.candidate else "")
        rows.append({"candidate": cand.label(), "": role,
                     "closed req/s": _f(f.throughput, "{:.3g}"),
                     "closed p99 TTFT ms": _f(f.p99_ms),
                     "max req/s": _f(c.qps, "{:.3g}") if c else "-",
                     "$/1M out": _f(c.cost, "{:,.4f}") if c else "-",
                     "outcome": (pruned[cand][:80] if cand in pruned else
                                 "confirmed" if c else "not confirmed")})
    return rows


def tuning_summary(t, ttft_ms: float, tpot_ms: float) -> str:
    bounds = f"p99 TTFT <= {ttft_ms:g} ms and p99 TPOT <= {tpot_ms:g} ms"
    if t.winner is None:
        return f"no candidate met {bounds}: {t.stop_reason}"
    w, d = t.winner, t.default
    what = (f"{w.qps:.3g} requests/s" if t.objective == "qps" else
            f"${w.cost:,.4f} per 1 M output tokens at {w.qps:.3g} requests/s")
    base = (f"{d.qps:.3g} requests/s" if t.objective == "qps" and d.qps is not None else
            f"${d.cost:,.4f}" if d.cost is not None else "none within the bounds")
    gain = (f"{t.gain_pct:+.0f} % {'more requests/s' if t.objective == 'qps' else 'cheaper'}"
            if t.gain_pct is not None else "no gain figure (the default met no rate)")
    return (f"recommended under {bounds}: {w.candidate.label()}: {what}; the default "
            f"({d.candidate.label()}): {base}; {gain}; Pareto front: "
            + "; ".join(x.candidate.label() for x in t.front) + f"; stopped: {t.stop_reason}")


def pruned_rows(t) -> list[dict]:
    """A tuning's pruned candidates and why."""
    return [{"candidate": c.label(), "why pruned": why} for c, why in t.pruned]


def front_rows(t) -> list[dict]:
    """A tuning's Pareto front (no other confirmation beats it on p99, requests/s and
    cost), each cost with its basis: measured on the shape, or the estimate's assumption;
    an upper bound where the max is a lower one (VALID at the largest target)."""
    rows = []
    for x in t.front:
        capped = x.search is not None and x.search.capped
        rows.append({"candidate": x.candidate.label(),
                     "max req/s": f"{'>= ' * capped}{x.qps:.3g}",
                     "$/1M out": (f"{'<= ' * capped}{x.cost:,.4f}" if x.cost is not None
                                  else "not priced"),
                     "basis": ("" if x.cost is None else
                               x.cost_note or "measured on the shape"),
                     "role": ("winner" if t.winner is not None and x is t.winner else
                              "default" if x is t.default else "")})
    return rows


def cost_rows(chosen: list[dict], cheapest: list[dict], lower_bound: bool = False
              ) -> list[dict]:
    """genserve_cost.token_serving_rows' rows as a table: the chosen shape's first, then the
    cheapest per provider (a provider's cheapest that is the chosen shape said once);
    figures stay numbers (USD), the basis beside each row."""
    best = {r["shape"]: r["provider"] for r in cheapest}
    out = []
    for r in [*chosen, *(r for r in cheapest if r["shape"] not in {c["shape"] for c in chosen})]:
        which = ("chosen shape" if r in chosen else f"cheapest on {r['provider']}")
        if r in chosen and r["shape"] in best:
            which += f" (the cheapest on {best[r['shape']]})"
        out.append({"which": which, "provider": r["provider"], "shape": r["shape"],
                    "USD/h": r["usd_per_hour"], "as of": r["as_of"],
                    "output tok/s": r["output_tok_s"],
                    "$/1M out at max": r["usd_per_m_output"],
                    "$/1M in at max": r["usd_per_m_input"],
                    "$/1M out flat out": r["usd_per_m_output_flat"],
                    "$/1M in flat out": r["usd_per_m_input_flat"],
                    "machines": r["machines"], "USD a month": r["monthly"],
                    "basis": (("an upper bound (the max is a lower one); " if lower_bound
                               else "") + ("estimate: " + r["assumption"].removeprefix(
                                   "estimate: ") if r["estimate"] else "measured"))})
    return out


_FLAGS = (("model", "--model"), ("engine", "--engine"), ("precision", "--precision"),
          ("threads", "--threads"), ("max_num_seqs", "--max-num-seqs"),
          ("kv_blocks", "--kv-blocks"), ("max_batched_tokens", "--max-batched-tokens"),
          ("prompt_len", "--prompt-len"), ("output_len", "--output-len"),
          ("samples", "--samples"), ("gen_seed", "--seed"))


def reproduce_command(command: str, fields: dict) -> str:
    """The CLI line that runs the search a sweep's command (replays.GEN_*_COMMAND) and its
    fields record: 'python -m engine genserve-search --model tiny_llama ...'."""
    import shlex

    name = command.removeprefix("dashboard ")
    parts = ["python -m engine", name]
    parts += [f"{flag} {shlex.quote(str(fields[k]))}" for k, flag in _FLAGS if k in fields]
    if fields.get("preset") == "custom":
        parts.append(f"--ttft-ms {fields['ttft_bound_ms']:g} --tpot-ms "
                     f"{fields['tpot_bound_ms']:g}")
    else:
        parts.append(f"--preset {fields.get('preset')}")
    if name == "genserve-search":
        parts.append(f"--search-queries {fields['search_queries']} --qps-precision "
                     f"{fields['qps_precision']:g} --max-probes {fields['max_probes']}")
        if fields.get("target_qps") is not None:
            parts.append(f"--target-qps {fields['target_qps']:g}")
    elif name == "genserve-users":
        parts.append(f"--requests {fields['min_query_count']} --max-users "
                     f"{fields['max_users']}")
    elif name == "genserve-tune":
        parts += ["--engines " + " ".join(fields["engines"]),
                  "--precisions " + " ".join(fields["precisions"]),
                  "--seqs " + " ".join(map(str, fields["seqs"])),
                  f"--objective {fields['objective']} --closed-requests "
                  f"{fields['closed_requests']} --search-queries {fields['search_queries']}"]
        if fields.get("thread_choices"):
            parts.append("--threads-list " + " ".join(map(str, fields["thread_choices"])))
        if fields.get("machine_shape"):
            parts.append(f"--machine-shape {shlex.quote(fields['machine_shape'])}")
    return " ".join(parts)
