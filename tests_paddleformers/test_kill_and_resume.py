"""``kill -9`` at chosen moments of the documented runs, then the same command again, as the docs say.

The runs are docs/paddleformers.rst's script (its two blocks saved as
``train.py``, run as ``python train.py config.json`` with the page's config
and the documented flags ``--max_steps 6 --save_steps 2``) and
docs/paddleformers_cli.rst's full config with ``python -m paddle_llrd train
sft.yaml max_steps=24 save_steps=8`` (the page's warm-up of 20 steps kept),
each in a folder of its own beside the model ``python -m paddle_llrd
tiny-llama`` writes. The moments are chosen deterministically:
``kill_hook/sitecustomize.py``, first on ``PYTHONPATH``, sends the process
SIGKILL at a named audit event (a file opened for writing, a rename), so the
killed run is the documented command itself. After the kill the same command
runs again; every case must end with the uninterrupted run's weights and EMA,
bit for bit (the script: its last checkpoint and the evaluation it prints;
the command: the final model and ``ema/``), and a folder the resume skipped
must be named in one line.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import paddle
import pytest
import yaml
from test_cli import weights
from test_doc_configs import CONFIGS, SHELL, TINY_LLAMA, run_command, succeeded, written_by
from trainer_checks import file_hashes

from paddle_llrd.integrations.checkpoints import MANIFEST_FILE
from paddle_llrd.integrations.paddleformers import get_last_checkpoint
from paddle_llrd.integrations.run_state import STATE_FILE

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "user_paths"))
import harness  # noqa: E402

KILL_HOOK = Path(__file__).resolve().parent / "kill_hook"
SCRIPT_FLAGS = ["--max_steps", "6", "--save_steps", "2"]
CLI_OVERRIDES = ["max_steps=24", "save_steps=8"]


@pytest.fixture(scope="module")
def model_folder() -> Path:
    """The folder the page's tiny-llama command leaves: ./tiny-llama, copied into each run's folder."""
    return written_by(TINY_LLAMA) / "tiny-llama"


def user_folder(path: Path, model_folder: Path) -> Path:
    shutil.copytree(model_folder, path / "tiny-llama")
    return path


def killed(command: List[str], work_dir: Path, at: str) -> subprocess.CompletedProcess:
    """``command`` in ``work_dir``, killed with SIGKILL at the audit event ``at`` (see kill_hook)."""
    env = {**os.environ, "LLRD_KILL_AT": at,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(KILL_HOOK), str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    words = [sys.executable if word in ("python", ".venv-paddleformers/bin/python") else word for word in command]
    done = subprocess.run(words, cwd=work_dir, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, f"not killed at {at!r}: {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}"
    return done


def assert_same_weights(got: Dict[str, np.ndarray], expected: Dict[str, np.ndarray], what: str) -> None:
    assert sorted(got) == sorted(expected), what
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=f"{what} {name}")


# --- the Trainer page's script -------------------------------------------------------------------
def script_folder(path: Path, model_folder: Path) -> Path:
    """The page's script as train.py and its config as config.json, beside ./tiny-llama."""
    user_folder(path, model_folder)
    chain = harness.doc_chain("paddleformers-trainer")
    (path / "train.py").write_text("\n\n".join(block.code for block in chain))
    config = harness.doc_block("paddleformers-example-config", CONFIGS).config()
    (path / "config.json").write_text(json.dumps(config))
    return path


SCRIPT = ["python", "train.py", "config.json", *SCRIPT_FLAGS]


def script_output_dir(work_dir: Path) -> Path:
    return work_dir / harness.doc_block("paddleformers-example-config", CONFIGS).config()["output_dir"]


def evaluation(output: str) -> Dict[str, float]:
    """The losses of the evaluation the script prints last."""
    line = next(line for line in reversed(output.splitlines()) if line.startswith("{'eval_loss'"))
    return {key: float(value) for key, value in re.findall(r"'(eval_(?:ema_)?loss)': ([0-9.e+-]+)", line)}


def checkpoint_state(checkpoint: Path) -> Dict[str, Dict[str, np.ndarray]]:
    """A checkpoint's weights and the EMA its paddle_llrd state holds."""
    state = paddle.load(str(checkpoint / STATE_FILE))
    ema = {name: value.numpy().astype(np.float64) for name, value in state["ema"]["shadow"].items()}
    return {"weights": weights(checkpoint), "ema": ema}


