"""AdamWDL.param_lr_table() against the documented formulas, and ratio caching
for LayerMap (and any function declaring ``pure_in_name``) checked by call
counts and by multi-step float64 reference runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL, WeightDecaySchedule
from paddle_llrd.layer_decay.layer_maps import LayerMap, build_name_dict
from paddle_llrd.models.skeletons import build_skeleton
from decay_routes import separate_decay
from lr_table_output import parse_lr_table
from reference_adamw import ReferenceAdamW
from adamwdl_runs import (
    ATOL,
    RTOL,
    bert_like,
    make_adamwdl,
    name_dict_of,
    split_parameters,
    tiny_bert,
    weights_of,
)

DECAY = 0.5


def bert_layer_id(structured: str, n_layers: int) -> int:
    """The documented ids for layerwise_lr_decay's names: 0 embeddings, i+1 encoder layer i, else n+1."""
    if "encoder.layers." in structured:
        return int(structured.split("encoder.layers.")[1].split(".")[0]) + 1
    if "embedding" in structured:
        return 0
    return n_layers + 1


def llama_layer_id(structured: str, n_layers: int) -> int:
    parts = structured.split(".")
    if "layers" in parts:
        return int(parts[parts.index("layers") + 1]) + 1
    if "embed" in structured:
        return 0
    return n_layers + 1


def no_bias(name_dict):
    return lambda paddle_name: not name_dict[paddle_name].endswith("bias")


# ------------------------------------------------------------------ the table
def test_default_function_rows_follow_the_formulas():
    layer_lrs = {0: 0.5, 1: 2.0}
    model = bert_like(layer_lrs=layer_lrs)
    names = name_dict_of(model)
    frozen = model.bert.pooler.dense.bias
    frozen.stop_gradient = True
    scheduler = paddle.optimizer.lr.LambdaDecay(0.04, lr_lambda=lambda epoch: 1.0 / (1 + epoch))
    scheduler.step()
    scheduler.step()  # global lr 0.04 / 3
    optimizer = make_adamwdl(
        model, learning_rate=scheduler, weight_decay=0.3, layerwise_decay=DECAY, apply_decay_param_fun=no_bias(names)
    )
    rows = optimizer.param_lr_table()
    assert [row.param_name for row in rows] == [p.name for p in model.parameters() if p is not frozen]
    n = 2
    for row in rows:
        structured = names[row.param_name]
        layer_id = bert_layer_id(structured, n)
        paramattr_lr = next((v for i, v in layer_lrs.items() if f".layers.{i}." in structured), 1.0)
        assert row.name == structured
        assert row.layer_id == layer_id, structured
        assert row.ratio == pytest.approx(DECAY ** (n + 1 - layer_id), rel=1e-12), structured
        assert row.lr == pytest.approx(0.04 / 3 * paramattr_lr * DECAY ** (n + 1 - layer_id), rel=1e-12), structured
        assert row.decayed == (not structured.endswith("bias"))
        assert row.weight_decay == (0.3 if row.decayed else 0.0)
    # the ids are LayerMap's for these (BERT) names
    layer_map = LayerMap.from_model(model)
    assert all(row.layer_id == layer_map.layer_id(row.name) for row in rows)
    # ParamAttr factors are left as they were
    assert {p.optimize_attr["learning_rate"] for p in model.bert.encoder.layers[1].parameters()} == {2.0}


def test_layer_map_rows_and_schedule_column_over_a_run():
    model = build_skeleton("llama", 3)
    layer_map = LayerMap.from_model(model)
    name_dict = build_name_dict(model)
    schedule = WeightDecaySchedule(0.0, 0.2, 4, "linear")
    optimizer = AdamWDL(
        learning_rate=0.01,
        parameters=model.parameters(),
        weight_decay=schedule,
        layerwise_decay=DECAY,
        n_layers=layer_map.n_layers,
        set_param_lr_fun=layer_map,
        name_dict=name_dict,
        apply_decay_param_fun=no_bias(name_dict),
    )
    for step in range(6):
        rows = {row.name: row for row in optimizer.param_lr_table()}
        assert set(rows) == set(name_dict.values())
        expected_wd = 0.2 * min(step, 4) / 4  # linear ramp over 4 steps, then clamped
        for name, row in rows.items():
            layer_id = llama_layer_id(name, 3)
            assert row.layer_id == layer_id, name
            assert row.ratio == pytest.approx(DECAY ** (4 - layer_id), rel=1e-12)
            assert row.lr == pytest.approx(0.01 * DECAY ** (4 - layer_id), rel=1e-12)
            assert row.weight_decay == pytest.approx(expected_wd if not name.endswith("bias") else 0.0, abs=1e-15)
        for param in model.parameters():
            param.grad = paddle.ones_like(param)
        optimizer.step()
        optimizer.clear_grad()


