"""LayerMap on real Paddle layer stacks named like each family; ratios against
the formula decay ** (n_layers + 1 - layer_id) written out here."""
import re

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, layerwise_lr_decay
from paddle_llrd.layer_decay.layer_maps import LayerMap, build_name_dict, make_layerwise_fn
from paddle_llrd.models.skeletons import build_skeleton
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
from lr_table_output import group_layer_id, parse_lr_table


def _expected_layer_id(name, n):
    """The documented rule, written out independently of the regexes."""
    parts = name.split(".")
    for marker in ("layers", "h", "blocks"):
        if marker in parts:
            return int(parts[parts.index(marker) + 1]) + 1
    if any(key in name for key in ("embed", "wte", "wpe", "cls_token")):
        return 0
    return n + 1


@pytest.mark.parametrize("family, arch", [("gpt", "gpt2"), ("gpt", "gpt"), ("llama", "llama"), ("vit", "vit"), ("bert", "bert")])
@pytest.mark.parametrize("n", [1, 3])
def test_each_family_gets_documented_layer_ids_and_ratios(family, arch, n):
    model = build_skeleton(arch, n)
    for chosen in (family, "auto"):
        layer_map = LayerMap.from_model(model, family=chosen)
        assert layer_map.n_layers == n
        for name, _ in model.named_parameters():
            expected = _expected_layer_id(name, n)
            assert layer_map.layer_id(name) == expected, name
            assert layer_map.ratio(name, 0.7) == pytest.approx(0.7 ** (n + 1 - expected), rel=1e-15)


def test_bert_ratios_equal_layerwise_lr_decay():
    model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=3))
    fn, name_dict = make_layerwise_fn(model)
    assert fn.n_layers == 3
    for _, param in model.named_parameters():
        assert fn(0.8, name_dict, 3, param) == pytest.approx(layerwise_lr_decay(0.8, name_dict, 3, param), rel=1e-15)


def test_user_pattern_and_explicit_n_layers():
    stages = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    layer_map = LayerMap.from_model(stages, pattern=r"^(\d+)\.", n_layers=4)
    assert layer_map.n_layers == 4
    assert layer_map.layer_id("1.weight") == 2 and layer_map.ratio("0.bias", 0.5) == 0.5**4


def test_build_name_dict_maps_paddle_names_to_structured_names():
    model = build_skeleton("llama", 2)
    name_dict = build_name_dict(model)
    assert sorted(name_dict.values()) == sorted(n for n, _ in model.named_parameters())
    assert all(name_dict[p.name] == n for n, p in model.named_parameters())


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"family": "resnet"}, ValueError, "family"),
        ({"pattern": "no_group"}, ValueError, "pattern"),
        ({"pattern": "(unclosed"}, ValueError, "pattern"),
        ({"n_layers": -1}, ValueError, "n_layers"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, error, match):
    with pytest.raises(error, match=match):
        LayerMap(**kwargs)


def test_missing_names_and_n_layers_are_explained():
    with pytest.raises(ValueError, match="n_layers"):
        LayerMap().layer_id("layers.0.w")
    with pytest.raises(ValueError, match="block 5"):
        LayerMap(n_layers=2).layer_id("layers.5.w")
    with pytest.raises(TypeError, match="paddle.nn.Layer"):
        build_name_dict("model")
    stranger = nn.Linear(2, 2)
    with pytest.raises(KeyError, match="build_name_dict"):
        LayerMap(n_layers=1)(0.5, {}, 1, stranger.weight)


def test_optimizer_n_layers_must_match_the_map():
    model = build_skeleton("llama", 2)
    layer_map, name_dict = make_layerwise_fn(model)
    with pytest.raises(ValueError, match="n_layers=layer_map.n_layers"):
        AdamWDL(parameters=model.parameters(), layerwise_decay=0.5, name_dict=name_dict, set_param_lr_fun=layer_map)


@pytest.mark.parametrize("arguments", [dict(family="vit"), dict(pattern=r"^stages\.(\d+)\.")])
def test_make_layerwise_fn_refuses_a_model_in_which_it_finds_no_block(arguments):
    """Every ratio would be 1 (n_layers 0): refused as layer_decay_param_groups refuses it, naming the map."""
    model = build_skeleton("llama", 2)
    with pytest.raises(ValueError, match=r"no parameter name has a block index this map recognises "
                                         r"\(names seen: 'model\.embed_tokens\.weight'"):
        make_layerwise_fn(model, **arguments)


