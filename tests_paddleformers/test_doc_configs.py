"""Every YAML and JSON config of README.md, README_cn.md and docs/*.rst that
PaddleFormers runs, with the page's own commands, as a user runs them: each
command in its own process and its own fresh working directory, which holds
what the page's ``tiny-llama`` command writes (the model and data its configs
name, copied from that command's one run: it writes the same bytes at every
run), the config written there under the name the command gives it
(``sft.yaml``, ``minimal.yaml``, ``config.json``) as the page writes it but
for a run length of at most ``MAX_STEPS`` steps. Nothing is added: no
``do_train``, ``device``, ``_attn_implementation`` or ``compute_type``; this
machine has no CUDA, so the run shows what ``python -m paddle_llrd train``
chooses there. ``python`` and ``.venv-paddleformers/bin/python`` (the
interpreter ``make train-env`` sets up) are this virtualenv's.

The blocks are found by their ``user-path`` markers (tests/user_paths/harness.py);
tests/user_paths/test_shell_blocks.py fails for a marker no test runs.
"""
from __future__ import annotations

import atexit
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
import yaml
from test_cli import DECAY, LEARNING_RATE, N_LAYERS, check_first_step_ratios, weights
from trainer_checks import file_hashes
from update_paths import cpu_flat_path

from paddle_llrd.cli.train_console import LAUNCH_LOG_NAME, LOG_NAME
from paddle_llrd.cli.train_env import TRAIN_ENV_PYTHON

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "user_paths"))
import harness  # noqa: E402

MAX_STEPS = 2
# The path the train command's steps take here, as its summary names it ("fused" where the operator is built).
FLAT_PATH = cpu_flat_path()[0].replace("_", "-")
CONFIGS = harness.CONFIG_LANGUAGES
SHELL = harness.SHELL_LANGUAGES
#: The markers this file runs (tests/user_paths/test_shell_blocks.py checks every marker is run somewhere).
MARKERS = {
    "train-env", "cli-try", "readme-cli-config", "readme-cli-commands", "cli-config", "cli-commands", "cli-lora",
    "cli-nproc", "cli-minimal", "readme-example-config", "readme-example-command", "paddleformers-example-config",
    "schedules-warmup-init-config", "paddleformers-example-commands", "schedules-wsd-hugging-face-config",
}
#: What the command chooses on this CPU-only machine for a key the config leaves out, one line each.
CHOSEN_ON_CPU = {
    "do_train": "do_train: True (paddleformers-cli: False)",
    "device": "device: 'cpu' (paddleformers-cli: 'gpu') because this Paddle sees no CUDA device",
    "_attn_implementation": "_attn_implementation: 'eager' (paddleformers-cli: 'flashmask')",
    "compute_type": "compute_type: 'float32' (paddleformers-cli: 'bf16')",
}
#: The interpreters a page's commands name: this virtualenv's.
INTERPRETERS = ("python", ".venv/bin/python", TRAIN_ENV_PYTHON)


def is_tiny_llama(command: List[str]) -> bool:
    return command[1:4] == ["-m", "paddle_llrd", "tiny-llama"]


#: The page's command that writes the model and data its configs name (docs/paddleformers_cli.rst "Try it").
TINY_LLAMA = next(command for command in harness.doc_block("cli-try", SHELL).commands() if is_tiny_llama(command))


@pytest.fixture(scope="module")
def workspace() -> Path:
    """The tiny LLaMA and data of ``python -m paddle_llrd tiny-llama``, for the configs written for a
    model of the reader's own (a path the tiny-llama command does not write)."""
    return written_by(TINY_LLAMA + ["model"])


def as_run_here(config: dict, workspace: Path) -> dict:
    """The page's config as a user runs it: a model folder or data file that the tiny-llama command does
    not write (a config for the reader's own model) is the workspace's; at most MAX_STEPS steps."""
    config = dict(config)
    if "model_name_or_path" in config and not str(config["model_name_or_path"]).startswith("./tiny-llama"):
        config["model_name_or_path"] = str(workspace / "model")
    for key in ("train_dataset_path", "eval_dataset_path"):
        if key in config and not str(config[key]).startswith("./tiny-llama/"):
            config[key] = str(workspace / "model" / "train.jsonl")
    # the page's warmup kept (a schedule refuses a warmup longer than training), the rest cut short
    run_length = MAX_STEPS + 2 * int(config.get("warmup_steps", 0))
    if config.get("max_steps", run_length + 1) > run_length:
        config["max_steps"] = run_length
    return config


