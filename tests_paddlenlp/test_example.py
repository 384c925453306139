"""examples/paddlenlp_trainer.py runs, in its short mode, with the schedule and
layer ratios it asks for."""
from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "paddlenlp_trainer.py"


def load_example():
    spec = importlib.util.spec_from_file_location("paddlenlp_trainer_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_short_mode_with_defaults(tmp_path):
    result = load_example().main(["--short", "--output-dir", str(tmp_path)])
    # 8 steps, warmup floor(0.1 * 8) = 0, linear decay of 2e-3, logged after each step
    expected = [2e-3 * (8 - step) / 8 for step in range(1, 9)]
    assert result["learning_rates"] == pytest.approx(expected, rel=6e-4, abs=1e-12)
    ratios = result["layer_ratios"]
    assert ratios["embeddings"] == pytest.approx(0.8**5)
    for i in range(4):
        assert ratios[f"encoder layer {i}"] == pytest.approx(0.8 ** (4 - i))
    assert ratios["pooler + classifier"] == 1.0
    assert math.isfinite(result["train_loss"])
    assert 0.0 <= result["eval_accuracy"] <= 1.0


def test_a_run_resumes_from_the_flag_or_else_from_the_last_checkpoint_in_the_output_dir(tmp_path):
    """PaddleNLP's Trainer.train() ignores args.resume_from_checkpoint; the example passes it on."""
    import shutil

    import paddle

    def run(*argv):
        with paddle.utils.unique_name.guard():  # the parameter names of a new process (checkpoints are keyed by them)
            return load_example().main(["--short", *argv])

    whole = run("--output-dir", str(tmp_path / "whole"), "--save-steps", "4")
    assert len(whole["learning_rates"]) == 8 and whole["start_step"] == 0
    assert (tmp_path / "whole" / "checkpoint-4").is_dir()
    resumed = run("--output-dir", str(tmp_path / "resumed"), "--resume-from-checkpoint",
                  str(tmp_path / "whole" / "checkpoint-4"))
    shutil.copytree(tmp_path / "whole" / "checkpoint-4", tmp_path / "latest" / "checkpoint-4")
    latest = run("--output-dir", str(tmp_path / "latest"))
    for result in (resumed, latest):
        assert result["start_step"] == 4
        # the log history of steps 1-4 comes back from the checkpoint; steps 5-8 are this run's
        assert result["learning_rates"] == pytest.approx(whole["learning_rates"], rel=1e-12)


def test_short_mode_with_a_cosine_and_two_layers(tmp_path):
    result = load_example().main(
        [
            "--short",
            "--output-dir",
            str(tmp_path),
            "--layers",
            "2",
            "--layerwise-decay",
            "0.5",
            "--lr-scheduler-type",
            "cosine",
            "--warmup-ratio",
            "0.25",
            "--learning-rate",
            "1e-3",
        ]
    )
    warmup, total = 2, 8  # floor(0.25 * 8)

    def factor(step):
        if step < warmup:
            return step / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    expected = [1e-3 * factor(step) for step in range(1, 9)]
    assert result["learning_rates"] == pytest.approx(expected, rel=6e-4, abs=1e-12)
    assert result["layer_ratios"] == pytest.approx(
        {"embeddings": 0.125, "encoder layer 0": 0.25, "encoder layer 1": 0.5, "pooler + classifier": 1.0}
    )


def test_help_needs_no_training(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_example().main(["--help"])
    assert exit_info.value.code == 0
    assert "--layerwise-decay" in capsys.readouterr().out
