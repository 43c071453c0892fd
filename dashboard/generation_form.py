"""The Run page's text-generation form (issue 37): language models x runtimes x prompt lengths
x output lengths x batches x threads x precisions, as `python -m engine generate` takes them,
into a GenRequest's fields (engine/run/jobs/generation_request.py queues it like any sweep).

Every widget carries its check (dashboard/offered.py): a value the page did not offer, sent in
a crafted rerun, stops the page with a message naming the field. Lengths and batches are
typed lists, refused naming the field and its range; what depends on the model (a prompt plus
output longer than its positions) is the spec's own refusal, under its field.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboard.job_forms import JobForm
from dashboard.numbers import Numbers
from dashboard.offered import MAX_VALUE_LEN, offered
from engine.core.errors import UserError
from engine.core.budget import default_max_rounds
from engine.core.limits import (DEFAULT_ENERGY_S, DEFAULT_ROUNDS, ROUNDS_RANGE, logical_cores,
                                parse_int_list)
from engine.core.runtimes import RuntimeOptions
from engine.scenarios.generation.models import LANGUAGE_MODELS, OFFERED
from engine.scenarios.generation.runtimes import GEN_PRECISIONS, GEN_ROWS, runtime_names
from engine.scenarios.generation.spec import GEN_BATCH_RANGE, GEN_POLICY

# OpenVINO GenAI's attention backend, the one generation runtime option (its row's)
_OV = next(o for r in GEN_ROWS for o in r.options if o.name == "attention_backend")

__all__ = ["generation_form", "LENGTH_RANGE"]

# Typed lengths are checked against the longest model offered here; a model's own limit
# (and prompt + output within it) is the spec's check (GenSpec.validate).
LENGTH_RANGE = (1, max(LANGUAGE_MODELS[m].max_positions for m in OFFERED))


def generation_form() -> JobForm:
    """GenRequest's fields; a bad length, batch or rounds refuses it."""
    cores = logical_cores()
    st.caption("Greedy decoding of exactly the output length from random token prompts "
               "(seeded; no tokenizer in the timed path; end-of-sequence ignored), every "
               "token's time kept. Each runtime's tokens are checked against PyTorch eager "
               "fp32 before timing. Results on the Compare page (Text generation).")
    g1, g2, g3, g4 = st.columns(4)
    models = g1.multiselect("Language models", list(OFFERED), default=[OFFERED[0]],
                            key="gen_models", **offered("gen_models", "model", OFFERED),
                            help="; ".join(f"{m}: {LANGUAGE_MODELS[m].note}" for m in OFFERED))
    names = runtime_names()
    runtimes = g2.multiselect("Runtimes", list(names), default=["eager"], key="gen_runtimes",
                              **offered("gen_runtimes", "runtime", names),
                              help="; ".join(f"{r.name}: {r.label}" for r in GEN_ROWS))
    precisions = g3.multiselect("Precisions", list(GEN_PRECISIONS), default=["fp32"],
                                key="gen_precisions",
                                **offered("gen_precisions", "precision", GEN_PRECISIONS),
                                help="a runtime x precision that cannot run here is left out "
                                     "with its reason")
    threads = g4.multiselect("Threads", list(range(1, cores + 1)), default=[1],
                             key="gen_threads",
                             **offered("gen_threads", "threads", range(1, cores + 1)))
    g5, g6, g7, g8 = st.columns(4)
    prompts = g5.text_input("Prompt lengths (tokens)", "128", key="gen_prompt",
                            **offered("gen_prompt", "prompt_len", max_len=MAX_VALUE_LEN))
    outputs = g6.text_input("Output lengths (tokens)", "128", key="gen_output",
                            **offered("gen_output", "output_len", max_len=MAX_VALUE_LEN))
    batch = g7.text_input("Batch sizes", "1", key="gen_batch",
                          **offered("gen_batch", "batch_size", max_len=MAX_VALUE_LEN))
    number = Numbers({})
    rounds = number(g8, "Rounds", "gen_rounds", "rounds", *ROUNDS_RANGE,
                    default=DEFAULT_ROUNDS, integer=True,
                    help="rounds of the whole sweep in alternating order; contests need 2")
    g9, g10, g11 = st.columns(3)
    max_rounds = number(g9, "Max rounds", "gen_max_rounds", "max_rounds", *ROUNDS_RANGE,
                        default=default_max_rounds(DEFAULT_ROUNDS), integer=True,
                        help="rounds until decided: a TTFT, TPOT or tokens/s contest still "
                             "undecided after Rounds gets more, for its configurations only, "
                             "up to this many (equal to Rounds: none)")
    backend = g10.selectbox(_OV.label, list(_OV.choices), index=_OV.choices.index(_OV.default),
                            key="gen_attention",
                            **offered("gen_attention", _OV.name, _OV.choices),
                            help=f"{_OV.what}; {_OV.stored}")
    energy = g11.checkbox(f"Measure energy ({DEFAULT_ENERGY_S:g} s loop after each timed pass)",
                          key="gen_energy",
                          help="joules per 1 K output tokens from RAPL or NVML, in a loop of "
                               "its own; absent with the reason where the machine exposes no "
                               "counter (most cloud VMs)")
    if max_rounds < rounds:
        number.errors.setdefault("max_rounds", f"max_rounds: {max_rounds} is below rounds "
                                               f"{rounds}; allowed: {rounds}..{ROUNDS_RANGE[1]}")
    lists = {}
    for name, text, lo, hi in (("prompt_len", prompts, *LENGTH_RANGE),
                               ("output_len", outputs, 2, LENGTH_RANGE[1]),
                               ("batch_size", batch, *GEN_BATCH_RANGE)):
        try:
            lists[name] = parse_int_list(text, name, lo, hi)
        except UserError as exc:
            number.errors.setdefault(name, str(exc))
    if number.errors:
        return JobForm(errors=number.errors)
    return JobForm(dict(models=tuple(models), runtimes=tuple(runtimes),
                        prompt_lens=tuple(lists["prompt_len"]),
                        output_lens=tuple(lists["output_len"]),
                        batch_sizes=tuple(lists["batch_size"]), threads=tuple(sorted(threads)),
                        precisions=tuple(precisions), rounds=int(rounds),
                        max_rounds=int(max_rounds),
                        # the option goes to the runtimes that have it, so only with them
                        options=RuntimeOptions({_OV.name: backend}
                                               if "openvino_genai" in runtimes else {}),
                        policy=replace(GEN_POLICY,
                                       energy_s=DEFAULT_ENERGY_S if energy else 0.0)))
