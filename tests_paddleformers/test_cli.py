"""``python -m paddle_llrd train CONFIG.yaml`` runs PaddleFormers' own CLI
workflow (SFT with ``fine_tuning: full`` and ``lora``) through LLRDTrainer, as
a user runs it: a YAML file in the CLI's format plus paddle_llrd's fields, in a
fresh process, on a tiny local LLaMA and jsonl data generated here.

The layer ratios are read back from what the run did: Adam's first step moves
every weight element by ``lr * ratio * |g| / (|g| + eps')``, so after one step
the typical ``|delta w|`` of a parameter is ``lr * ratio`` to a few 1e-4, and
no element moves by more; the ratios are ``d ** (L - i)`` written out below.
With ``report_to`` left at PaddleFormers' default the run also writes a
VisualDL log; its ``learning_rate/<group>`` scalars are read back with
VisualDL's LogReader and checked against the WSD formula times the ratios.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_workspace import build_workspace
from safetensors.numpy import load_file
from trainer_checks import file_hashes  # tests_shared/, on sys.path by conftest.py
from trainer_suite import group_ratios, visualdl_scalars

from paddle_llrd.cli.train_console import LOG_NAME

REPO_ROOT = Path(__file__).resolve().parents[1]
N_LAYERS = 3
DECAY = 0.5
LEARNING_RATE = 1e-3


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A saved tiny LLaMA (untied head) with a word-level tokenizer, and erniekit SFT and DPO data."""
    return build_workspace(tmp_path_factory.mktemp("cli"), N_LAYERS)


def write_config(workspace: Path, name: str, **entries) -> Path:
    """A paddleformers-cli SFT config as its docs write one (CPU settings), plus ``entries``."""
    config = {
        "stage": "SFT",
        "fine_tuning": "full",
        "model_name_or_path": str(workspace / "model"),
        "_attn_implementation": "eager",
        "train_dataset_type": "erniekit",
        "train_dataset_path": str(workspace / "model" / "train.jsonl"),
        "train_dataset_prob": "1.0",
        "eval_dataset_type": "erniekit",
        "eval_dataset_path": str(workspace / "model" / "train.jsonl"),
        "eval_dataset_prob": "1.0",
        "max_seq_len": 32,
        "do_train": True,
        "per_device_train_batch_size": 2,
        "logging_steps": 1,
        "learning_rate": LEARNING_RATE,
        "seed": 23,
        "device": "cpu",
        "compute_type": "float32",
        "output_dir": str(workspace / name),
        # paddle_llrd's fields
        "layerwise_decay": DECAY,
        "lr_scheduler_type": "warmup_stable_decay",
        "lr_scheduler_kwargs": {"decay_style": "cosine"},
        **entries,
    }
    path = workspace / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def train(config: Path, *overrides: str, env: dict | None = None, output_dir: Path | None = None) -> str:
    """``python -m paddle_llrd train config [overrides]`` in a fresh process; its console output, then
    PaddleFormers' (the run's log, ``train.log`` in ``output_dir``, the config's unless given)."""
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-m", "paddle_llrd", "train", str(config), *overrides],
                            cwd=config.parent, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    log = (output_dir or Path(yaml.safe_load(config.read_text())["output_dir"])) / LOG_NAME
    return output + (log.read_text() if log.is_file() else "")


def expected_ratio(name: str) -> float:
    """LLaMA under layer decay d with L blocks: embeddings d**(L+1), block i d**(L-i), final norm and head 1."""
    if name.startswith("model.embed_tokens."):
        return DECAY ** (N_LAYERS + 1)
    if name.startswith("model.layers."):
        return DECAY ** (N_LAYERS - int(name.split(".")[2]))
    assert name in ("model.norm.weight", "lm_head.weight"), name
    return 1.0


def weights(directory: Path, prefix: str = "model") -> dict:
    """Every weight in the directory's ``<prefix>-*.safetensors`` shards, as float64."""
    files = sorted(directory.glob(f"{prefix}-*.safetensors"))
    assert files, sorted(directory.iterdir())
    return {name: value.astype(np.float64) for file in files for name, value in load_file(file).items()}


