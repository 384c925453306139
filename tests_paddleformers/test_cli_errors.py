"""``python -m paddle_llrd train`` refuses a user's mistake in one line
(docs/paddleformers_cli.rst "Mistakes"), as a user meets it: each case is the real command in a fresh process,
in this virtualenv, on a saved tiny LLaMA and jsonl data made here.

A refusal is exit status 2, no traceback, and one line on stderr of the form
``python -m paddle_llrd train: error: <what, naming the key>`` besides what
importing Paddle and PaddleFormers prints in this environment (read from a
bare import in its own process: the command adds nothing else). None of them
gets as far as loading the model: PaddleFormers' ``Loading configuration
file`` / ``Loading model weights`` never appear, though the model folder is
real.
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin

REPO_ROOT = Path(__file__).resolve().parents[1]
PROG = "python -m paddle_llrd train"
WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(20)]
# what PaddleFormers logs when the workflow starts loading the model
MODEL_LOADING = ("Loading configuration file", "Loading model weights", "Loading weights file")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A saved tiny LLaMA with a word-level tokenizer, erniekit data, and a config a user would write."""
    import paddle
    from paddleformers.transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    root = tmp_path_factory.mktemp("cli_errors")
    tokenizer = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(WORDS)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(root / "tiny-llama")
    paddle.seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, max_position_embeddings=32, fuse_rms_norm=False,
                                 bos_token_id=1, eos_token_id=2, pad_token_id=0)).save_pretrained(root / "tiny-llama")
    (root / "train.jsonl").write_text("".join('{"src": "w1 w2", "tgt": "w3 w4"}\n' for _ in range(8)))
    return root


def write_config(workspace: Path, **entries) -> str:
    """The docs' minimal CPU config (relative paths, as a user writes them), changed by ``entries``."""
    config = {
        "stage": "SFT", "fine_tuning": "full", "model_name_or_path": "./tiny-llama", "_attn_implementation": "eager",
        "train_dataset_type": "erniekit", "train_dataset_path": "./train.jsonl", "train_dataset_prob": "1.0",
        "eval_dataset_type": "erniekit", "eval_dataset_path": "./train.jsonl", "eval_dataset_prob": "1.0",
        "max_seq_len": 16, "per_device_train_batch_size": 2, "max_steps": 2, "do_train": True,
        "learning_rate": 1.0e-3, "device": "cpu", "compute_type": "float32", "output_dir": "./out",
        "layerwise_decay": 0.5, **entries,
    }
    (workspace / "config.yaml").write_text(yaml.safe_dump({k: v for k, v in config.items() if v is not None}))
    return "config.yaml"


def run(workspace: Path, *arguments: str, code: str = "") -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "paddle_llrd", "train", *arguments]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=workspace, timeout=300)


def normalised(line: str) -> str:
    """A log line without its colours and time stamp."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return re.sub(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]", "[time]", line).rstrip()


@pytest.fixture(scope="module")
def import_noise(workspace):
    """What importing the command's modules prints in this environment (ccache, PyTorch notices)."""
    done = run(workspace, code="import paddle_llrd.cli.train, paddle_llrd.cli.train_config")
    assert done.returncode == 0, done.stderr
    return {normalised(line) for line in done.stderr.splitlines()}