def run_command(command: List[str], work_dir: Path, files: Dict[str, dict]) -> subprocess.CompletedProcess:
    """One documented command in ``work_dir``, with ``files`` (name: config) written there first;
    the interpreters the page names are this virtualenv's, ``examples/...`` this checkout's."""
    work_dir.mkdir(parents=True, exist_ok=True)
    for name, config in files.items():
        text = json.dumps(config) if name.endswith(".json") else yaml.safe_dump(config)
        (work_dir / name).write_text(text)
    words = [sys.executable if word in INTERPRETERS else word for word in command]
    words = [str(REPO_ROOT / word) if word.startswith("examples/") else word for word in words]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(words, cwd=work_dir, env=env, capture_output=True, text=True, timeout=600)


def succeeded(result: subprocess.CompletedProcess) -> str:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    return output


def trained_steps(output_dir: Path) -> int:
    return json.loads((output_dir / "trainer_state.json").read_text())["global_step"]


#: The folder where each tiny-llama command of the pages ran, once per test process.
_TINY_LLAMA_RUNS: Dict[Tuple[str, ...], Path] = {}


def written_by(command: List[str]) -> Path:
    """The folder where ``command`` (a tiny-llama command) ran, once: it writes the same bytes at every
    run (test_the_try_it_commands_train_the_minimal_config_as_written_with_a_short_console runs the
    "Try it" one in its test's own folder)."""
    key = tuple(command)
    if key not in _TINY_LLAMA_RUNS:
        folder = Path(tempfile.mkdtemp(prefix="tiny-llama-run-"))
        atexit.register(shutil.rmtree, folder, True)
        succeeded(run_command(command, folder, {}))
        _TINY_LLAMA_RUNS[key] = folder
    return _TINY_LLAMA_RUNS[key]


def in_a_user_folder(work_dir: Path, commands: List[List[str]]) -> List[List[str]]:
    """``work_dir`` as the reader's folder after the page's tiny-llama command (the block's own, when it has
    one, else the "Try it" one): what that command writes, copied from its one run; the block's other
    commands, to run there."""
    own = [command for command in commands if is_tiny_llama(command)]
    shutil.copytree(written_by(own[0] if own else TINY_LLAMA), work_dir, dirs_exist_ok=True)
    return [command for command in commands if not is_tiny_llama(command)]


def run_cli_page(tmp_path: Path, config_marker: str, commands_marker: str, workspace: Path, **extra) -> List[str]:
    """Each train command of the block, in a fresh folder of its own, on the page's config saved as sft.yaml."""
    config = as_run_here({**harness.doc_block(config_marker, CONFIGS).config(), **extra}, workspace)
    outputs = []
    for index, command in enumerate(harness.doc_block(commands_marker, SHELL).commands()):
        if is_tiny_llama(command):
            continue
        work_dir = tmp_path / f"{commands_marker}-{index}"
        in_a_user_folder(work_dir, harness.doc_block(commands_marker, SHELL).commands())
        output = succeeded(run_command(command, work_dir, {"sft.yaml": config}))
        for key, line in CHOSEN_ON_CPU.items():
            assert (line in output) == (key not in config), (command, line, output[-3000:])
        output_dir = work_dir / config["output_dir"]
        assert trained_steps(output_dir) == config["max_steps"], command
        assert (output_dir / "ema").is_dir() == ("ema_decay" in config)
        assert "EMAHorizonWarning" not in output  # the pages' EMAs warm up
        # every step on the flat layout's path, clipping by the Trainer's default max_grad_norm included
        steps = config["max_steps"]
        assert f"update path: {FLAT_PATH} at {steps} of {steps} steps" in output, (command, output[-3000:])
        outputs.append(output)
    return outputs


def test_train_env_is_the_environment_of_these_tests_and_train_help_works_there(tmp_path):
    """``make train-env`` runs the recipe ``make test-paddleformers`` builds this virtualenv with (so this
    virtualenv holds every pin of requirements-paddleformers.txt), and the interpreter it names runs
    ``train --help`` (here: this virtualenv's)."""
    make, helped = harness.doc_block("train-env", SHELL).commands()
    assert make == ["make", "train-env"]
    recipe = subprocess.run(harness.shell_command(make), capture_output=True, text=True, check=True).stdout
    assert "scripts/integration_env.sh paddleformers" in recipe, recipe
    assert "bash scripts/integration_env.sh \"$NAME\"" in (REPO_ROOT / "scripts" / "integration_tests.sh").read_text()
    assert TRAIN_ENV_PYTHON in recipe and helped[0] == TRAIN_ENV_PYTHON
    for line in (REPO_ROOT / "requirements-paddleformers.txt").read_text().splitlines():
        pin = line.split("#")[0].strip()
        if pin:
            name, version = pin.split("==")
            assert importlib.metadata.version(name) == version, (name, sys.prefix)
    output = succeeded(run_command(helped, tmp_path, {}))
    assert "usage: python -m paddle_llrd train" in output and "layerwise_decay" in output


