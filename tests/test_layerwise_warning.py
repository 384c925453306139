"""AdamWDL warns when the default layerwise_lr_decay reads no encoder block (issue 17.4).

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

from paddle_llrd import AdamWDL, build_name_dict, make_layerwise_fn
from paddle_llrd.models.skeletons import build_skeleton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def test_a_tensor_decay_other_than_one_warns():
    model = build_skeleton("vit", N_LAYERS)
    with pytest.warns(UserWarning, match="LayerMap"):
        _adamwdl(model, layerwise_decay=paddle.to_tensor(0.8))


@pytest.mark.parametrize(
    "arch, overrides",
    [
        ("bert", {}),  # PaddleNLP BERT: encoder.layers.N
        ("llama", {"layerwise_decay": 1.0}),
        ("llama", {"layerwise_decay": paddle.to_tensor(1.0)}),
        ("llama", {"set_param_lr_fun": None}),
        ("hf_bert", {"set_param_lr_fun": lambda decay, names, n, param: 1.0}),
    ],
    ids=["paddlenlp-bert", "decay-off", "tensor-decay-off", "no-ratio-function", "own-ratio-function"],
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
    ours = [line for line in done.stderr.splitlines() if "UserWarning: AdamWDL" in line]
    assert len(ours) == 1, done.stderr
    assert ours[0].startswith(f"{script}:6: UserWarning: AdamWDL: layerwise_decay=0.8"), ours[0]
    assert "make_layerwise_fn" in ours[0]
