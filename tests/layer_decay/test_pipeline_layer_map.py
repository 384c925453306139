"""PipelineLayerMap on the name shapes of Paddle's PipelineLayer, from a
prefix table written out here (the real PaddleFormers pipeline model on two
ranks is in tests_paddleformers/test_pipeline_layer_map.py)."""
from __future__ import annotations

import pytest

from paddle_llrd.layer_decay.layer_maps import PipelineLayerMap

# LlamaForCausalLMPipe's get_sequential_name_prefixes() for 3 blocks and a tied head
PREFIXES = {"0": "model", "1": "model.layers.0", "2": "model.layers.1", "3": "model.layers.2",
            "4": "model.norm", "5": "lm_head"}
SHARED = {"model_shared_weight": 0}
L, D = 3, 0.5


def expected(layer_id: int) -> float:
    return D ** (L + 1 - layer_id)


@pytest.mark.parametrize("name, layer_id", [
    ("1.mlp.up_proj.weight", 1),                          # one stage: position 1 is block 0
    ("3.self_attn.q_proj.weight", 3),                     # a later stage: still the global block 2
    ("4.weight", L + 1),                                  # the final norm
    ("0.embed_tokens.weight", 0),                         # an untied embedding
    ("5.weight", L + 1),                                  # an untied head
    ("shared_layers.model_shared_weight.embed_tokens.weight", 0),  # tied, first stage
    ("shared_layers.model_shared_weight.weight", 0),      # tied, last stage: the same weight, the same ratio
    ("2.1.mlp.up_proj.weight", 3),                        # virtual stages: chunk from 2, its 2nd layer, block 2
    ("2.model_shared_weight.weight", 0),                  # a shared layer inside a virtual chunk
])
def test_layer_ids_are_global(name, layer_id):
    layer_map = PipelineLayerMap(PREFIXES, SHARED)
    assert layer_map.n_layers == L
    assert layer_map.layer_id(name) == layer_id
    assert layer_map.ratio(name, D) == pytest.approx(expected(layer_id), rel=1e-15)


def test_inside_a_wrapper_such_as_lora():
    layer_map = PipelineLayerMap(PREFIXES, SHARED, path="model")
    assert layer_map.global_name("model.2.mlp.up_proj.lora_B") == "model.layers.1.mlp.up_proj.lora_B"
    assert layer_map.layer_id("model.2.mlp.up_proj.lora_B") == 2
    assert layer_map.layer_id("classifier.weight") == L + 1  # outside the pipeline layer: the map's own rules


def test_a_deeper_n_layers_is_kept_and_a_shallower_one_refused():
    assert PipelineLayerMap(PREFIXES, SHARED, n_layers=5).ratio("1.mlp.up_proj.weight", D) == D ** 5
    with pytest.raises(ValueError, match=r"n_layers`=2 .* at least 3"):
        PipelineLayerMap(PREFIXES, SHARED, n_layers=2)


@pytest.mark.parametrize("prefixes, shared, message", [
    ({"0": "model", "2": "lm_head"}, {}, r"positions 0 \.\. 1, got \[0, 2\]"),
    (PREFIXES, {"model_shared_weight": 9}, r"position 9, outside 0 \.\. 5"),
])
def test_bad_tables_are_refused(prefixes, shared, message):
    with pytest.raises(ValueError, match=message):
        PipelineLayerMap(prefixes, shared)


def test_unknown_positions_and_shared_keys_name_the_parameter():
    layer_map = PipelineLayerMap(PREFIXES, SHARED)
    with pytest.raises(ValueError, match=r"'7.weight' is at position 7, past the 6 layers"):
        layer_map.layer_id("7.weight")
    with pytest.raises(ValueError, match=r"shared layer 'other'"):
        layer_map.layer_id("shared_layers.other.weight")
    with pytest.raises(TypeError, match="from_model"):
        PipelineLayerMap.from_names(["1.weight"])
