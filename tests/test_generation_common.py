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
