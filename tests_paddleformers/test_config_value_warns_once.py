"""One config value warns once: ``layerwise_decay: 2`` in a ``python -m paddle_llrd train``
config passes the config check, the arguments' own check and the optimizer on its way, and
gives one ``DecayAboveOneWarning`` (docs/adamwdl.rst "Layer ratios"), run as a user runs the
command: a YAML file, a fresh process, Python's default warning filters."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from cli_workspace import build_workspace

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_an_int_layerwise_decay_above_one_in_a_cli_config_warns_once(tmp_path):
    workspace = build_workspace(tmp_path, 2)
    config = {
        "stage": "SFT",
        "fine_tuning": "full",
        "model_name_or_path": str(workspace / "model"),
        "_attn_implementation": "eager",
        "train_dataset_type": "erniekit",
        "train_dataset_path": str(workspace / "model" / "train.jsonl"),
        "train_dataset_prob": "1.0",
        "max_seq_len": 32,
        "do_train": True,
        "per_device_train_batch_size": 2,
        "max_steps": 1,
        "device": "cpu",
        "compute_type": "float32",
        "output_dir": str(workspace / "out"),
        "layerwise_decay": 2,  # an int, as YAML reads `2`
    }
    path = workspace / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "paddle_llrd", "train", str(path)], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    warned = [line for line in output.splitlines() if "DecayAboveOneWarning" in line]
    assert len(warned) == 1, output[-6000:]
    assert "`layerwise_decay`=2.0 is greater than 1, so lower layers train faster than the head" in warned[0]
