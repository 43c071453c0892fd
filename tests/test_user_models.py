"""Opening a user's model file the safe way (issue #14, worker side, not wired yet): real
files made here with torch (a .pt2 program, TorchScript, ONNX), a state dict, and a pickle
whose unpickling would create a file. Runs in a subprocess: the test process, like the
dashboard, never imports torch itself."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

SCRIPT = r'''
import hashlib, json, os, sys, warnings
import torch
from engine.core.model_source import InputSpec, ModelSource
from engine.worker.user_models import (ModelFileError, file_digest, load_torch, onnx_session,
                                       arrays)
warnings.filterwarnings("ignore")
d = sys.argv[1]
out = {}

from tests.model_files import NETS
exec(NETS)  # ImageNet and Tokens, the nets every user-model test uses

torch.manual_seed(0)
net = ImageNet().eval()
x = torch.randn(2, 3, 16, 16)
ref = net(x)
torch.export.save(torch.export.export(net, (x,)), f"{d}/m.pt2")
torch.jit.save(torch.jit.trace(net, x), f"{d}/m.pt")
torch.onnx.export(net, (x,), f"{d}/m.onnx", input_names=["input"], dynamo=False)
torch.save(net.state_dict(), f"{d}/weights.pt")

class Evil:
    def __reduce__(self):
        return (open, (f"{d}/pwned", "w"))
torch.save({"w": torch.ones(1), "evil": Evil()}, f"{d}/evil.pt")
if os.path.exists(f"{d}/pwned"):
    os.remove(f"{d}/pwned")  # torch.save itself does not create it; make sure

# The same program with a code-running pickle in its sample inputs, or as a weight marked
# use_pickle: torch.export.load itself would unpickle both with weights_only=False.
import io, zipfile
buf = io.BytesIO()
torch.save(Evil(), buf)
archive = zipfile.ZipFile(f"{d}/m.pt2")
for variant, target in (("sample", "sample_inputs/model.pt"), ("weight", "weights/weight_0")):
    with zipfile.ZipFile(f"{d}/evil_{variant}.pt2", "w") as z:
        for member in archive.namelist():
            data = archive.read(member)
            if member.endswith(target):
                data = buf.getvalue()
            if variant == "weight" and member.endswith("model_weights_config.json"):
                config = json.loads(data)
                config["config"]["conv.weight"]["use_pickle"] = True
                data = json.dumps(config).encode()
            z.writestr(member, data)

def src(name, fmt, inputs=(InputSpec("input", (1, 3, 16, 16)),), trust=True):
    return ModelSource(name, fmt, inputs, path=f"{d}/{name}", trust_code=trust)

for name, fmt in (("m.pt2", "pt2"), ("m.pt", "torchscript")):
    m = load_torch(src(name, fmt))
    out[name] = float((m(x) - ref).abs().max())
try:  # TorchScript is a program: never loaded unless the user trusts the file
    load_torch(src("m.pt", "torchscript", trust=False))
    out["untrusted"] = "loaded"
except ModelFileError as e:
    out["untrusted"] = str(e)
sess = onnx_session(src("m.onnx", "onnx"), 1)
out["m.onnx"] = float(abs(sess.run(None, {"input": x.numpy()})[0] - ref.detach().numpy()).max())
for name, fmt in (("weights.pt", "torchscript"), ("evil.pt", "torchscript"),
                  ("evil_sample.pt2", "pt2"), ("evil_weight.pt2", "pt2")):
    try:
        load_torch(src(name, fmt))
        out[name] = "loaded"
    except ModelFileError as e:
        out[name] = str(e)
out["pwned"] = os.path.exists(f"{d}/pwned")
sha, size = file_digest(f"{d}/m.onnx")
out["digest"] = [sha == hashlib.sha256(open(f"{d}/m.onnx", "rb").read()).hexdigest(), size]
(ids,) = map(torch.from_numpy, arrays((InputSpec("input_ids", (1, 128), "int64"),), 4))
out["ids"] = [list(ids.shape), str(ids.dtype), int(ids.min()) >= 0, int(ids.max()) < 100]
out["tokens"] = list(Tokens().eval()(ids).shape)
print(json.dumps(out))
'''


def worker_side(script: str, folder) -> dict:
    """Run a script as a worker would (its own process) and read its JSON answer."""
    proc = subprocess.run([sys.executable, "-c", script, str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def safely_loaded(tmp_path_factory):
    """SCRIPT run once: its files (the crafted .pt2 archives among them) and its answer,
    which the guard's test reads as well (each pwned file it makes is removed again)."""
    folder = tmp_path_factory.mktemp("formats")
    return folder, worker_side(SCRIPT, folder)


