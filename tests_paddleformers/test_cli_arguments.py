"""``python -m paddle_llrd train``'s config handling in-process: the file and
its ``key=value`` overrides, refused stages and keys, and the arguments class
against PaddleFormers' own ``FinetuningArguments`` defaults."""
from __future__ import annotations

import re
import sys

import pytest
from paddleformers.cli.hparams import parser as cli_parser
from paddleformers.cli.hparams.finetuning_args import FinetuningArguments
from paddleformers.cli.train.sft import workflow as sft_workflow
from paddleformers.cli.train.sft.sft_trainer import SFTTrainer

from paddle_llrd.cli import train as cli
from paddle_llrd.cli import train_config, train_workflows
from paddle_llrd.cli.train_checks import check_config
from paddle_llrd.cli.train_launch import launch_command


def test_overrides_merge_into_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("learning_rate: 1.0e-3\nlr_scheduler_kwargs: {decay_style: cosine}\nstage: SFT\n")
    config = train_config.read_config(str(path), ["learning_rate=0.01", "lr_scheduler_kwargs.decay_style=linear", "ema_decay=0.9"])
    assert config == {"learning_rate": 0.01, "lr_scheduler_kwargs": {"decay_style": "linear"}, "stage": "SFT",
                      "ema_decay": 0.9}


