"""The worker side of the process boundary: everything that runs inside a benchmark's
subprocess. The only package that imports torch, torchvision, tensorflow, keras or
onnxruntime; the dashboard and the parent never import it (tests/test_layout.py checks)."""
