"""Every YAML and JSON config of README.md, README_cn.md and docs/*.rst that
PaddleFormers runs, with the page's own commands, as a user runs them: each
command in its own process and its own fresh working directory, the config
written there under the name the command gives it (``sft.yaml``,
``config.json``), as the page writes it but for the substitutions a user
makes: the model folder and the data files (a tiny local LLaMA and jsonl data,
cli_workspace.py) and a run length of at most ``MAX_STEPS`` steps. Nothing is
added: no ``do_train``, ``device``, ``_attn_implementation`` or
``compute_type``; this machine has no CUDA, so the run shows what
``python -m paddle_llrd train`` chooses there.

The blocks are found by their ``user-path`` markers (tests/user_paths/harness.py);
tests/user_paths/test_shell_blocks.py fails for a marker no test runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import yaml
from cli_workspace import build_workspace
from test_cli import DECAY, LEARNING_RATE, N_LAYERS, check_first_step_ratios, weights

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "user_paths"))
import harness  # noqa: E402

MAX_STEPS = 2
CONFIGS = harness.CONFIG_LANGUAGES
SHELL = harness.SHELL_LANGUAGES
#: The markers this file runs (tests/user_paths/test_shell_blocks.py checks every marker is run somewhere).
MARKERS = {
    "readme-cli-config", "readme-cli-commands", "cli-config", "cli-commands", "cli-lora", "cli-nproc",
    "cli-minimal", "readme-example-config", "readme-example-command", "paddleformers-example-config",
    "schedules-warmup-init-config", "paddleformers-example-commands", "schedules-wsd-hugging-face-config",
}
#: What the command chooses on this CPU-only machine for a key the config leaves out, one line each.
CHOSEN_ON_CPU = {
    "do_train": "do_train: True (paddleformers-cli: False)",
    "device": "device: 'cpu' (paddleformers-cli: 'gpu') because this Paddle sees no CUDA device",
    "_attn_implementation": "_attn_implementation: 'eager' (paddleformers-cli: 'flashmask')",
    "compute_type": "compute_type: 'float32' (paddleformers-cli: 'bf16')",
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("doc-configs"), N_LAYERS)


def as_run_here(config: dict, workspace: Path) -> dict:
    """The page's config with the user's substitutions: model folder, data files, at most MAX_STEPS steps."""
    config = dict(config)
    if "model_name_or_path" in config:
        config["model_name_or_path"] = str(workspace / "model")
    for key in ("train_dataset_path", "eval_dataset_path"):
        if key in config:
            config[key] = str(workspace / "train.jsonl")
    # the page's warmup kept (a schedule refuses a warmup longer than training), the rest cut short
    run_length = MAX_STEPS + 2 * int(config.get("warmup_steps", 0))
    if config.get("max_steps", run_length + 1) > run_length:
        config["max_steps"] = run_length
    return config


def run_command(command: List[str], work_dir: Path, files: Dict[str, dict]) -> subprocess.CompletedProcess:
    """One documented command in ``work_dir``, with ``files`` (name: config) written there first;
    ``python`` (or ``.venv/bin/python``) is this virtualenv's, ``examples/...`` this checkout's."""
    work_dir.mkdir(parents=True, exist_ok=True)
    for name, config in files.items():
        text = json.dumps(config) if name.endswith(".json") else yaml.safe_dump(config)
        (work_dir / name).write_text(text)
    words = [sys.executable if word in ("python", ".venv/bin/python") else word for word in command]
    words = [str(REPO_ROOT / word) if word.startswith("examples/") else word for word in words]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(words, cwd=work_dir, env=env, capture_output=True, text=True, timeout=600)


def succeeded(result: subprocess.CompletedProcess) -> str:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    return output


def trained_steps(output_dir: Path) -> int:
    return json.loads((output_dir / "trainer_state.json").read_text())["global_step"]


def file_hashes(directory: Path) -> Dict[str, str]:
    return {str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def run_cli_page(workspace: Path, tmp_path: Path, config_marker: str, commands_marker: str, **extra) -> List[str]:
    config = {**harness.doc_block(config_marker, CONFIGS).config(), **extra}
    config = as_run_here(config, workspace)
    outputs = []
    for index, command in enumerate(harness.doc_block(commands_marker, SHELL).commands()):
        work_dir = tmp_path / f"{commands_marker}-{index}"
        output = succeeded(run_command(command, work_dir, {"sft.yaml": config}))
        for key, line in CHOSEN_ON_CPU.items():
            assert (line in output) == (key not in config), (command, line, output[-3000:])
        output_dir = work_dir / config["output_dir"]
        assert trained_steps(output_dir) == config["max_steps"], command
        assert (output_dir / "ema").is_dir() == ("ema_decay" in config)
        outputs.append(output)
    return outputs


def test_readme_config_trains_on_a_cpu_with_each_readme_command(workspace, tmp_path):
    """README's LoRA config has no do_train, device, attention or compute_type: each of its two commands
    (an override; two CPU ranks) trains MAX_STEPS steps, saving the adapters and the EMA."""
    outputs = run_cli_page(workspace, tmp_path, "readme-cli-config", "readme-cli-commands")
    assert "launching 2 ranks" in outputs[1]


def test_cli_page_config_trains_with_the_pages_commands_and_a_rerun_changes_no_file(workspace, tmp_path):
    """The page's full fine-tuning config trains with each of its commands (one process, an override, two
    CPU ranks); its first command run again leaves the final model and the EMA's bytes as they were."""
    run_cli_page(workspace, tmp_path, "cli-config", "cli-commands")
    run_cli_page(workspace, tmp_path, "cli-config", "cli-nproc")
    config = as_run_here(harness.doc_block("cli-config", CONFIGS).config(), workspace)
    output_dir = tmp_path / "cli-commands-0" / config["output_dir"]
    assert (output_dir / "ema").is_dir() and not list(output_dir.glob("checkpoint-*"))  # save_steps 200
    check_rerun_changes_no_file(harness.doc_block("cli-commands", SHELL).commands()[0], tmp_path / "cli-commands-0",
                                output_dir, config["max_steps"])


