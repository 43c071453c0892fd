"""Benchmark your own model (issue #14), end to end in a real browser: real model files
(torch.export .pt2, ONNX, Keras v3) uploaded through the Run page's "Your model file" form
into a temporary models folder, named, given their input, launched one sweep each (batch 1,
1 thread, 1 round); a TorchScript .pt, refused as an upload (it runs code when loaded),
copied into the folder by hand and launched once "runs code from this file" is ticked; all
found in the database as ok runs with the file's format and SHA-256, and offered on
Results, Compare and Cost. A legacy .h5 upload is refused with the reason and leaves the
models folder as it was."""

import os
import re

import pytest

from store.db import open_db
from tests.test_e2e_browser import ARTIFACTS, browser_page
from tests.test_e2e_sharing import dashboard, no_exception

pytestmark = pytest.mark.slow
QUERY = ("source=file&batch=1&threads=1&rounds=1&max_rounds=1&min_time=0.2&min_iters=10"
         "&warmup=2")
# (format key of make_model_files, name given on the page, Input box)
UPLOADS = [("pt2", "e2e_pt2", "3,16,16"), ("onnx", "e2e_onnx", "3,16,16"),
           ("keras", "e2e_keras", "16,16,3")]


def test_upload_name_and_launch_each_model_file_format(tmp_path, model_files):
    from playwright.sync_api import expect

    files = model_files  # made once a session (tests/conftest.py); read, never changed
    h5 = tmp_path / "legacy.h5"
    h5.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    models, db = tmp_path / "models", tmp_path / "e2e.duckdb"
    with dashboard(db, tmp_path, BENCH_MODELS_DIR=str(models)) as (port, _), \
            browser_page("user-models") as page:
        base = f"http://127.0.0.1:{port}"
        page.goto(f"{base}/?{QUERY}")
        upload = page.locator("input[type=file]")
        expect(upload).to_have_count(1, timeout=60_000)

        upload.set_input_files(h5)
        expect(page.get_by_text("model_file: .h5 files are refused: legacy HDF5 Keras files "
                                "bypass safe_mode")).to_be_visible(timeout=30_000)
        expect(page.get_by_role("button", name="Save to the models folder")).to_have_count(0)
        assert not models.exists() or os.listdir(models) == []
        upload.set_input_files(files["torchscript"])
        expect(page.get_by_text("model_file: .pt files (TorchScript, a program) are not taken "
                                "as uploads")).to_be_visible(timeout=30_000)
        expect(page.get_by_role("button", name="Save to the models folder")).to_have_count(0)
        assert not models.exists() or os.listdir(models) == []

        for job, (fmt, name, shape) in enumerate(UPLOADS, start=1):
            path = files[fmt]
            upload.set_input_files(path)
            page.get_by_role("button", name="Save to the models folder").click()
            expect(page.get_by_text(re.compile(
                rf"Saved {re.escape(path.name)} as [0-9a-f]{{12}}{re.escape(path.suffix)} "
                r"\("))).to_be_visible(timeout=30_000)
            box = page.get_by_label("Name", exact=True)
            expect(box).to_have_value("net")  # the new file's default name
            box.fill(name)
            box.press("Enter")
            area = page.get_by_label("Input", exact=True)
            area.fill(shape)
            area.press("Control+Enter")
            expect(page.get_by_text("1 configuration × 1 round = 1 run")).to_be_visible(
                timeout=30_000)
            page.get_by_role("button", name="Launch").click()
            expect(page.get_by_text(re.compile(rf"Sweep job {job} (starts now|is queued)\.")
                                    )).to_be_visible(timeout=30_000)
        # A TorchScript file the user trusts: copied in by hand, run once the box is ticked.
        (models / "net.pt").write_bytes(files["torchscript"].read_bytes())
        page.goto(f"{base}/?{QUERY}&model_file=net.pt&name=e2e_torchscript&input=3,16,16")
        expect(page.get_by_text("trust_model_code: net.pt is TorchScript, a program")
               ).to_be_visible(timeout=60_000)
        page.get_by_text("runs code from this file", exact=True).click()
        expect(page.get_by_text("1 configuration × 1 round = 1 run")).to_be_visible(
            timeout=30_000)
        page.get_by_role("button", name="Launch").click()
        expect(page.get_by_text(re.compile(r"Sweep job 4 (starts now|is queued)\.")
                                )).to_be_visible(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "e2e-user-models-launched.png"), full_page=True)
        expect(page.get_by_text(re.compile(r"Job 4: done"))).to_be_visible(timeout=600_000)
        page.screenshot(path=str(ARTIFACTS / "e2e-user-models-done.png"), full_page=True)
        # Where models are chosen, the user's models are offered by the names they were given.
        for path, last in (("results", "4 runs · click a column header to sort"),
                           ("compare", "One-time costs next to steady state"),
                           ("cost", "Cost per 1 M inferences — e2e_keras")):
            page.goto(f"{base}/{path}")
            expect(page.get_by_text(last)).to_be_visible(timeout=60_000)
            no_exception(page)
        page.screenshot(path=str(ARTIFACTS / "e2e-user-models-cost.png"), full_page=True)
        saved = sorted(p for p in os.listdir(models) if not p.endswith(".json"))
        with open_db(db, read_only=True) as con:
            rows = con.execute(
                "SELECT model, framework, runtime, status, coalesce(reason, ''), model_format, "
                "model_sha256, model_bytes FROM runs ORDER BY model").fetchall()
    assert sorted(re.sub(r"^[0-9a-f]{12}", "", p) for p in saved) == sorted(
        [".pt2", ".onnx", ".keras", "net.pt"])
    assert [(r[0], r[1], r[2], r[3], r[5]) for r in rows] == [
        ("e2e_keras", "tensorflow", "tf_function", "ok", "keras"),
        ("e2e_onnx", "torch", "onnxruntime", "ok", "onnx"),
        ("e2e_pt2", "torch", "eager", "ok", "pt2"),
        ("e2e_torchscript", "torch", "torchscript", "ok", "torchscript")], rows
    for r in rows:
        assert re.fullmatch(r"[0-9a-f]{64}", r[6]), r
    sizes = {fmt: files[fmt].stat().st_size for fmt in ("pt2", "onnx", "keras", "torchscript")}
    assert sorted(r[7] for r in rows) == sorted(sizes.values())
