"""The Deploy page's launch form for serving a language model (issue 38): one model on one
engine, LoadGen scenarios in token-latency mode and closed loops of N users, as
`python -m engine genserve` takes them, into a GenServeRequest's fields
(engine/run/jobs/genserve_request.py; the job queue runs it like any sweep).

Every widget carries its check (dashboard/offered.py): a value the page did not offer, sent
in a crafted rerun, stops the page with a message naming the field. Number boxes are
range-checked by dashboard/numbers.py, the users list by parse_int_list, each refusal under
its field; what depends on the model or the engine (prompt + output within the model's
positions, max_num_seqs on a one-at-a-time engine) is the spec's own refusal.
"""

from __future__ import annotations

import streamlit as st

from dashboard.generation_form import LENGTH_RANGE
from dashboard.job_forms import JobForm
from dashboard.numbers import Numbers
from dashboard.offered import MAX_VALUE_LEN, offered
from engine.core.errors import UserError
from engine.core.limits import (SERVE_BOUND_MS_RANGE, SERVE_DURATION_RANGE, SERVE_QPS_RANGE,
                                logical_cores, parse_int_list)
from engine.scenarios.generation.models import LANGUAGE_MODELS, OFFERED
from engine.scenarios.genserve.engines import ENGINES, ENGINE_NAMES
from engine.scenarios.genserve.spec import (BOUND_PRESETS, DEFAULT_PRESET, GENSERVE_SCENARIOS,
                                            MAX_SEQS_RANGE, REQUESTS_RANGE, USERS_RANGE)
from engine.present.genserve_text import scenario_label

__all__ = ["genserve_form", "PRECISIONS", "PRESETS"]

PRECISIONS = tuple(dict.fromkeys(p for e in ENGINES for p in e.precisions))
PRESETS = (*BOUND_PRESETS, "custom")


def genserve_form() -> JobForm:
    """GenServeRequest's fields; a refused box or list refuses it, named by its field."""
    cores = logical_cores()
    st.caption("LoadGen in token-latency mode (Server: Poisson arrivals judged on p99 TTFT "
               "and p99 TPOT; Offline; SingleStream) or a closed loop of N users (ours: N "
               "requests kept in flight). Prompts are seeded random tokens; every request "
               "returns exactly the output length.")
    c = st.columns(4)
    model = c[0].selectbox("Model", list(OFFERED), key="gsf_model",
                           **offered("gsf_model", "model", OFFERED),
                           help="; ".join(f"{m}: {LANGUAGE_MODELS[m].note}" for m in OFFERED))
    engine = c[1].selectbox("Engine", list(ENGINE_NAMES), key="gsf_engine",
                            **offered("gsf_engine", "runtime", ENGINE_NAMES),
                            help="; ".join(f"{e.name}: {e.label}" for e in ENGINES))
    scenarios = c[2].multiselect("Scenarios", list(GENSERVE_SCENARIOS), default=["server"],
                                 format_func=scenario_label, key="gsf_scenarios",
                                 **offered("gsf_scenarios", "scenario", GENSERVE_SCENARIOS))
    precision = c[3].selectbox("Precision", list(PRECISIONS), key="gsf_precision",
                               **offered("gsf_precision", "precision", PRECISIONS))
    number = Numbers({})
    c = st.columns(4)
    prompt = number(c[0], "Prompt tokens", "gsf_prompt", "prompt_len", *LENGTH_RANGE,
                    default=128, integer=True)
    output = number(c[1], "Output tokens", "gsf_output", "output_len", 2, LENGTH_RANGE[1],
                    default=64, integer=True, help="exactly, end-of-sequence ignored")
    threads = number(c[2], "Threads", "gsf_threads", "threads", 1, cores, default=1,
                     integer=True)
    seqs = number(c[3], "Max sequences", "gsf_seqs", "max_num_seqs", *MAX_SEQS_RANGE,
                  default=1, integer=True, help="continuous batching only; 1 for eager")
    c = st.columns(4)
    preset = c[0].selectbox("Bounds", list(PRESETS), key="gsf_preset",
                            index=PRESETS.index(DEFAULT_PRESET),
                            **offered("gsf_preset", "preset", PRESETS),
                            help="MLPerf's llama3.1-8b: " + "; ".join(
                                f"{k} TTFT {v[0]:g} ms, TPOT {v[1]:g} ms"
                                for k, v in BOUND_PRESETS.items()))
    base = BOUND_PRESETS.get(preset, BOUND_PRESETS[DEFAULT_PRESET])
    custom = preset == "custom"
    ttft = number(c[1], "p99 TTFT bound [ms]", "gsf_ttft", "ttft_bound_ms",
                  *SERVE_BOUND_MS_RANGE, default=base[0], disabled=not custom)
    tpot = number(c[2], "p99 TPOT bound [ms]", "gsf_tpot", "tpot_bound_ms",
                  *SERVE_BOUND_MS_RANGE, default=base[1], disabled=not custom)
    qps = number(c[3], "Target req/s", "gsf_qps", "target_qps", *SERVE_QPS_RANGE,
                 default=1.0, help="Server: Poisson arrivals; Offline: expected")
    c = st.columns(3)
    users_text = c[0].text_input("Users (closed loop)", "1, 2, 4", key="gsf_users",
                                 **offered("gsf_users", "users", max_len=MAX_VALUE_LEN),
                                 help="one closed-loop test per count")
    queries = number(c[1], "Min requests", "gsf_queries", "min_query_count",
                     *REQUESTS_RANGE, default=100, integer=True,
                     help="LoadGen's minimum query count; closed loop: requests sent")
    duration = number(c[2], "Min duration [s]", "gsf_duration", "min_duration_s",
                      *SERVE_DURATION_RANGE, default=10.0)
    try:
        users = parse_int_list(users_text, "users", *USERS_RANGE)
    except UserError as exc:
        number.errors.setdefault("users", str(exc))
    if number.errors:
        return JobForm(errors=number.errors)
    return JobForm(dict(scenarios=tuple(scenarios), model=model, engine=engine,
                        prompt_len=int(prompt), output_len=int(output), threads=int(threads),
                        precision=precision, preset=preset,
                        ttft_bound_ms=float(ttft) if custom else None,
                        tpot_bound_ms=float(tpot) if custom else None,
                        target_qps=float(qps), min_duration_s=float(duration),
                        min_query_count=int(queries), users=tuple(users),
                        max_num_seqs=int(seqs)))
