"""The MAE, BEiT, timm and PaddleViT conventions docs/migration.rst compares
with layer_decay_param_groups, each written out here from the project's code."""
from __future__ import annotations

import re

import pytest
from paddle import nn

from paddle_llrd import AdamWDL, layer_decay_param_groups
from paddle_llrd.layer_decay.layer_maps import build_name_dict

DECAY = 0.6


def model_with(shapes: dict[str, list[int]]) -> nn.Layer:
    """A Layer whose structured parameter names are exactly ``shapes``' keys."""
    root = nn.Layer()
    for name, shape in shapes.items():
        owner = root
        *path, leaf = name.split(".")
        for part in path:
            if part not in owner._sub_layers:
                setattr(owner, part, nn.Layer())
            owner = owner._sub_layers[part]
        setattr(owner, leaf, owner.create_parameter(shape))
    return root


def vit_shapes(n_blocks: int, beit: bool) -> dict[str, list[int]]:
    shapes = {"cls_token": [1, 1, 4], "pos_embed": [1, 5, 4], "patch_embed.proj.weight": [4, 3, 2, 2],
              "patch_embed.proj.bias": [4]}
    if beit:
        shapes.update({"mask_token": [1, 1, 4], "rel_pos_bias.relative_position_bias_table": [7, 2]})
    for i in range(n_blocks):
        shapes.update({f"blocks.{i}.norm1.weight": [4], f"blocks.{i}.attn.qkv.weight": [4, 12],
                       f"blocks.{i}.attn.qkv.bias": [12], f"blocks.{i}.gamma_1": [4]})
        if beit:
            shapes[f"blocks.{i}.attn.relative_position_bias_table"] = [7, 2]
    shapes.update({"norm.weight": [4], "norm.bias": [4], "fc_norm.weight": [4], "head.weight": [4, 3], "head.bias": [3]})
    return shapes


def mae_layer_id(name, n):  # MAE util/lr_decay.py get_layer_id_for_vit, num_layers = n + 1
    if name in ("cls_token", "pos_embed") or name.startswith("patch_embed"):
        return 0
    return int(name.split(".")[1]) + 1 if name.startswith("blocks") else n + 1


def beit_layer_id(name, n):  # BEiT optim_factory get_num_layer_for_vit, num_max_layer = n + 2
    if name in ("cls_token", "mask_token", "pos_embed") or name.startswith("patch_embed"):
        return 0
    return int(name.split(".")[1]) + 1 if name.startswith("blocks") else n + 1


def timm_vit_layer_id(name, n):  # timm VisionTransformer.group_matcher through group_with_matcher
    if re.match(r"^cls_token|pos_embed|patch_embed", name):
        return 0
    if re.match(r"^blocks\.(\d+)", name):
        return int(name.split(".")[1]) + 1
    return n if re.match(r"^norm", name) else n + 1  # the final norm joins the last block


def group_ratios(model, **kwargs) -> dict[str, float]:
    names = build_name_dict(model)
    return {names[p.name]: g["learning_rate"] for g in layer_decay_param_groups(model, DECAY, 0.05, **kwargs) for p in g["params"]}


def test_ratios_are_mae_and_beit_ones_and_timm_ones_but_the_final_norm():
    n = 2
    for beit, layer_id in ((False, mae_layer_id), (True, beit_layer_id)):
        for name, ratio in group_ratios(model_with(vit_shapes(n, beit))).items():
            assert ratio == pytest.approx(DECAY ** (n + 1 - layer_id(name, n)), rel=1e-15), name
    for name, ratio in group_ratios(model_with(vit_shapes(n, beit=False))).items():
        timm = DECAY ** (n + 1 - timm_vit_layer_id(name, n))
        if name.startswith("norm."):
            assert (ratio, timm) == (1.0, pytest.approx(DECAY)), name
        else:
            assert ratio == pytest.approx(timm, rel=1e-15), name


def test_weight_decay_choice_against_mae_and_beit_rules():
    n = 2
    model = model_with(vit_shapes(n, beit=False))
    names = build_name_dict(model)
    excluded = {names[p.name] for g in layer_decay_param_groups(model, DECAY, 0.05) if g["weight_decay"] == 0.0 for p in g["params"]}
    mae = {name for name, p in model.named_parameters() if len(p.shape) == 1 or name in ("pos_embed", "cls_token", "dist_token")}
    assert excluded == mae

    model = model_with(vit_shapes(n, beit=True))
    names = build_name_dict(model)
    excluded = {names[p.name] for g in layer_decay_param_groups(model, DECAY, 0.05) if g["weight_decay"] == 0.0 for p in g["params"]}
    beit = {name for name, p in model.named_parameters()
            if len(p.shape) == 1 or name.endswith(".bias") or name in ("pos_embed", "cls_token")}
    assert excluded - beit == {n for n in names.values() if n.endswith("relative_position_bias_table")}
    assert beit - excluded == set()


def test_paddlevit_lr_setting_runs_in_adamwdl_at_layermap_ratios_over_decay():
    """PaddleViT passes n_layers = depth to its lr_setting (written out here from its code)."""
    n = 3
    shapes = {"cls_token": [1, 1, 4], "encoder_position_embedding": [1, 5, 4], "patch_embedding.weight": [4, 3, 2, 2]}
    for i in range(n):
        shapes.update({f"encoder.layers.{i}.mlp.weight": [4, 4], f"encoder.layers.{i}.mlp.bias": [4]})
    shapes.update({"encoder_norm.weight": [4], "classifier.weight": [4, 3]})
    model = model_with(shapes)

    def paddlevit_layer_id(name, num_layers):
        if name in ("cls_token", "mask_token", "encoder_position_embedding") or name.startswith("patch_embedding"):
            return 0
        return int(name.split(".")[2]) + 1 if name.startswith("encoder.layers") else num_layers

    def lr_setting(layer_decay, name_dict, num_layers, param):
        scales = [layer_decay ** (num_layers - i) for i in range(num_layers + 1)]
        param.optimize_attr["learning_rate"] *= scales[paddlevit_layer_id(name_dict[param.name], num_layers)]

    optimizer = AdamWDL(learning_rate=1.0, parameters=model.parameters(), layerwise_decay=DECAY, n_layers=n,
                        set_param_lr_fun=lr_setting, name_dict=build_name_dict(model))
    table = {row.name: row.ratio for row in optimizer.param_lr_table()}
    ours = group_ratios(model)
    for name, ratio in table.items():
        if name in ("encoder_norm.weight", "classifier.weight"):
            assert ratio == ours[name] == 1.0
        else:
            assert ratio == pytest.approx(ours[name] / DECAY, rel=1e-12), name