def test_the_try_it_commands_train_the_minimal_config_as_written_with_a_short_console(tmp_path):
    """docs/paddleformers_cli.rst "Try it": tiny-llama, then minimal.yaml as written (4 steps). Each weight's
    first step is lr * 0.5 ** (L - i); the console starts with the package's summary line, shows every
    layer group's ratio, a line per checkpoint and where things were written, in at most 100 lines, while
    PaddleFormers' argument dump and debug lines are in out/train.log only."""
    config = harness.doc_block("cli-minimal", CONFIGS).config()
    assert (config["layerwise_decay"], config["learning_rate"], config["max_steps"]) == (DECAY, LEARNING_RATE, 4)
    make_model, train = harness.doc_block("cli-try", SHELL).commands()
    assert train[-1] == "minimal.yaml"
    succeeded(run_command(make_model, tmp_path, {}))
    # the model, its tokenizer and the data: no file of PaddleFormers' own saving machinery (saved_signal_0)
    assert sorted(path.name for path in (tmp_path / "tiny-llama").iterdir()) == [
        "config.json", "dev.jsonl", "dpo.jsonl", "model-00001-of-00001.safetensors", "model.safetensors.index.json",
        "tokenizer.json", "tokenizer_config.json", "train.jsonl"]
    done = run_command(train, tmp_path, {"minimal.yaml": config})
    console = succeeded(done)
    lines = done.stdout.splitlines()
    assert len((done.stdout + done.stderr).splitlines()) <= 100, console
    assert lines[0].startswith("paddle_llrd train minimal.yaml: SFT (full) of ./tiny-llama on cpu, 4 steps"), lines[0]
    assert done.stderr == "", done.stderr  # nothing else: no import notices, no PaddleFormers lines
    for k, group in enumerate(["embeddings"] + [f"layer_{i}" for i in range(N_LAYERS)] + ["head"]):
        ratio = DECAY ** (N_LAYERS + 1 - k)
        assert any(re.fullmatch(rf"  {group} +{ratio:.4g} +{LEARNING_RATE * ratio:.3e}", line) for line in lines), group
    assert [line for line in lines if "saved" in line] == [f"step {k}/4: saved ./out/checkpoint-{k}" for k in range(1, 5)]
    # the Trainer's default max_grad_norm (1.0) clips on the multi-tensor step (docs/adamwdl.rst)
    assert f"update path: {FLAT_PATH} at 4 of 4 steps" in lines, console
    assert lines[-1].startswith("wrote the final model in ./out, 4 checkpoints") and lines[-1].endswith(
        f"the full log in ./out/{LOG_NAME}"), lines[-1]
    log = (tmp_path / "out" / LOG_NAME).read_text()
    for noisy in ("Model Configuration Arguments", "DEBUG", "Loading configuration file", "PyTorch was not found"):
        assert noisy in log and noisy not in console, noisy
    check_first_step_ratios(weights(tmp_path / "tiny-llama"), weights(tmp_path / "out" / "checkpoint-1"))
    # --verbose: PaddleFormers' own output on the console too
    verbose = succeeded(run_command(train + ["--verbose", "output_dir=./verbose"], tmp_path, {}))
    assert "Model Configuration Arguments" in verbose and "layer groups (layerwise_decay 0.5): ratio, peak lr" in verbose


def test_readme_config_trains_on_a_cpu_with_each_readme_command(workspace, tmp_path):
    """README's LoRA config has no do_train, device, attention or compute_type: each of its train commands
    (as it is, an override, two CPU ranks) trains MAX_STEPS steps, saving the adapters and the EMA. With two
    ranks the console is rank 0's: the launcher's settings and its imports' notices are in its launch.log."""
    outputs = run_cli_page(tmp_path, "readme-cli-config", "readme-cli-commands", workspace)
    launched = outputs[2]
    assert "launching 2 ranks" in launched and "layer groups (layerwise_decay 0.85)" in launched, launched[-3000:]
    assert "LAUNCH INFO" not in launched and "No ccache found" not in launched, launched[-3000:]
    launch_log = tmp_path / "readme-cli-commands-3" / "paddleformers_dist_log" / LAUNCH_LOG_NAME
    assert "LAUNCH INFO" in launch_log.read_text()
    assert f"the launcher's output is in paddleformers_dist_log/{LAUNCH_LOG_NAME}" in launched


