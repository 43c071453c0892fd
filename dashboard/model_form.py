"""The Run page's "Your model file" choice (issue #14): upload a model file into the models
folder, pick one, name it, describe its input and pick its runtimes. Streamlit glue; the
files are store/models_dir.py's, the rules engine/core/model_source.py's.

The upload control renders only for a session that may write (the Run page itself stops in
viewer mode before this is called). The form reads and writes its part of the page's link
through the page's PageLink: a link names a file by its server-side name only
(?source=file&model_file=<12 hex>.pt2), matched against the listing, never used as a path;
?name=, ?input= (lines as %0A) and ?runtime=a,b fill the other fields.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from dashboard.link_state import PageLink
from engine.present.links import md_escape
from engine.core.errors import UserError
from engine.core.model_source import (DECLARING_FORMATS, FORMAT_RUNTIMES, InputSpec,
                                      ModelSource, CODE_FORMATS, DeclaredInput,
                                      check_model_name, declared_text, default_runtime,
                                      parse_input, parse_input_shape, upload_format_for_name)
from engine.run.process.worker_steps import read_declared
from store.models_dir import (list_models, models_dir, save_upload, size_text,
                              upload_cap_bytes)

__all__ = ["ModelForm", "model_form", "source_choice", "default_name", "parse_inputs",
           "declared_for", "UPLOAD_TYPES", "SOURCES"]

SOURCES = {"catalog": "Catalog", "file": "Your model file"}  # link value -> label

# The refused extensions are accepted by the widget on purpose: refused by the browser, a
# .h5 file would only say "files are not allowed"; refused here, the user reads why. Only
# .pt2, .onnx and .keras are saved (they load without running code); a .pt/.pth is
# TorchScript, a program, refused with the way to run one the user trusts.
UPLOAD_TYPES = ["pt2", "onnx", "keras", "pt", "pth", "h5", "hdf5", "pkl", "pickle"]
TRUST_LABEL = "runs code from this file"
_LAYOUT = {"pt2": "3,224,224", "torchscript": "3,224,224", "onnx": "3,224,224",
           "keras": "224,224,3", "savedmodel": "224,224,3"}
INPUT_HELP = (
    "Either `C,H,W`: one float32 image input, dims in the model's own layout (torch files "
    "C,H,W such as 3,224,224; Keras H,W,C such as 224,224,3), no batch axis. Or one "
    "`NAME:DIMS[:DTYPE]` per line, e.g. `input_ids:1x128:int64`: the batch axis first, "
    "written as 1 (each batch size of the sweep replaces it); DTYPE defaults to float32. "
    "A .keras, .pt2 or .onnx file declares its inputs: leave this empty to use them; what "
    "you type is checked against them before anything runs.")


@dataclass
class ModelForm:
    """What the form chose: the source (None while something is refused), the errors by
    field and where each is shown."""

    source: ModelSource | None = None
    runtimes: list[str] = field(default_factory=list)
    # what the file declares about its inputs (None: nothing read); the sweep form fills or
    # checks the source's inputs with it once the batch sizes are known (fill_inputs)
    declared: tuple[DeclaredInput, ...] | None = None
    input_text: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    slots: dict = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        return [self.source.name] if self.source else []

    @property
    def frameworks(self) -> list[str]:
        return [self.source.framework] if self.source else []


def source_choice(link: PageLink) -> bool:
    """The "Models from" choice at the top of the sweep form; True for "Your model file".
    A link (?source=file) sets it when it is opened, so a user's later choice stays."""
    by_label = {label: value for value, label in SOURCES.items()}
    link.choice("source", "model_source", list(SOURCES.values()), encode=by_label.get)
    label = st.radio("Models from", list(SOURCES.values()), key="model_source",
                     horizontal=True, **link.initial("model_source"))
    link.put("source", by_label[label], default="catalog")
    return label == SOURCES["file"]