@pytest.fixture(scope="module")
def script_baseline(tmp_path_factory, model_folder):
    """The uninterrupted run: its last checkpoint and the evaluation it prints."""
    work_dir = script_folder(tmp_path_factory.mktemp("script-whole"), model_folder)
    output = succeeded(run_command(SCRIPT, work_dir, {}))
    last = script_output_dir(work_dir) / "checkpoint-6"
    return {"checkpoint": checkpoint_state(last), "evaluation": evaluation(output), "folder": work_dir}


SCRIPT_MOMENTS = {
    # moment: (LLRD_KILL_AT, the staging folder the resume skips, or None)
    "inside a checkpoint's save, as the framework writes its optimizer":
        (r"open tmp-checkpoint-4/checkpoint-4/optimizer\.safetensors\.index\.json", "tmp-checkpoint-4"),
    "inside the last checkpoint's save, as paddle_llrd writes its state file":
        (r"open tmp-checkpoint-6/checkpoint-6/paddle_llrd_state\.pdparams", "tmp-checkpoint-6"),
    "as a complete checkpoint is renamed into place":
        (r"os.rename tmp-checkpoint-4/checkpoint-4$", "tmp-checkpoint-4"),
    # the checkpoint in place, its staging folder not yet removed; what follows (the end of training, the
    # final evaluation) writes only VisualDL's log, from a thread of its own, so no later moment is
    # chosen deterministically, and none leaves other files
    "after the last checkpoint, before the final evaluation":
        (r"os.rmdir tmp-checkpoint-6$", None),
}


@pytest.mark.parametrize("moment", sorted(SCRIPT_MOMENTS))
def test_the_trainer_page_script_killed_and_run_again_ends_as_the_uninterrupted_run(
        tmp_path, model_folder, script_baseline, moment):
    at, skipped = SCRIPT_MOMENTS[moment]
    work_dir = script_folder(tmp_path, model_folder)
    killed(SCRIPT, work_dir, at)
    output_dir = script_output_dir(work_dir)
    if skipped is not None:  # killed inside a save: no incomplete checkpoint-N, the staging folder left
        assert (output_dir / skipped).is_dir() and not (output_dir / skipped.replace("tmp-", "")).exists()
    before = file_hashes(output_dir, leave_out=("runs",))
    output = succeeded(run_command(SCRIPT, work_dir, {}))
    if skipped is not None:
        assert f"skipped {output_dir.relative_to(work_dir) / skipped}: a save that did not finish" in output
    else:  # the run was finished: nothing trained, nothing changed, said in one line
        assert "checkpoint-6 is at max_steps 6: the run is finished and trains no further" in output
        assert file_hashes(output_dir, leave_out=("runs",)) == before
    assert "Traceback" not in output
    resumed = checkpoint_state(output_dir / "checkpoint-6")
    for group in ("weights", "ema"):
        assert_same_weights(resumed[group], script_baseline["checkpoint"][group], group)
    assert evaluation(output) == script_baseline["evaluation"]


def test_the_trainer_page_script_skips_a_truncated_checkpoint_and_ends_as_the_uninterrupted_run(
        tmp_path, script_baseline):
    """Any one file of the newest checkpoint truncated: get_last_checkpoint, as the script calls it, takes
    the checkpoint before it with one line naming the file; run again on a copy of the finished run with
    its model shard cut, the script trains the last two steps again to the same weights and EMA."""
    source = script_output_dir(script_baseline["folder"])
    newest = sorted(path.name for path in (source / "checkpoint-6").iterdir())
    assert MANIFEST_FILE in newest and STATE_FILE in newest
    for name in newest:
        folder = tmp_path / "each" / name
        shutil.copytree(source, folder, ignore=shutil.ignore_patterns("runs"))
        path = folder / "checkpoint-6" / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        assert get_last_checkpoint(str(folder)) == str(folder / "checkpoint-4"), name

    work_dir = tmp_path / "run"
    shutil.copytree(script_baseline["folder"], work_dir, ignore=shutil.ignore_patterns("runs"))
    shard = next((script_output_dir(work_dir) / "checkpoint-6").glob("model-*.safetensors"))
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: size // 2])
    output = succeeded(run_command(SCRIPT, work_dir, {}))
    assert (f"skipped {script_output_dir(work_dir).relative_to(work_dir) / 'checkpoint-6'}: incomplete, "
            f"{shard.name} has {size // 2} bytes where the save wrote {size}") in output
    resumed = checkpoint_state(script_output_dir(work_dir) / "checkpoint-6")
    for group in ("weights", "ema"):
        assert_same_weights(resumed[group], script_baseline["checkpoint"][group], group)
    assert (script_output_dir(work_dir) / "replaced-checkpoint-6" / shard.name).stat().st_size == size // 2