def test_cli_page_config_trains_with_the_pages_commands_and_a_rerun_changes_no_file(workspace, tmp_path):
    """The page's full fine-tuning config trains with each of its commands (one process, an override, two
    CPU ranks); its first command run again, or its override command after it, leaves every file as it was
    and says how to train again; run again with a larger max_steps (it saved no checkpoint: save_steps 200)
    it stops in one line, the final model and its EMA unchanged."""
    run_cli_page(tmp_path, "cli-config", "cli-commands", workspace)
    run_cli_page(tmp_path, "cli-config", "cli-nproc", workspace)
    config = as_run_here(harness.doc_block("cli-config", CONFIGS).config(), workspace)
    work_dir = tmp_path / "cli-commands-0"
    output_dir = work_dir / config["output_dir"]
    assert (output_dir / "ema").is_dir() and not list(output_dir.glob("checkpoint-*"))  # save_steps 200
    command, override = harness.doc_block("cli-commands", SHELL).commands()[:2]
    check_rerun_changes_no_file(command, work_dir, output_dir, config["max_steps"])
    assert "layerwise_decay=0.9" in override
    check_rerun_changes_no_file(override, work_dir, output_dir, config["max_steps"])
    before = file_hashes(output_dir)
    longer = run_command(command + [f"max_steps={config['max_steps'] + 8}"], work_dir, {})
    assert longer.returncode == 2 and "Traceback" not in longer.stderr, longer.stderr[-3000:]
    (line,) = longer.stderr.splitlines()
    assert line.startswith(f"python -m paddle_llrd train: error: output_dir {config['output_dir']!r} holds a finished "
                           f"model trained for {config['max_steps']} steps ("), line
    assert "ema/" in line and "trainer_state.json" in line
    for way in ("resume_from_checkpoint=PATH", "output_dir=PATH", "overwrite_output_dir=true"):
        assert way in line, way
    assert longer.stdout == "" and file_hashes(output_dir) == before


def test_cli_page_lora_keys_on_its_config(workspace, tmp_path):
    """The LoRA block lists the keys that change the page's config: run as that config with them."""
    lora = harness.doc_block("cli-lora", CONFIGS).config()
    run_cli_page(tmp_path, "cli-config", "cli-commands", workspace, **lora)


def test_minimal_cpu_run_trains_at_layer_ratios_and_a_rerun_changes_no_file(tmp_path):
    """The page's minimal CPU config (max_steps 4, a checkpoint each step) with the "Try it" command: run
    again, it says the run is done and changes no file, also without the trainer_state.json the workflow
    writes after the final model."""
    config = harness.doc_block("cli-minimal", CONFIGS).config()
    (command,) = in_a_user_folder(tmp_path, harness.doc_block("cli-try", SHELL).commands())
    succeeded(run_command(command, tmp_path, {"minimal.yaml": config}))
    output_dir = tmp_path / config["output_dir"]
    assert f"checkpoint-{config['max_steps']}/trainer_state.bin" in file_hashes(output_dir)  # the final checkpoint
    check_rerun_changes_no_file(command, tmp_path, output_dir, config["max_steps"])
    # the workflow's trainer_state.json, written after the final model, lost: the final model and its
    # manifest are complete, so the run is finished all the same (a run cut before them: test_kill_and_resume.py)
    (output_dir / "trainer_state.json").unlink()
    check_rerun_changes_no_file(command, tmp_path, output_dir, config["max_steps"])


def check_rerun_changes_no_file(command: List[str], work_dir: Path, output_dir: Path, final_step: int) -> None:
    """The same command again in the same directory: one line says so, every file's bytes are kept."""
    before = file_hashes(output_dir)
    output = succeeded(run_command(command, work_dir, {}))
    assert f"already holds a run finished at step {final_step}; nothing to do" in output, output[-3000:]
    for way in ("output_dir=PATH", "overwrite_output_dir=true"):  # how to train again, with other settings
        assert way in output, way
    assert "resuming" not in output.lower() and "Traceback" not in output
    assert file_hashes(output_dir) == before


