"""layerwise_lr_decay: the ratio rule of docs/adamwdl.rst ("Layer ratios"), written out per case."""
from __future__ import annotations

import types

import paddle
import pytest

from paddle_llrd import layerwise_lr_decay
from paddle_llrd.layer_decay.layerwise import layer_id_of
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

ADVICE = "{p.name: n for n, p in model.named_parameters()}"


def _param(name: str):
    """Anything with a ``name`` stands in for a parameter."""
    return types.SimpleNamespace(name=name)


@pytest.mark.parametrize(
    "structured, expected",
    [
        ("bert.encoder.layers.11.linear2.weight", 0.8**1),
        ("bert.encoder.layers.3.self_attn.q_proj.bias", 0.8**9),
        ("bert.encoder.layers.0.norm1.weight", 0.8**12),
        ("bert.embeddings.word_embeddings.weight", 0.8**13),
        ("bert.embeddings.layer_norm.bias", 0.8**13),
        ("ernie.embeddings.position_embeddings.weight", 0.8**13),
        ("bert.pooler.dense.weight", 1.0),
        ("classifier.bias", 1.0),
        # the encoder rule comes first, even when the name mentions an embedding
        ("model.encoder.layers.5.embedding_proj.weight", 0.8**7),
    ],
)
def test_ratio_rule(structured, expected):
    ratio = layerwise_lr_decay(0.8, {"p_0": structured}, 12, _param("p_0"))
    assert ratio == pytest.approx(expected, rel=1e-12)


def test_ratios_on_tiny_bert():
    layers, decay = 3, 0.7
    model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=layers))
    name_dict = {p.name: n for n, p in model.named_parameters()}
    for structured, param in model.named_parameters():
        ratio = layerwise_lr_decay(decay, name_dict, layers, param)
        if structured.startswith("bert.encoder.layers."):
            layer = int(structured.split(".")[3])
            assert ratio == pytest.approx(decay ** (layers - layer)), structured
        elif structured.startswith("bert.embeddings."):
            assert ratio == pytest.approx(decay ** (layers + 1)), structured
        else:
            assert structured.startswith(("bert.pooler.", "classifier.")) and ratio == 1.0


def test_missing_parameter_raises_key_error_with_advice():
    with pytest.raises(KeyError, match="linear_9.w_0") as info:
        layerwise_lr_decay(0.8, {"linear_1.w_0": "classifier.weight"}, 12, _param("linear_9.w_0"))
    assert ADVICE in str(info.value)


def test_name_dict_none():
    assert layerwise_lr_decay(1.0, None, 12, _param("linear_0.w_0")) == 1.0
    with pytest.raises(TypeError, match="name_dict") as info:
        layerwise_lr_decay(0.8, None, 12, _param("linear_0.w_0"))
    assert ADVICE in str(info.value)


def test_layer_index_must_be_below_n_layers():
    with pytest.raises(ValueError, match="n_layers"):
        layerwise_lr_decay(0.8, {"p": "bert.encoder.layers.12.linear1.weight"}, 12, _param("p"))


def test_unreadable_layer_index():
    with pytest.raises(ValueError, match="layer index"):
        layerwise_lr_decay(0.8, {"p": "bert.encoder.layers.first.linear1.weight"}, 12, _param("p"))


def test_tensor_decay_rate():
    ratio = layerwise_lr_decay(paddle.to_tensor(0.5), {"p": "bert.encoder.layers.1.linear1.weight"}, 4, _param("p"))
    assert isinstance(ratio, paddle.Tensor) and float(ratio) == pytest.approx(0.5**3)


@pytest.mark.parametrize(
    "structured, expected_id",
    [
        ("bert.embeddings.word_embeddings.weight", 0),
        ("bert.encoder.layers.0.linear1.weight", 1),
        ("bert.encoder.layers.3.norm2.bias", 4),
        ("model.encoder.layers.2.embedding_proj.weight", 3),
        ("bert.pooler.dense.weight", 5),
    ],
)
def test_layer_id_of_and_the_ratio_agree(structured, expected_id):
    """ids 0 embeddings, i + 1 for encoder layer i, n + 1 the rest; the ratio is d ** (n + 1 - id)."""
    n_layers, decay = 4, 0.6
    assert layer_id_of(structured, n_layers) == expected_id
    ratio = layerwise_lr_decay(decay, {"p": structured}, n_layers, _param("p"))
    assert ratio == pytest.approx(decay ** (n_layers + 1 - expected_id), rel=1e-12)


@pytest.mark.parametrize(
    "structured, match",
    [
        ("bert.encoder.layers.4.linear1.weight", "n_layers=4"),
        ("bert.encoder.layers.x.linear1.weight", "layer index"),
        ("bert.encoder.layers.\u00b2.linear1.weight", "layer index"),  # a superscript 2 is no index
        ("bert.encoder.layers.-1.linear1.weight", "layer index"),
    ],
)
def test_unusable_layer_index_is_a_value_error_naming_the_name(structured, match):
    with pytest.raises(ValueError, match=match) as info:
        layer_id_of(structured, 4)
    assert structured in str(info.value) and "layer_id_of" in str(info.value)
    with pytest.raises(ValueError, match=match) as info:
        layerwise_lr_decay(0.8, {"linear_7.w_0": structured}, 4, _param("linear_7.w_0"))
    assert "linear_7.w_0" in str(info.value) and structured in str(info.value)