def default_name(stem: str) -> str:
    """A model name from a file's stem: letters, digits, _ . - only, at most 64, never a
    catalog model's name."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("._-")[:64] or "my_model"
    try:
        return check_model_name(name)
    except UserError:
        return f"my_{name}"[:64]


def parse_inputs(text: str, optional: bool = False) -> tuple[InputSpec, ...]:
    """The Input box: one `C,H,W` line, or NAME:DIMS[:DTYPE] lines (UserError naming the
    field). optional: the file declares its inputs, so an empty box means those."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines and optional:
        return ()
    if not lines:
        raise UserError("input: required; allowed: C,H,W (e.g. 3,224,224) or one "
                        "NAME:DIMS[:DTYPE] per line (e.g. input_ids:1x128:int64)",
                        field="input")
    if len(lines) == 1 and ":" not in lines[0]:
        return (parse_input_shape(lines[0]),)
    inputs = tuple(parse_input(line) for line in lines)
    names = [i.name for i in inputs]
    if len(set(names)) < len(names):
        raise UserError(f"input: names {', '.join(names)} repeat; allowed: each input "
                        "named once", field="input")
    return inputs


def _upload(cap: int) -> None:
    """The upload control and its Save button: a saved file becomes the selected one."""
    # The lower of Streamlit's own limit (server.maxUploadSize, MB) and ours
    # (BENCH_MAX_UPLOAD_MB): raising one alone changes nothing.
    cap = min(cap, st.get_option("server.maxUploadSize") * 2**20)
    up = st.file_uploader(
        "Upload a model file", type=UPLOAD_TYPES, key="um_upload",
        max_upload_size=max(1, math.ceil(cap / 2**20)),
        help=f"saved into the models folder under a name of the server's own, at most "
             f"{size_text(cap)}; .pt2 (torch.export), .onnx, .keras: the formats that load "
             "without running code. TorchScript (.pt/.pth) or a SavedModel folder is a "
             "program: copy one you trust into the models folder and tick "
             f"\"{TRUST_LABEL}\"")
    if up is None:
        return
    saved = st.session_state.setdefault("_um_saved", {})  # file_id -> (server name, bytes)
    shown = md_escape(up.name)
    if up.file_id in saved:
        name, size = saved[up.file_id]
        st.success(f"Saved {shown} as `{name}` ({size_text(size)}).")
        return
    try:
        upload_format_for_name(up.name)
    except UserError as exc:
        st.error(md_escape(str(exc)), icon=":material/error:")
        return
    if st.button("Save to the models folder", key="um_save"):
        try:
            up.seek(0)
            path = save_upload(up, up.name, cap)
        except UserError as exc:
            st.error(md_escape(str(exc)), icon=":material/error:")
            return
        except OSError as exc:
            st.error(f"model\\_file: could not save into `{models_dir()}`: "
                     f"{md_escape(exc.strerror or str(exc))}", icon=":material/error:")
            return
        saved[up.file_id] = (path.name, path.stat().st_size)
        st.session_state["um_file"] = str(path)
        st.success(f"Saved {shown} as `{path.name}` ({size_text(up.size)}).")


@st.cache_data(ttl=3600, max_entries=256, show_spinner="reading the inputs the file declares")
def _declared(path: str, fmt: str, mtime_ns: int, size: int) -> tuple | None:
    """What a models-folder file declares about its inputs, read by a worker (this process
    never opens the file); cached per file version (its stat: mtime and size)."""
    got = read_declared(ModelSource("declared", fmt, (), path=path))
    return got.inputs


def declared_for(entry) -> tuple[DeclaredInput, ...] | None:
    """The inputs the chosen file declares, for the formats that declare them."""
    if entry.format not in DECLARING_FORMATS:
        return None
    try:
        st_ = os.stat(entry.path)
    except OSError:
        return None
    return _declared(entry.path, entry.format, st_.st_mtime_ns, st_.st_size)


def _trust(entry, may_trust: bool, form: ModelForm) -> bool:
    """A TorchScript file or SavedModel runs code when loaded: the "runs code from this
    file" box, per file, for a session on this machine that may write; never from a link
    (the box is not part of it), never for a remote session, signed in or not."""
    what = CODE_FORMATS[entry.format]
    if not may_trust:
        form.errors["trust_model_code"] = (
            f"trust_model_code: {entry.file_name} is {what}: loading it runs code from the "
            "file, which only a session on the server's own machine may allow; allowed: a "
            ".pt2, .onnx or .keras file, or run this one from that machine (or the CLI with "
            "--trust-model-code)")
        return False
    trusted = st.checkbox(TRUST_LABEL, key=f"um_trust_{entry.file_name}", value=False,
                          help=f"this file is {what}: loading it runs code it carries, as "
                               "your own Python would. Tick only for a file you trust")
    if not trusted:
        form.errors["trust_model_code"] = (
            f"trust_model_code: {entry.file_name} is {what}: loading it runs code from the "
            f"file; allowed: tick \"{TRUST_LABEL}\" when you trust it, or a .pt2, .onnx or "
            ".keras file")
    return trusted


