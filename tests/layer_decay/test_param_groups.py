"""layer_decay_param_groups against rules and update formulas written out here.

The layer ids, ratios and weight-decay choices are computed from the names by
the documented rules (not by the package); training runs are replayed by
float64 references fed the gradients each Paddle step applied: AdamW with the
decay scaled by the group's lr (tests/helpers/reference_adamw.py), Momentum with its
L2 term, and LAMB, each written out below.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, LayerMap, LayerMapWarning, layer_decay_param_groups, param_groups_table, resolve_layer_map
from paddle_llrd.layer_decay.layer_maps import build_name_dict
from paddle_llrd.cli.lr_table import main as lr_table_main
from paddle_llrd.layer_decay.param_groups import format_param_groups_table
from paddle_llrd.models.skeletons import build_skeleton
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
from lr_table_output import group_layer_id, parse_lr_table
from reference_adamw import ReferenceAdamW

ROOT = Path(__file__).resolve().parents[2]
N_BLOCKS = 3
DECAY = 0.6
WEIGHT_DECAY = 0.2
LR = 0.05
STEPS = 4
RTOL, ATOL = 1e-5, 1e-6
WIDTH = 8


# --------------------------------------------------------------------- rules
def expected_layer_id(name: str, n_layers: int) -> int:
    """0 embeddings and ViT tokens, i + 1 in block i, n_layers + 1 for the rest."""
    parts = name.split(".")
    for marker in ("layers", "blocks", "h"):
        if marker in parts:
            return int(parts[parts.index(marker) + 1]) + 1
    if "embed" in name or parts[-1] in ("cls_token", "wte", "wpe"):
        return 0
    return n_layers + 1


def expected_ratio(name: str, n_layers: int = N_BLOCKS, decay: float = DECAY) -> float:
    return decay ** (n_layers + 1 - expected_layer_id(name, n_layers))


def expected_decays(name: str, shape) -> bool:
    """Biases, norms, 1-D parameters and ViT tokens keep out of weight decay."""
    if len(shape) <= 1 or "bias" in name or "norm" in name:
        return False
    return name.split(".")[-1] not in ("cls_token", "pos_embed", "dist_token")


# -------------------------------------------------------------------- models
class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.attn = nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return x + self.mlp(F.relu(self.attn(self.norm(x))))


class TinyViT(nn.Layer):
    """ViT names: cls_token, pos_embed, patch_embed.proj, blocks.N, norm, head."""

    patches, patch_dim, classes = 3, 6, 3

    def __init__(self, n_blocks: int = N_BLOCKS):
        super().__init__()
        self.cls_token = self.create_parameter([1, 1, WIDTH])
        self.pos_embed = self.create_parameter([1, self.patches + 1, WIDTH])
        self.patch_embed = nn.Layer()
        self.patch_embed.proj = nn.Linear(self.patch_dim, WIDTH)
        self.blocks = nn.LayerList([Block() for _ in range(n_blocks)])
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, self.classes)

    def forward(self, patches):
        tokens = self.patch_embed.proj(patches)
        cls = self.cls_token.expand([patches.shape[0], 1, WIDTH])
        x = paddle.concat([cls, tokens], axis=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


class TinyLlama(nn.Layer):
    """LLaMA names: model.embed_tokens, model.layers.N, model.norm, lm_head."""

    vocab = 11

    def __init__(self, n_blocks: int = N_BLOCKS):
        super().__init__()
        self.model = nn.Layer()
        self.model.embed_tokens = nn.Embedding(self.vocab, WIDTH)
        self.model.layers = nn.LayerList([Block() for _ in range(n_blocks)])
        self.model.norm = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, self.vocab, bias_attr=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def tiny_bert(n_blocks: int = N_BLOCKS):
    config = TinyBertConfig(
        vocab_size=13, hidden_size=WIDTH, num_hidden_layers=n_blocks, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=8,
    )
    return TinyBertForSequenceClassification(config)


def batches(family: str, steps: int = STEPS, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        if family == "vit":
            yield paddle.to_tensor(rng.normal(size=(4, TinyViT.patches, TinyViT.patch_dim)).astype("float32")), \
                paddle.to_tensor(rng.integers(0, TinyViT.classes, size=(4,)))
        elif family == "bert":
            yield paddle.to_tensor(rng.integers(0, 13, size=(4, 5))), paddle.to_tensor(rng.integers(0, 2, size=(4,)))
        else:
            ids = rng.integers(0, TinyLlama.vocab, size=(4, 6))
            yield paddle.to_tensor(ids[:, :-1]), paddle.to_tensor(ids[:, 1:])


def loss_of(model, inputs, labels):
    logits = model(inputs)
    return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), labels.reshape([-1]))


MODELS = {"vit": TinyViT, "bert": tiny_bert, "llama": TinyLlama}


def build(family: str, seed: int = 1):
    paddle.seed(seed)
    return MODELS[family]()


def weights(model) -> dict[str, np.ndarray]:
    return {name: param.numpy().astype(np.float64) for name, param in model.named_parameters()}


def train(model, optimizer, family: str, step_fn=None) -> list[dict[str, np.ndarray]]:
    """STEPS optimizer steps; returns the gradients each step applied."""
    applied = []
    for inputs, labels in batches(family):
        if step_fn is None:
            loss_of(model, inputs, labels).backward()
            optimizer.step()
        else:
            step_fn(inputs, labels)
        applied.append({n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters() if p.grad is not None})
        optimizer.clear_grad()
    return applied


def assert_weights(model, expected: dict[str, np.ndarray]) -> None:
    for name, value in weights(model).items():
        np.testing.assert_allclose(value, expected[name], rtol=RTOL, atol=ATOL, err_msg=name)


def freeze_one(model) -> str:
    """Freezes the first block's attention bias; returns its name."""
    name, param = next((n, p) for n, p in model.named_parameters() if ".0." in n and n.endswith("bias"))
    param.stop_gradient = True
    return name


