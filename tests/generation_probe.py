"""Runs a generation runtime, or the reference, in a subprocess of its own and prints what it
gave as one JSON line: the test process imports no framework, and no process imports both
torch and TensorFlow (the Keras runtime's process never imports torch).

    python -m tests.generation_probe folder NAME SEED ROOT
    python -m tests.generation_probe reference FOLDER SEED P N B...
    python -m tests.generation_probe params FOLDER...
    python -m tests.generation_probe run RUNTIME FOLDER WORKDIR PRECISIONS SEED P N B...
                                     [--opt k=v]

`run` opens one session per precision (comma-separated, `int8@2` for one batch size only; one
process, so a later precision reuses the exports an earlier one made) and generates for each
batch size on the seed's prompts (engine.worker.generation.session.prompts), once untimed
and once more to report, so the readings are of a warm session. `params` counts the Keras
runtime's parameters per folder.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

__all__: list[str] = []

def _model_name(folder: Path) -> str:
    return folder.name.rsplit("-", 1)[0]


def folder(name: str, seed: int, root: str) -> dict:
    from engine.worker.generation.models import model_folder

    return {"folder": str(model_folder(name, seed, Path(root)))}


def reference(src: Path, seed: int, p: int, n: int, batches: list[int]) -> dict:
    """Hugging Face eager fp32 greedy, EOS ignored: the tokens every runtime must give."""
    import torch
    from transformers import AutoModelForCausalLM

    from engine.scenarios.generation.models import language_model
    from engine.worker.generation.session import prompts

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    vocab = language_model(_model_name(src)).vocab_size
    out = {}
    for b in batches:
        ids = torch.from_numpy(prompts(seed, b, p, vocab))
        with torch.inference_mode():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=n, min_new_tokens=n, eos_token_id=None,
                                 pad_token_id=0)
        out[str(b)] = gen[:, p:].tolist()
    return out


def params(folders: list[Path]) -> dict:
    """keras-hub's count of each folder's model (loaded only: nothing compiled)."""
    import keras_hub

    from engine.scenarios.generation.models import language_model

    out = {}
    for src in folders:
        name = _model_name(src)
        cls = getattr(keras_hub.models, language_model(name).keras_class)
        out[name] = int(cls.from_preset(str(src), preprocessor=None).count_params())
    out["torch_imported"] = "torch" in sys.modules
    return out


def run(runtime: str, src: Path, workdir: Path, precisions: str, seed: int, p: int, n: int,
        batches: list[int], options: dict) -> dict:
    out = {}
    for item in precisions.split(","):  # "int8@2": int8 at batch 2 only
        prec, _, only = item.partition("@")
        out[prec] = _run(runtime, src, workdir, prec, seed, p, n,
                         [int(only)] if only else batches, options)
    return out


def _run(runtime: str, src: Path, workdir: Path, precision: str, seed: int, p: int, n: int,
         batches: list[int], options: dict) -> dict:
    import importlib

    from engine.scenarios.generation.models import language_model
    from engine.worker.generation.session import Refused, prompts

    from engine.scenarios.generation.runtimes import gen_row
    from engine.scenarios.generation.spec import GenSpec

    row = gen_row(runtime)  # the product's row: its framework and its module
    framework = row.framework
    spec = GenSpec(_model_name(src), framework, runtime, max(batches), p, n, 1,
                   precision=precision, options=options, seed=seed)
    if framework == "tensorflow" and "tensorflow" not in sys.modules:
        from engine.worker.backends import configure_threads

        configure_threads("tensorflow", spec.intra_threads, spec.inter_threads)
    mod = importlib.import_module(row.path)
    try:
        session = mod.open_session(src, spec, workdir)
    except Refused as exc:
        return {"refused": str(exc), "torch_imported": "torch" in sys.modules}
    out = {"build_s": session.build_s, "versions": session.versions,
           "settings": getattr(session, "settings", {}), "runs": {},
           "torch_imported": "torch" in sys.modules}
    for b in batches:
        ids = prompts(seed, b, p, language_model(spec.model).vocab_size)
        session.generate(ids, n)
        t = session.generate(ids, n)
        out["runs"][str(b)] = {"tokens": t.tokens.tolist(), "dtype": str(t.tokens.dtype),
                               "start_ns": t.start_ns, "end_ns": t.end_ns,
                               "token_ns": list(t.token_ns), "no_steps": t.no_steps,
                               "ttft_ns": t.ttft_ns,
                               "metrics": getattr(session, "last_metrics", {})}
    return out


def main(argv: list[str]) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    opts = {}
    while "--opt" in argv:
        i = argv.index("--opt")
        k, _, v = argv[i + 1].partition("=")
        opts[k] = v
        del argv[i:i + 2]
    what = argv[0]
    if what == "folder":
        return folder(argv[1], int(argv[2]), argv[3])
    if what == "params":
        return params([Path(a) for a in argv[1:]])
    if what == "reference":
        return reference(Path(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]),
                         [int(b) for b in argv[5:]])
    return run(argv[1], Path(argv[2]), Path(argv[3]), argv[4], int(argv[5]), int(argv[6]),
               int(argv[7]), [int(b) for b in argv[8:]], opts)


if __name__ == "__main__":
    print("PROBE " + json.dumps(main(sys.argv[1:])))