def model_form(*, can_write: bool, link: PageLink, may_trust: bool = False) -> ModelForm:
    """Draw the form (file, name, input, runtimes) and say what it chose. A link opened
    fills the file, name, input and runtimes (the name and input are checked like typed
    ones, runtimes matched against the format's own; a refused value is one of the link's
    notes), and the form writes them back. may_trust: the session may let a file's code run
    (on this machine and may write); the box is never filled from a link."""
    form = ModelForm()
    if can_write:
        try:
            _upload(upload_cap_bytes())
        except UserError as exc:  # a bad BENCH_MAX_UPLOAD_MB: no upload, the listing stays
            st.error(str(exc), icon=":material/error:")
    else:
        st.caption("Uploading needs write access: pick a file already in the models folder.")
    form.slots["model_file"] = st.empty()
    entries = {e.path: e for e in list_models()}
    link.choice("model_file", "um_file", list(entries), encode=lambda p: entries[p].file_name)
    if st.session_state.get("um_file") not in entries:  # removed from the folder meanwhile
        st.session_state.pop("um_file", None)
    if not entries:
        form.errors["model_file"] = (
            f"model_file: no model file in {models_dir()} yet; allowed: upload one above, "
            "or copy a .pt2, .pt, .pth, .onnx or .keras file or a SavedModel folder there")
        return form
    path = st.selectbox("Model file", list(entries), key="um_file", **link.initial("um_file"),
                        format_func=lambda p: entries[p].label,
                        help="the models folder's files, newest first")
    entry = entries[path]
    framework, runtimes = FORMAT_RUNTIMES[entry.format]
    st.caption(f"{entry.format} file: runs on {framework} ({', '.join(runtimes)})")
    trusted = _trust(entry, may_trust and can_write, form) if entry.format in CODE_FORMATS \
        else False
    form.slots["trust_model_code"] = st.empty()
    if st.session_state.get("_um_name_for") != path or "um_name" not in st.session_state:
        # a new file: its own default name
        st.session_state["um_name"] = default_name(Path(entry.source_name).stem)
        st.session_state["_um_name_for"] = path
    form.declared = declared_for(entry)
    if form.declared:
        st.caption(f"the file declares {md_escape(declared_text(form.declared))}: leave "
                   "Input empty to use it")
    elif entry.format not in DECLARING_FORMATS:
        st.caption(f"a {entry.format} file declares no inputs we read: describe them in "
                   "Input")
    link.text("name", "um_name", max_len=64)
    link.text("input", "um_input", max_len=2000)
    link.choices("runtime", f"um_runtimes_{entry.format}", list(runtimes))
    name = st.text_input("Name", key="um_name", max_chars=64, **link.initial("um_name"),
                         help="shown on every page as this model's name: 1 to 64 letters, "
                              "digits, _ . - (a catalog model's name is taken)")
    form.slots["model_name"] = st.empty()
    text = st.text_area("Input", key="um_input", height=80, max_chars=2000,
                        **link.initial("um_input"),
                        placeholder=("as the file declares" if form.declared
                                     else _LAYOUT[entry.format]), help=INPUT_HELP)
    form.slots["input"] = form.slots["input_shape"] = st.empty()
    chosen = st.multiselect(
        "Runtimes", list(runtimes), key=f"um_runtimes_{entry.format}",
        **link.initial(f"um_runtimes_{entry.format}"),
        placeholder=f"the format's default ({default_runtime(entry.format, framework)})",
        help="the runtimes this file's format can run on; one per configuration")
    form.slots["runtime"] = st.empty()
    form.runtimes = list(chosen)  # none: the format's default (the sweep decides)
    link.put("model_file", entry.file_name)
    link.put("name", name or None)
    link.put("input", text or None)
    link.put("runtime", form.runtimes)
    try:
        name = check_model_name(name)
    except UserError as exc:
        form.errors["model_name"] = str(exc)
    try:
        inputs = parse_inputs(text or "", optional=bool(form.declared))
        form.input_text = " ".join((text or "").split())
    except UserError as exc:
        form.errors[exc.field or "input"] = str(exc)
    if not form.errors:
        form.source = ModelSource(name, entry.format, inputs, path=entry.path,
                                  trust_code=trusted)
    return form