# --------------------------------------------------------- the groups' shape
@pytest.mark.parametrize("family", sorted(MODELS))
def test_groups_follow_the_layer_and_decay_rules(family):
    model = build(family)
    frozen = freeze_one(model)
    groups = layer_decay_param_groups(model, DECAY, weight_decay=WEIGHT_DECAY)
    names = {param.name: name for name, param in model.named_parameters()}

    seen, keys = [], []
    for group in groups:
        members = [names[param.name] for param in group["params"]]
        layer_ids = {expected_layer_id(n, N_BLOCKS) for n in members}
        decays = {expected_decays(n, dict(model.named_parameters())[n].shape) for n in members}
        assert len(layer_ids) == 1 and len(decays) == 1, members
        (layer_id,), (decayed,) = layer_ids, decays
        assert group["learning_rate"] == pytest.approx(DECAY ** (N_BLOCKS + 1 - layer_id), rel=1e-15)
        assert group["weight_decay"] == (WEIGHT_DECAY if decayed else 0.0)
        assert isinstance(group["weight_decay"], float)
        keys.append((layer_id, decayed))
        seen += members
    trainable = [n for n, p in model.named_parameters() if not p.stop_gradient]
    assert sorted(seen) == sorted(trainable) and frozen not in seen
    assert len(keys) == len(set(keys)), "one group per (layer, decays)"
    assert keys == sorted(keys, key=lambda key: (key[0], not key[1]))
    assert {k for k, _ in keys} == set(range(N_BLOCKS + 2))