def test_interrupted_run_resumes_to_the_uninterrupted_weights(tmp_path):
    """The run cut after step 1 (only checkpoint-1 left): the same command resumes and ends with the
    uninterrupted run's model, bit for bit (the EMA's resume: test_cli.py)."""
    config = harness.doc_block("cli-minimal", CONFIGS).config()
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    (command,) = in_a_user_folder(whole, harness.doc_block("cli-try", SHELL).commands())
    in_a_user_folder(cut, harness.doc_block("cli-try", SHELL).commands())
    succeeded(run_command(command, whole, {"minimal.yaml": config}))
    (cut / "out").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(whole / "out" / "checkpoint-1"), str(cut / "out")], check=True)
    output = succeeded(run_command(command, cut, {"minimal.yaml": config}))
    assert "nothing to do" not in output
    assert "resumed at step 1" in output, output[-3000:]
    assert "trained 3 steps (resumed at step 1)" in output, output[-3000:]  # the steps this run trained
    assert "Continuing training from global step 1" in (cut / "out" / LOG_NAME).read_text()
    got, expected = weights(cut / "out"), weights(whole / "out")
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize("key, value, expected", [
    ("device", "gpu", "set device: cpu"),
    ("_attn_implementation", "flashmask", "set _attn_implementation: eager"),
])
def test_a_key_that_cannot_run_on_this_cpu_is_refused_naming_the_key(tmp_path, key, value, expected):
    config = {**harness.doc_block("cli-minimal", CONFIGS).config(), key: value}
    if key == "_attn_implementation":
        config["device"] = "cpu"
    in_a_user_folder(tmp_path, [])
    result = run_command(["python", "-m", "paddle_llrd", "train", "sft.yaml"], tmp_path, {"sft.yaml": config})
    output = result.stdout + result.stderr
    # a refusal is the command line's one line (exit status 2), not a traceback
    assert result.returncode == 2 and expected in result.stderr.strip().splitlines()[-1], output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert not (tmp_path / config["output_dir"]).exists()


def test_do_train_false_is_kept(tmp_path):
    config = {**harness.doc_block("cli-minimal", CONFIGS).config(), "do_train": False}
    in_a_user_folder(tmp_path, [])
    output = succeeded(run_command(["python", "-m", "paddle_llrd", "train", "sft.yaml"], tmp_path, {"sft.yaml": config}))
    assert "do_train: True" not in output
    assert not (tmp_path / config["output_dir"] / "trainer_state.json").exists()


@pytest.mark.parametrize("config_marker", ["readme-example-config", "paddleformers-example-config",
                                           "schedules-warmup-init-config", "schedules-wsd-hugging-face-config"])
def test_trainer_config_runs_with_the_readme_example_command(tmp_path, config_marker):
    """The Trainer configs (the example's config.json and the schedule pages' fragments of one), run by
    README's `python examples/paddleformers_llama.py config.json`; a fragment gets output_dir."""
    config = {"output_dir": "out", **harness.doc_block(config_marker, CONFIGS).config()}
    config = as_run_here(config, tmp_path)
    (command,) = harness.doc_block("readme-example-command", SHELL).commands()
    assert command[-1] == "config.json"
    output = succeeded(run_command(command, tmp_path, {"config.json": config}))
    # the example's summary: the config's schedule and decay were the run's
    assert f"schedule {config['lr_scheduler_type']}," in output, output[-3000:]
    assert f"layerwise_decay={config.get('layerwise_decay', 0.8):g}," in output
    assert f"saved to {config['output_dir']}" in output
    assert (tmp_path / config["output_dir"] / "model.safetensors.index.json").is_file()


def test_example_commands_of_the_trainer_page_run_and_the_resume_ends_with_the_uninterrupted_weights(tmp_path):
    """docs/paddleformers.rst's four example commands, as written but for run length: the saving run
    stops at step 4 and saves every 2 steps (the page's 50), and the resume starts from checkpoint-2;
    its final model is the saving run's, bit for bit."""
    quick, from_file, saving, resuming = harness.doc_block("paddleformers-example-commands", SHELL).commands()
    config = as_run_here(harness.doc_block("paddleformers-example-config", CONFIGS).config(), tmp_path)
    assert "--short" in quick
    out = quick[quick.index("--output_dir") + 1]  # the page's output folder
    succeeded(run_command(quick, tmp_path / "quick", {}))
    assert (tmp_path / "quick" / out / "model.safetensors.index.json").is_file()
    output = succeeded(run_command(from_file, tmp_path / "from_file", {"config.json": config}))
    assert "layerwise_decay=0.7," in output, output[-3000:]

    def shortened(command: List[str]) -> List[str]:
        words = ["2" if word == "50" else word.replace("checkpoint-50", "checkpoint-2") for word in command]
        return words + ["--max_steps", "4"]

    assert "50" in saving and f"{out}/checkpoint-50" in resuming
    work_dir = tmp_path / "saving"
    succeeded(run_command(shortened(saving), work_dir, {}))
    uninterrupted = weights(work_dir / out)
    output = succeeded(run_command(shortened(resuming), work_dir, {}))
    assert "Continuing training from global step 2" in output, output[-3000:]
    resumed = weights(work_dir / out)
    assert sorted(resumed) == sorted(uninterrupted)
    for name, value in uninterrupted.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)


