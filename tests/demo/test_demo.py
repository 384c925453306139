"""The transfer-learning demo: its data, its measurements by hand, its runs and its output files."""
import json
import math

import numpy as np
import pytest

from paddle_llrd.cli import main as cli_main
from paddle_llrd.demo import plots
from paddle_llrd.demo.data import few_shot_indices, load_transfer_task, random_shift
from paddle_llrd.demo.experiment import FineTuneRun, TrainSettings, batch_indices, fine_tune, layer_label, pretrain
from paddle_llrd.demo.metrics import accuracy, mean_and_spread, relative_layer_change
from paddle_llrd.demo.report import grid_table, results_document
from paddle_llrd.layer_decay.layer_maps import LayerMap
from paddle_llrd.models.vit import TinyViT, TinyViTConfig

RUN_KEYS = {"optimizer", "layerwise_decay", "learning_rate", "seed", "target_accuracy", "source_accuracy_kept", "layer_change"}


@pytest.fixture(scope="module")
def task():
    return load_transfer_task()


@pytest.fixture(scope="module")
def tiny_pretrained(task):
    config = TinyViTConfig(patch_size=4, hidden_size=16, num_layers=2, num_classes=5)
    return pretrain(task, config, TrainSettings(steps=30, learning_rate=3e-3, batch_size=64), seed=0)


# --- measurements against hand-computed cases ---------------------------------------------------


def test_accuracy_counts_rows_whose_largest_logit_is_the_label():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    # argmax per row: 1, 0, 1, 0; labels 1, 0, 0, 0 -> rows 0, 1 and 3 right
    assert accuracy(logits, np.array([1, 0, 0, 0])) == 0.75


@pytest.mark.parametrize("logits, labels", [(np.zeros(3), np.zeros(3)), (np.zeros((3, 2)), np.zeros(2)), (np.zeros((0, 2)), np.zeros(0))])
def test_accuracy_rejects_mismatched_shapes(logits, labels):
    with pytest.raises(ValueError, match="logits"):
        accuracy(logits, labels)


def test_relative_layer_change_pools_a_layers_parameters():
    before = {
        "a.weight": np.array([[3.0, 0.0], [0.0, 0.0]]),
        "a.bias": np.array([4.0]),
        "b.weight": np.array([1.0, 1.0, 1.0, 1.0]),
    }
    after = {
        "a.weight": np.array([[3.0, 1.0], [0.0, 0.0]]),
        "a.bias": np.array([6.0]),
        "b.weight": np.array([1.0, 1.0, 1.0, 2.0]),
        "head.weight": np.array([100.0]),  # not in `before`: a new layer has no pretrained weights
    }
    change = relative_layer_change(before, after, lambda name: name.split(".")[0])
    # a: ||(0, 1, 0, 0, 2)|| / ||(3, 0, 0, 0, 4)|| = sqrt(5) / 5;  b: ||(0, 0, 0, 1)|| / ||(1, 1, 1, 1)|| = 1 / 2
    assert change == pytest.approx({"a": math.sqrt(5) / 5, "b": 0.5}, rel=1e-12)
    assert list(change) == ["a", "b"]


def test_relative_layer_change_rejects_missing_or_reshaped_parameters():
    with pytest.raises(KeyError, match="w"):
        relative_layer_change({"w": np.ones(2)}, {}, str)
    with pytest.raises(ValueError, match="shape"):
        relative_layer_change({"w": np.ones(2)}, {"w": np.ones(3)}, str)