def test_each_format_loads_safely_and_a_code_running_pickle_never_runs(safely_loaded):
    tmp_path, out = safely_loaded
    assert out["m.pt2"] == 0.0 and out["m.pt"] < 1e-6 and out["m.onnx"] < 1e-5
    assert out["untrusted"] == (
        "trust_model_code: m.pt is TorchScript, a program: loading it runs code from the file, "
        "and it was not marked trusted; allowed: --trust-model-code (on the Run page: \"runs "
        "code from this file\")")
    assert out["weights.pt"].startswith("model_file: weights.pt holds OrderedDict (weights), not a "
                                        "model")
    assert out["evil.pt"].startswith("model_file: evil.pt was refused: it is not TorchScript")
    assert "a pickle that needs code to load is never opened" in out["evil.pt"]
    for name in ("evil_sample.pt2", "evil_weight.pt2"):  # a torch.export archive
        assert out[name].startswith(f"model_file: {name} was refused: it holds a pickled "
                                    "object that only code could rebuild")
    assert out["pwned"] is False and not (tmp_path / "pwned").exists()
    assert out["digest"][0] is True and out["digest"][1] == (tmp_path / "m.onnx").stat().st_size
    assert out["ids"] == [[4, 128], "torch.int64", True, True]
    assert out["tokens"] == [4, 2]


KERAS_SCRIPT = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import keras
from engine.core.model_source import InputSpec, ModelSource
from engine.worker.user_models import ModelFileError, load_factory, load_keras, load_savedmodel
d = sys.argv[1]
out = {}
inp = keras.Input((4,))
model = keras.Model(inp, keras.layers.Dense(2)(inp))
x = np.ones((3, 4), "float32")
ref = model(x).numpy()
model.save(f"{d}/m.keras")
lam = keras.Model(inp, keras.layers.Lambda(lambda t: t * 2)(inp))
lam.save(f"{d}/lambda.keras")
model.export(f"{d}/saved", verbose=False)
src = lambda name, fmt, trust=True: ModelSource(name, fmt, (InputSpec("x", (1, 4)),),
                                               path=f"{d}/{name}", trust_code=trust)
out["keras"] = float(abs(load_keras(src("m.keras", "keras"))(x).numpy() - ref).max())
try:
    load_keras(src("lambda.keras", "keras"))
    out["lambda"] = "loaded"
except ModelFileError as e:
    out["lambda"] = str(e)
sig = load_savedmodel(src("saved", "savedmodel"))
(val,) = sig(**{list(sig.structured_input_signature[1])[0]: x}).values()
out["saved"] = float(abs(val.numpy() - ref).max())
seq = keras.Sequential([keras.layers.Dense(2)])
seq.build((None, 4))
try:  # a call on the wrong shape fails inside a layer: Keras bolds the reason
    seq(np.ones((1, 5), "float32"))
except ValueError as e:
    out["bold"] = "\x1b[1m" in str(e)
try:  # a SavedModel's graph functions are code: never loaded unless the user trusts it
    load_savedmodel(src("saved", "savedmodel", trust=False))
    out["untrusted"] = "loaded"
except ModelFileError as e:
    out["untrusted"] = str(e)
with open(f"{d}/userfactories.py", "w") as f:
    f.write("import torch\n"
            "def tokens():\n"
            "    return torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Flatten(),"
            " torch.nn.Linear(8 * 16, 2))\n"
            "def keras_dense():\n"
            "    import keras\n"
            "    i = keras.Input((4,))\n"
            "    return keras.Model(i, keras.layers.Dense(2)(i))\n"
            "def boom():\n"
            "    raise ValueError('no weights here')\n"
            "def number():\n"
            "    return 42\n")
for fn in ("tokens", "keras_dense", "boom", "number"):
    try:
        fw, m = load_factory(ModelSource(fn, "factory", (), factory=f"userfactories:{fn}"), d)
        out[fn] = [fw, type(m).__name__]
    except ModelFileError as e:
        out[fn] = str(e)
try:
    load_factory(ModelSource("x", "factory", (), factory="no_such_module:f"), d)
except ModelFileError as e:
    out["missing"] = str(e)