def test_make_layerwise_fn_refuses_n_layers_below_the_block_count():
    with pytest.raises(ValueError, match="n_layers must be at least 2"):
        make_layerwise_fn(build_skeleton("llama", 2), n_layers=1)


def test_adamwdl_with_layer_map_scales_updates_by_ratio():
    """Zero weight decay, equal grads: after several steps each parameter moved
    by lr * ratio * (Adam's normalised step); with a constant gradient g the
    Adam step is exactly sign(g) * lr_t * |m_hat|/... -> compare displacement
    ratios between layers against decay ** (layer-id difference)."""
    model = build_skeleton("llama", 2)
    layer_map, name_dict = make_layerwise_fn(model)
    opt = AdamWDL(learning_rate=0.01, parameters=model.parameters(), weight_decay=0.0, layerwise_decay=0.5,
                  n_layers=layer_map.n_layers, name_dict=name_dict, set_param_lr_fun=layer_map)
    params = dict(model.named_parameters())
    before = {n: p.numpy().astype("float64") for n, p in params.items()}
    for _ in range(4):
        for p in model.parameters():
            p.grad = paddle.ones_like(p)  # constant gradient: every Adam step is lr*ratio*c_t, c_t the same for all
        opt.step()
        opt.clear_grad()
    moved = {n: float(np.abs(params[n].numpy().astype("float64") - before[n]).mean()) for n in params}
    head = moved["lm_head.weight"]
    for name in params:
        expected = 0.5 ** (layer_map.n_layers + 1 - _expected_layer_id(name, layer_map.n_layers))
        assert moved[name] / head == pytest.approx(expected, rel=1e-4), name


def _table_rows(out, n_layers):
    """``[name, layer id, ratio, lr, decayed, weight decay]`` per parameter of the printed table."""
    rows, _ = parse_lr_table(out.strip().splitlines())
    return [[name, str(group_layer_id(group, n_layers)), *values] for name, group, *values in rows]


@pytest.mark.parametrize("arch", ["bert", "gpt", "gpt2", "llama", "vit"])
def test_lr_table_prints_formula_values_for_each_family(arch, capsys):
    from paddle_llrd.cli.lr_table import main

    assert main(["--arch", arch, "--layers", "3", "--decay", "0.5", "--learning-rate", "2.0", "--weight-decay", "0.3",
                 "--style", "params"]) == 0
    rows = _table_rows(capsys.readouterr().out, 3)
    # lr-table's llama is tied, as PaddleFormers' LlamaConfig is by default: the head is the embeddings' weight
    options = {"tie_word_embeddings": True} if arch == "llama" else {}
    assert len(rows) == len(build_skeleton(arch, 3, **options).parameters())
    for name, layer, ratio, lr, decayed, weight_decay in rows:
        assert int(layer) == _expected_layer_id(name, 3), name
        assert float(ratio) == pytest.approx(0.5 ** (4 - int(layer)), rel=1e-3)
        assert float(lr) == pytest.approx(2.0 * 0.5 ** (4 - int(layer)), rel=1e-3)
        bias_or_norm = "bias" in name or "norm" in name  # PaddleNLP Trainer's rule
        assert decayed == ("no" if bias_or_norm else "yes"), name
        assert float(weight_decay) == (0.0 if bias_or_norm else 0.3), name


def test_lr_table_loads_a_user_factory(capsys):
    from paddle_llrd.cli.lr_table import main

    assert main(["--model", "paddle_llrd.models.tiny_bert:TinyBertForSequenceClassification", "--decay", "0.9",
                 "--style", "params"]) == 0
    out = capsys.readouterr().out
    rows, after = parse_lr_table(out.strip().splitlines())
    assert "n_layers=4" in after[-1] and ["bert.encoder.layers.3.linear2.weight", "layer_3"] in [r[:2] for r in rows]
    with pytest.raises(SystemExit) as info:  # argparse's usage error (tests/cli/test_cli_errors.py)
        main(["--model", "no_colon_here"])
    assert info.value.code == 2 and "package.module:factory" in capsys.readouterr().err


