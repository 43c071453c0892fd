"""Small user-model files, made for real by torch and Keras in a subprocess (the test
process, like the dashboard, never imports a framework): a torch.export program (.pt2) with
a dynamic batch axis, a TorchScript file, an ONNX file, a Keras v3 file, a SavedModel folder,
and a factory module (an image net and a token-ids net). Every image model takes 3x16x16
(Keras: 16x16x3) but net64.keras, the Keras net saved for 64x64x3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

__all__ = ["make_model_files", "FACTORY_MODULE", "NETS"]

# The two nets, as source: the user's factory module holds them, the scripts run them.
NETS = '''
class ImageNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


class Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 8)
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(1))
'''

_TORCH = r'''
import sys, warnings
import torch
warnings.filterwarnings("ignore")
d = sys.argv[1]
''' + NETS + r'''

torch.manual_seed(0)
net = ImageNet().eval()
x = torch.randn(2, 3, 16, 16)
batch = torch.export.Dim("batch", min=1, max=1024)
torch.export.save(torch.export.export(net, (x,), dynamic_shapes=({0: batch},)), f"{d}/net.pt2")
torch.jit.save(torch.jit.trace(net, x), f"{d}/net.pt")
torch.onnx.export(net, (x,), f"{d}/net.onnx", input_names=["input"], output_names=["out"],
                  dynamic_axes={"input": {0: "batch"}, "out": {0: "batch"}}, dynamo=False)
'''

_KERAS = r'''
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras, tensorflow as tf
d = sys.argv[1]
keras.utils.set_random_seed(0)
inp = keras.Input((16, 16, 3), name="image")
y = keras.layers.Conv2D(4, 3)(inp)
y = keras.layers.GlobalAveragePooling2D()(y)
out = keras.layers.Dense(5)(y)
model = keras.Model(inp, out)
model.save(f"{d}/net.keras")
model.export(f"{d}/net_savedmodel", verbose=False)
# The same layers as a Sequential built for 16x16x3: a call on another layout fails inside a
# layer, and Keras writes that reason with the terminal's bold-text codes.
seq = keras.Sequential([keras.layers.Conv2D(4, 3), keras.layers.GlobalAveragePooling2D(),
                        keras.layers.Dense(5)])
seq.build((None, 16, 16, 3))
seq.save(f"{d}/seq.keras")
# The image net saved for 64x64x3: a file that declares its input (issue 26 part 8)
inp = keras.Input((64, 64, 3), name="image")
y = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(inp))
keras.Model(inp, keras.layers.Dense(5)(y)).save(f"{d}/net64.keras")
'''

# A factory module: the user's own code, imported only by a worker.
FACTORY_MODULE = "import torch\n" + NETS + '''

def image_net():
    torch.manual_seed(0)
    return ImageNet().eval()


def tokens():
    torch.manual_seed(0)
    return Tokens().eval()


def broken():
    raise ValueError("no weights here")


def not_a_model():
    return 42
'''


def make_model_files(folder: Path, keras: bool = True) -> dict[str, Path]:
    """Write the files into folder; returns {format: path} plus "factory_dir" (the folder
    holding usermodels.py, to run the CLI from)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    scripts = [_TORCH] + ([_KERAS] if keras else [])
    for script in scripts:
        subprocess.run([sys.executable, "-c", script, str(folder)], cwd=ROOT, check=True,
                       capture_output=True, timeout=600)
    (folder / "usermodels.py").write_text(FACTORY_MODULE)
    out = {"pt2": folder / "net.pt2", "torchscript": folder / "net.pt",
           "onnx": folder / "net.onnx", "factory_dir": folder}
    if keras:
        out["keras"] = folder / "net.keras"
        out["keras_sequential"] = folder / "seq.keras"
        out["keras64"] = folder / "net64.keras"
        out["savedmodel"] = folder / "net_savedmodel"
    return out


if __name__ == "__main__":  # python -m tests.model_files FOLDER: files for a manual check
    print(json.dumps({k: str(v) for k, v in make_model_files(Path(sys.argv[1])).items()}))
