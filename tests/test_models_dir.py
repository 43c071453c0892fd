"""The models folder: uploads refused by extension before a byte is written, capped while
written, renamed to a server-side name with a sidecar, listed by a stat; and the Run page's
pure helpers for a user's model (its default name, its Input box)."""

import io
import json
import os
import re
from datetime import datetime, timezone

import pytest

from dashboard.model_form import default_name, parse_inputs
from engine.core.errors import UserError
from engine.core.model_source import InputSpec, format_for_name
from engine.core.paths import PROJECT_ROOT
from store.models_dir import (ModelEntry, find_model, list_models, models_dir, save_upload,
                              size_text, upload_cap_bytes)

MIB = 2**20


@pytest.fixture
def folder(tmp_path, monkeypatch):
    path = tmp_path / "models"
    monkeypatch.setenv("BENCH_MODELS_DIR", str(path))
    monkeypatch.delenv("BENCH_MAX_UPLOAD_MB", raising=False)
    return path


class Unreadable(io.RawIOBase):
    """A file object that must never be read (a refused upload)."""

    def read(self, n=-1):
        raise AssertionError("read before the extension was checked")


class BreaksAfter(io.RawIOBase):
    """Gives one chunk, then the connection drops."""

    def __init__(self):
        self.calls = 0

    def read(self, n=-1):
        self.calls += 1
        if self.calls > 1:
            raise OSError("connection reset")
        return b"x" * n


def test_the_folder_comes_from_the_environment_else_data_models(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_MODELS_DIR", str(tmp_path / "m"))
    assert models_dir() == (tmp_path / "m").resolve()
    monkeypatch.delenv("BENCH_MODELS_DIR")
    assert models_dir() == PROJECT_ROOT / "data" / "models"
    assert models_dir().is_absolute()


@pytest.mark.parametrize("raw, cap", [("", 1024 * MIB), ("5", 5 * MIB), (" 64 ", 64 * MIB),
                                      ("1048576", 1048576 * MIB)])
def test_the_cap_is_a_positive_number_of_mib(raw, cap, monkeypatch):
    monkeypatch.setenv("BENCH_MAX_UPLOAD_MB", raw)
    assert upload_cap_bytes() == cap


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "lots", "1048577"])
def test_a_bad_cap_names_the_variable_and_the_range(raw, monkeypatch):
    monkeypatch.setenv("BENCH_MAX_UPLOAD_MB", raw)
    with pytest.raises(UserError) as err:
        upload_cap_bytes()
    assert str(err.value) == (f"BENCH_MAX_UPLOAD_MB: {raw!r} is not allowed; allowed: an "
                              "integer 1..1048576 (MiB)")
    assert err.value.field == "BENCH_MAX_UPLOAD_MB"


def test_an_upload_gets_a_server_side_name_and_a_sidecar(folder):
    data = bytes(range(256)) * 10_000  # 2.4 MiB: three chunks
    path = save_upload(io.BytesIO(data), "My Net (v2).PT2", cap_bytes=3 * MIB)
    assert re.fullmatch(r"[0-9a-f]{12}\.pt2", path.name)
    assert path.parent == folder.resolve() and path.read_bytes() == data
    meta = json.loads((folder / f"{path.name}.json").read_text())
    assert meta["uploaded_name"] == "My Net (v2).PT2" and meta["bytes"] == len(data)
    when = datetime.fromisoformat(meta["uploaded_at"])
    assert when.tzinfo == timezone.utc
    assert abs((datetime.now(timezone.utc) - when).total_seconds()) < 60
    assert sorted(p.name for p in folder.iterdir()) == [path.name, f"{path.name}.json"]


def test_an_uploaded_name_is_never_a_path(folder, tmp_path):
    path = save_upload(io.BytesIO(b"abc"), "../../evil.onnx", cap_bytes=10)
    assert path.parent == folder.resolve() and re.fullmatch(r"[0-9a-f]{12}\.onnx", path.name)
    assert not (tmp_path / "evil.onnx").exists() and not (tmp_path.parent / "evil.onnx").exists()
    [entry] = list_models()
    assert entry.source_name == "../../evil.onnx"  # display text only


