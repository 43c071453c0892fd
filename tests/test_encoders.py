"""The transformer encoders in the inference catalog (issue 37): rows, labels, the size
field as a sequence length, runtime refusals, FLOPs and tokens/s, without a framework."""

import pytest

from engine.analysis.roofline import min_bytes
from engine.analysis.sweep_verdict import judge_sweep
from engine.core.catalog import (CATALOG, IMAGE_MODELS, OFFERED_MODELS, input_values,
                                 model_label, tokens_per_sample)
from engine.core.encoders import encoder_flops
from engine.core.errors import UserError
from engine.present.tables import TOKENS_TITLE, compare_table
from engine.scenarios.inference.spec import RunSpec
from engine.scenarios.training.spec import TrainSpec


def test_rows_say_their_input_and_tiny_rows_stay_off_the_forms():
    assert (CATALOG["bert_base"].input_kind, CATALOG["bert_base"].native_size) == ("tokens", 128)
    assert (CATALOG["vit_b16"].input_kind, CATALOG["vit_b16"].native_size) == ("image", 224)
    assert "bert_base" in OFFERED_MODELS and "vit_b16" in OFFERED_MODELS
    assert "tiny_bert" not in OFFERED_MODELS and "tiny_vit" not in OFFERED_MODELS
    # training and serving make images and labels: classifiers only
    assert not {"bert_base", "vit_b16", "tiny_bert"} & set(IMAGE_MODELS)
    assert "resnet18" in IMAGE_MODELS


def test_labels_name_the_unit_and_tokens_per_sample_is_the_sequence_length():
    assert model_label("bert_base", 128) == "bert_base 128 tok"
    assert model_label("resnet18", 224) == "resnet18 224px"
    assert model_label("vit_b16", 224) == "vit_b16 224px"
    assert model_label("my_model", None) == "my_model"
    assert tokens_per_sample("bert_base", 512) == 512
    assert tokens_per_sample("vit_b16", 224) is None
    assert tokens_per_sample("bert_base", float("nan")) is None


def test_the_size_field_takes_a_sequence_length_within_the_models_positions():
    spec = RunSpec("bert_base", "torch", 1, 1).validate(cores=2)
    assert spec.image_size == 128
    assert RunSpec("bert_base", "tensorflow", 1, 1, image_size=512).validate(cores=2) \
        .image_size == 512
    assert RunSpec("tiny_bert", "torch", 1, 1, image_size=1).validate(cores=2).image_size == 1
    with pytest.raises(UserError) as e:
        RunSpec("bert_base", "torch", 1, 1, image_size=513).validate(cores=2)
    assert e.value.field == "image_size"
    assert str(e.value) == ("image_size: 513 is out of range; allowed: integer 1..512 (for "
                            "bert_base: its sequence length in tokens)")
    with pytest.raises(UserError, match="allowed: integer 32..1024"):  # images unchanged
        RunSpec("resnet18", "torch", 1, 1, image_size=16).validate(cores=2)


def test_a_vit_takes_whole_patches():
    assert RunSpec("vit_b16", "torch", 1, 1, image_size=384).validate(cores=2).image_size == 384
    with pytest.raises(UserError) as e:
        RunSpec("vit_b16", "torch", 1, 1, image_size=200).validate(cores=2)
    assert e.value.field == "image_size"
    assert "allowed: 32..1024 in steps of 16" in str(e.value)


def test_runtimes_that_cannot_take_tokens_refuse_with_their_reason():
    with pytest.raises(UserError) as e:
        RunSpec("bert_base", "torch", 1, 1, runtime="channels_last").validate(cores=2)
    assert e.value.field == "runtime"
    assert "channels_last is a memory format of 4-D N,C,H,W tensors" in str(e.value)
    assert str(e.value).endswith("allowed: eager, compile, onnxruntime, aoti, openvino")
    for rt in ("torchscript", "libtorch", "libtorch_aoti"):
        with pytest.raises(UserError, match=f"torch {rt} does not run bert_base"):
            RunSpec("bert_base", "torch", 1, 1, runtime=rt).validate(cores=2)
    # ViT takes one float32 image: every runtime runs it
    for rt in ("channels_last", "torchscript", "libtorch"):
        assert RunSpec("vit_b16", "torch", 1, 1, runtime=rt).validate(cores=2).runtime == rt


def test_training_and_serving_refuse_the_encoders():
    with pytest.raises(UserError) as e:
        TrainSpec("bert_base", "torch", 8, 1).validate(cores=2)
    assert e.value.field == "model" and "not an image classifier" in str(e.value)


def test_flops_are_the_linear_layers_plus_attention():
    # measured with torch's FlopCounterMode, which counts the Linear layers (and ViT's patch
    # convolution) but not CPU attention: 21,744,451,584 (bert_base, 128 tokens) and
    # 33,695,465,472 (vit_b16, 224 px); attention's two matmuls add 4 x 12 x T^2 x 768
    assert encoder_flops("bert_base", 128) == 21_744_451_584 + 4 * 12 * 128 ** 2 * 768
    assert encoder_flops("vit_b16", 224) == 33_695_465_472 + 4 * 12 * 197 ** 2 * 768
    # attention grows with the square of the length: 512 tokens cost more than 4 x 128
    assert encoder_flops("bert_base", 512) > 4 * encoder_flops("bert_base", 128)


def test_roofline_counts_a_token_models_ids_and_mask():
    assert input_values("bert_base", 128) == 256
    assert input_values("resnet18", 224) == 3 * 224 * 224
    assert min_bytes(1000, 2, 128, "fp32", model="bert_base") == 4 * (1000 + 2 * 256)
    assert min_bytes(1000, 2, 32, "fp32", model="resnet18") == min_bytes(1000, 2, 32, "fp32")


def _round(model, size, framework, round_no, median, throughput):
    return {"model": model, "framework": framework, "runtime": "eager", "image_size": size,
            "batch_size": 1, "intra_threads": 1, "round_no": round_no, "status": "ok",
            "median_ms": median, "iqr_ms": 0.01, "validity": "valid",
            "throughput": throughput}


def test_compare_table_adds_tokens_per_second_for_token_models_only():
    rounds = [_round("bert_base", 128, "torch", 1, 10.0, 100.0),
              _round("bert_base", 128, "tensorflow", 1, 20.0, 50.0),
              _round("resnet18", 224, "torch", 1, 5.0, 200.0),
              _round("resnet18", 224, "tensorflow", 1, 6.0, 160.0)]
    text = compare_table(judge_sweep(rounds))
    assert TOKENS_TITLE in text
    block = text.split(TOKENS_TITLE)[1].split("\n\n")[0]
    assert "bert_base 128 tok" in block and "resnet18" not in block
    # 100 samples/s x 128 tokens, 50 x 128
    assert "*12,800.0" in block and "6,400.0" in block
    only_images = compare_table(judge_sweep(rounds[2:]))
    assert TOKENS_TITLE not in only_images


def test_the_run_forms_size_box_checks_each_chosen_model():
    from engine.present.run_form import parse_image_size

    assert parse_image_size("16", ("bert_base",)) == 16
    assert parse_image_size("512", ("bert_base", "resnet18")) == 512
    with pytest.raises(UserError, match="allowed: integer 32..1024"):
        parse_image_size("16", ("bert_base", "resnet18"))
    with pytest.raises(UserError, match=r"allowed: integer 1\.\.512 \(for bert_base"):
        parse_image_size("1024", ("bert_base",))
