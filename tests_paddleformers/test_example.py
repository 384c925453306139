"""examples/paddleformers_llama.py runs, in its short mode, with the schedule,
weight-decay ramp, layer ratios and EMA that its defaults, a JSON or YAML
config file and the command line ask for."""
from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import shutil
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "paddleformers_llama.py"
SHORT_STEPS = 20  # the example's --short run


def load_example():
    spec = importlib.util.spec_from_file_location("paddleformers_llama_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def cosine_with_floor(step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warmup from 0, then a half cosine from 1 down to ``floor`` (a fraction of the peak) at ``total``."""
    if step < warmup:
        return step / warmup
    progress = (step - warmup) / (total - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def llama_ratios(decay: float, n_layers: int, tied: str = "embeddings + tied head") -> dict:
    """Embeddings d**(L+1), block i d**(L-i), the final norm (the head is tied) 1."""
    ratios = {tied: decay ** (n_layers + 1), "final norm": 1.0}
    ratios.update({f"block {i}": decay ** (n_layers - i) for i in range(n_layers)})
    return ratios


def check_run_outputs(result, output_dir: pathlib.Path) -> None:
    assert len(result["learning_rates"]) == len(result["weight_decays"]) == SHORT_STEPS
    assert result["ema_updates"] == SHORT_STEPS
    assert math.isfinite(result["train_loss"]) and math.isfinite(result["eval_loss"])
    if result["training_args"].ema_eval:  # the averaged weights' evaluation, under its own name
        assert math.isfinite(result["eval_ema_loss"]) and result["eval_ema_loss"] != result["eval_loss"]
    else:
        assert result["eval_ema_loss"] is None
    # save_model(): the trained weights, and the averaged ones under ema/
    for directory in (output_dir, output_dir / "ema"):
        assert any(path.suffix == ".safetensors" for path in directory.iterdir()), sorted(directory.iterdir())


def test_short_mode_with_the_example_defaults(tmp_path):
    result = load_example().main(["--output_dir", str(tmp_path), "--short"])
    # warmup_stable_decay, peak 3e-3, T = 20: W = floor(0.1 * T) = 2 warmup steps, the last
    # D = floor(0.1 * T) = 2 steps a half cosine to 0 (r = 0 at step 18, 1/2 at step 19).
    def wsd(step):
        if step < 2:
            return step / 2
        if step < SHORT_STEPS - 2:
            return 1.0
        return 0.5 * (1 + math.cos(math.pi * (step - (SHORT_STEPS - 2)) / 2))

    expected_lr = [3e-3 * wsd(s) for s in range(SHORT_STEPS)]
    assert result["learning_rates"] == pytest.approx(expected_lr, rel=1e-6, abs=1e-12)
    assert result["learning_rates"][-1] == pytest.approx(1.5e-3)
    # weight decay 0.01 -> 0.1 over the run, Megatron-LM's cosine increment
    expected_wd = [0.01 + 0.09 * 0.5 * (math.cos(math.pi * (1 - s / SHORT_STEPS)) + 1) for s in range(SHORT_STEPS)]
    assert result["weight_decays"] == pytest.approx(expected_wd, rel=1e-9)
    assert result["layer_ratios"] == pytest.approx(llama_ratios(0.8, 4))
    check_run_outputs(result, tmp_path)


def test_a_json_config_sets_every_new_field(tmp_path):
    config = {
        "output_dir": str(tmp_path / "out"),
        "short": True,
        "num_hidden_layers": 2,
        "learning_rate": 2e-3,
        "warmup_steps": 2,
        "lr_scheduler_type": "cosine",
        "min_lr": 4e-4,
        "layerwise_decay": 0.5,
        "layer_map": "llama",
        "weight_decay": 0.0,
        "weight_decay_end": 0.05,
        "weight_decay_incr_style": "linear",
        "ema_decay": 0.9,
        "ema_eval": False,
        "lr_scheduler_kwargs": {"num_cycles": 0.5},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = load_example().main([str(path)])

    args = result["training_args"]
    for name in ("layerwise_decay", "layer_map", "lr_scheduler_type", "min_lr", "weight_decay_end",
                 "weight_decay_incr_style", "ema_decay", "ema_eval", "warmup_steps", "learning_rate",
                 "lr_scheduler_kwargs"):
        assert getattr(args, name) == config[name], name
    # min_lr 4e-4 of the peak 2e-3 is a floor of 0.2
    expected_lr = [2e-3 * cosine_with_floor(s, warmup=2, total=SHORT_STEPS, floor=0.2) for s in range(SHORT_STEPS)]
    assert result["learning_rates"] == pytest.approx(expected_lr, rel=1e-6, abs=1e-12)
    assert result["weight_decays"] == pytest.approx([0.05 * s / SHORT_STEPS for s in range(SHORT_STEPS)], abs=1e-12)
    assert result["layer_ratios"] == pytest.approx(llama_ratios(0.5, 2))
    check_run_outputs(result, tmp_path / "out")


def test_a_yaml_config_with_the_command_line_winning(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "num_hidden_layers: 3\n"
        "layerwise_decay: 0.9\n"
        "lr_scheduler_type: cosine_with_min_lr\n"
        "lr_scheduler_kwargs: {min_lr_rate: 0.1}\n"
        "warmup_ratio: 0.25\n"
        "max_steps: 100\n"  # --short wins over the file
    )
    result = load_example().main([str(path), "--output_dir", str(tmp_path / "out"), "--short",
                                  "--layerwise_decay", "0.7"])
    args = result["training_args"]
    assert (args.layerwise_decay, args.max_steps, args.lr_scheduler_kwargs) == (0.7, SHORT_STEPS, {"min_lr_rate": 0.1})
    # warmup floor(0.25 * 20) = 5 steps, then a half cosine to 0.1 of the peak 3e-3
    expected_lr = [3e-3 * cosine_with_floor(s, warmup=5, total=SHORT_STEPS, floor=0.1) for s in range(SHORT_STEPS)]
    assert result["learning_rates"] == pytest.approx(expected_lr, rel=1e-6, abs=1e-12)
    assert result["layer_ratios"] == pytest.approx(llama_ratios(0.7, 3))


def run_in_a_fresh_name_scope(argv):
    """main(argv) with Paddle's parameter-name counter from 0, as in a new process (optimizer checkpoints are
    keyed by the generated names)."""
    import paddle

    with paddle.utils.unique_name.guard():
        return load_example().main(argv)


def test_a_run_resumes_from_the_flag_or_else_from_the_last_checkpoint_in_output_dir(tmp_path):
    """PaddleFormers' Trainer.train() ignores args.resume_from_checkpoint; the example passes it on."""
    whole = run_in_a_fresh_name_scope(["--output_dir", str(tmp_path / "whole"), "--short",
                                       "--save_strategy", "steps", "--save_steps", "10"])
    checkpoint = tmp_path / "whole" / "checkpoint-10"
    assert len(whole["learning_rates"]) == SHORT_STEPS and checkpoint.is_dir()
    resumed = run_in_a_fresh_name_scope(["--output_dir", str(tmp_path / "resumed"), "--short",
                                         "--resume_from_checkpoint", str(checkpoint)])
    assert resumed["learning_rates"] == pytest.approx(whole["learning_rates"][10:], rel=1e-12)
    assert resumed["weight_decays"] == pytest.approx(whole["weight_decays"][10:], rel=1e-12)
    assert resumed["eval_loss"] == pytest.approx(whole["eval_loss"], rel=1e-5)  # the same final weights
    shutil.copytree(checkpoint, tmp_path / "latest" / "checkpoint-10")
    latest = run_in_a_fresh_name_scope(["--output_dir", str(tmp_path / "latest"), "--short"])
    assert latest["learning_rates"] == pytest.approx(whole["learning_rates"][10:], rel=1e-12)
    assert latest["eval_loss"] == pytest.approx(whole["eval_loss"], rel=1e-5)


def test_ernie_4_5_trains_with_the_same_layer_ratios(tmp_path):
    result = load_example().main(["--output_dir", str(tmp_path), "--short", "--model_type", "ernie4_5",
                                  "--num_hidden_layers", "2", "--layerwise_decay", "0.5"])
    assert result["layer_ratios"] == pytest.approx(llama_ratios(0.5, 2))
    check_run_outputs(result, tmp_path)


def test_a_bad_field_fails_before_training(tmp_path):
    with pytest.raises(ValueError, match="ema_decay"):
        load_example().main(["--output_dir", str(tmp_path), "--short", "--ema_decay", "1.5"])
    assert not (tmp_path / "ema").exists()


def test_help_needs_no_training(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_example().main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--layerwise_decay", "--layer_map", "--weight_decay_end", "--ema_decay", "--model_type"):
        assert flag in out


def test_the_readme_config_at_full_length_keeps_an_ema_close_to_the_trained_weights(tmp_path):
    """README's config.json (ema_decay 0.999 with ema_warmup) over the example's 200 steps: timm's warm-up
    keeps the average's horizon (1 + t) ** (2/3) within the run (34 updates at its end), so the EMA
    evaluates close to the trained weights, where without the warm-up (README: 3.95 against 0.017) it
    stayed near the initial ones."""
    sys.path.insert(0, str(EXAMPLE.parents[1] / "tests" / "user_paths"))
    import harness

    config = {**harness.doc_block("readme-example-config", ("json",)).config(), "output_dir": str(tmp_path)}
    assert (config["ema_decay"], config["ema_warmup"]) == (0.999, True)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = run_in_a_fresh_name_scope([str(path)])
    assert result["ema_updates"] == 200 == len(result["learning_rates"])
    assert result["eval_ema_loss"] < 1.5 * result["eval_loss"], (result["eval_loss"], result["eval_ema_loss"])