def test_groups_paramattr_and_their_weight_decay():
    model = tiny_bert()
    layer0, others = split_parameters(model, ".layers.0.")
    optimizer = make_adamwdl(
        model,
        parameters=[{"params": layer0, "weight_decay": 0.4, "learning_rate": 0.5}, {"params": others}],
        learning_rate=0.1,
        weight_decay=WeightDecaySchedule(0.1, 0.3, 2, "cosine", current_step=1),
        layerwise_decay=DECAY,
    )
    for row in optimizer.param_lr_table():
        in_layer0 = ".layers.0." in row.name
        ratio = DECAY ** (3 - bert_layer_id(row.name, 2))
        assert row.lr == pytest.approx(0.1 * (0.5 if in_layer0 else 1.0) * ratio, rel=1e-12), row.name
        assert row.weight_decay == pytest.approx(0.4 if in_layer0 else 0.2, rel=1e-12), row.name  # cosine midpoint


def test_custom_and_absent_ratio_functions():
    model = bert_like(layer_lrs={1: 2.0})
    names = name_dict_of(model)

    def editing(decay_rate, name_dict, n_layers, param):  # PaddleNLP's style: edits, returns None
        param.optimize_attr["learning_rate"] *= decay_rate if "weight" in name_dict[param.name] else 1.0

    optimizer = make_adamwdl(model, learning_rate=0.1, layerwise_decay=0.25, set_param_lr_fun=editing)
    for row in optimizer.param_lr_table():
        structured = names[row.param_name]
        paramattr_lr = 2.0 if ".layers.1." in structured else 1.0
        ratio = 0.25 if "weight" in structured else 1.0
        assert row.layer_id is None and row.ratio == pytest.approx(ratio)
        assert row.lr == pytest.approx(0.1 * paramattr_lr * ratio, rel=1e-12)
    assert {p.optimize_attr["learning_rate"] for p in model.bert.encoder.layers[1].parameters()} == {2.0}

    plain = AdamWDL(learning_rate=0.1, parameters=model.parameters(), weight_decay=0.05, set_param_lr_fun=None)
    for row in plain.param_lr_table():
        assert row.name == row.param_name and row.layer_id is None and row.ratio == 1.0
        assert row.lr == pytest.approx(0.1 * (2.0 if ".layers.1." in names[row.param_name] else 1.0))
        assert row.decayed and row.weight_decay == 0.05


# ------------------------------------------------------------ ratio caching
def _counting(layer_map: LayerMap) -> list[str]:
    """Count the map's ratio computations by structured name."""
    calls: list[str] = []
    original = layer_map.ratio

    def ratio(structured_name, *args, **kwargs):
        calls.append(structured_name)
        return original(structured_name, *args, **kwargs)

    layer_map.ratio = ratio
    return calls


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_layer_map_ratios_are_cached_and_right_over_a_run(general):
    model = build_skeleton("llama", 2)
    layer_map = LayerMap.from_model(model)
    calls = _counting(layer_map)
    name_dict = build_name_dict(model)
    optimizer = AdamWDL(
        learning_rate=0.02,
        parameters=model.parameters(),
        weight_decay=0.1,
        layerwise_decay=DECAY,
        n_layers=layer_map.n_layers,
        set_param_lr_fun=layer_map,
        name_dict=name_dict,
    )
    separate_decay(optimizer, general)
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    rng = np.random.default_rng(5)
    params = dict(model.named_parameters())
    for step in range(5):
        grads = {n: rng.standard_normal(p.shape) for n, p in params.items()}
        for name, param in params.items():
            param.grad = paddle.to_tensor(grads[name].astype("float32"))
        optimizer.step()
        optimizer.clear_grad()
        reference.step(
            {n: g.astype("float32").astype(np.float64) for n, g in grads.items()},
            0.02,
            ratio=lambda n: DECAY ** (3 - llama_layer_id(n, 2)),
        )
        for name, param in params.items():
            np.testing.assert_allclose(
                param.numpy().astype(np.float64), reference.params[name], rtol=RTOL, atol=ATOL, err_msg=f"{name} {step}"
            )
    optimizer.param_lr_table()
    assert sorted(calls) == sorted(name_dict.values())  # once per parameter, at construction


def test_pure_in_name_attribute_opts_in_and_out():
    model = tiny_bert()
    steps = 3

    class Uncached(LayerMap):
        pure_in_name = False

    uncached = Uncached.from_model(model)
    uncached_calls = _counting(uncached)

    plain_calls: list[str] = []

    def declared_pure(decay_rate, name_dict, n_layers, param):
        plain_calls.append(param.name)
        return decay_rate

    declared_pure.pure_in_name = True

    for fn in (uncached, declared_pure):
        optimizer = make_adamwdl(model, learning_rate=0.01, layerwise_decay=DECAY, set_param_lr_fun=fn)
        for _ in range(steps):
            for param in model.parameters():
                param.grad = paddle.ones_like(param)
            optimizer.step()
            optimizer.clear_grad()
    n_params = len(model.parameters())
    assert len(uncached_calls) == steps * n_params
    assert len(plain_calls) == n_params


