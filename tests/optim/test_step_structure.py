"""One ``AdamWDL.step()`` reads top to bottom (docs/adamwdl.rst, "One step"): measured by
``benchmarks/profile_step.py`` on the 4th step of a small BERT-named model, in a fresh
process, counting the package's own Python calls in call order."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def figures() -> dict:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "profile_step.py"), "--json"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_multi_tensor_step_enters_four_files_and_switches_eight_times_at_most(figures):
    step = figures["multi_tensor"]
    assert step["path"] == "fused"
    assert len(step["files"]) <= 4 and step["switches"] <= 8, step


def test_the_clipped_step_stays_on_the_multi_tensor_path_within_five_files_and_ten_switches(figures):
    step = figures["clipped"]
    assert step["path"] == "fused"
    assert "optim/clipping.py" in step["files"]
    assert len(step["files"]) <= 5 and step["switches"] <= 10, step


def test_the_per_parameter_path_switches_at_most_three_times_per_parameter(figures):
    step = figures["per_parameter"]
    assert step["path"] == "per_parameter"
    assert len(step["files"]) <= 4 and step["switches_per_parameter"] <= 3, step


def test_the_optimizers_private_attributes_are_read_in_its_own_module(figures):
    assert sum(figures["private_reads"].values()) <= 10, figures["private_reads"]