def test_mean_and_spread_is_mean_and_sample_std():
    mean, spread = mean_and_spread([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    # squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5 over n - 1 = 3
    assert spread == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    assert mean_and_spread([0.4]) == (0.4, 0.0)


def test_layer_labels_follow_the_vit_layer_map():
    model = TinyViT(TinyViTConfig(num_layers=3, hidden_size=8, num_classes=5))
    layer_map = LayerMap.from_model(model)
    labels = {name: layer_label(name, layer_map) for name, _ in model.named_parameters()}
    assert labels["cls_token"] == labels["pos_embed"] == labels["patch_embed.proj.weight"] == "embeddings"
    assert labels["blocks.0.self_attn.q_proj.weight"] == "block 0"
    assert labels["blocks.2.norm2.bias"] == "block 2"
    assert labels["norm.weight"] == "final norm"
    assert labels["head.weight"] == labels["head.bias"] == "head"


# --- data ---------------------------------------------------------------------------------------


def test_tasks_split_the_digits_without_overlap(task):
    from sklearn.datasets import load_digits

    digits = load_digits()
    flat = (digits.images / 16.0).reshape(len(digits.target), -1).astype("float32")
    digit_of = {row.tobytes(): int(d) for row, d in zip(flat, digits.target)}
    seen = []
    for part, chosen in [
        (task.source_train, (0, 1, 2, 3, 4)), (task.source_test, (0, 1, 2, 3, 4)),
        (task.target_pool, (5, 6, 7, 8, 9)), (task.target_test, (5, 6, 7, 8, 9)),
    ]:
        for image, label in zip(part.images.reshape(len(part), -1), part.labels):
            assert digit_of[image.tobytes()] == chosen[label]
            seen.append(image.tobytes())
    assert len(seen) == len(digits.target) == 1797
    # 30 % of each task is held out for testing
    assert len(task.source_test) == round(0.3 * (len(task.source_train) + len(task.source_test)))


def test_few_shot_picks_distinct_images_per_class():
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    picked = few_shot_indices(labels, per_class=2, rng=np.random.default_rng(3))
    assert len(set(picked.tolist())) == 6
    assert np.bincount(labels[picked]).tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="per_class"):
        few_shot_indices(labels, per_class=4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="per_class"):
        few_shot_indices(labels, per_class=0, rng=np.random.default_rng(0))


@pytest.mark.parametrize("digits", [(), (0, 1, 2, 3, 4, 5, 6, 7, 8), (3, 11)])
def test_transfer_task_rejects_bad_source_digits(digits):
    with pytest.raises(ValueError, match="source_digits"):
        load_transfer_task(source_digits=digits)


def test_random_shift_moves_each_image_by_at_most_one_pixel():
    image = np.zeros((1, 1, 3, 3), dtype="float32")
    image[0, 0, 1, 1] = 1.0
    shifted = random_shift(np.repeat(image, 200, axis=0), 1, np.random.default_rng(0))
    positions = {tuple(np.argwhere(s[0] == 1.0)[0]) for s in shifted}
    assert shifted.sum() == 200  # the centre pixel stays inside a 3x3 image under any one-pixel shift
    assert positions == {(r, c) for r in range(3) for c in range(3)}


def test_batches_walk_through_whole_epochs():
    batches = list(batch_indices(5, 2, steps=5, rng=np.random.default_rng(0)))
    flat = np.concatenate(batches)
    assert [len(b) for b in batches] == [2] * 5
    assert sorted(flat[:5].tolist()) == [0, 1, 2, 3, 4]  # first epoch: each example once
    assert [len(b) for b in batch_indices(3, 8, steps=2, rng=np.random.default_rng(0))] == [3, 3]


# --- fine-tuning ----------------------------------------------------------------------------------


def _fine_tune(pretrained, task, decay, learning_rate=3e-3, seed=1):
    indices = few_shot_indices(task.target_pool.labels, 3, np.random.default_rng(seed))
    return fine_tune(pretrained, task, indices, TrainSettings(steps=6, learning_rate=learning_rate, batch_size=8), decay, seed)


def test_unchanged_backbone_keeps_the_pretrained_source_accuracy(tiny_pretrained, task):
    # With a negligible lr the backbone is the pretrained one: the old head must score exactly as after pretraining.
    run = _fine_tune(tiny_pretrained, task, None, learning_rate=1e-12)
    assert run.source_accuracy_kept == tiny_pretrained.source_test_accuracy
    assert max(run.layer_change.values()) < 1e-6
    assert list(run.layer_change) == ["embeddings", "block 0", "block 1", "final norm"]


def test_adamwdl_without_decay_is_adamw_on_the_same_data_order(tiny_pretrained, task):
    adamw = _fine_tune(tiny_pretrained, task, None)
    no_decay = _fine_tune(tiny_pretrained, task, 1.0)
    assert (adamw.optimizer, no_decay.optimizer) == ("AdamW", "AdamWDL")
    assert no_decay.target_accuracy == adamw.target_accuracy
    assert no_decay.source_accuracy_kept == adamw.source_accuracy_kept
    assert no_decay.layer_change == pytest.approx(adamw.layer_change, rel=1e-4)


def test_layer_decay_moves_the_lower_layers_less(tiny_pretrained, task):
    adamw = _fine_tune(tiny_pretrained, task, None)
    decayed = _fine_tune(tiny_pretrained, task, 0.5)
    # embeddings learn at 0.5 ** 3 of the rate, block 0 at 0.5 ** 2
    assert decayed.layer_change["embeddings"] < 0.5 * adamw.layer_change["embeddings"]
    assert decayed.layer_change["block 0"] < 0.75 * adamw.layer_change["block 0"]


# --- report and command line -------------------------------------------------------------------


def _run(optimizer, decay, rate, seed, target, kept):
    return FineTuneRun(optimizer, decay, rate, seed, target, kept, {"block 0": 0.1}, 0.0)


def test_grid_table_has_one_cell_per_rate_and_decay():
    runs = [_run("AdamW", 1.0, 1e-3, s, t, k) for s, t, k in [(0, 0.8, 0.6), (1, 0.6, 0.4)]]
    runs += [_run("AdamWDL", 0.5, 1e-3, 0, 0.7, 0.9), _run("AdamWDL", 0.5, 2e-3, 0, 0.75, 0.85)]
    lines = grid_table(runs).splitlines()
    assert lines[1].split() == ["lr", "AdamW", "AdamWDL", "0.5"]
    assert lines[3].split() == ["0.001", "0.700", "/", "0.500", "0.700", "/", "0.900"]  # AdamW mean of two seeds
    assert lines[4].split() == ["0.002", "-", "0.750", "/", "0.850"]


def test_results_document_has_exactly_the_issue_keys():
    document = results_document("scikit-learn digits", [0], [_run("AdamW", 1.0, 1e-3, 0, 0.8, 0.6)], {"labels_per_class": 10})
    assert set(document) == {"dataset", "seeds", "runs"}
    assert document["runs"][0]["labels_per_class"] == 10 and "layer_lrs" not in document["runs"][0]


def test_quick_demo_prints_the_table_and_writes_figures_and_results(tmp_path, capsys):
    argv = ["demo", "--quick", "--no-progress", "--seeds", "3", "5", "--decays", "0.8", "0.5", "--grid-learning-rates", "3e-3", "--output-dir", str(tmp_path)]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    for text in ("target accuracy", "source accuracy kept", "AdamWDL 0.8", "relative weight change", "target accuracy / source accuracy kept, mean over seeds", "0.003  "):
        assert text in out
    for name in ("layer_change.png", "transfer.png", "layer_lrs.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads((tmp_path / "results.json").read_text())
    assert set(document) == {"dataset", "seeds", "runs"}
    assert document["dataset"] == "scikit-learn digits" and document["seeds"] == [3, 5]
    runs = document["runs"]
    # 2 seeds x 2 learning rates x (AdamW + 2 decays)
    assert len(runs) == 12
    assert {(r["optimizer"], r["layerwise_decay"]) for r in runs} == {("AdamW", 1.0), ("AdamWDL", 0.8), ("AdamWDL", 0.5)}
    assert {r["learning_rate"] for r in runs} == {1e-3, 3e-3} and {r["seed"] for r in runs} == {3, 5}
    for run in runs:
        assert RUN_KEYS <= set(run)
        assert 0.0 <= run["target_accuracy"] <= 1.0 and 0.0 <= run["source_accuracy_kept"] <= 1.0
        assert set(run["layer_change"]) == {"embeddings", "block 0", "block 1", "final norm"}
        assert all(isinstance(v, float) and v >= 0.0 for v in run["layer_change"].values())


@pytest.mark.parametrize(
    "flags, message",
    [(["--decays", "1.5"], "--decays"), (["--seeds", "1", "1"], "--seeds"), (["--steps", "0"], "--steps"), (["--hidden", "6"], "--hidden"),
     (["--grid-learning-rates", "0"], "--grid-learning-rates"), (["--seeds", "-1"], "--seeds"),
     (["--learning-rate", "nan"], "--learning-rate"), (["--pretrain-learning-rate", "inf"], "--pretrain-learning-rate"),
     (["--weight-decay", "-0.1"], "--weight-decay"), (["--weight-decay", "nan"], "--weight-decay")],
)
def test_demo_rejects_bad_flags(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["demo", "--quick", *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_demo_says_when_a_class_has_too_few_images_for_the_labels_asked():
    with pytest.raises(SystemExit, match="--labels-per-class.*per_class"):
        cli_main(["demo", "--quick", "--no-progress", "--labels-per-class", "1000"])


def test_a_quick_run_says_it_is_a_smoke_run_and_leaves_the_full_runs_files_alone(tmp_path, capsys, monkeypatch):
    """``demo --quick`` writes to demo_output/quick, beside the full run's demo_output files, and says on its
    first and last lines, in every run of its results.json and atop each figure that its numbers mean nothing."""
    monkeypatch.chdir(tmp_path)
    full = tmp_path / "demo_output" / "results.json"
    full.parent.mkdir()
    full.write_text("{}")
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, *args: figures.append(fig) or save(fig, *args))
    assert cli_main(["demo", "--quick", "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    notice = "--quick: a smoke run of a few steps, whose numbers mean nothing (make demo runs the real one)"
    assert lines[0] == notice and lines[-2] == notice, lines
    assert full.read_text() == "{}"
    document = json.loads((tmp_path / "demo_output" / "quick" / "results.json").read_text())
    assert document["seeds"] == [0, 1] and all(run["quick"] is True for run in document["runs"])
    assert len(figures) == 3 and all("smoke run" in figure.get_suptitle() for figure in figures)