# --- python -m paddle_llrd train -------------------------------------------------------------------
def cli_folder(path: Path, model_folder: Path) -> Path:
    user_folder(path, model_folder)
    (path / "sft.yaml").write_text(yaml.safe_dump(harness.doc_block("cli-config", CONFIGS).config()))
    return path


def cli_command() -> List[str]:
    """The page's first command, with the documented key=value overrides of the run's length."""
    command = harness.doc_block("cli-commands", SHELL).commands()[0]
    assert command[-1] == "sft.yaml", command
    return command + CLI_OVERRIDES


def cli_output_dir(work_dir: Path) -> Path:
    return work_dir / harness.doc_block("cli-config", CONFIGS).config()["output_dir"]


def final_weights(output_dir: Path) -> Dict[str, Dict[str, np.ndarray]]:
    return {"model": weights(output_dir), "ema": weights(output_dir / "ema")}


@pytest.fixture(scope="module")
def cli_baseline(tmp_path_factory, model_folder):
    work_dir = cli_folder(tmp_path_factory.mktemp("cli-whole"), model_folder)
    succeeded(run_command(cli_command(), work_dir, {}))
    return {"final": final_weights(cli_output_dir(work_dir)), "folder": work_dir}


CLI_MOMENTS = {
    # moment: (LLRD_KILL_AT, what the command run again says about it)
    "inside a checkpoint's save, as the framework writes its optimizer":
        (r"open tmp-checkpoint-16/checkpoint-16/optimizer\.safetensors\.index\.json",
         "skipped checkpoints/sft/tmp-checkpoint-16: a save that did not finish"),
    "during the final save, as the model is written":
        (r"open tmp-final-model/config\.json",
         "checkpoints/sft/checkpoint-24 is at the run's final step but the final model in ./checkpoints/sft is "
         "incomplete"),
    "during the final save, as ema/ is moved into place":
        (r"os.rename tmp-final-model/ema$",
         "checkpoints/sft/checkpoint-24 is at the run's final step but the final model in ./checkpoints/sft is "
         "incomplete"),
    "after the final save, as the workflow writes its trainer state":
        (r"open sft/trainer_state\.json", "already holds a run finished at step 24; nothing to do"),
}


@pytest.mark.parametrize("moment", sorted(CLI_MOMENTS))
def test_the_cli_killed_and_run_again_ends_as_the_uninterrupted_run(tmp_path, model_folder, cli_baseline, moment):
    at, said = CLI_MOMENTS[moment]
    work_dir = cli_folder(tmp_path, model_folder)
    killed(cli_command(), work_dir, at)
    output_dir = cli_output_dir(work_dir)
    before = file_hashes(output_dir)
    output = succeeded(run_command(cli_command(), work_dir, {}))
    assert said in output, output[-3000:]
    assert "Traceback" not in output
    if "nothing to do" in said:
        assert file_hashes(output_dir) == before
    resumed = final_weights(output_dir)
    for group in ("model", "ema"):
        assert_same_weights(resumed[group], cli_baseline["final"][group], group)


def test_the_cli_skips_a_truncated_checkpoint_and_ends_as_the_uninterrupted_run(tmp_path, cli_baseline):
    """A run killed after its last checkpoint whose model shard was then cut: the command skips that
    checkpoint in one line, resumes the one before, and ends with the uninterrupted final model and EMA."""
    work_dir = tmp_path / "run"
    shutil.copytree(cli_baseline["folder"], work_dir)
    output_dir = cli_output_dir(work_dir)
    (output_dir / MANIFEST_FILE).unlink()  # the final save did not finish
    shard = next((output_dir / "checkpoint-24").glob("model-*.safetensors"))
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: size // 2])
    output = succeeded(run_command(cli_command(), work_dir, {}))
    assert (f"skipped checkpoints/sft/checkpoint-24: incomplete, {shard.name} has {size // 2} bytes where the save "
            f"wrote {size}") in output, output[-3000:]
    assert "resumed at step 16" in output and "trained 8 steps (resumed at step 16)" in output
    resumed = final_weights(output_dir)
    for group in ("model", "ema"):
        assert_same_weights(resumed[group], cli_baseline["final"][group], group)