def test_resolve_layer_map_without_blocks_only_when_asked():
    from paddle_llrd.layer_decay.layer_maps import resolve_layer_map

    names = ["stem.weight", "head.bias"]
    with pytest.raises(ValueError, match="no parameter name has a block index"):
        resolve_layer_map("llama", names)
    assert resolve_layer_map("llama", names, require_blocks=False).n_layers == 0
    resolved = resolve_layer_map("llama", names, n_layers=3, require_blocks=False)
    assert resolved.n_layers == 3 and resolved.ratio("head.bias", 0.5) == 1.0


# A layer_map regex whose group captures no number: a ValueError
# naming layer_map, the pattern and the parameter, wherever a layer_map is read.
NOT_A_NUMBER = r"model\.(\w+)\."  # captures "embed_tokens" before any block


def _refuses_naming_pattern_and_parameter(call):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert message.startswith("layer_map pattern "), message
    assert repr(NOT_A_NUMBER) in message and "'model.embed_tokens.weight'" in message, message
    assert "captured 'embed_tokens'" in message and "invalid literal" not in message, message


def test_a_pattern_capturing_no_number_is_refused_naming_it():
    from paddle_llrd import layer_decay_param_groups
    from paddle_llrd.layer_decay.layer_maps import resolve_layer_map

    model = build_skeleton("llama", 2)
    _refuses_naming_pattern_and_parameter(lambda: LayerMap(pattern=NOT_A_NUMBER).block_index("model.embed_tokens.weight"))
    _refuses_naming_pattern_and_parameter(lambda: LayerMap.from_model(model, pattern=NOT_A_NUMBER))
    _refuses_naming_pattern_and_parameter(lambda: resolve_layer_map(NOT_A_NUMBER, model))
    _refuses_naming_pattern_and_parameter(lambda: layer_decay_param_groups(model, 0.8, layer_map=NOT_A_NUMBER))


@pytest.mark.parametrize("captured, name", [("", "stage..w"), ("+1", "stage.+1.w"), (" 1", "stage. 1.w"), ("1_0", "stage.1_0.w")])
def test_captures_int_would_read_but_that_are_no_block_digits_are_refused(captured, name):
    with pytest.raises(ValueError, match=re.escape(f"captured {captured!r}, not a block index")):
        LayerMap(pattern=r"^stage\.([^.]*)\.").block_index(name)


def test_a_group_that_takes_no_part_in_the_match_is_refused():
    with pytest.raises(ValueError, match="captured None, not a block index"):
        LayerMap(pattern=r"^(?:stage\.(\d+)|head)\.").block_index("head.weight")


def test_digit_patterns_still_read_their_blocks():
    layer_map = LayerMap(pattern=r"^stage\.([0-9]+)\.", n_layers=12)
    assert layer_map.block_index("stage.10.w") == 10 and layer_map.layer_id("stage.10.w") == 11
    assert layer_map.block_index("head.w") is None


# One layer_map regex rule (docs/layer_maps.rst). A Trainer field used to take a regex
# with two groups that LayerMap's resolution then refused, at training time.
@pytest.mark.parametrize("pattern, problem", [
    (r"(blocks)\.(\d+)\.", "has 2 groups; it needs exactly one"),
    (r"blocks\.\d+\.", "has 0 groups; it needs exactly one"),
    (r"blocks\.(\d+", "is no regular expression"),
])
def test_the_trainer_field_layer_map_and_the_lr_table_refuse_the_same_patterns(pattern, problem, capsys):
    from paddle_llrd.integrations.training_arguments import check_fields
    from paddle_llrd.layer_decay.layer_maps import resolve_layer_map
    from paddle_llrd.cli.lr_table import main as lr_table_main

    with pytest.raises(ValueError) as field_error:
        check_fields({"layer_map": pattern})
    with pytest.raises(ValueError) as resolve_error:
        resolve_layer_map(pattern, ["blocks.0.w"])
    assert str(field_error.value) == str(resolve_error.value)
    assert str(field_error.value).startswith("`layer_map` must be ")
    with pytest.raises(ValueError) as pattern_error:
        LayerMap(pattern=pattern)
    assert str(pattern_error.value).startswith("`pattern` must be a regular expression whose one group")
    for error in (field_error, pattern_error):
        assert f"{pattern!r} " in str(error.value) and problem in str(error.value)
    with pytest.raises(SystemExit):
        lr_table_main(["--layers", "1", "--pattern", pattern])
    assert f"argument --pattern: {pattern!r} {problem}" in capsys.readouterr().err
