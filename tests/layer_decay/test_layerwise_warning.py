"""AdamWDL warns when the default layerwise_lr_decay reads no encoder block (docs/adamwdl.rst).

PaddleNLP's rule only knows ``encoder.layers.N``: on the bundled LLaMA, GPT-2,
ViT and Hugging Face-style BERT name skeletons it leaves every ratio at 1 but
for names containing ``embedding``. The numbers stay PaddleNLP's (checked
against that rule written out here); a UserWarning names LayerMap and
make_layerwise_fn. PaddleNLP BERT names, decay 1.0, another ratio function:
no warning, with warnings turned into errors.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import paddle
import pytest

from paddle_llrd import AdamWDL, LayerMapWarning, build_name_dict, make_layerwise_fn
from paddle_llrd.models.skeletons import build_skeleton

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_LAYERS = 2
DECAY = 0.8


def _adamwdl(model, **overrides):
    arguments = dict(
        parameters=model.parameters(), layerwise_decay=DECAY, n_layers=N_LAYERS, name_dict=build_name_dict(model)
    )
    arguments.update(overrides)
    return AdamWDL(**arguments)


def _paddlenlp_ratio(structured: str) -> float:
    """PaddleNLP's rule for names without an encoder.layers.N block."""
    return DECAY ** (N_LAYERS + 1) if "embedding" in structured else 1.0


@pytest.mark.parametrize("arch", ["llama", "gpt2", "vit", "hf_bert"])
def test_names_without_encoder_layers_warn_and_keep_paddlenlps_ratios(arch):
    model = build_skeleton(arch, N_LAYERS)
    with pytest.warns(UserWarning, match="no parameter's structured name has an `encoder.layers.N` block") as caught:
        optimizer = _adamwdl(model)
    message = str(caught[0].message)
    assert "LayerMap" in message and "make_layerwise_fn" in message and "layerwise_decay=0.8" in message
    assert caught[0].filename == __file__  # the user's line, not the package's
    rows = optimizer.param_lr_table()
    assert len(rows) == len(model.parameters())
    for row in rows:
        assert row.ratio == pytest.approx(_paddlenlp_ratio(row.name), rel=1e-12), row.name
    if arch == "hf_bert":  # "decays only the embeddings"
        assert {row.name for row in rows if row.ratio != 1.0} == {
            n for n, _ in model.named_parameters() if n.startswith("bert.embeddings.")
        }


def test_parameter_groups_are_read_too():
    model = build_skeleton("llama", N_LAYERS)
    groups = [{"params": model.parameters()[:3], "learning_rate": 0.5}, {"params": model.parameters()[3:]}]
    with pytest.warns(UserWarning, match="make_layerwise_fn"):
        _adamwdl(model, parameters=groups)


@pytest.mark.parametrize("value", [0.8, 1.0])
def test_a_tensor_decay_warns_whatever_its_value_now(value):
    """A Tensor decay is read at every step and may be changed in place, so it counts as on even
    at 1.0 (docs/adamwdl.rst), as it does for AdamWDL's name_dict check."""
    model = build_skeleton("vit", N_LAYERS)
    with pytest.warns(LayerMapWarning, match="LayerMap"):
        _adamwdl(model, layerwise_decay=paddle.to_tensor(value))