def check_step(name: str, step: np.ndarray, new: np.ndarray, target: float) -> None:
    """No element moved more than ``target`` (plus the float32 rounding of the new weight), the typical one by it."""
    rounding = np.spacing(np.abs(new).astype(np.float32)).astype(np.float64)
    assert np.all(step <= target * (1 + 1e-4) + rounding), (name, step.max(), target)
    moved = step[step > 0]  # embedding rows of tokens not in the batch have no gradient
    assert moved.size, f"{name} did not move"
    assert np.median(moved) == pytest.approx(target, rel=2e-3), (name, np.median(moved), target)


def check_first_step_ratios(before: dict, after: dict) -> None:
    """Each parameter's first-step |delta w| against lr * ratio."""
    seen = set()
    for name, new in after.items():
        check_step(name, np.abs(new - before[name]), new, LEARNING_RATE * expected_ratio(name))
        seen.add(expected_ratio(name))
    assert len(seen) == N_LAYERS + 2  # embeddings, each block, norm/head: every ratio was exercised


def wsd_cosine_factor(step: int, total: int, decay_steps: int) -> float:
    """WSD without warmup: 1 before the last ``decay_steps`` steps, then the half cosine ``(1 + cos(pi r)) / 2``."""
    if step < total - decay_steps:
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * (step - (total - decay_steps)) / decay_steps))


def check_logged_group_lrs(output_dir: Path, logged_steps: list, total: int, decay_steps: int) -> None:
    """Each group's ``learning_rate/<group>`` in the run's VisualDL log, at each logged global step g, is
    the lr of the step the framework's ``learning_rate`` describes (schedule step g, the coming one) times
    the group's ratio."""
    (logging_dir,) = (output_dir / "runs").iterdir()  # PaddleFormers' default logging_dir
    scalars = visualdl_scalars(logging_dir)
    for group, ratio in group_ratios(DECAY, N_LAYERS).items():
        got = scalars[f"train/learning_rate/{group}"]
        assert [step for step, _ in got] == logged_steps, (group, got)
        expected = [LEARNING_RATE * wsd_cosine_factor(step, total, decay_steps) * ratio for step in logged_steps]
        assert [value for _, value in got] == pytest.approx(expected, rel=1e-6), group


def test_sft_full_trains_with_layer_ratios_and_resumes_to_the_same_weights(workspace):
    steps, decay_steps = 4, 3  # schedule factors 1, 1, 0.75, 0.25
    config = write_config(
        workspace, "full", max_steps=steps, save_steps=1,
        lr_scheduler_kwargs={"decay_style": "cosine", "num_decay_steps": decay_steps},
        weight_decay=0.0, weight_decay_end=0.05, weight_decay_incr_style="linear", ema_decay=0.9,
    )
    output = train(config)
    out = workspace / "full"
    # float32 has no AMP: the defaults that differ from paddleformers-cli's are announced
    assert "amp_master_grad: False (paddleformers-cli: True)" in output, output[-3000:]
    assert "save_checkpoint_format: 'unified_checkpoint' (paddleformers-cli: 'flex_checkpoint')" in output
    # the weight-decay ramp starts at 0, so step 1 is Adam's step alone
    check_first_step_ratios(weights(workspace / "model"), weights(out / "checkpoint-1"))
    check_logged_group_lrs(out, [1, 2, 3, 4], steps, decay_steps)
    assert (out / "checkpoint-2" / "paddle_llrd_state.pdparams").is_file()  # EMA and weight-decay position
    final, final_ema = weights(out), weights(out / "ema")

    # The CLI's workflow resumes from the last checkpoint in output_dir by itself.
    resumed = workspace / "resumed"
    resumed.mkdir()
    shutil.copytree(out / "checkpoint-2", resumed / "checkpoint-2")
    output = train(config, f"output_dir={resumed}", output_dir=resumed)
    assert "Continuing training from global step 2" in output, output[-3000:]
    check_logged_group_lrs(resumed, [3, 4], steps, decay_steps)  # the schedule resumed at its step
    for name, value in weights(resumed).items():
        np.testing.assert_array_equal(value, final[name], err_msg=name)
    for name, value in weights(resumed / "ema").items():
        np.testing.assert_array_equal(value, final_ema[name], err_msg=f"ema {name}")