def test_the_trainer_page_script_runs_as_written_on_its_config(tmp_path):
    """docs/paddleformers.rst "Switching a PaddleFormers script": its two blocks (the second continues the
    first), saved as train.py in one file, run as ``python train.py config.json`` with the page's JSON
    config (at most MAX_STEPS steps) beside the model tiny-llama writes: it trains at the config's layer
    decay and prints an evaluation of the trained and the averaged weights."""
    chain = harness.doc_chain("paddleformers-trainer")
    assert [block.marker for block in chain] == ["paddleformers-script-start", "paddleformers-trainer"]
    (tmp_path / "train.py").write_text("\n\n".join(block.code for block in chain))
    in_a_user_folder(tmp_path, [])
    config = as_run_here(harness.doc_block("paddleformers-example-config", CONFIGS).config(), tmp_path)
    output = succeeded(run_command(["python", "train.py", "config.json"], tmp_path, {"config.json": config}))
    assert f"paddle_llrd: layerwise_decay={config['layerwise_decay']} over L={N_LAYERS} blocks" in output, output[-3000:]
    assert "EMAHorizonWarning" not in output
    evaluation = next(line for line in reversed(output.splitlines()) if line.startswith("{'eval_loss'"))
    metrics = {key: float(value) for key, value in re.findall(r"'(eval_\w+)': ([0-9.e+-]+)", evaluation)}
    assert np.isfinite(metrics["eval_loss"]) and np.isfinite(metrics["eval_ema_loss"]), evaluation


def test_the_cli_page_and_the_trainer_page_run_in_one_folder_without_touching_each_others_outputs(tmp_path):
    """docs/paddleformers_cli.rst "Try it" and then docs/paddleformers.rst's script on its config, in one
    folder as a reader runs them: each writes its own output folder, the CLI's is left as it was. Pointed
    at the CLI's folder (another run's checkpoints), the script stops before it trains, in one line naming
    each setting that differs and the ways on (exit status 1, no traceback), and changes nothing there."""
    minimal = harness.doc_block("cli-minimal", CONFIGS).config()
    make_model, train = harness.doc_block("cli-try", SHELL).commands()
    succeeded(run_command(make_model, tmp_path, {}))
    succeeded(run_command(train, tmp_path, {"minimal.yaml": minimal}))
    cli_output = tmp_path / minimal["output_dir"]
    before = file_hashes(cli_output)

    (tmp_path / "train.py").write_text("\n\n".join(block.code for block in harness.doc_chain("paddleformers-trainer")))
    config = as_run_here(harness.doc_block("paddleformers-example-config", CONFIGS).config(), tmp_path)
    assert (tmp_path / config["output_dir"]).resolve() != cli_output.resolve()
    output = succeeded(run_command(["python", "train.py", "config.json"], tmp_path, {"config.json": config}))
    assert "{'eval_loss'" in output and (tmp_path / config["output_dir"]).is_dir()
    assert file_hashes(cli_output) == before

    refused = run_command(["python", "train.py", "config.json", "--output_dir", minimal["output_dir"]], tmp_path, {})
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    line = refused.stderr.splitlines()[-1]
    assert line.startswith(f"cannot resume {os.path.join(minimal['output_dir'], 'checkpoint-4')}: its run had other "
                           "paddle_llrd settings: "), line
    for difference in ("layerwise_decay 0.5 there, 0.85 here", 'layer_map "auto" there, "llama" here',
                       "ema_decay 0.0 there, 0.999 here", "weight_decay_end unset there, 0.1 here"):
        assert difference in line, (difference, line)
    assert "fresh output_dir" in line and "resume_with_new_settings=true" in line
    assert file_hashes(cli_output) == before