def test_a_tensor_decay_is_not_cached():
    """A Tensor layerwise_decay may change between steps, so LayerMap ratios are recomputed."""
    model = tiny_bert()
    layer_map = LayerMap.from_model(model)
    calls = _counting(layer_map)
    optimizer = make_adamwdl(
        model, learning_rate=0.01, layerwise_decay=paddle.to_tensor(DECAY), set_param_lr_fun=layer_map
    )
    for _ in range(2):
        for param in model.parameters():
            param.grad = paddle.ones_like(param)
        optimizer.step()
        optimizer.clear_grad()
    assert len(calls) == 2 * len(model.parameters())


# ------------------------------------------------------------------ python -m paddle_llrd lr-table
ROOT = Path(__file__).resolve().parents[2]
# PaddleFormers LlamaForCausalLM's parameter names in a block, in its order (no biases)
LLAMA_BLOCK = ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
               "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
               "input_layernorm.weight", "post_attention_layernorm.weight"]


def lr_table(*flags: str) -> list[str]:
    """The lines ``python -m paddle_llrd lr-table`` prints, run as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "paddle_llrd", "lr-table", *flags], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=180)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_lr_table_llama_shows_llamas_names_and_the_logs_group_names(tied):
    """--arch llama: PaddleFormers' LlamaForCausalLM names (no bias), groups named as the
    logs name them (layer_0 is block 0), ratio d**(L+1-k), a tied head said to be tied."""
    n, decay, lr, wd = 3, 0.5, 0.1, 0.01
    lines = lr_table("--arch", "llama", "--layers", str(n), "--decay", str(decay), "--learning-rate", str(lr),
                     "--style", "params", *([] if tied else ["--no-tie-word-embeddings"]))
    assert all(len(line) <= 80 for line in lines)  # a terminal's width, and the docs' code blocks'
    rows, rest = parse_lr_table(lines)
    top = "final_norm" if tied else "head"
    expected = [("model.embed_tokens.weight", "embeddings_tied_head" if tied else "embeddings", 0)]
    expected += [(f"model.layers.{i}.{suffix}", f"layer_{i}", i + 1) for i in range(n) for suffix in LLAMA_BLOCK]
    expected += [("model.norm.weight", top, n + 1)] + ([] if tied else [("lm_head.weight", "head", n + 1)])
    assert [row[:2] for row in rows] == [[name, group] for name, group, _ in expected]
    for row, (name, _, layer_id) in zip(rows, expected):
        ratio = decay ** (n + 1 - layer_id)
        decayed = "norm" not in name
        assert [float(row[2]), float(row[3])] == pytest.approx([ratio, lr * ratio], rel=1e-3), name
        assert row[4:] == (["yes", str(wd)] if decayed else ["no", "0"]), name
    assert not any("bias" in line for line in lines)
    if tied:
        assert rest[0] == "lm_head.weight is tied to model.embed_tokens.weight (embeddings_tied_head)"
        rest = rest[1:]
    assert rest == [f"({len(expected)} parameters, n_layers={n}, decay={decay}, learning rate={lr})",
                    "model: a stand-in with PaddleFormers LlamaForCausalLM's names"]


def test_lr_table_tie_flag_is_for_llama_only():
    done = subprocess.run([sys.executable, "-m", "paddle_llrd", "lr-table", "--arch", "vit", "--tie-word-embeddings"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT,
                          timeout=180)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "error: --tie-word-embeddings/--no-tie-word-embeddings apply to --arch llama only")


def documented_lr_tables(page: Path) -> list[tuple[list[str], list[str]]]:
    """Each ``$ python -m paddle_llrd lr-table ...`` sample of a page: its flags and the lines shown under it."""
    samples, lines = [], page.read_text().splitlines()
    for index, line in enumerate(lines):
        if not line.strip().startswith("$ python -m paddle_llrd lr-table"):
            continue
        command, index = line.strip(), index + 1
        while command.endswith("\\"):
            command, index = command[:-1] + lines[index].strip(), index + 1
        shown = []
        while index < len(lines) and lines[index].strip():
            shown.append(lines[index].strip())
            index += 1
        samples.append((command.split()[5:], shown))
    return samples


@pytest.mark.parametrize("page", ["docs/layer_maps.rst"])
def test_documented_lr_table_samples_are_what_the_command_prints(page):
    """Every sample is the command's output, line for line ("..." stands for lines left out)."""
    samples = documented_lr_tables(ROOT / page)
    assert samples
    for flags, shown in samples:
        printed = [line.strip() for line in lr_table(*flags)]
        position, skipping = 0, False
        for line in shown:
            if line == "...":
                skipping = True
                continue
            if skipping:
                assert line in printed[position:], (flags, line)
                position = printed.index(line, position)
            assert printed[position:position + 1] == [line], (flags, line)
            position, skipping = position + 1, False
        assert skipping or position == len(printed), (flags, "the sample stops before the output does")
