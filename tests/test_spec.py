import pytest

from engine.core.errors import UserError
from engine.core import MeasurementPolicy
from engine.scenarios.inference.expand import expand_sweep
from engine.scenarios.inference.spec import RunSpec


def err(fn):
    with pytest.raises(UserError) as info:
        fn()
    return info.value


def test_defaults_resolve_native_image_size():
    s = RunSpec("efficientnet_b3", "torch", 8, 2).validate(cores=4)
    assert s.image_size == 300 and s.runtime == "eager"
    assert RunSpec("resnet18", "tensorflow", 1, 1).validate(cores=2).runtime == "tf_function"


@pytest.mark.parametrize("kwargs, field, message", [
    (dict(batch_size=0), "batch_size", "batch_size: 0 is out of range; allowed: integer 1..4096"),
    (dict(batch_size=5000), "batch_size", "batch_size: 5000 is out of range; allowed: integer 1..4096"),
    (dict(batch_size=2.5), "batch_size", "batch_size: 2.5 is not an integer; allowed: integer 1..4096"),
    (dict(intra_threads=3), "intra_threads",
     "intra_threads: 3 is out of range; allowed: integer 1..2 (this machine has 2 logical cores)"),
    (dict(image_size=16), "image_size", "image_size: 16 is out of range; allowed: integer 32..1024"),
    (dict(model="vgg16"), "model", "model: unknown 'vgg16'; allowed: efficientnet_b0"),
    (dict(framework="jax"), "framework", "framework: unknown 'jax'; allowed: torch, tensorflow"),
    (dict(precision="fp16"), "precision",
     "precision: 'fp16' is not supported; allowed: fp32, bf16, int8"),
    (dict(runtime="onnxruntime", precision="bf16"), "precision",
     "precision: bf16 is not supported by torch onnxruntime: ONNX Runtime 1.31's CPU execution "
     "provider has no bfloat16 kernel"),
    (dict(framework="tensorflow", device="cuda"), "device", "device: cuda is not available for tensorflow"),
])
def test_validation_names_field_and_allowed_values(kwargs, field, message):
    base = dict(model="resnet18", framework="torch", batch_size=1, intra_threads=1)
    e = err(lambda: RunSpec(**{**base, **kwargs}).validate(cores=2))
    assert e.field == field
    assert str(e).startswith(message)


def test_policy_validation():
    e = err(lambda: MeasurementPolicy(min_iters=0).validate())
    assert str(e) == "min_iters: 0 is out of range; allowed: integer 1..100000"
    e = err(lambda: MeasurementPolicy(min_time_s=-1).validate())
    assert str(e) == "min_time_s: -1 is out of range; allowed: number 0..3600"


def test_sweep_expansion_groups_by_framework_and_threads():
    specs = expand_sweep(["efficientnet_b0"], ["torch", "tensorflow"], [1, 8], [1, 2], cores=2)
    assert len(specs) == 8
    assert [(s.framework, s.intra_threads, s.batch_size) for s in specs] == [
        ("torch", 1, 1), ("torch", 1, 8), ("torch", 2, 1), ("torch", 2, 8),
        ("tensorflow", 1, 1), ("tensorflow", 1, 8), ("tensorflow", 2, 1), ("tensorflow", 2, 8)]
    assert len({s.key() for s in specs}) == 8
    assert str(err(lambda: expand_sweep([], ["torch"], [1], [1]))) == \
        "model: pick at least one value"


def test_spec_round_trips_through_dict():
    s = RunSpec("resnet18", "torch", 4, 1, policy=MeasurementPolicy(min_iters=7)).validate(cores=2)
    assert RunSpec.from_dict(s.to_dict()) == s
    assert hash(RunSpec.from_dict(s.to_dict())) == hash(s)


def test_runtimes_expand_per_framework_and_unknown_ones_are_refused():
    specs = expand_sweep(["resnet18"], ["torch", "tensorflow"], [1], [1], cores=2,
                         runtimes=["eager", "torchscript", "xla"])
    assert [(s.framework, s.runtime) for s in specs] == [
        ("torch", "eager"), ("torch", "torchscript"), ("tensorflow", "xla")]
    assert [s.runtime for s in expand_sweep(["resnet18"], ["torch", "tensorflow"], [1], [1],
                                            cores=2)] == ["eager", "tf_function"]
    e = err(lambda: expand_sweep(["resnet18"], ["tensorflow"], [1], [1], cores=2,
                                 runtimes=["torchscript"]))
    assert str(e) == ("runtime: 'torchscript' is not available for tensorflow; allowed: "
                      "tensorflow: keras, tf_function, xla")
    e = err(lambda: expand_sweep(["resnet18"], ["torch", "tensorflow"], [1], [1], cores=2,
                                 runtimes=["xla"]))
    assert str(e) == ("runtime: none of the named runtimes applies to torch; allowed for "
                      "torch: eager, channels_last, torchscript, compile, onnxruntime, libtorch, "
                      "aoti, libtorch_aoti, openvino")
    e = err(lambda: RunSpec("resnet18", "torch", 1, 1, runtime="compiled").validate(cores=2))
    assert e.field == "runtime" and str(e) == (
        "runtime: 'compiled' is not available for torch; allowed: eager, channels_last, "
        "torchscript, compile, onnxruntime, libtorch, aoti, libtorch_aoti, openvino")


@pytest.mark.parametrize("runtime, why", [
    ("onnxruntime", "the project installs ONNX Runtime's CPU execution provider"),
    ("libtorch", "the C++ runner is built against libtorch_cpu"),
    ("libtorch_aoti", "the C++ runner is built against libtorch_cpu"),
    ("aoti", "AOTInductor packages are compiled and checked for the CPU here"),
    ("openvino", "the project runs OpenVINO's CPU plugin"),
])
def test_cpu_only_runtimes_refuse_cuda_up_front(runtime, why):
    with pytest.raises(UserError) as err:
        RunSpec("resnet18", "torch", 1, 1, device="cuda", runtime=runtime).validate(cores=4)
    assert err.value.field == "device"
    assert str(err.value) == f"device: cuda is not available for torch {runtime}: {why}; " \
                             "allowed: cpu"