print(json.dumps(out))
'''


def test_keras_files_savedmodels_and_factories_load_in_the_worker_only(tmp_path):
    out = worker_side(KERAS_SCRIPT, tmp_path)
    assert out["keras"] == 0.0 and out["saved"] < 1e-6
    # what engine.core.errors.plain_text strips from stored reasons (test_user_model_cli)
    assert out["bold"] is True
    assert out["untrusted"].startswith("trust_model_code: saved is a SavedModel, a program: "
                                       "loading it runs code from the file, and it was not "
                                       "marked trusted")
    assert out["lambda"].startswith("model_file: lambda.keras was not loaded: ")
    assert "safe_mode refuses Lambda layers" in out["lambda"]
    assert out["tokens"] == ["torch", "Sequential"]
    assert out["keras_dense"] == ["tensorflow", "Functional"]
    assert out["boom"] == ("model_factory: userfactories:boom raised ValueError: no weights "
                           "here")
    assert out["number"] == ("model_factory: userfactories:number returned int, not a "
                             "torch.nn.Module or a Keras model")
    assert out["missing"].startswith("model_factory: no_such_module:f could not be imported "
                                     "(ModuleNotFoundError: ")


# The .pt2 guard on the pinned torch: the crafted archives of SCRIPT loaded by torch itself
# (no guard) do run their pickles, which is what the guard is for; and the private module it
# patches is where the guard expects it.
UNGUARDED = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
d = sys.argv[1]
out = {}
for name in ("evil_sample.pt2", "evil_weight.pt2"):
    try:
        torch.export.load(f"{d}/{name}")
    except Exception as e:  # the Evil object is not a tensor: torch may fail after unpickling
        pass
    out[name] = os.path.exists(f"{d}/pwned")
    if out[name]:
        os.remove(f"{d}/pwned")
print(json.dumps(out))
'''

HOOK = r'''
import json, pickle
from engine.worker.user_models import PT2_HOOK, pt2_hook
module = pt2_hook()  # raises if the hook moved
name, calls = PT2_HOOK
print(json.dumps({"name": module.__name__, "pickle": module.pickle is pickle,
                  "torch": __import__("torch").__version__}))
'''


def test_the_pt2_guard_stops_crafted_archives_that_torch_alone_would_run_and_fails_closed(
        safely_loaded):
    tmp_path, out = safely_loaded  # SCRIPT made the archives; the guard refused both
    assert out["pwned"] is False
    unguarded = worker_side(UNGUARDED, tmp_path)
    # torch.export.load on its own unpickles a sample input and a use_pickle weight with
    # weights_only=False: each crafted archive creates its file. Should a torch upgrade stop
    # that, this says the guard's test no longer proves anything, not that all is well.
    assert unguarded == {"evil_sample.pt2": True, "evil_weight.pt2": True}
    hook = worker_side(HOOK, tmp_path)
    assert hook["name"] == "torch.export.pt2_archive._package" and hook["pickle"] is True
    assert hook["torch"].startswith("2.")
    # and a torch where the hook moved or reads pickles another way: every .pt2 is refused
    out = worker_side(MISSING_HOOK, tmp_path)
    assert out["torch.export.pt2_archive._no_such_module"].startswith(
        "model_file: m.pt2 was refused: the .pt2 guard's hook "
        "torch.export.pt2_archive._no_such_module is missing in this torch (")
    assert out["torch.export.pt2_archive._package"] == (
        "model_file: m.pt2 was refused: the .pt2 guard's hook "
        "torch.export.pt2_archive._package changed in this torch (no call to no_such_call); no .pt2 "
        "file is opened unguarded")


MISSING_HOOK = r'''
import json, sys, warnings
warnings.filterwarnings("ignore")
import engine.worker.user_models as um
from engine.core.model_source import InputSpec, ModelSource
d = sys.argv[1]
out = {}
for hook in (("torch.export.pt2_archive._no_such_module", ("torch.load(",)),
             ("torch.export.pt2_archive._package", ("torch.load(", "no_such_call(")),):
    um.PT2_HOOK = hook
    try:
        um.load_program(ModelSource("m", "pt2", (InputSpec("input", (1, 3, 16, 16)),),
                                    path=f"{d}/m.pt2"))
        out[hook[0]] = "loaded"
    except um.ModelFileError as e:
        out[hook[0]] = str(e)
print(json.dumps(out))
'''

