"""The models folder (issue #14): users' model files the dashboard can benchmark.

Data side only: this module stats and copies bytes and never opens a model (only a worker
does). An upload is refused by its extension before a byte is written (model_source's
rules: only the formats that load without running code, .pt2, .onnx and .keras), streamed in 1 MiB chunks to a hidden part file and counted against the cap, then
renamed to a server-side name `<12 hex of a uuid4><ext>` with a sidecar `<name>.json`
holding the uploaded name, its size and when it came. The uploaded name is display text
only, never part of a path. On any failure nothing is left behind.

The folder: `$BENCH_MODELS_DIR`, else `./data/models` (next to the default database). Files
or SavedModel folders put there by hand are listed too.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from engine.core.errors import UserError
from engine.core.model_source import format_for_name, upload_format_for_name
from engine.core.paths import PROJECT_ROOT

__all__ = ["ModelEntry", "models_dir", "upload_cap_bytes", "save_upload", "list_models",
           "find_model", "size_text", "CAP_MB_RANGE", "DEFAULT_CAP_MB", "CHUNK_BYTES"]

MIB = 2**20
CHUNK_BYTES = MIB
DEFAULT_CAP_MB = 1024  # the same as Streamlit's server.maxUploadSize in .streamlit/config.toml
CAP_MB_RANGE = (1, 1024 * 1024)  # up to 1 TiB: past that, copy the file in by hand
_MAX_LABEL = 120  # characters of an uploaded name shown in a label


@dataclass(frozen=True)
class ModelEntry:
    """One model in the folder: a file or a SavedModel folder."""

    path: str  # absolute
    format: str  # a model_source format
    bytes: int  # a SavedModel: the sum of its files
    label: str  # the uploaded name (or the file name), the server-side name and the size
    source_name: str  # the uploaded name from the sidecar, else the file name: display text

    @property
    def file_name(self) -> str:
        """The server-side name: what a link names (?model_file=...), never a path."""
        return Path(self.path).name


def models_dir() -> Path:
    return Path(os.environ.get("BENCH_MODELS_DIR") or PROJECT_ROOT / "data" / "models"
                ).resolve()


def upload_cap_bytes() -> int:
    """$BENCH_MAX_UPLOAD_MB in bytes (a positive integer of MiB), else 1024 MiB."""
    raw = os.environ.get("BENCH_MAX_UPLOAD_MB", "").strip()
    if not raw:
        return DEFAULT_CAP_MB * MIB
    lo, hi = CAP_MB_RANGE
    try:
        mb = int(raw)
    except ValueError:
        mb = None
    if mb is None or not lo <= mb <= hi:
        raise UserError(f"BENCH_MAX_UPLOAD_MB: {raw[:40]!r} is not allowed; allowed: an "
                        f"integer {lo}..{hi} (MiB)", field="BENCH_MAX_UPLOAD_MB")
    return mb * MIB


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", MIB), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"


def _cap_text(cap: int) -> str:
    return f"{cap // MIB:,} MiB" if cap % MIB == 0 else f"{cap:,} bytes"


def save_upload(fileobj: BinaryIO, original_name: str, cap_bytes: int | None = None) -> Path:
    """Copy an upload into the models folder under a server-side name; its path.
    UserError (field model_file) for a refused or unknown extension, or a format that runs
    code when loaded (TorchScript: nothing written; a trusted one is copied in by hand), an
    empty upload, or one past the cap (the part file removed)."""
    upload_format_for_name(original_name)  # refuse by extension before writing anything
    ext = Path(original_name).suffix.lower()
    cap = upload_cap_bytes() if cap_bytes is None else cap_bytes
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stem = uuid.uuid4().hex[:12]
    part = folder / f".{stem}{ext}.part"
    final = folder / f"{stem}{ext}"
    sidecar = folder / f"{final.name}.json"
    sidecar_part = folder / f".{sidecar.name}.part"
    written = 0
    try:
        with open(part, "xb") as out:
            while chunk := fileobj.read(CHUNK_BYTES):
                written += len(chunk)
                if written > cap:
                    raise UserError(f"model_file: the upload is over the cap of "
                                    f"{_cap_text(cap)}; allowed: at most {_cap_text(cap)} "
                                    "(BENCH_MAX_UPLOAD_MB)", field="model_file")
                out.write(chunk)
        if written == 0:
            raise UserError("model_file: the upload is empty; allowed: a model file of 1 "
                            f"byte to {_cap_text(cap)}", field="model_file")
        sidecar_part.write_text(json.dumps({
            "uploaded_name": original_name[:255], "bytes": written,
            "uploaded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        os.replace(sidecar_part, sidecar)  # a sidecar without its model is never listed
        os.replace(part, final)
    except BaseException:
        for leftover in (part, sidecar_part, sidecar):
            leftover.unlink(missing_ok=True)
        raise
    return final


def _uploaded_name(path: Path) -> str | None:
    try:
        meta = json.loads((path.parent / f"{path.name}.json").read_text())
    except (OSError, ValueError):
        return None
    name = meta.get("uploaded_name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    return name[:_MAX_LABEL] or None


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, names in os.walk(folder):
        for n in names:
            try:
                total += (Path(root) / n).stat().st_size
            except OSError:
                pass  # removed while listing: not part of the size
    return total


# An upload that was killed (the server stopped mid-write) leaves its hidden part file, or a
# sidecar whose model never arrived; past this age no upload is still writing them.
STALE_S = 3600.0
_OURS = re.compile(r"^\.?[0-9a-f]{12}\.(pt2|pt|pth|onnx|keras)(\.json)?(\.part)?$")


def remove_stale(folder: Path, now: float) -> list[str]:
    """Delete part files and orphan sidecars older than STALE_S; returns their names."""
    gone = []
    for p in folder.iterdir():
        # only names save_upload makes: a user's own files in the folder are never touched
        ours = _OURS.match(p.name)
        orphan = (ours and not p.name.startswith(".") and p.name.endswith(".json")
                  and not (folder / p.name[:-len(".json")]).exists())
        if not ours or not (p.name.endswith(".part") or orphan) or not p.is_file():
            continue
        try:
            if now - p.stat().st_mtime > STALE_S:
                p.unlink()
                gone.append(p.name)
        except OSError:
            continue  # removed or renamed meanwhile: an upload finishing
    return gone


def list_models(now: float | None = None) -> list[ModelEntry]:
    """Every model file with an allowed extension and every SavedModel folder directly in
    the models folder, newest first. Hidden and part files are skipped (and removed once
    stale); nothing is read but the sidecars."""
    folder = models_dir()
    if not folder.is_dir():
        return []
    remove_stale(folder, time.time() if now is None else now)
    found = []
    for p in folder.iterdir():
        if p.name.startswith("."):
            continue
        try:
            if p.is_dir():
                if not (p / "saved_model.pb").is_file():
                    continue
                fmt, size = "savedmodel", _folder_bytes(p)
            else:
                try:
                    fmt = format_for_name(p.name)
                except UserError:
                    continue
                size = p.stat().st_size
            mtime = p.stat().st_mtime
        except OSError:
            continue  # removed while listing
        shown = _uploaded_name(p) if fmt != "savedmodel" else None
        source = shown or p.name
        label = (f"{shown} ({p.name})" if shown and shown != p.name else p.name)
        found.append((mtime, ModelEntry(str(p), fmt, size, f"{label} · {size_text(size)}",
                                        source)))
    found.sort(key=lambda t: (-t[0], t[1].file_name))
    return [e for _, e in found]


def find_model(file_name: str | None) -> ModelEntry | None:
    """The listed model whose server-side name is exactly file_name (a link's value): matched
    against the listing, never joined to a path."""
    if not file_name:
        return None
    return next((e for e in list_models() if e.file_name == file_name), None)