def test_vit_tokens_and_no_weight_decay_patterns_keep_out_of_decay():
    model = build("vit")
    groups = layer_decay_param_groups(model, DECAY, 0.1, no_weight_decay=["head.weight", "blocks.*.mlp.weight"])
    names = build_name_dict(model)
    no_decay = {names[p.name] for g in groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert {"cls_token", "pos_embed", "head.weight", "blocks.2.mlp.weight"} <= no_decay
    assert "patch_embed.proj.weight" not in no_decay and "blocks.0.attn.weight" not in no_decay
    # names no parameter has (timm's ViTs list dist_token without having one) are ignored
    assert len(layer_decay_param_groups(model, DECAY, 0.1, no_weight_decay=["dist_token"])) == len(
        layer_decay_param_groups(model, DECAY, 0.1)
    )


@pytest.mark.parametrize(
    "layer_map", ["auto", "vit", r"^blocks\.(\d+)\.", LayerMap(family="vit"), LayerMap(n_layers=N_BLOCKS)]
)
def test_every_layer_map_form_gives_the_same_groups(layer_map):
    model = build("vit")
    expected = [(g["learning_rate"], [p.name for p in g["params"]]) for g in layer_decay_param_groups(model, DECAY)]
    got = [(g["learning_rate"], [p.name for p in g["params"]]) for g in layer_decay_param_groups(model, DECAY, layer_map=layer_map)]
    assert got == expected


def test_explicit_n_layers_deepens_the_scale():
    model = build("llama")
    with pytest.warns(LayerMapWarning):  # n_layers=5 for 3 blocks: said, and taken
        groups = layer_decay_param_groups(model, 0.5, n_layers=5)
    assert [g["learning_rate"] for g in groups if g["weight_decay"] == 0.0][:1] == [0.5**6]  # embeddings: 0.5 ** (5 + 1)
    assert max(g["learning_rate"] for g in groups) == 1.0


def test_building_groups_again_after_an_optimizer_gives_the_same_ratios():
    # Paddle's optimizers write each group's learning_rate into param.optimize_attr;
    # the groups must not read it back (that would square the ratios).
    model = build("bert")
    first = layer_decay_param_groups(model, DECAY, WEIGHT_DECAY)
    paddle.optimizer.AdamW(learning_rate=LR, parameters=first)
    again = layer_decay_param_groups(model, DECAY, WEIGHT_DECAY)
    assert [g["learning_rate"] for g in again] == [g["learning_rate"] for g in first]


def test_a_parameters_own_lr_factor_is_kept_as_adamwdl_keeps_it():
    """A ParamAttr(learning_rate=s) factor (PaddleFormers' LoRA+ lora_plus_scale on lora_B) multiplies the
    layer ratio, in a group of its own; building the groups again after an optimizer gives the same."""
    model = build("llama")
    boosted = {name: param for name, param in model.named_parameters() if name.endswith("mlp.weight")}
    assert len(boosted) == N_BLOCKS
    for param in boosted.values():
        param.optimize_attr["learning_rate"] = 4.0
    for attempt in range(2):
        groups = layer_decay_param_groups(model, DECAY, WEIGHT_DECAY)
        by_param = {id(p): g["learning_rate"] for g in groups for p in g["params"]}
        for name, param in model.named_parameters():
            factor = 4.0 if name in boosted else 1.0
            assert by_param[id(param)] == pytest.approx(expected_ratio(name) * factor, rel=1e-12), (attempt, name)
        paddle.optimizer.AdamW(learning_rate=LR, parameters=groups)  # writes the group lrs into optimize_attr

    # the numbers: a float64 AdamW at lr * ratio * 4 for the boosted parameters
    model = build("llama")
    for name, param in model.named_parameters():
        if name.endswith("mlp.weight"):
            param.optimize_attr["learning_rate"] = 4.0
    start = weights(model)
    grads = train(model, paddle.optimizer.AdamW(learning_rate=LR, parameters=layer_decay_param_groups(model, DECAY),
                                                weight_decay=0.0), "llama")
    reference = ReferenceAdamW(start, weight_decay=0.0)
    for step_grads in grads:
        reference.step(step_grads, LR, lr_scale=lambda n: expected_ratio(n) * (4.0 if n.endswith("mlp.weight")
                                                                             else 1.0))
    for name, value in weights(model).items():  # float32 steps at up to 4x the lr: a little more rounding
        np.testing.assert_allclose(value, reference.params[name], rtol=RTOL, atol=5e-6, err_msg=name)


# ------------------------------------------------------------ AdamW numbers
@pytest.mark.parametrize("family", sorted(MODELS))
def test_adamw_with_groups_scales_the_decay_by_the_group_lr(family):
    model = build(family)
    frozen = freeze_one(model)
    start = weights(model)
    groups = layer_decay_param_groups(model, DECAY, weight_decay=WEIGHT_DECAY)
    # the optimizer's own weight_decay is overridden by every group's
    optimizer = paddle.optimizer.AdamW(learning_rate=LR, parameters=groups, weight_decay=0.9)
    grads = train(model, optimizer, family)

    shapes = {n: p.shape for n, p in model.named_parameters()}
    reference = ReferenceAdamW(start, weight_decay=WEIGHT_DECAY)
    for step_grads in grads:
        # lr_scale scales the Adam step and the decay alike: p *= 1 - lr * ratio * wd
        reference.step(step_grads, LR, lr_scale=expected_ratio, decay=lambda n: expected_decays(n, shapes[n]))
    assert frozen not in grads[0]
    assert_weights(model, reference.params)


@pytest.mark.parametrize("family", sorted(MODELS))
def test_without_weight_decay_groups_and_adamwdl_give_the_same_weights(family):
    grouped, layered = build(family), build(family)
    groups = layer_decay_param_groups(grouped, DECAY, weight_decay=0.0)
    train(grouped, paddle.optimizer.AdamW(learning_rate=LR, parameters=groups), family)
    layer_map = LayerMap.from_model(layered)
    optimizer = AdamWDL(
        learning_rate=LR, parameters=layered.parameters(), weight_decay=0.0, layerwise_decay=DECAY,
        n_layers=layer_map.n_layers, name_dict=build_name_dict(layered), set_param_lr_fun=layer_map,
    )
    train(layered, optimizer, family)
    np.testing.assert_equal(sorted(weights(grouped)), sorted(weights(layered)))
    for name, value in weights(layered).items():
        np.testing.assert_allclose(weights(grouped)[name], value, rtol=1e-6, atol=1e-7, err_msg=name)


def test_the_one_line_difference_in_weight_decay():
    """A zero gradient leaves only the decay: groups p*(1 - lr*r*wd), AdamWDL p*(1 - lr*wd)."""
    grouped, layered = build("vit"), build("vit")
    start = weights(grouped)
    groups = layer_decay_param_groups(grouped, DECAY, weight_decay=WEIGHT_DECAY)
    opt_groups = paddle.optimizer.AdamW(learning_rate=LR, parameters=groups)
    layer_map = LayerMap.from_model(layered)
    decayed = {p.name for n, p in layered.named_parameters() if expected_decays(n, p.shape)}
    opt_layers = AdamWDL(
        learning_rate=LR, parameters=layered.parameters(), weight_decay=WEIGHT_DECAY, layerwise_decay=DECAY,
        n_layers=layer_map.n_layers, name_dict=build_name_dict(layered), set_param_lr_fun=layer_map,
        apply_decay_param_fun=lambda name: name in decayed,
    )
    for model, optimizer in ((grouped, opt_groups), (layered, opt_layers)):
        inputs, labels = next(batches("vit"))
        (loss_of(model, inputs, labels) * 0.0).backward()
        optimizer.step()
    for name, param in grouped.named_parameters():
        keep = 1.0 - LR * expected_ratio(name) * WEIGHT_DECAY if expected_decays(name, param.shape) else 1.0
        np.testing.assert_allclose(param.numpy(), start[name] * keep, rtol=1e-6, err_msg=name)
    for name, param in layered.named_parameters():
        keep = 1.0 - LR * WEIGHT_DECAY if expected_decays(name, param.shape) else 1.0
        np.testing.assert_allclose(param.numpy(), start[name] * keep, rtol=1e-6, err_msg=name)


# ------------------------------------------------------- other optimizers
def test_groups_drive_momentum_with_per_layer_lr_and_l2():
    """Paddle's Momentum: g' = g + wd * p (a group's weight_decay is L2), v = mu v + g', p -= lr r v."""
    family, mu = "llama", 0.9
    model = build(family)
    start = weights(model)
    groups = layer_decay_param_groups(model, DECAY, weight_decay=WEIGHT_DECAY)
    grads = train(model, paddle.optimizer.Momentum(learning_rate=LR, momentum=mu, parameters=groups), family)

    shapes = {n: p.shape for n, p in model.named_parameters()}
    params = dict(start)
    velocity = {n: np.zeros_like(v) for n, v in start.items()}
    for step_grads in grads:
        for name, grad in step_grads.items():
            l2 = WEIGHT_DECAY if expected_decays(name, shapes[name]) else 0.0
            velocity[name] = mu * velocity[name] + grad + l2 * params[name]
            params[name] = params[name] - LR * expected_ratio(name) * velocity[name]
    assert_weights(model, params)


def test_groups_drive_sgd_with_per_layer_lr_and_l2():
    """Paddle's SGD: p -= lr r (g + wd p), a group's weight_decay being L2."""
    family = "vit"
    model = build(family)
    start = weights(model)
    groups = layer_decay_param_groups(model, DECAY, weight_decay=WEIGHT_DECAY)
    grads = train(model, paddle.optimizer.SGD(learning_rate=LR, parameters=groups), family)

    shapes = {n: p.shape for n, p in model.named_parameters()}
    params = dict(start)
    for step_grads in grads:
        for name, grad in step_grads.items():
            l2 = WEIGHT_DECAY if expected_decays(name, shapes[name]) else 0.0
            params[name] = params[name] - LR * expected_ratio(name) * (grad + l2 * params[name])
    assert_weights(model, params)


def lamb_reference(start, grads, lr, ratio, decay, always_adapt, beta1=0.9, beta2=0.999, eps=1e-6):
    """Paddle's LAMB: r = m_hat / (sqrt(v_hat) + eps) + wd * p, p -= lr * (|p| / |r|) * r.

    Without ``always_adapt`` a parameter whose decay is 0 skips the trust ratio |p| / |r|.
    """
    params = dict(start)
    m = {n: np.zeros_like(v) for n, v in start.items()}
    v = {n: np.zeros_like(x) for n, x in start.items()}
    for t, step_grads in enumerate(grads, start=1):
        for name, grad in step_grads.items():
            m[name] = beta1 * m[name] + (1 - beta1) * grad
            v[name] = beta2 * v[name] + (1 - beta2) * grad * grad
            update = (m[name] / (1 - beta1**t)) / (np.sqrt(v[name] / (1 - beta2**t)) + eps) + decay(name) * params[name]
            p_norm, u_norm = np.linalg.norm(params[name]), np.linalg.norm(update)
            adapts = always_adapt or decay(name) != 0.0
            trust = p_norm / u_norm if adapts and p_norm > 0 and u_norm > 0 else 1.0
            params[name] = params[name] - lr * ratio(name) * trust * update
    return params


@pytest.mark.parametrize("always_adapt", [False, True])
def test_groups_drive_lamb_with_per_layer_lr_and_its_own_decay(always_adapt):
    """The documented recipe: each group's weight_decay becomes its lamb_weight_decay."""
    family = "bert"
    model = build(family)
    start = weights(model)
    groups = layer_decay_param_groups(model, DECAY, weight_decay=WEIGHT_DECAY)
    for group in groups:
        group["lamb_weight_decay"], group["weight_decay"] = group["weight_decay"], 0.0
    optimizer = paddle.optimizer.Lamb(learning_rate=LR, lamb_weight_decay=0.0, parameters=groups, always_adapt=always_adapt)
    grads = train(model, optimizer, family)

    shapes = {n: p.shape for n, p in model.named_parameters()}
    decay = lambda n: WEIGHT_DECAY if expected_decays(n, shapes[n]) else 0.0  # noqa: E731
    assert_weights(model, lamb_reference(start, grads, LR, expected_ratio, decay, always_adapt))


# ------------------------------------------------------------ the tables
@pytest.mark.parametrize("arch", ["bert", "gpt", "gpt2", "llama", "vit"])
def test_param_lr_table_and_the_groups_agree_on_every_ratio(arch):
    model = build_skeleton(arch, N_BLOCKS)
    layer_map = LayerMap.from_model(model)
    optimizer = AdamWDL(
        learning_rate=1.0, parameters=model.parameters(), layerwise_decay=DECAY, n_layers=layer_map.n_layers,
        name_dict=build_name_dict(model), set_param_lr_fun=layer_map,
    )
    table = {row.param_name: row for row in optimizer.param_lr_table()}
    groups = layer_decay_param_groups(model, DECAY, 0.1)
    rows = param_groups_table(groups, model)
    assert len(rows) == len(groups)
    for group, row in zip(groups, rows):
        for param in group["params"]:
            assert table[param.name].ratio == pytest.approx(group["learning_rate"], rel=1e-12)
            assert row.layer_ids == (table[param.name].layer_id,)
        assert row.learning_rate == group["learning_rate"] and row.weight_decay == group["weight_decay"]
        assert row.tensors == len(group["params"])
        assert row.elements == sum(math.prod(p.shape) for p in group["params"])
    assert sum(row.tensors for row in rows) == len(table)


def _cli_lines(capsys, argv):
    assert lr_table_main(argv) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("arch", ["bert", "llama", "vit"])
def test_lr_table_styles_agree(capsys, arch):
    argv = ["--arch", arch, "--layers", "3", "--decay", "0.7", "--learning-rate", "0.5"]
    by_layer = {}
    for _, group, ratio, lr, *_ in parse_lr_table(_cli_lines(capsys, argv + ["--style", "params"]))[0]:
        by_layer.setdefault(group_layer_id(group, 3), set()).add((ratio, lr))
    group_lines = _cli_lines(capsys, argv + ["--style", "groups"])
    assert group_lines[0].split()[:4] == ["layer", "lr", "factor", "effective"]
    # A long parameter span continues on a line of its own, ".. last name".
    rows = [line for line in group_lines[1:-1] if not line.lstrip().startswith(".. ")]
    assert len(rows) == int(re.match(r"\((\d+) groups", group_lines[-1]).group(1))
    for line in rows:
        layer, ratio, lr, *_ = line.split()
        assert by_layer[int(layer)] == {(ratio, lr)}
        assert float(ratio) == pytest.approx(0.7 ** (3 + 1 - int(layer)), rel=1e-3)
    assert re.match(r"\(\d+ groups, \d+ parameters, n_layers=3", group_lines[-1])


def test_lr_table_groups_refuses_decay_all(capsys):
    with pytest.raises(SystemExit):
        lr_table_main(["--style", "groups", "--decay-all"])
    assert "--decay-all" in capsys.readouterr().err


def test_format_wraps_a_long_parameter_span_below_its_row():
    model = build("vit")
    lines = format_param_groups_table(param_groups_table(layer_decay_param_groups(model, 0.5, 0.1), model), 2.0)
    lines = lines.splitlines()
    # Only a single name may run past 80 columns; a span that would, wraps.
    assert all(len(line) <= 80 for line in lines if " .. " in line.lstrip())
    column = lines[0].index("parameters")
    first = next(i for i, line in enumerate(lines) if line.endswith("  blocks.0.attn.weight"))
    assert lines[first + 1] == " " * column + ".. blocks.0.mlp.weight"
    assert any(line.endswith("  patch_embed.proj.weight") for line in lines)


def test_format_names_each_group():
    model = build("vit")
    text = format_param_groups_table(param_groups_table(layer_decay_param_groups(model, 0.5, 0.1), model), 2.0)
    header, *lines = text.splitlines()
    assert header.split() == ["layer", "lr", "factor", "effective", "lr", "weight", "decay", "tensors", "elements", "parameters"]
    first = lines[0].split()
    assert first[:4] == ["0", "0.0625", "0.125", "0.1"] and first[-1] == "patch_embed.proj.weight"


# ------------------------------------------------------- execution modes
def _run_one_eager_adamw_step() -> None:
    """Paddle's ``Optimizer`` imports modules lazily on its first step. Under pytest, SOT
    would translate that import, pytest's assertion-rewriting import hook included, and
    fail (``UnboundLocalError``) when no earlier test stepped an optimizer; in plain Python
    the same train step runs. One eager step of a throwaway layer does those imports first."""
    layer = nn.Linear(1, 1)
    optimizer = paddle.optimizer.AdamW(parameters=layer.parameters())
    layer(paddle.ones([1, 1])).sum().backward()
    optimizer.step()


def test_to_static_train_step_accepts_the_groups():
    _run_one_eager_adamw_step()
    family = "llama"
    model = build(family)
    start = weights(model)
    optimizer = paddle.optimizer.AdamW(learning_rate=LR, parameters=layer_decay_param_groups(model, DECAY, WEIGHT_DECAY))

    @paddle.jit.to_static
    def train_step(inputs, labels):
        loss = loss_of(model, inputs, labels)
        loss.backward()
        optimizer.step()
        return loss

    grads = train(model, optimizer, family, step_fn=train_step)
    shapes = {n: p.shape for n, p in model.named_parameters()}
    reference = ReferenceAdamW(start, weight_decay=WEIGHT_DECAY)
    for step_grads in grads:
        reference.step(step_grads, LR, lr_scale=expected_ratio, decay=lambda n: expected_decays(n, shapes[n]))
    assert_weights(model, reference.params)


@pytest.mark.parametrize("pir", [True, False], ids=["pir", "legacy"])
def test_static_programs_refuse_groups_as_the_docs_say_and_the_recipe_trains(tmp_path, pir):
    out = tmp_path / "static.npz"
    env = {**os.environ, "FLAGS_enable_pir_api": "1" if pir else "0"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "static_param_groups.py"), str(out)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    saved = np.load(out)
    error = str(saved["error"])
    assert error.startswith("TypeError: "), error
    docs = " ".join((ROOT / "docs" / "layer_maps.rst").read_text().split())
    assert " ".join(error.split()) in docs, f"docs/layer_maps.rst does not record {error!r}"
    # AdamWDL refuses the groups by name, when built and at minimize (docs/layer_maps.rst)
    for key in ("adamwdl_error", "adamwdl_minimize_error"):
        assert str(saved[key]).startswith(
            "TypeError: AdamWDL: `parameters` as parameter groups (dicts) is not supported in a static program"
        ), (key, str(saved[key]))

    from static_param_groups import DECAY, LR, STEPS, WEIGHT_DECAY  # the runner's settings

    start = {key[len("init/"):]: saved[key].astype(np.float64) for key in saved.files if key.startswith("init/")}
    reference = ReferenceAdamW(start, weight_decay=WEIGHT_DECAY)
    ratio = lambda name: expected_ratio(name, n_layers=2, decay=DECAY)  # noqa: E731
    for step in range(STEPS):
        grads = {name: saved[f"grad/{step}/{name}"] for name in start}
        reference.step(grads, LR, lr_scale=ratio, decay=lambda n: expected_decays(n, start[n].shape))
    for name, value in reference.params.items():
        np.testing.assert_allclose(saved[f"final/{name}"], value, rtol=RTOL, atol=ATOL, err_msg=name)


# ------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"layer_decay": "0.8"}, TypeError, "`layer_decay`"),
        ({"layer_decay": True}, TypeError, "`layer_decay`"),
        ({"layer_decay": None}, TypeError, "`layer_decay`"),
        ({"layer_decay": 0}, ValueError, "`layer_decay` must be a finite number > 0"),
        ({"layer_decay": -0.5}, ValueError, "`layer_decay`"),
        ({"layer_decay": float("nan")}, ValueError, "`layer_decay`"),
        ({"layer_decay": float("inf")}, ValueError, "`layer_decay`"),
        ({"weight_decay": -0.1}, ValueError, "`weight_decay` must be a finite number >= 0"),
        ({"weight_decay": float("nan")}, ValueError, "`weight_decay`"),
        ({"weight_decay": float("inf")}, ValueError, "`weight_decay`"),
        ({"weight_decay": "0.1"}, TypeError, "`weight_decay`"),
        ({"weight_decay": None}, TypeError, "`weight_decay`"),
        ({"no_weight_decay": "pos_embed"}, TypeError, "`no_weight_decay`"),
        ({"no_weight_decay": 3}, TypeError, "`no_weight_decay`"),
        ({"no_weight_decay": ["pos_embed", 3]}, TypeError, "`no_weight_decay`"),
        ({"layer_map": "resnet"}, ValueError, r"`layer_map` must be 'auto', a family .*'resnet' is no family"),
        ({"layer_map": r"blocks\.\d+"}, ValueError, "`layer_map`.*0 groups"),
        ({"layer_map": r"(blocks)\.(\d+)"}, ValueError, "`layer_map`.*2 groups"),
        ({"layer_map": "(unclosed"}, ValueError, "`layer_map`.*is no regular expression"),
        ({"layer_map": 3}, TypeError, "`layer_map`"),
        ({"layer_map": "llama"}, ValueError, r"layer_map='llama': no parameter name .*'cls_token'"),
        ({"n_layers": 0}, ValueError, "`n_layers`"),
        ({"n_layers": -1}, ValueError, "`n_layers`"),
        ({"n_layers": 2.5}, TypeError, "`n_layers`"),
        ({"n_layers": True}, TypeError, "`n_layers`"),
        ({"n_layers": 2}, ValueError, "`n_layers`=2 but the model has a block with index 2"),
        ({"layer_map": LayerMap(n_layers=3), "n_layers": 4}, ValueError, "`n_layers`=4 but the LayerMap"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, error, match):
    model = build("vit")
    arguments = {"layer_decay": DECAY, **kwargs}
    with pytest.raises(error, match=match):
        layer_decay_param_groups(model, **arguments)


def test_a_model_without_blocks_is_refused_with_the_names_seen():
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(5)])
    with pytest.raises(ValueError, match=r"no parameter name .*names seen: '0.weight', '0.bias', .*\(10 in all\)"):
        layer_decay_param_groups(model, DECAY)
    # a regex finds its blocks
    assert len(layer_decay_param_groups(model, DECAY, layer_map=r"^(\d+)\.")) == 10