def test_cli_page_lora_keys_on_its_config(workspace, tmp_path):
    """The LoRA block lists the keys that change the page's config: run as that config with them."""
    lora = harness.doc_block("cli-lora", CONFIGS).config()
    run_cli_page(workspace, tmp_path, "cli-config", "cli-commands", **lora)


def test_minimal_cpu_run_trains_at_layer_ratios_and_a_rerun_changes_no_file(workspace, tmp_path):
    """The page's minimal CPU config (max_steps 4, a checkpoint each step) with its first command: each
    weight's first step is lr * 0.5 ** (L - i); run again, it says the run is done and changes no file."""
    config = as_run_here(harness.doc_block("cli-minimal", CONFIGS).config(), workspace)
    assert (config["layerwise_decay"], config["learning_rate"]) == (DECAY, LEARNING_RATE)
    command = harness.doc_block("cli-commands", SHELL).commands()[0]
    work_dir = tmp_path / "minimal"
    succeeded(run_command(command, work_dir, {"sft.yaml": config}))
    output_dir = work_dir / config["output_dir"]
    check_first_step_ratios(weights(workspace / "model"), weights(output_dir / "checkpoint-1"))
    before = file_hashes(output_dir)
    assert f"checkpoint-{MAX_STEPS}/trainer_state.bin" in file_hashes(output_dir)  # the final step's checkpoint
    check_rerun_changes_no_file(command, work_dir, output_dir, MAX_STEPS)
    # cut after the final checkpoint, before the final model was saved: still nothing to do
    (output_dir / "trainer_state.json").unlink()
    check_rerun_changes_no_file(command, work_dir, output_dir, MAX_STEPS)