def test_an_upload_of_exactly_the_cap_is_kept_and_one_byte_more_leaves_nothing(folder):
    assert save_upload(io.BytesIO(b"x" * 100), "a.onnx", cap_bytes=100).stat().st_size == 100
    before = sorted(os.listdir(folder))
    with pytest.raises(UserError) as err:
        save_upload(io.BytesIO(b"x" * 101), "b.onnx", cap_bytes=100)
    assert str(err.value) == ("model_file: the upload is over the cap of 100 bytes; allowed: "
                              "at most 100 bytes (BENCH_MAX_UPLOAD_MB)")
    assert err.value.field == "model_file"
    assert sorted(os.listdir(folder)) == before


def test_the_cap_is_counted_across_chunks_and_named_in_mib(folder, monkeypatch):
    monkeypatch.setenv("BENCH_MAX_UPLOAD_MB", "2")
    with pytest.raises(UserError, match=r"over the cap of 2 MiB; allowed: at most 2 MiB"):
        save_upload(io.BytesIO(b"x" * (2 * MIB + 1)), "big.keras")
    assert os.listdir(folder) == []


@pytest.mark.parametrize("name, reason", [
    ("model.h5", "model_file: .h5 files are refused: legacy HDF5 Keras files bypass safe_mode"),
    ("model.HDF5", "model_file: .hdf5 files are refused: legacy HDF5 Keras files bypass"),
    ("weights.pkl", "model_file: .pkl files are refused: a pickle runs code when it is read"),
    ("w.pickle", "model_file: .pickle files are refused: a pickle runs code when it is read"),
    ("notes.txt", "model_file: extension '.txt' is not supported; allowed: .pt2, .onnx, "
                  ".keras"),
    # TorchScript is a program: loading it runs code from the file, so no upload is one
    ("net.pt", "model_file: .pt files (TorchScript, a program) are not taken as uploads: "
               "loading one runs code from the file; allowed: .pt2, .onnx, .keras (they load "
               "without running code). A TorchScript file you trust: copy it into the models "
               "folder and tick \"runs code from this file\""),
    ("net.PTH", "model_file: .pth files (TorchScript, a program) are not taken as uploads"),
    ("no_extension", "model_file: extension '(none)' is not supported"),
])
def test_a_refused_extension_is_refused_before_anything_is_read_or_written(name, reason,
                                                                            folder):
    with pytest.raises(UserError) as err:
        save_upload(Unreadable(), name)
    assert str(err.value).startswith(reason) and err.value.field == "model_file"
    assert not folder.exists()


def test_an_upload_that_breaks_or_is_empty_leaves_nothing(folder):
    with pytest.raises(OSError, match="connection reset"):
        save_upload(BreaksAfter(), "net.pt2", cap_bytes=10 * MIB)
    with pytest.raises(UserError, match="model_file: the upload is empty"):
        save_upload(io.BytesIO(b""), "net.pt2", cap_bytes=10)
    assert os.listdir(folder) == []


def test_format_for_name_follows_detect_formats_extensions():
    assert [format_for_name(n) for n in ("a.pt2", "a.PT", "b.pth", "c.onnx", "d.keras")] == [
        "pt2", "torchscript", "torchscript", "onnx", "keras"]


def test_the_listing_shows_models_and_skips_everything_else(folder):
    up = save_upload(io.BytesIO(b"u" * 3000), "resnet-ish.pt2", cap_bytes=MIB)
    folder.joinpath("hand.onnx").write_bytes(b"o" * 10)
    folder.joinpath("hand.pt").write_bytes(b"t" * 20)  # TorchScript, copied in by hand
    sm = folder / "exported"
    (sm / "variables").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"p" * 100)
    (sm / "variables" / "variables.data").write_bytes(b"v" * 24)
    (folder / "not_a_model").mkdir()  # a folder without saved_model.pb
    for skipped in (".hidden.onnx", ".abc.pt2.part", "old.h5", "readme.txt", "x.pkl"):
        folder.joinpath(skipped).write_bytes(b"s")
    bad = folder / "broken.keras"
    bad.write_bytes(b"k")
    folder.joinpath("broken.keras.json").write_text("{not json")
    for age, p in enumerate((up, folder / "hand.onnx", folder / "hand.pt", sm, bad)):
        os.utime(p, (1_700_000_000 - age, 1_700_000_000 - age))  # newest first
    assert list_models() == [
        ModelEntry(str(up), "pt2", 3000,
                   f"resnet-ish.pt2 ({up.name}) · 2.9 KiB", "resnet-ish.pt2"),
        ModelEntry(str(folder.resolve() / "hand.onnx"), "onnx", 10, "hand.onnx · 10 bytes",
                   "hand.onnx"),
        ModelEntry(str(folder.resolve() / "hand.pt"), "torchscript", 20, "hand.pt · 20 bytes",
                   "hand.pt"),
        ModelEntry(str(sm.resolve()), "savedmodel", 124, "exported · 124 bytes", "exported"),
        ModelEntry(str(bad.resolve()), "keras", 1, "broken.keras · 1 bytes", "broken.keras"),
    ]
    assert all(os.path.isabs(e.path) for e in list_models())