def test_other_bad_models():
    with pytest.raises(TypeError, match="`model` must be a paddle.nn.Layer"):
        layer_decay_param_groups("model", DECAY)
    model = build("vit")
    for param in model.parameters():
        param.stop_gradient = True
    with pytest.raises(ValueError, match="no trainable parameter"):
        layer_decay_param_groups(model, DECAY)


def test_table_bad_input():
    model, other = build("vit"), build("vit", seed=2)
    groups = layer_decay_param_groups(model, DECAY)
    with pytest.raises(TypeError, match="`groups`"):
        param_groups_table(groups[0], model)
    with pytest.raises(TypeError, match=r"`groups\[0\]`"):
        param_groups_table([{"learning_rate": 1.0}], model)
    with pytest.raises(ValueError, match=r"`groups\[0\]` holds a parameter that `model` does not have"):
        param_groups_table(layer_decay_param_groups(other, DECAY), model)


# ----------------------------------------------------- resolve_layer_map
def test_resolve_layer_map_forms():
    names = ["embed_tokens.weight", "layers.0.w", "layers.1.w", "norm.weight"]
    assert resolve_layer_map("auto", names).n_layers == 2
    assert resolve_layer_map("llama", names, n_layers=5).n_layers == 5
    given = LayerMap(family="llama")
    resolved = resolve_layer_map(given, names)
    assert resolved.n_layers == 2 and given.n_layers is None, "the caller's map is not changed"
    assert isinstance(resolved, LayerMap) and resolved.layer_id("layers.1.w") == 2
    assert resolve_layer_map(r"^layers\.(\d+)", names).layer_id("norm.weight") == 3
    with pytest.raises(TypeError, match="`model_or_names`"):
        resolve_layer_map("auto", "layers.0.w")
    with pytest.raises(TypeError, match="`model_or_names`"):
        resolve_layer_map("auto", [1, 2])