def test_sft_lora_gives_each_blocks_adapters_their_ratio(workspace):
    config = write_config(workspace, "lora", fine_tuning="lora", lora_rank=4, max_steps=1, save_steps=1)
    train(config)
    adapters = weights(workspace / "lora" / "checkpoint-1", prefix="peft_model")
    # lora_B starts at 0 and is the only adapter half with a gradient at step 1 (lora_A's is B^T ... = 0)
    lora_b = {name: value for name, value in adapters.items() if name.endswith(".lora_B")}
    assert len(lora_b) == 7 * N_LAYERS, sorted(adapters)  # q, k, v, o, gate, up, down in each block
    for name, value in lora_b.items():
        check_step(name, np.abs(value), value, LEARNING_RATE * DECAY ** (N_LAYERS - int(name.split(".")[2])))


def test_dpo_on_two_cpu_ranks_trains_at_layer_ratios(workspace):
    """DPO does not start in one CPU process, PaddleFormers' own CLI neither (its reference model is wrapped
    with fleet.distributed_model: AttributeError: 'Fleet' object has no attribute '_user_defined_strategy');
    started on two gloo ranks the way paddleformers-cli starts ranks, it trains."""
    config = write_config(workspace, "dpo", stage="DPO", train_dataset_path=str(workspace / "model" / "dpo.jsonl"),
                          eval_dataset_path=str(workspace / "model" / "dpo.jsonl"), max_steps=1, save_steps=1)
    output = train(config, "--nproc_per_node", "2")
    assert "launching 2 ranks" in output, output[-3000:]
    # each rank's first step: the DPO loss of two equal models still has a gradient (chosen minus rejected)
    check_first_step_ratios(weights(workspace / "model"), weights(workspace / "dpo" / "checkpoint-1"))


def ema_reference(initial: dict, steps: list, decays: list) -> dict:
    """The float64 average, written out: s <- d_t * s + (1 - d_t) * w_t over the weights after each step."""
    average = dict(initial)
    for weights_after, decay in zip(steps, decays):
        average = {name: decay * value + (1.0 - decay) * weights_after[name] for name, value in average.items()}
    return average


@pytest.mark.parametrize("warmup", [False, True])
def test_an_ema_longer_than_the_run_warns_naming_ema_decay_unless_it_warms_up(workspace, warmup):
    """docs/ema.rst: ema_decay 0.999 over 20 steps. Without warm-up the horizon 1 / (1 - 0.999) = 1000
    updates is longer than the run: an EMAHorizonWarning naming ema_decay, and an average that keeps
    0.999 ** 20 = 0.98 of the initial weights. With ema_warmup (timm's rule, update t from 0 uses
    min(0.999, 1 - (1 + t) ** (-2/3))) no warning, and an average of the run's recent weights."""
    steps, decay = 20, 0.999
    name = f"ema-{'warmup' if warmup else 'plain'}"
    config = write_config(workspace, name, max_steps=steps, save_steps=1, ema_decay=decay, ema_warmup=warmup)
    output = train(config)
    warned = [line for line in output.splitlines() if line.startswith("warning (EMAHorizonWarning): ema_decay=0.999")]
    assert len(warned) == (0 if warmup else 1), output[-3000:]
    if not warmup:
        assert "averages over about 1000 updates" in warned[0] and f"the {steps} steps this run plans" in warned[0]
    out = workspace / name
    initial = weights(workspace / "model")
    after = [weights(out / f"checkpoint-{k}") for k in range(1, steps + 1)]
    decays = [min(decay, 1.0 - (1.0 + t) ** (-2.0 / 3.0)) if warmup else decay for t in range(steps)]
    expected, saved = ema_reference(initial, after, decays), weights(out / "ema")
    for param, value in saved.items():
        np.testing.assert_allclose(value, expected[param], rtol=1e-5, atol=1e-7, err_msg=param)
    final = after[-1]
    distance = {key: sum(float(np.sum((a[n] - b[n]) ** 2)) for n in final) ** 0.5
                for key, (a, b) in {"to_initial": (saved, initial), "to_final": (saved, final)}.items()}
    initial_share = float(np.prod(decays))  # what is left of the initial weights in the average
    if warmup:  # the first update copied the weights (decay 0): the average moved with the model
        assert initial_share == 0.0 and distance["to_final"] < 0.5 * distance["to_initial"], distance
    else:  # 0.98 of the average is still the initial weights
        assert initial_share == pytest.approx(0.999 ** 20) and distance["to_initial"] < 0.1 * distance["to_final"], distance


