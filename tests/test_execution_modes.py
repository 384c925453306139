"""AdamWDL gives the same numbers in every Paddle execution mode.

``tests/helpers/mode_runner.py`` trains one small BERT-shaped model (same initial
weights, same batches, four steps, layer-wise decay 0.8 over 2 layers,
``apply_decay_param_fun`` excluding biases and norms, two parameters with a
ParamAttr learning rate of 0.5 and 2.0) in one mode per fresh process:
dygraph, ``paddle.jit.to_static`` over the whole train step, a static PIR
program (``minimize`` + ``Executor``) and the legacy static program
(``FLAGS_enable_pir_api=0``), each with a float lr, with an ``LRScheduler``
and with an AMP overflow step, and each on both of AdamWDL's decay paths
(folded into the fused ``adamw`` kernel; a separate decay op built from the
``_lr_to_coeff`` cache and the ``found_inf`` flag).

Checked here:

* the dygraph run against a float64 NumPy replay of the update rule of the
  update in docs/adamwdl.rst (``tests/helpers/reference_adamw.py``), fed with the gradients
  the run applied;
* every other mode against dygraph, within 1e-5;
* an overflow step (``found_inf`` true) changes no weight and no optimizer
  state, in every mode, while the other steps of the same run still train;
* ``_lr_to_coeff`` is empty after ``minimize`` in both static programs;
* the test setup can tell a wrong implementation apart: ignoring layer decay,
  or keying the decay coefficient on the global lr instead of each
  parameter's own lr (the ``_lr_to_coeff`` cache), moves the result far more
  than the tolerance.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest

import mode_runner as runner
from reference_adamw import AdamWState, adamw_update
from reference_adamw import layer_ratio as reference_layer_ratio

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "helpers" / "mode_runner.py"
REPO_ROOT = HERE.parent

# The optimizer every mode trains with ("adamw" = paddle.optimizer.AdamW,
# the stand-in the harness was first built with).
OPTIMIZER = "adamwdl"
TOLERANCE = 1e-5
SUBPROCESS_TIMEOUT_S = 180
OTHER_MODES = ("to_static", "static", "static_legacy")
SCENARIOS = ("float", "scheduler", "overflow")
DECAY_PATHS = runner.DECAY_PATHS if OPTIMIZER == "adamwdl" else ("fused",)


def run_mode_subprocess(mode: str, out: Path) -> Dict[str, np.ndarray]:
    """Run ``mode_runner.py`` in a fresh interpreter and load what it saved."""
    env = dict(os.environ)
    # Paddle reads this flag once, at import: the legacy program needs a process of its own.
    env["FLAGS_enable_pir_api"] = "0" if mode == "static_legacy" else "1"
    command = [sys.executable, str(RUNNER), "--mode", mode, "--optimizer", OPTIMIZER, "--out", str(out)]
    proc = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S
    )
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"{' '.join(command[1:])} exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
    with np.load(out) as saved:
        return dict(saved)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Callable[[str, str, str], Dict[str, np.ndarray]]:
    """``runs(mode, decay_path, scenario)``: that run's saved entries, prefix removed.

    Each mode's process runs once per module; a run that raised fails the
    test with its traceback. (Under ``to_static`` the first failing runs of a
    process are the informative ones: SOT stops translating a code object
    after two failures, see mode_runner.py.)
    """
    out_dir = tmp_path_factory.mktemp("modes")
    process = functools.lru_cache(maxsize=None)(lambda mode: run_mode_subprocess(mode, out_dir / f"{mode}.npz"))

    def run(mode: str, decay_path: str, scenario: str) -> Dict[str, np.ndarray]:
        saved = process(mode)
        if mode.startswith("static"):
            assert bool(saved["pir"]) == (mode == "static"), "the static program is not of the IR the mode names"
        key = runner.run_key(decay_path, scenario)
        error = saved.get(f"{key}/error")
        if error is not None:
            pytest.fail(f"{mode}: the {key!r} run raised:\n{error}")
        prefix = f"{key}/"
        return {name[len(prefix):]: value for name, value in saved.items() if name.startswith(prefix)}

    return run


def weights(entries: Dict[str, np.ndarray], kind: str) -> Dict[str, np.ndarray]:
    prefix = f"{kind}/"
    return {key[len(prefix):]: value for key, value in entries.items() if key.startswith(prefix)}


def max_abs_difference(left: Dict[str, np.ndarray], right: Dict[str, np.ndarray]) -> Dict[str, float]:
    assert sorted(left) == sorted(right), (sorted(left), sorted(right))
    return {name: float(np.max(np.abs(left[name].astype("float64") - right[name]))) for name in left}


def assert_close(actual, expected, what: str, tolerance: float = TOLERANCE) -> None:
    differences = max_abs_difference(actual, expected)
    worst = sorted(differences.items(), key=lambda item: -item[1])[:5]
    assert worst[0][1] <= tolerance, f"{what}: largest |difference| per parameter {worst} > {tolerance}"


# --------------------------------------------------------------------------- float64 reference
def layer_ratio(structured_name: str) -> float:
    if OPTIMIZER == "adamw":
        return 1.0
    return reference_layer_ratio(structured_name, runner.LAYERWISE_DECAY, runner.NUM_LAYERS)


def param_lr_scale(structured_name: str) -> float:
    return runner.PARAM_LR_SCALES.get(structured_name, 1.0)


def replay_float64(
    entries: Dict[str, np.ndarray],
    ratio_of: Callable[[str], float] = layer_ratio,
    decay_lr_scale_of: Callable[[str], float] = param_lr_scale,
) -> Dict[str, np.ndarray]:
    """The contract's update (``tests/helpers/reference_adamw.py``) in float64, replayed
    over the gradients a run applied::

        p <- p * (1 - lr_p * coeff)                       (decayed parameters only)
        m <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g*g
        p <- p - lr_p*ratio * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps*sqrt(1-b2^t))

    with ``lr_p`` the step's lr times the parameter's ParamAttr lr.
    ``ratio_of`` and ``decay_lr_scale_of`` let a test build the result of a
    wrong implementation.
    """
    params = {name: value.astype("float64") for name, value in weights(entries, "init").items()}
    states = {name: AdamWState.zeros_like(value) for name, value in params.items()}
    for step, lr in enumerate(entries["lrs"].astype("float64")):
        for name in params:
            params[name], states[name] = adamw_update(
                params[name],
                entries[f"grad/{step}/{name}"],
                states[name],
                lr=lr * param_lr_scale(name) * ratio_of(name),
                decay_lr=lr * decay_lr_scale_of(name),
                coeff=runner.WEIGHT_DECAY if runner.is_decayed(name) else 0.0,
                beta1=runner.BETA1,
                beta2=runner.BETA2,
                epsilon=runner.EPSILON,
            )
    return params


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("scenario", ["float", "scheduler"])
def test_dygraph_matches_float64_reference(runs, scenario, decay_path):
    entries = runs("dygraph", decay_path, scenario)
    expected_lrs = (
        [runner.BASE_LR] * runner.NUM_STEPS
        if scenario == "float"
        else [runner.scheduled_lr(step) for step in range(runner.NUM_STEPS)]
    )
    np.testing.assert_allclose(entries["lrs"], expected_lrs, rtol=1e-12)
    assert_close(weights(entries, "final"), replay_float64(entries), f"dygraph {decay_path}-{scenario} vs float64")


@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("mode", OTHER_MODES)
def test_mode_matches_dygraph(runs, mode, scenario, decay_path):
    entries = runs(mode, decay_path, scenario)
    # The overflow scenario is the scheduler scenario plus one skipped step.
    reference = runs("dygraph", decay_path, "scheduler" if scenario == "overflow" else scenario)
    np.testing.assert_allclose(entries["lrs"], reference["lrs"], rtol=1e-12)
    for name, value in weights(entries, "init").items():
        np.testing.assert_array_equal(value, reference[f"init/{name}"])
    assert_close(weights(entries, "final"), weights(reference, "final"), f"{mode} {decay_path}-{scenario} vs dygraph")


@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("mode", ("dygraph",) + OTHER_MODES)
def test_overflow_step_changes_nothing(runs, mode, decay_path):
    entries = runs(mode, decay_path, "overflow")
    for kind in ("", "state_"):
        before = weights(entries, f"{kind}before_overflow")
        after = weights(entries, f"{kind}after_overflow")
        assert before, f"no {kind or 'weight '}snapshot around the overflow step"
        changed = {name: diff for name, diff in max_abs_difference(after, before).items() if diff != 0.0}
        assert not changed, f"{mode} {decay_path}: the found_inf=True step changed {kind or 'weights '}{changed}"
    # The optimizer state holds both moments and both beta powers of every parameter.
    assert len(weights(entries, "state_before_overflow")) >= 4 * len(weights(entries, "init"))
    # ... and the run still trained on its other steps (the scheduler scenario's numbers).
    dygraph = runs("dygraph", decay_path, "scheduler")
    assert_close(weights(entries, "final"), weights(dygraph, "final"), f"{mode} {decay_path} overflow run vs dygraph")


@pytest.mark.skipif(OPTIMIZER != "adamwdl", reason="a property of AdamWDL's static-graph decay")
@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("mode", ("static", "static_legacy"))
def test_lr_to_coeff_cache_is_emptied_after_minimize(runs, mode, decay_path):
    for scenario in SCENARIOS:
        entries = runs(mode, decay_path, scenario)
        assert int(entries["lr_to_coeff_after_minimize"]) == 0


def test_reference_tells_layer_decay_and_per_parameter_lr_apart(runs):
    """A mode that dropped layer decay, or built one decay coefficient from
    the global lr for all parameters (a ``_lr_to_coeff`` cache keyed on the
    wrong thing), would miss the tolerance by far."""
    entries = runs("dygraph", DECAY_PATHS[-1], "scheduler")
    correct = replay_float64(entries)
    without_layer_decay = replay_float64(entries, ratio_of=lambda name: 1.0)
    global_lr_decay = replay_float64(entries, decay_lr_scale_of=lambda name: 1.0)
    if OPTIMIZER == "adamwdl":
        moved = max_abs_difference(without_layer_decay, correct)
        assert moved["embeddings.word_embeddings.weight"] > 100 * TOLERANCE
        assert moved["encoder.layers.0.linear1.weight"] > 100 * TOLERANCE
    moved = max_abs_difference(global_lr_decay, correct)
    for name in runner.PARAM_LR_SCALES:
        assert moved[name] > 100 * TOLERANCE, (name, moved[name])


def test_static_graph_example_runs_as_documented():
    """``python examples/static_graph.py --steps 20``: a PIR program trained by
    AdamWDL with ``LinearDecayWithWarmup(1e-2, 20, warmup=0.1)``."""
    steps = 20
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "static_graph.py"), "--steps", str(steps)],
        cwd=REPO_ROOT,
        env={**os.environ, "FLAGS_enable_pir_api": "1"},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert [int(row[1]) for row in rows] == list(range(steps))
    lrs = np.array([float(row[3]) for row in rows])
    losses = np.array([float(row[5]) for row in rows])
    warmup = int(0.1 * steps)  # floor(warmup * total_steps)
    expected = [1e-2 * (s / warmup if s < warmup else (steps - s) / (steps - warmup)) for s in range(steps)]
    np.testing.assert_allclose(lrs, expected, atol=1e-6)  # printed with 6 decimals
    assert losses[-10:].mean() < losses[0] - 0.1, losses
    assert f"PIR program, {steps} steps" in proc.stdout