@pytest.mark.parametrize("name, text, overrides, error, message", [
    ("c.txt", "a: 1", [], ValueError, r"CONFIG must be a \.yaml, \.yml or \.json file, got '.*c\.txt'"),
    ("c.yaml", "- 1\n- 2\n", [], ValueError, "must hold a mapping of argument names to values, got list"),
    ("c.yaml", "# empty\n", [], ValueError, "must hold a mapping of argument names to values, got nothing"),
    ("c.yaml", "a: 1", ["learning_rate"], ValueError, r"overrides after CONFIG must be key=value, got \['learning_rate'\]"),
])
def test_bad_config_files_are_refused(tmp_path, name, text, overrides, error, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(error, match=message):
        train_config.read_config(str(path), overrides)


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        train_config.read_config(str(tmp_path / "nope.yaml"), [])


def test_a_stage_with_its_own_trainer_is_refused():
    with pytest.raises(ValueError, match=r"stage must be one of \['SFT', 'PT', .*got 'ernie_pretrain': the other Paddle"):
        cli.run_workflow({"stage": "ernie_pretrain"})


@pytest.mark.parametrize("entry, message", [
    ({"layerwise_decy": 0.8}, r"config key 'layerwise_decy' is neither .* Did you mean 'layerwise_decay'\?$"),
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
    ours = train_config.LLRDFinetuningArguments(output_dir=str(tmp_path), compute_type=compute_type, report_to="none")
    theirs = FinetuningArguments(output_dir=str(tmp_path), compute_type=compute_type, report_to="none")
    assert (ours.bf16, ours.fp16, ours.amp_master_grad, ours.sharding) == (
        theirs.bf16, theirs.fp16, theirs.amp_master_grad, theirs.sharding) and ours.amp_master_grad is True
    assert set(train_config.changed_defaults({"compute_type": compute_type})) == {"save_checkpoint_format",
                                                                           "load_checkpoint_format"}


def test_float32_turns_amp_master_grad_off_where_paddleformers_refuses_its_default(tmp_path):
    with pytest.raises(ValueError, match=r"\[ConfigConflict\] `amp_master_grad` was set to True"):
        FinetuningArguments(output_dir=str(tmp_path), compute_type="float32", report_to="none")
    ours = train_config.LLRDFinetuningArguments(output_dir=str(tmp_path), compute_type="float32", report_to="none")
    assert (ours.bf16, ours.fp16, ours.amp_master_grad) == (False, False, False)
    assert train_config.changed_defaults({"compute_type": "float32"}) == {
        "save_checkpoint_format": ("flex_checkpoint", "unified_checkpoint"),
        "load_checkpoint_format": ("flex_checkpoint", "unified_checkpoint"),
        "amp_master_grad": (True, False),
        "sharding": ("stage1", ""),
    }
    # a value the config sets is its own, never announced
    assert "amp_master_grad" not in train_config.changed_defaults({"compute_type": "float32", "amp_master_grad": False})


def test_several_cpu_ranks_are_launched_over_gloo(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    command, env = launch_command(2, "cpu", ["c.yaml", "max_steps=3"])
    assert command[:3] == [sys.executable, "-m", "paddle.distributed.launch"]
    assert command[command.index("--nproc_per_node") + 1] == "2" and env["PADDLE_DISTRI_BACKEND"] == "gloo"
    assert command[-6:] == [sys.executable, "-m", "paddle_llrd", "train", "c.yaml", "max_steps=3"]


def test_nproc_per_node_below_one_is_refused(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("stage: SFT\n")
    with pytest.raises(SystemExit) as info:
        cli.main([str(path), "--nproc_per_node", "0"])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m paddle_llrd train: error: argument --nproc_per_node: expected an integer >= 1, got '0'")


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
    with train_workflows.llrd_classes():
        parser = PdArgumentParser(cli_parser._TRAIN_ARGS)
        for config in configs:
            config = {"output_dir": str(tmp_path), "device": "cpu", "compute_type": "float32", **config}
            config.update(device="cpu", compute_type="float32", report_to="none")
            *parsed, unknown = parser.parse_dict(config, return_unknown_ars=True)
            assert not unknown, f"{path}: {unknown}"
            assert isinstance(parsed[-1], train_config.LLRDFinetuningArguments)


# Checks of a config before anything loads (docs/paddleformers_cli.rst "Mistakes"): the exception types
# Python callers of run_workflow get; the command line's one-line form of them
# is tests_paddleformers/test_cli_errors.py.

def _valid_config(tmp_path, **entries):
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "train.jsonl").write_text('{"src": "a", "tgt": "b"}\n')
    return {"stage": "SFT", "model_name_or_path": str(tmp_path / "model"),
            "train_dataset_path": str(tmp_path / "train.jsonl"), "output_dir": str(tmp_path / "out"), **entries}


def _check(config):
    return check_config(config, train_config.train_arguments_classes())


@pytest.mark.parametrize("written, stage", [("sft", "SFT"), ("Pt", "PT"), ("vl-sft", "VL-SFT"), ("dpo", "DPO"),
                                            (" SFT ", "SFT")])
def test_stage_is_matched_without_case(tmp_path, written, stage):
    config = _valid_config(tmp_path, stage=written)
    assert _check(config)["stage"] == stage and config["stage"] == written  # a copy: the caller's dict is left alone


def test_only_the_other_workflows_are_refused_as_other_workflows(tmp_path):
    with pytest.raises(ValueError, match=r"got 'ERNIE_PRETRAIN': the other PaddleFormers workflows build trainers"):
        _check(_valid_config(tmp_path, stage="ERNIE_PRETRAIN"))
    with pytest.raises(ValueError) as info:
        _check(_valid_config(tmp_path, stage="SFTT"))
    assert str(info.value).endswith("got 'SFTT'. Did you mean 'SFT'?") and "trainers" not in str(info.value)
    with pytest.raises(TypeError, match=r"stage must be a string such as 'SFT', got int 3"):
        cli.run_workflow(_valid_config(tmp_path, stage=3))


@pytest.mark.parametrize("key, closest", [("layerwise_decay_rate", "layerwise_decay"),
                                          ("lr_sheduler_type", "lr_scheduler_type"),
                                          ("Learning_Rate", "learning_rate"),  # a PaddleFormers key too
                                          ("ema_decy", "ema_decay")])
def test_a_misspelt_key_is_refused_with_the_closest_key(tmp_path, key, closest):
    with pytest.raises(ValueError) as info:
        cli.run_workflow(_valid_config(tmp_path, **{key: 0.5}))
    message = str(info.value)
    assert message.startswith(f"config key {key!r} is neither a paddleformers-cli argument nor a paddle_llrd field")
    assert message.endswith(f"Did you mean {closest!r}?"), message


def test_every_unknown_key_is_counted(tmp_path):
    with pytest.raises(ValueError, match=r"'layerwise_decy' .* \(and 2 more unknown: 'foo', 'bar'\)"):
        _check(_valid_config(tmp_path, layerwise_decy=0.8, foo=1, bar=2))


@pytest.mark.parametrize("value", ["./no-such-model", "../no-such-model", "/no/such/model", "a/b/c", "~/no-such-model",
                                   "models\\llama", "checkpoints/llama"])
def test_a_model_path_that_does_not_exist_is_refused(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints").mkdir()  # so checkpoints/llama is a path here, not a hub id
    config = _valid_config(tmp_path, model_name_or_path=value)
    with pytest.raises(ValueError, match=rf"^model_name_or_path {re.escape(repr(value))} is no folder \(.* does not "
                                         r"exist\) and not a hub id such as 'Qwen/Qwen3-0.6B'$"):
        cli.run_workflow(config)


def test_a_hub_id_is_left_to_the_hub_and_a_file_or_nothing_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _check(_valid_config(tmp_path, model_name_or_path="Qwen/Qwen3-0.6B"))["model_name_or_path"] == "Qwen/Qwen3-0.6B"
    assert _check(_valid_config(tmp_path, model_name_or_path="my-llama"))  # a bare hub name
    with pytest.raises(ValueError, match=r"^model_name_or_path '.*train\.jsonl' is a file; expected a model folder"):
        _check(_valid_config(tmp_path, model_name_or_path=str(tmp_path / "train.jsonl")))
    config = _valid_config(tmp_path)
    del config["model_name_or_path"]
    with pytest.raises(ValueError, match=r"^model_name_or_path must be set: a local model folder or a hub id"):
        _check(config)
    with pytest.raises(ValueError, match=r"^tokenizer_name_or_path './tok' is no folder"):
        _check(_valid_config(tmp_path, tokenizer_name_or_path="./tok"))


def test_each_dataset_path_is_checked_where_the_workflow_reads_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _valid_config(tmp_path)
    (tmp_path / "more").mkdir()  # a folder of jsonl files is a source too
    assert _check({**config, "train_dataset_path": "train.jsonl#10, more,llamafactory/alpaca_en"})  # a named download
    with pytest.raises(ValueError, match=r"^train_dataset_path: 'missing\.jsonl' does not exist \(.*missing\.jsonl\) "
                                         r"and is no dataset PaddleFormers downloads by name$"):
        _check({**config, "train_dataset_path": "train.jsonl,missing.jsonl#5"})
    # the eval data only when the run evaluates (PaddleFormers' default path is in its own repository)
    assert _check({**config, "eval_dataset_path": "missing.jsonl"})
    for evaluates in ({"do_eval": True}, {"evaluation_strategy": "steps"}):
        with pytest.raises(ValueError, match=r"^eval_dataset_path: 'missing\.jsonl' does not exist"):
            _check({**config, "eval_dataset_path": "missing.jsonl", **evaluates})
    with pytest.raises(ValueError, match=r"^train_dataset_path must be set: PaddleFormers' SFT workflow reads"):
        _check({**config, "train_dataset_path": None})
    assert _check({**config, "stage": "VL-SFT", "train_dataset_path": "missing.jsonl"})  # its data come otherwise
    assert _check({**config, "dataset_type": "offline", "train_dataset_path": None})


def test_paddle_llrd_values_are_refused_before_the_model_path_is_looked_at(tmp_path):
    config = _valid_config(tmp_path, model_name_or_path="./nowhere", layerwise_decay="0")
    with pytest.raises(ValueError, match=r"^`layerwise_decay` must be a finite number > 0, got 0\.0 "):
        _check(config)
    with pytest.raises(ValueError, match=r"lr_scheduler_kwargs has the key 'decay_styl', .* Did you mean 'decay_style'"):
        _check(_valid_config(tmp_path, lr_scheduler_type="warmup_stable_decay",
                             lr_scheduler_kwargs={"decay_styl": "cosine"}))


@pytest.mark.parametrize("name, text, message", [
    ("c.yaml", "stage: SFT\nlist: [1, 2\n", r"^CONFIG '.*c\.yaml' is not valid YAML: expected ',' or '\]', .*"
                                           r"\(line 3, column 1\)$"),
    ("c.json", '{"stage": "SFT",}', r"^CONFIG '.*c\.json' is not valid JSON: Expecting property name enclosed in "
                                    r"double quotes \(line 1, column 17\)$"),
])
def test_a_config_that_does_not_parse_says_where(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        train_config.read_config(str(path), [])


def test_a_folder_is_no_config_and_an_override_that_does_not_merge_is_named(tmp_path):
    (tmp_path / "c.yaml").mkdir()
    with pytest.raises(FileNotFoundError, match=r"CONFIG '.*c\.yaml' is a folder"):
        train_config.read_config(str(tmp_path / "c.yaml"), [])
    path = tmp_path / "d.yaml"
    path.write_text("lr_scheduler_kwargs: {decay_style: cosine}\n")
    with pytest.raises(ValueError, match=r"^overrides \['max_steps=\[1'\] do not parse or merge into CONFIG '.*d\.yaml': "
                                         r"did not find expected ',' or '\]'$"):
        train_config.read_config(str(path), ["max_steps=[1"])