def refusal(done: subprocess.CompletedProcess, noise) -> str:
    """The one line the command wrote (exit status 2, no traceback, the model never loaded)."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not any(marker in done.stdout + done.stderr for marker in MODEL_LOADING), done.stderr[-3000:]
    own = [line for line in done.stderr.splitlines() if normalised(line) not in noise and line.strip()]
    assert len(own) == 1, own
    assert own[0].startswith(f"{PROG}: error: "), own
    return own[0][len(f"{PROG}: error: "):]


def test_a_missing_config_file(workspace, import_noise):
    message = refusal(run(workspace, "sft.yaml"), import_noise)
    assert message == f"CONFIG 'sft.yaml' does not exist ({workspace / 'sft.yaml'})"


def test_a_config_that_does_not_parse(workspace, import_noise):
    (workspace / "broken.yaml").write_text("stage: SFT\nlr_scheduler_kwargs: {decay_style: cosine\n")
    message = refusal(run(workspace, "broken.yaml"), import_noise)
    assert re.fullmatch(r"CONFIG 'broken\.yaml' is not valid YAML: expected ',' or '}', but got '<stream end>' "
                        r"\(line 3, column 1\)", message), message


@pytest.mark.parametrize("entries, overrides, expected", [
    ({"layerwise_decay_rate": 0.8}, [], r"config key 'layerwise_decay_rate' is neither a paddleformers-cli argument "
                                        r"nor a paddle_llrd field; .*--help lists paddle_llrd's\. Did you mean "
                                        r"'layerwise_decay'\?"),
    ({}, ["lr_sheduler_type=cosine"], r"config key 'lr_sheduler_type' .* Did you mean 'lr_scheduler_type'\?"),
    ({"lr_scheduler_type": "cosin"}, [], r"lr_scheduler_type must be one of paddle_llrd's registered schedules .*: "
                                         r"Unknown scheduler name 'cosin'; valid names are: linear, .*\. Did you mean "
                                         r"'cosine'\?"),
    ({"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"decay_styl": "cosine"}}, [],
     r"lr_scheduler_kwargs has the key 'decay_styl', which lr_scheduler_type='warmup_stable_decay' does not take; "
     r"valid keys: decay_ratio, decay_style, .*\. Did you mean 'decay_style'\?"),
    ({"layerwise_decay": -1}, [], r"`layerwise_decay` must be a finite number > 0, got -1\.0 \(usually in \(0, 1\]; 1\.0 turns layer-wise decay off; .*\)\."),
], ids=["misspelt-key", "misspelt-override", "schedule-name", "schedule-option", "bad-value"])
def test_a_misspelt_key_or_bad_value_names_it(workspace, import_noise, entries, overrides, expected):
    message = refusal(run(workspace, write_config(workspace, **entries), *overrides), import_noise)
    assert re.fullmatch(expected, message), message


@pytest.mark.parametrize("stage", ["SFT", "sft"])
def test_a_missing_dataset_is_refused_before_the_model_loads(workspace, import_noise, stage):
    """The model folder is real: the old order loaded it first (623 lines), then
    failed in the data reader. ``sft`` is the SFT workflow, not another one."""
    config = write_config(workspace, stage=stage, train_dataset_path="./train.jsonl,./data/sft-train.jsonl")
    message = refusal(run(workspace, config), import_noise)
    assert message == (f"train_dataset_path: './data/sft-train.jsonl' does not exist "
                       f"({workspace / 'data' / 'sft-train.jsonl'}) and is no dataset PaddleFormers downloads by name")


def test_a_missing_model_folder_is_named(workspace, import_noise):
    message = refusal(run(workspace, write_config(workspace, model_name_or_path="./my-llama")), import_noise)
    assert message == (f"model_name_or_path './my-llama' is no folder ({workspace / 'my-llama'} does not exist) "
                       "and not a hub id such as 'Qwen/Qwen3-0.6B'")


@pytest.mark.parametrize("stage, expected", [
    ("ernie_pretrain", r"stage must be one of \['SFT', 'PT', 'VL-SFT', 'VL-PT', 'DPO', 'VL-DPO'\] for paddle_llrd "
                       r"train, got 'ernie_pretrain': the other PaddleFormers workflows build trainers of their own.*"),
    ("SFX", r"stage must be one of \[.*\] for paddle_llrd train, got 'SFX'\. Did you mean 'SFT'\?"),
])
def test_a_stage_this_command_cannot_run(workspace, import_noise, stage, expected):
    message = refusal(run(workspace, write_config(workspace, stage=stage)), import_noise)
    assert re.fullmatch(expected, message), message


def test_a_value_paddleformers_refuses_ends_in_one_line(workspace):
    """PaddleFormers' own check, raised while it builds the arguments (after the
    start-up notices): the last line, and still no traceback and no model."""
    done = run(workspace, write_config(workspace, amp_master_grad=True))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not any(marker in done.stdout + done.stderr for marker in MODEL_LOADING)
    assert done.stderr.splitlines()[-1] == (
        f"{PROG}: error: [ConfigConflict] `amp_master_grad` was set to True, but amp is disabled (bf16=False and "
        "fp16=False) requires False. Please set `amp_master_grad`=False explicitly or enable fp16 or bf16.")


def test_no_arguments_is_a_usage_error_with_the_overrides_optional(workspace, import_noise):
    done = run(workspace)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == "", done.stderr
    own = [line for line in done.stderr.splitlines() if normalised(line) not in import_noise]
    assert own == [f"usage: {PROG} [-h] [--nproc_per_node N] [--verbose] config [key=value ...]",
                   f"{PROG}: error: the following arguments are required: config"]


def test_help_lists_paddle_llrds_keys_one_line_each(workspace):
    done = run(workspace, "--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"usage: {PROG} [-h] [--nproc_per_node N] [--verbose] config [key=value ...]" in lines
    fields = dataclasses.fields(LLRDArgumentsMixin)
    assert len(fields) >= 9
    for spec in fields:
        line = next((line for line in lines if line.split()[:1] == [spec.name]), None)
        assert line is not None, f"{spec.name} is not listed: {done.stdout}"
        assert spec.metadata["help"] in line, line  # the whole help, on the key's line
    assert "  layerwise_decay          Layer-wise lr decay d > 0: " in done.stdout
    assert not re.search(r"``|:(class|func|meth|data|doc|ref|mod):`", done.stdout), done.stdout  # plain text


def test_a_refusal_is_the_only_output_and_comes_before_the_workflows_are_imported(workspace):
    """docs/paddleformers_cli.rst "Mistakes": nothing before the one line (no import notices), and the
    config is refused before PaddleFormers' workflow modules (seconds of imports) are loaded."""
    done = run(workspace, "sft.yaml")
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.splitlines() == [f"{PROG}: error: CONFIG 'sft.yaml' does not exist ({workspace / 'sft.yaml'})"]
    code = ("import sys\nfrom paddle_llrd.cli import main\n"
            f"status = main(['train', {write_config(workspace, layerwise_decay=-1)!r}])\n"
            "print(status, 'paddleformers.cli.train.sft.workflow' in sys.modules)")
    imported = run(workspace, code=code)
    assert imported.stdout.split() == ["2", "False"], imported.stdout + imported.stderr[-2000:]


