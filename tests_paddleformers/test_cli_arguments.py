"""``python -m paddle_llrd train``'s config handling in-process: the file and
its ``key=value`` overrides, refused stages and keys, and the arguments class
against PaddleFormers' own ``FinetuningArguments`` defaults."""
from __future__ import annotations

import sys

import pytest
from paddleformers.cli.hparams import parser as cli_parser
from paddleformers.cli.hparams.finetuning_args import FinetuningArguments
from paddleformers.cli.train.sft import workflow as sft_workflow
from paddleformers.cli.train.sft.sft_trainer import SFTTrainer

from paddle_llrd.integrations import paddleformers_cli as cli


def test_overrides_merge_into_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("learning_rate: 1.0e-3\nlr_scheduler_kwargs: {decay_style: cosine}\nstage: SFT\n")
    config = cli.read_config(str(path), ["learning_rate=0.01", "lr_scheduler_kwargs.decay_style=linear", "ema_decay=0.9"])
    assert config == {"learning_rate": 0.01, "lr_scheduler_kwargs": {"decay_style": "linear"}, "stage": "SFT",
                      "ema_decay": 0.9}


@pytest.mark.parametrize("name, text, overrides, error, message", [
    ("c.txt", "a: 1", [], ValueError, r"CONFIG must be a \.yaml, \.yml or \.json file, got '.*c\.txt'"),
    ("c.yaml", "- 1\n- 2\n", [], ValueError, "must hold a mapping of argument names to values, got list"),
    ("c.yaml", "a: 1", ["learning_rate"], ValueError, r"overrides after CONFIG must be key=value, got \['learning_rate'\]"),
])
def test_bad_config_files_are_refused(tmp_path, name, text, overrides, error, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(error, match=message):
        cli.read_config(str(path), overrides)


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cli.read_config(str(tmp_path / "nope.yaml"), [])


def test_a_stage_with_its_own_trainer_is_refused():
    with pytest.raises(ValueError, match=r"stage must be one of \['DPO', 'PT', .*got 'ernie_pretrain'"):
        cli.run_workflow({"stage": "ernie_pretrain"})


@pytest.mark.parametrize("entry, message", [
    ({"layerwise_decy": 0.8}, r"not used by the PdArgumentParser: \{'layerwise_decy'\}"),  # PaddleFormers' own check
    ({"layerwise_decay": -1.0}, r"`layerwise_decay` must be a finite number > 0, got -1\.0"),
    ({"lr_scheduler_type": "warmup_stable_decy"}, r"lr_scheduler_type must be one of paddle_llrd's registered"),
])
def test_bad_keys_fail_when_the_arguments_are_built_and_the_cli_classes_come_back(tmp_path, entry, message):
    config = {"stage": "SFT", "output_dir": str(tmp_path), "device": "cpu", "compute_type": "float32", **entry}
    with pytest.raises(ValueError, match=message):
        cli.run_workflow(config)
    assert FinetuningArguments in cli_parser._TRAIN_ARGS and sft_workflow.SFTTrainer is SFTTrainer


@pytest.mark.parametrize("compute_type", ["bf16", "fp16"])
def test_amp_defaults_are_paddleformers_own(tmp_path, compute_type):
    ours = cli.LLRDFinetuningArguments(output_dir=str(tmp_path), compute_type=compute_type, report_to="none")
    theirs = FinetuningArguments(output_dir=str(tmp_path), compute_type=compute_type, report_to="none")
    assert (ours.bf16, ours.fp16, ours.amp_master_grad, ours.sharding) == (
        theirs.bf16, theirs.fp16, theirs.amp_master_grad, theirs.sharding) and ours.amp_master_grad is True
    assert set(cli.changed_defaults({"compute_type": compute_type})) == {"save_checkpoint_format",
                                                                           "load_checkpoint_format"}


def test_float32_turns_amp_master_grad_off_where_paddleformers_refuses_its_default(tmp_path):
    with pytest.raises(ValueError, match=r"\[ConfigConflict\] `amp_master_grad` was set to True"):
        FinetuningArguments(output_dir=str(tmp_path), compute_type="float32", report_to="none")
    ours = cli.LLRDFinetuningArguments(output_dir=str(tmp_path), compute_type="float32", report_to="none")
    assert (ours.bf16, ours.fp16, ours.amp_master_grad) == (False, False, False)
    assert cli.changed_defaults({"compute_type": "float32"}) == {
        "save_checkpoint_format": ("flex_checkpoint", "unified_checkpoint"),
        "load_checkpoint_format": ("flex_checkpoint", "unified_checkpoint"),
        "amp_master_grad": (True, False),
        "sharding": ("stage1", ""),
    }
    # a value the config sets is its own, never announced
    assert "amp_master_grad" not in cli.changed_defaults({"compute_type": "float32", "amp_master_grad": False})


def test_several_cpu_ranks_are_launched_over_gloo(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    command, env = cli._launch_command(2, "cpu", ["c.yaml", "max_steps=3"])
    assert command[:3] == [sys.executable, "-m", "paddle.distributed.launch"]
    assert command[command.index("--nproc_per_node") + 1] == "2" and env["PADDLE_DISTRI_BACKEND"] == "gloo"
    assert command[-6:] == [sys.executable, "-m", "paddle_llrd", "train", "c.yaml", "max_steps=3"]


def test_nproc_per_node_below_one_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("stage: SFT\n")
    with pytest.raises(ValueError, match="--nproc_per_node must be >= 1, got 0"):
        cli.main([str(path), "--nproc_per_node", "0"])


def _yaml_blocks(path):
    import re
    import textwrap
    from pathlib import Path

    import yaml

    text = (Path(__file__).resolve().parents[1] / path).read_text(encoding="utf-8")
    if path.endswith(".md"):
        blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    else:
        blocks = [textwrap.dedent(match) for match in re.findall(r"\.\. code-block:: yaml\n\n((?:   .*\n|\n)+)", text)]
    return [yaml.safe_load(block) for block in blocks]


@pytest.mark.parametrize("path", ["README.md", "README_cn.md", "docs/paddleformers_cli.rst"])
def test_the_documented_configs_are_accepted(tmp_path, path):
    from paddleformers.trainer import PdArgumentParser

    configs = _yaml_blocks(path)
    assert configs, f"{path} shows no YAML config"
    with cli._llrd_classes():
        parser = PdArgumentParser(cli_parser._TRAIN_ARGS)
        for config in configs:
            config = {"output_dir": str(tmp_path), "device": "cpu", "compute_type": "float32", **config}
            config.update(device="cpu", compute_type="float32", report_to="none")
            *parsed, unknown = parser.parse_dict(config, return_unknown_ars=True)
            assert not unknown, f"{path}: {unknown}"
            assert isinstance(parsed[-1], cli.LLRDFinetuningArguments)