def test_a_resumed_run_continues_the_ema_warm_up_where_it_stopped(workspace):
    """docs/ema.rst "Checkpoints": the warm-up's step (the EMA's update count) is in each checkpoint, so a run
    resumed from step 2 takes the decays of steps 3 and 4 (not those of a fresh average) and ends with the
    uninterrupted run's EMA, bit for bit."""
    config = write_config(workspace, "warm", max_steps=4, save_steps=1, ema_decay=0.99, ema_warmup=True)
    train(config)
    resumed = workspace / "warm-resumed"
    resumed.mkdir()
    shutil.copytree(workspace / "warm" / "checkpoint-2", resumed / "checkpoint-2")
    output = train(config, f"output_dir={resumed}", output_dir=resumed)
    assert "resumed at step 2" in output, output[-3000:]
    expected = weights(workspace / "warm" / "ema")
    for name, value in weights(resumed / "ema").items():
        np.testing.assert_array_equal(value, expected[name], err_msg=f"ema {name}")


def refused(config: Path, *overrides: str) -> str:
    """``python -m paddle_llrd train`` that must stop: its one line (exit status 2, no traceback)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-m", "paddle_llrd", "train", str(config), *overrides],
                            cwd=config.parent, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2 and "Traceback" not in result.stderr, (result.stdout + result.stderr)[-3000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("python -m paddle_llrd train: error: ")]
    return line[len("python -m paddle_llrd train: error: "):]


def test_a_resume_the_command_cannot_serve_stops_in_one_line_and_changes_nothing(workspace):
    """A run of 4 steps (checkpoints 2 and 4) then: a longer run with another layerwise_decay (it would
    resume checkpoint-4 with other settings), resume_from_checkpoint naming a truncated checkpoint, and an
    output_dir whose checkpoints are all truncated (which PaddleFormers would resume): each stops in one
    line naming the checkpoint, what is wrong and what to do, and no file changes."""
    config = write_config(workspace, "refusals", max_steps=4, save_steps=2, ema_decay=0.5)
    train(config)
    out = workspace / "refusals"
    before = file_hashes(out)
    line = refused(config, "max_steps=6", "layerwise_decay=0.9")
    assert line.startswith(f"cannot resume {out / 'checkpoint-4'}: its run had other paddle_llrd settings: "), line
    assert "layerwise_decay 0.5 there, 0.9 here" in line and "resume_with_new_settings=true" in line, line
    assert file_hashes(out, leave_out=("runs", "train.log")) == {
        name: digest for name, digest in before.items() if not name.startswith(("runs", "train.log"))}

    for checkpoint in ("checkpoint-2", "checkpoint-4"):
        (out / checkpoint / "scheduler.pdparams").write_bytes(b"")
    before = file_hashes(out)  # a longer run (max_steps=6) is not finished: it looks for a checkpoint
    line = refused(config, "max_steps=6", f"resume_from_checkpoint={out / 'checkpoint-4'}")
    assert line == (f"resume_from_checkpoint '{out / 'checkpoint-4'}' cannot be resumed: scheduler.pdparams has 0 "
                    "bytes where the save wrote 50; name a complete checkpoint-N folder, or leave "
                    "resume_from_checkpoint out to resume the newest one"), line
    assert file_hashes(out) == before
    line = refused(config, "max_steps=6")
    assert line.startswith(f"output_dir '{out}' holds no complete checkpoint to resume from ({out / 'checkpoint-4'}: "
                           "incomplete, scheduler.pdparams has 0 bytes where the save wrote 50; "), line
    assert "PaddleFormers would resume the incomplete one" in line and "overwrite_output_dir=true" in line
    assert file_hashes(out) == before