@pytest.mark.parametrize(
    "arch, overrides",
    [
        ("bert", {}),  # PaddleNLP BERT: encoder.layers.N
        ("llama", {"layerwise_decay": 1.0}),
        ("llama", {"set_param_lr_fun": None}),
        ("hf_bert", {"set_param_lr_fun": lambda decay, names, n, param: 1.0}),
    ],
    ids=["paddlenlp-bert", "decay-off", "no-ratio-function", "own-ratio-function"],
)
def test_no_warning_where_the_rule_reads_the_names_or_decays_nothing(arch, overrides):
    model = build_skeleton(arch, N_LAYERS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _adamwdl(model, **overrides)


@pytest.mark.parametrize("arch", ["llama", "gpt2", "vit", "hf_bert"])
def test_the_advised_layer_map_warns_not_and_decays_every_block(arch):
    model = build_skeleton(arch, N_LAYERS)
    fn, name_dict = make_layerwise_fn(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimizer = _adamwdl(model, set_param_lr_fun=fn, name_dict=name_dict, n_layers=fn.n_layers)
    assert {round(row.ratio, 12) for row in optimizer.param_lr_table()} >= {
        round(DECAY**k, 12) for k in range(1, N_LAYERS + 1)
    }


def test_a_users_script_sees_one_warning_at_its_own_line(tmp_path):
    """As a user runs it: a fresh process, module-level code, Python's default warning filters."""
    script = tmp_path / "train_llama.py"
    script.write_text(textwrap.dedent("""\
        import paddle
        from paddle_llrd import AdamWDL, build_name_dict
        from paddle_llrd.models.skeletons import build_skeleton

        model = build_skeleton("llama", 2)
        opt = AdamWDL(learning_rate=1e-3, parameters=model.parameters(), layerwise_decay=0.8,
                      n_layers=2, name_dict=build_name_dict(model))
        loss = model.lm_head(model.model.embed_tokens(paddle.to_tensor([[1, 2]]))).mean()
        loss.backward()
        opt.step()
    """))
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if "LayerMapWarning: AdamWDL" in line]
    assert len(ours) == 1, done.stderr
    assert ours[0].startswith(f"{script}:6: LayerMapWarning: AdamWDL: layerwise_decay=0.8"), ours[0]
    assert "make_layerwise_fn" in ours[0]


def _run_user_script(tmp_path, text):
    """A fresh process with Python's default warning filters (each warning once per line)."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(text))
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return script, [line for line in done.stderr.splitlines() if "Warning: " in line and "ccache" not in line]


def test_a_layerwise_decay_above_one_warns_once_naming_the_value_wherever_it_is_accepted(tmp_path):
    """AdamWDL and layer_decay_param_groups (the Trainer/CLI field: tests_paddleformers) share one check."""
    script, lines = _run_user_script(tmp_path, """\
        import paddle
        from paddle_llrd import AdamWDL, build_name_dict, layer_decay_param_groups
        from paddle_llrd.models.skeletons import build_skeleton

        model = build_skeleton("bert", 2)
        for _ in range(3):  # one warning per line, as Python shows warnings
            opt = AdamWDL(learning_rate=1e-3, parameters=model.parameters(), layerwise_decay=1.5,
                          n_layers=2, name_dict=build_name_dict(model))
        groups = layer_decay_param_groups(model, 1.25)
        opt = paddle.optimizer.AdamW(learning_rate=1e-3, parameters=groups)
        print(sorted({g["learning_rate"] for g in groups}))
    """)
    faster = "is greater than 1, so lower layers train faster than the head"
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{script}:7: DecayAboveOneWarning: AdamWDL: `layerwise_decay`=1.5 {faster}"), lines[0]
    assert lines[1].startswith(
        f"{script}:9: DecayAboveOneWarning: layer_decay_param_groups: `layer_decay`=1.25 {faster}"), lines[1]


@pytest.mark.parametrize("value", [0.0, -0.5])
def test_a_layerwise_decay_at_or_below_zero_is_refused_by_name(value):
    model = build_skeleton("bert", N_LAYERS)
    with pytest.raises(ValueError, match=r"AdamWDL: `layerwise_decay` must be a finite number > 0"):
        _adamwdl(model, layerwise_decay=value)


def test_n_layers_above_the_deepest_block_read_warns_naming_both_numbers(tmp_path):
    """n_layers left at AdamWDL's default 12 on a 2-block model: the top block trains at 0.8**11."""
    script, lines = _run_user_script(tmp_path, """\
        from paddle_llrd import AdamWDL, LayerMap, build_name_dict, layer_decay_param_groups, make_layerwise_fn
        from paddle_llrd.models.skeletons import build_skeleton

        bert = build_skeleton("bert", 2)
        opt = AdamWDL(parameters=bert.parameters(), layerwise_decay=0.8, name_dict=build_name_dict(bert))
        llama = build_skeleton("llama", 2)
        fn, names = make_layerwise_fn(llama)
        opt = AdamWDL(parameters=llama.parameters(), layerwise_decay=0.8, set_param_lr_fun=LayerMap(family="llama"),
                      name_dict=names)
        opt = AdamWDL(parameters=llama.parameters(), layerwise_decay=0.8, set_param_lr_fun=fn, name_dict=names,
                      n_layers=fn.n_layers)
        groups = layer_decay_param_groups(llama, 0.8, layer_map=LayerMap(5, family="llama"))
        groups = layer_decay_param_groups(llama, 0.8)
    """)
    top = 0.8 ** 11
    assert len(lines) == 3, lines
    for line, number, where in zip(lines, (12, 12, 5), (f"{script}:5: LayerMapWarning: AdamWDL",
                                                        f"{script}:8: LayerMapWarning: AdamWDL",
                                                        f"{script}:12: LayerMapWarning: layer_decay_param_groups")):
        assert line.startswith(f"{where}: n_layers={number} but the deepest block the layer ratios read is "
                               "block 1 (2 blocks)"), line
        assert "Pass n_layers=2" in line
    assert f"0.8**11 = {top:.3g} of the head's rate" in lines[0]


def test_the_warned_n_layers_still_gives_the_documented_ratio():
    """Only a warning: the ratios stay decay ** (n_layers - i), as docs/adamwdl.rst has them."""
    model = build_skeleton("bert", N_LAYERS)
    with pytest.warns(UserWarning, match="n_layers=12"):
        optimizer = AdamWDL(parameters=model.parameters(), layerwise_decay=DECAY, name_dict=build_name_dict(model))
    rows = {row.name: row.ratio for row in optimizer.param_lr_table()}
    top = next(name for name in rows if "encoder.layers.1." in name)
    assert rows[top] == pytest.approx(DECAY ** (12 - 1), rel=1e-12)