def test_a_link_names_a_file_by_its_server_side_name_only(folder):
    up = save_upload(io.BytesIO(b"m"), "mine.onnx", cap_bytes=10)
    assert find_model(up.name).path == str(up)
    for raw in ("mine.onnx", str(up), f"../models/{up.name}", up.name[:6], "", None):
        assert find_model(raw) is None, raw


def test_an_empty_or_missing_folder_lists_nothing(folder):
    assert list_models() == []
    folder.mkdir()
    assert list_models() == []


def test_sizes_read_in_binary_units():
    assert [size_text(n) for n in (0, 1023, 1024, 3 * MIB // 2, 5 * 2**30)] == [
        "0 bytes", "1023 bytes", "1.0 KiB", "1.5 MiB", "5.0 GiB"]


@pytest.mark.parametrize("stem, name", [
    ("net", "net"), ("My Net (v2)", "My_Net_v2"), ("..", "my_model"),
    ("resnet18", "my_resnet18"), ("a" * 80, "a" * 64), ("ünïcode-ok.1", "n_code-ok.1")])
def test_a_default_name_is_the_stem_made_safe(stem, name):
    assert default_name(stem) == name


def test_the_input_box_takes_c_h_w_or_named_inputs():
    assert parse_inputs("3,16,16") == (InputSpec("input", (1, 3, 16, 16)),)
    assert parse_inputs(" 16, 16, 3 \n\n") == (InputSpec("input", (1, 16, 16, 3)),)
    assert parse_inputs("input_ids:1x128:int64\nmask:1x128:int64") == (
        InputSpec("input_ids", (1, 128), "int64"), InputSpec("mask", (1, 128), "int64"))
    assert parse_inputs("image:1x3x8x8") == (InputSpec("image", (1, 3, 8, 8)),)


@pytest.mark.parametrize("text, field, start", [
    ("", "input", "input: required; allowed: C,H,W"),
    ("3,a,16", "input_shape", "input_shape: 'a' in '3,a,16' is not an integer"),
    ("a:1x2\na:1x3", "input", "input: names a, a repeat; allowed: each input named once"),
    ("ids:1x128:int128", "input", "input: dtype 'int128' is not supported"),
])
def test_a_bad_input_box_names_its_field(text, field, start):
    with pytest.raises(UserError) as err:
        parse_inputs(text)
    assert err.value.field == field and str(err.value).startswith(start)


def test_a_killed_uploads_leftovers_go_once_stale_and_a_users_own_files_never(folder):
    kept = save_upload(io.BytesIO(b"model"), "net.onnx", cap_bytes=100)
    leftovers = [".0123456789ab.pt2.part", ".0123456789ab.pt2.json.part",
                 "0123456789ab.pt2.json"]  # a sidecar whose model never arrived
    for name in leftovers:
        (folder / name).write_text("x")
    (folder / "notes.json").write_text("{}")  # the user's own: not a name we make
    (folder / ".cache.part").write_text("x")
    now = (folder / leftovers[0]).stat().st_mtime
    assert [e.path for e in list_models(now=now + 60)] == [str(kept)]
    assert all((folder / n).exists() for n in leftovers)  # an upload may still be writing
    assert [e.path for e in list_models(now=now + 3601)] == [str(kept)]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [".cache.part", kept.name, f"{kept.name}.json", "notes.json"])
