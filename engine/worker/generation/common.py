"""What the exporting generation runtimes share: their exports of the model folder (an OpenVINO
IR, an ONNX Runtime GenAI folder), built once under the worker's workdir and reused; the
versions a run records; the bf16 rule.

A cache entry is named by the model folder's name (the model and its seed, through
engine.scenarios.generation.models.config_digest), the precision, the options that change
the exported files, and the versions of every package that writes them: a new exporter never
reuses an old export. Like the model folder, an entry is built in a temporary folder and
renamed into place, so a worker killed mid-export never leaves half of one behind.

A refusal the exporter itself gives (ONNX Runtime GenAI's builder on an architecture it
lacks) is cached as well, in a file beside the entries, so the next run of the same spec
repeats the measured reason without paying for the failed export again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Callable

from engine.core.precision import BF16_FLAGS, cpu_flags

__all__ = ["versions", "entry_name", "cached_export", "refusal_file", "bf16_refusal"]


def versions(*packages: str) -> dict:
    """package -> installed version, as a run stores them ("absent" where not installed)."""
    out = {}
    for p in packages:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "absent"
    return out


def entry_name(runtime: str, folder: Path, precision: str, vers: dict,
               extra: dict | None = None) -> str:
    """<runtime>-<model folder>-<precision>-<digest of versions and extra>."""
    blob = json.dumps({"versions": vers, "extra": extra or {}}, sort_keys=True)
    return (f"{runtime}-{Path(folder).name}-{precision}-"
            f"{hashlib.sha256(blob.encode()).hexdigest()[:12]}")


def refusal_file(workdir: Path, name: str) -> Path:
    return Path(workdir) / f"{name}.refused"


def cached_export(workdir: Path, name: str, build: Callable[[Path], None],
                  done: str) -> tuple[Path, bool]:
    """The entry `name` under workdir, `build(tmp)` writing it on first use; `done` is the
    file whose presence marks a finished entry. Returns (path, built_now)."""
    dest = Path(workdir) / name
    if (dest / done).exists():
        return dest, False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest.parent))
    try:
        build(tmp)
        if not (tmp / done).exists():
            raise RuntimeError(f"the export wrote no {done} in {tmp}")
        try:
            tmp.rename(dest)
        except OSError:  # another worker finished the same export first: theirs is equal
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest, True


def bf16_refusal(flags: tuple[str, ...] | None = None) -> str:
    """Why bf16 is refused on this CPU ("" where it has bf16 instructions): without them
    oneDNN, OpenVINO and XLA emulate bf16 with fp32 instructions plus conversions, slower
    than fp32, so a bf16 figure would mislead (engine.core.precision's rule, same words)."""
    have = cpu_flags() if flags is None else flags
    if any(f in have for f in BF16_FLAGS):
        return ""
    return (f"this CPU has neither {' nor '.join(BF16_FLAGS)}: bf16 would be emulated in fp32 "
            "instructions, slower than fp32")