def check_rerun_changes_no_file(command: List[str], work_dir: Path, output_dir: Path, final_step: int) -> None:
    """The same command again in the same directory: one line says so, every file's bytes are kept."""
    before = file_hashes(output_dir)
    output = succeeded(run_command(command, work_dir, {}))
    assert f"output_dir already holds the final checkpoint (step {final_step}); nothing to do" in output, output[-3000:]
    assert "resuming" not in output.lower() and "Traceback" not in output
    assert file_hashes(output_dir) == before


def test_interrupted_run_resumes_to_the_uninterrupted_weights(workspace, tmp_path):
    """The run cut after step 1 (only checkpoint-1 left): the same command resumes and ends with the
    uninterrupted run's model, bit for bit (the EMA's resume: test_cli.py)."""
    config = as_run_here(harness.doc_block("cli-minimal", CONFIGS).config(), workspace)
    command = harness.doc_block("cli-commands", SHELL).commands()[0]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    succeeded(run_command(command, whole, {"sft.yaml": config}))
    (cut / "out").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(whole / "out" / "checkpoint-1"), str(cut / "out")], check=True)
    output = succeeded(run_command(command, cut, {"sft.yaml": config}))
    assert "nothing to do" not in output
    assert "Continuing training from global step 1" in output, output[-3000:]
    got, expected = weights(cut / "out"), weights(whole / "out")
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize("key, value, expected", [
    ("device", "gpu", "set device: cpu"),
    ("_attn_implementation", "flashmask", "set _attn_implementation: eager"),
])
def test_a_key_that_cannot_run_on_this_cpu_is_refused_naming_the_key(workspace, tmp_path, key, value, expected):
    config = {**as_run_here(harness.doc_block("cli-minimal", CONFIGS).config(), workspace), key: value}
    if key == "_attn_implementation":
        config["device"] = "cpu"
    result = run_command(["python", "-m", "paddle_llrd", "train", "sft.yaml"], tmp_path, {"sft.yaml": config})
    output = result.stdout + result.stderr
    # a refusal is the command line's one line (exit status 2), not a traceback
    assert result.returncode == 2 and expected in result.stderr.strip().splitlines()[-1], output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert not (tmp_path / config["output_dir"]).exists()


def test_do_train_false_is_kept(workspace, tmp_path):
    config = {**as_run_here(harness.doc_block("cli-minimal", CONFIGS).config(), workspace), "do_train": False}
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
    assert "saved to out" in output and (tmp_path / "out" / "model.safetensors.index.json").is_file()


def test_example_commands_of_the_trainer_page_run_and_the_resume_ends_with_the_uninterrupted_weights(tmp_path):
    """docs/paddleformers.rst's four example commands, as written but for run length: the saving run
    stops at step 4 and saves every 2 steps (the page's 50), and the resume starts from checkpoint-2;
    its final model is the saving run's, bit for bit."""
    quick, from_file, saving, resuming = harness.doc_block("paddleformers-example-commands", SHELL).commands()
    config = as_run_here(harness.doc_block("paddleformers-example-config", CONFIGS).config(), tmp_path)
    assert "--short" in quick
    succeeded(run_command(quick, tmp_path / "quick", {}))
    assert (tmp_path / "quick" / "out" / "model.safetensors.index.json").is_file()
    output = succeeded(run_command(from_file, tmp_path / "from_file", {"config.json": config}))
    assert "layerwise_decay=0.7," in output, output[-3000:]

    def shortened(command: List[str]) -> List[str]:
        words = ["2" if word == "50" else word.replace("checkpoint-50", "checkpoint-2") for word in command]
        return words + ["--max_steps", "4"]

    assert "50" in saving and "out/checkpoint-50" in resuming
    work_dir = tmp_path / "saving"
    succeeded(run_command(shortened(saving), work_dir, {}))
    uninterrupted = weights(work_dir / "out")
    output = succeeded(run_command(shortened(resuming), work_dir, {}))
    assert "Continuing training from global step 2" in output, output[-3000:]
    resumed = weights(work_dir / "out")
    assert sorted(resumed) == sorted(uninterrupted)
    for name, value in uninterrupted.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)