def test_an_override_written_as_a_flag_is_answered_with_its_key_value_form(workspace):
    """``--layerwise_decay 0.9`` (the style of PaddleFormers' scripts) is no flag of the command."""
    done = run(workspace, write_config(workspace), "--layerwise_decay", "0.9", "--max_steps=3")
    assert done.stderr.count("\n") == 1, done.stderr  # the one line, nothing else
    assert refusal(done, set()) == ("--layerwise_decay 0.9, --max_steps=3: config overrides are key=value pairs, as "
                                    "with paddleformers-cli, not flags; write layerwise_decay=0.9 max_steps=3")


@pytest.mark.parametrize("launched", [False, True], ids=["one-process", "one-launched-rank"])
def test_dpo_on_one_rank_is_refused_before_the_model_loads(workspace, launched):
    """docs/paddleformers_cli.rst "Stages": PaddleFormers' DPO fails in one process (also as the one rank of
    a launch); the command says so in one line and names the flag that gives it two ranks."""
    env = {"PADDLE_TRAINER_ID": "0", "PADDLE_TRAINERS_NUM": "1"} if launched else {}
    config = write_config(workspace, stage="DPO")
    done = subprocess.run([sys.executable, "-m", "paddle_llrd", "train", config], capture_output=True, text=True,
                          cwd=workspace, timeout=300,
                          env=dict(os.environ, **env, PYTHONPATH=os.pathsep.join(
                              filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))))
    message = refusal(done, set())
    assert message.startswith("stage DPO trains on two or more ranks: in one process PaddleFormers 1.2.0's DPO "
                              "workflow fails"), message
    assert message.endswith("add --nproc_per_node 2 (a CPU runs them over gloo)")
