"""The export cache the generation runtimes share (engine/worker/generation/common.py): an
entry is built once, named by what changes its files, and a failed build leaves nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.worker.generation.common import bf16_refusal, cached_export, entry_name

V = {"openvino": "2026.4.1", "nncf": "3.4.0"}


def test_entry_names_change_with_precision_versions_and_options_only():
    folder = Path("/models/tiny_llama-b847a59fa3a4ccca")
    name = entry_name("openvino_genai", folder, "int4", V, {"group": 64})
    assert name.startswith("openvino_genai-tiny_llama-b847a59fa3a4ccca-int4-")
    assert name == entry_name("openvino_genai", folder, "int4", dict(reversed(V.items())),
                              {"group": 64})
    others = {entry_name("openvino_genai", folder, "int8", V, {"group": 64}),
              entry_name("openvino_genai", folder, "int4", {**V, "nncf": "3.5.0"},
                         {"group": 64}),
              entry_name("openvino_genai", folder, "int4", V, {"group": 128})}
    assert name not in others and len(others) == 3


def test_an_entry_is_built_once_and_reused(tmp_path):
    calls = []

    def build(tmp: Path):
        calls.append(tmp)
        (tmp / "model.xml").write_text("ir")

    first = cached_export(tmp_path, "e", build, "model.xml")
    again = cached_export(tmp_path, "e", build, "model.xml")
    assert first == (tmp_path / "e", True) and again == (tmp_path / "e", False)
    assert len(calls) == 1 and (tmp_path / "e" / "model.xml").read_text() == "ir"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e"]  # no temporary folder left


def test_a_failed_or_incomplete_build_leaves_nothing(tmp_path):
    def fails(tmp: Path):
        (tmp / "half.bin").write_text("x")
        raise ValueError("exporter died")

    with pytest.raises(ValueError, match="exporter died"):
        cached_export(tmp_path, "e", fails, "model.xml")
    with pytest.raises(RuntimeError, match="wrote no model.xml"):
        cached_export(tmp_path, "e", lambda tmp: None, "model.xml")
    assert list(tmp_path.iterdir()) == []


def test_bf16_is_refused_on_a_cpu_without_bf16_instructions():
    assert bf16_refusal(("avx512f", "amx_bf16")) == ""
    assert bf16_refusal(("avx512_bf16",)) == ""
    assert bf16_refusal(("avx512f", "avx512_vnni")) == (
        "this CPU has neither avx512_bf16 nor amx_bf16: bf16 would be emulated in fp32 "
        "instructions, slower than fp32")


# llama32_1b's config.json as transformers 5.5.4 writes it (data/models/llama32_1b-*/): the
# llama3 RoPE scaling under rope_parameters, no rope_scaling key
LLAMA3_ROPE = {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
               "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
               "rope_type": "llama3"}


def test_keras_hub_gets_llama3s_rope_scaling_under_the_key_its_converter_reads(tmp_path):
    from engine.worker.generation.gen_keras_hub import keras_config, keras_folder

    config = {"model_type": "llama", "hidden_size": 2048, "rope_parameters": LLAMA3_ROPE}
    fixed = keras_config(config)
    assert fixed["rope_scaling"] == {"factor": 32.0, "high_freq_factor": 4.0,
                                     "low_freq_factor": 1.0,
                                     "original_max_position_embeddings": 8192,
                                     "rope_type": "llama3"}
    assert fixed["rope_parameters"] == LLAMA3_ROPE and fixed["hidden_size"] == 2048
    # default RoPE (smollm2_135m, tiny_llama), GPT-2 (none) and a config that has the key:
    # keras-hub reads them as they are
    assert keras_config({"rope_parameters": {"rope_theta": 1e5, "rope_type": "default"}}) \
        is None
    assert keras_config({"model_type": "gpt2"}) is None
    assert keras_config({**config, "rope_scaling": {"rope_type": "llama3"}}) is None

    import json

    model = tmp_path / "models" / "llama32_1b-83540295c1417867"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(config))
    (model / "model.safetensors").write_bytes(b"weights")
    work = tmp_path / "exports"
    folder = keras_folder(model, work)
    assert folder.parent == work
    assert folder.name.startswith("keras_hub-llama32_1b-83540295c1417867-")
    assert (folder / "model.safetensors").resolve() == model / "model.safetensors"
    assert json.loads((folder / "config.json").read_text())["rope_scaling"]["factor"] == 32.0
    assert keras_folder(model, work) == folder  # made once
    assert sorted(p.name for p in work.iterdir()) == [folder.name]  # no temporary left
    moved = tmp_path / "elsewhere" / model.name  # the same model folder at another path:
    model.parent.rename(moved.parent)             # its links would dangle, so a new entry
    again = keras_folder(moved, work)
    assert again != folder and (again / "model.safetensors").resolve() == \
        moved / "model.safetensors"
    plain = tmp_path / "smollm2"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"rope_parameters": {"rope_type": "default"}}))
    assert keras_folder(plain, work) == plain
