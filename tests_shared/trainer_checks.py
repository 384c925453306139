"""Trainer-level checks shared by the PaddleNLP and PaddleFormers test suites.

Each suite builds a :class:`Kit` (its framework's classes, a tiny model built
from a config and a generated data set) and calls the checks below from its
own test functions; the checks run the real ``LLRDTrainer`` and compare what
it did with formulas written out here: the schedules' closed forms, Megatron's
weight-decay ramp, a float64 NumPy AdamW with layer-wise decay fed the
gradients the run computed, and a float64 EMA of the weights the run
produced. Nothing here imports a framework.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import paddle
import pytest
from update_paths import cpu_flat_path


def quiet_run_settings() -> Dict[str, Any]:
    """Trainer settings for quiet, quick CPU runs: log every step, save nothing (a fresh dict). ``report_to``
    keeps the framework's default (VisualDL), as a user's run does."""
    return dict(per_device_train_batch_size=8, logging_steps=1, save_strategy="no", disable_tqdm=True, seed=11)


def layer_ratio(structured_name: str, decay: float, n_layers: int, *, block: str, embedding: str) -> float:
    """The layer-wise lr ratio written out: ``d**(L-i)`` for a name in block
    ``i`` (the first group of the regex ``block``), ``d**(L+1)`` for a name
    containing ``embedding``, ``1`` for the rest (head, pooler, final norm)."""
    found = re.search(block, structured_name)
    if found:
        return decay ** (n_layers - int(found.group(1)))
    if embedding in structured_name:
        return decay ** (n_layers + 1)
    return 1.0


@dataclass
class Kit:
    """What a suite provides: its framework's classes and a tiny model and data set."""

    trainer_class: type
    arguments_class: type
    parser_class: type
    callback_class: type
    make_model: Callable[..., paddle.nn.Layer]  # make_model(seed=...)
    make_dataset: Callable[[], Any]
    family: str  # the model's layer_map family
    block_regex: str  # a layer_map regex for the model's blocks
    expected_ratio: Callable[[str, float, int], float]  # (structured name, d, L) -> lr ratio
    n_layers: int
    loss: Callable[[paddle.nn.Layer, Any], float]  # the model's own loss on a whole data set, one batch
    load_model: Callable[[str], paddle.nn.Layer]  # from_pretrained
    last_checkpoint: Callable[[str], Optional[str]]  # the integration's get_last_checkpoint
    quiet_settings: Dict[str, Any] = field(default_factory=quiet_run_settings)
    # parameters whose gradient is exactly 0 (softmax ignores a key bias)
    zero_gradient_suffixes: tuple = ()

    def args(self, output_dir, **overrides):
        settings = {**self.quiet_settings, "output_dir": str(output_dir), **overrides}
        return self.arguments_class(**settings)

    def trainer(self, args, model=None, callbacks=(), **keywords):
        return self.trainer_class(
            model=model if model is not None else self.make_model(),
            args=args,
            train_dataset=self.make_dataset(),
            callbacks=list(callbacks),
            **keywords,
        )


def file_hashes(directory, leave_out: tuple = ()) -> Dict[str, str]:
    """Every file under ``directory`` (but the top-level folders in ``leave_out``) by its sha256."""
    directory = Path(directory)
    return {str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*"))
            if path.is_file() and path.relative_to(directory).parts[0] not in leave_out}


def parameters_numpy(model) -> Dict[str, np.ndarray]:
    """Structured name -> float64 copy of every parameter."""
    return {name: param.numpy().astype(np.float64) for name, param in model.named_parameters()}


def make_recorder(kit: Kit):
    """A callback of the kit's framework recording, at every optimizer step,
    the lr the step uses, each parameter and its gradient before it, and the
    parameters after it (float64 copies keyed by structured name)."""

    class Recorder(kit.callback_class):
        def __init__(self):
            self.lrs: List[float] = []
            self.before: List[Dict[str, tuple]] = []
            self.after: List[Dict[str, np.ndarray]] = []
            self.paths: List[Any] = []  # the optimizer's last_update_path after each step

        def on_optimizer_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
            self.lrs.append(float(optimizer.get_lr()))
            step = {}
            for name, param in model.named_parameters():
                grad = param.grad
                grad = np.zeros(param.shape) if grad is None else grad.numpy().astype(np.float64)
                step[name] = (param.numpy().astype(np.float64), grad)
            self.before.append(step)

        def on_optimizer_end(self, args, state, control, model=None, optimizer=None, **kwargs):
            self.after.append(parameters_numpy(model))
            self.paths.append(getattr(optimizer, "last_update_path", None))

    return Recorder()


class LogLines(logging.Handler):
    """The messages of the framework's logger (its own ``logging.Logger``, which does not propagate)."""

    def __init__(self, kit):
        super().__init__()
        self.lines = []
        self.target = kit.trainer_class.logger.logger

    def emit(self, record):
        self.lines.append(record.getMessage())

    def __enter__(self):
        self.target.addHandler(self)
        return self.lines

    def __exit__(self, *exc):
        self.target.removeHandler(self)


# --- the formulas ----------------------------------------------------------------------------------
def is_decayed(structured_name: str) -> bool:
    """The frameworks' rule: weight decay for every name without "bias" or "norm"."""
    return "bias" not in structured_name and "norm" not in structured_name


def schedule_factor(name: str, step: int, warmup: int, total: int, **options: float) -> float:
    """The lr factor at scheduler step ``step`` of the schedules the suites run."""
    if name == "constant":
        return 1.0
    if step < warmup:
        return step / max(1, warmup)
    if name == "constant_with_warmup":
        return 1.0
    if name == "inverse_sqrt":
        tau = options.get("timescale", warmup)
        return math.sqrt(tau / (step + tau - warmup))
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if name == "linear":
        return max(0.0, 1.0 - progress)
    if name in ("cosine", "cosine_with_min_lr"):
        floor = options.get("min_lr_rate", options.get("min_lr", 0.0) / options.get("learning_rate", 1.0))
        wave = max(0.0, 0.5 * (1.0 + math.cos(math.pi * options.get("num_cycles", 0.5) * 2.0 * progress)))
        return floor + (1.0 - floor) * wave
    if name == "polynomial":
        end = options.get("lr_end_ratio", 0.0)
        return end + (1.0 - end) * (1.0 - progress) ** options.get("power", 1.0)
    if name == "warmup_stable_decay":  # linear decay over the last num_decay_steps, to min_lr_ratio
        decay, floor = options["num_decay_steps"], options.get("min_lr_ratio", 0.0)
        if step < total - decay:
            return 1.0
        return floor + (1.0 - floor) * (1.0 - min(1.0, (step - (total - decay)) / decay))
    raise AssertionError(f"no formula for {name}")


def weight_decay_at(step: int, start: float, end: Optional[float], total: int, style: str) -> float:
    """Megatron-LM's ramp: ``start`` at step 0, ``end`` from step ``total`` on."""
    if end is None or style == "constant" or step >= total:
        return start if end is None else end
    progress = step / total
    fraction = progress if style == "linear" else 0.5 * (math.cos(math.pi * (1.0 - progress)) + 1.0)
    return start + (end - start) * fraction


def adamw_reference(initial, recorded, lrs, wds, ratio, *, beta1, beta2, eps, clip_norm):
    """float64 AdamW with layer-wise decay over recorded raw gradients.

    Per step t: clip all gradients by global norm; decayed parameters scale by
    ``1 - lr_t * wd_t``; then Adam's step with lr ``lr_t * ratio(name)``.
    Returns the parameters after every step.
    """
    params = {name: value.copy() for name, value in initial.items()}
    moment1 = {name: np.zeros_like(value) for name, value in params.items()}
    moment2 = {name: np.zeros_like(value) for name, value in params.items()}
    trajectory = []
    for t, step in enumerate(recorded, start=1):
        global_norm = math.sqrt(sum(float(np.sum(grad**2)) for _, grad in step.values()))
        scale = clip_norm / max(global_norm, clip_norm) if clip_norm > 0 else 1.0
        lr = lrs[t - 1]
        for name in params:
            grad = step[name][1] * scale
            if is_decayed(name):
                params[name] *= 1.0 - lr * wds[t - 1]
            moment1[name] = beta1 * moment1[name] + (1 - beta1) * grad
            moment2[name] = beta2 * moment2[name] + (1 - beta2) * grad * grad
            correction = math.sqrt(1 - beta2**t) / (1 - beta1**t)
            denominator = np.sqrt(moment2[name]) + eps * math.sqrt(1 - beta2**t)
            params[name] -= lr * ratio(name) * correction * moment1[name] / denominator
        trajectory.append({name: value.copy() for name, value in params.items()})
    return trajectory


def ema_reference(initial, produced, decay):
    """float64 ``s <- d * s + (1 - d) * w`` from the initial weights over each step's weights."""
    shadow = {name: value.copy() for name, value in initial.items()}
    for weights in produced:
        for name in shadow:
            shadow[name] = decay * shadow[name] + (1.0 - decay) * weights[name]
    return shadow


# --- the checks -------------------------------------------------------------------------------------
def check_first_step_moves_each_parameter_by_lr_times_its_ratio(kit: Kit, tmp_path, decay=0.5, *, keywords=False,
                                                               n_layers=None, **fields):
    """Adam's first step is ``lr * ratio * g / (|g| + eps)``: with a tiny eps its
    largest entry is ``lr * ratio`` for every parameter with a gradient.
    ``decay`` is the ``layerwise_decay`` field, or with ``keywords`` the
    constructor keyword; ``n_layers`` (a keyword only) replaces ``L``."""
    lr = 1e-2
    model = kit.make_model()
    before = parameters_numpy(model)
    args = kit.args(tmp_path, max_steps=1, learning_rate=lr, lr_scheduler_type="constant", weight_decay=0.0,
                    adam_epsilon=1e-15, **({} if keywords else {"layerwise_decay": decay}), **fields)
    trainer = kit.trainer(args, model=model, **({"layerwise_decay": decay} if keywords else {}),
                          **({} if n_layers is None else {"n_layers": n_layers}))
    expected_layers = kit.n_layers if n_layers is None else n_layers
    trainer.train()
    after = parameters_numpy(model)
    ratios = set()
    for name in before:
        if name.endswith(kit.zero_gradient_suffixes):
            continue
        ratio = kit.expected_ratio(name, decay, expected_layers)
        ratios.add(ratio)
        largest_move = np.max(np.abs(after[name] - before[name]))
        assert largest_move == pytest.approx(lr * ratio, rel=2e-3), name
    return trainer, ratios


def check_whole_run_against_float64_reference(kit: Kit, tmp_path, *, decay, schedule, schedule_options,
                                              weight_decay, weight_decay_end, style, steps=8, warmup=2):
    """A whole run with layer decay, a registry schedule and a weight-decay ramp,
    step by step against :func:`adamw_reference` fed the run's gradients."""
    lr, clip_norm = 5e-3, 0.05
    model = kit.make_model()
    initial = parameters_numpy(model)
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=lr, warmup_steps=warmup, lr_scheduler_type=schedule,
                    lr_scheduler_kwargs=schedule_options, weight_decay=weight_decay, weight_decay_end=weight_decay_end,
                    weight_decay_incr_style=style, layerwise_decay=decay, adam_beta1=0.8, adam_beta2=0.95,
                    adam_epsilon=1e-6, max_grad_norm=clip_norm)
    trainer = kit.trainer(args, model=model, callbacks=[recorder])
    trainer.train()

    assert len(recorder.before) == steps
    expected_lrs = [lr * schedule_factor(schedule, s, warmup, steps, **schedule_options) for s in range(steps)]
    assert recorder.lrs == pytest.approx(expected_lrs, rel=1e-6, abs=1e-12)
    wds = [weight_decay_at(s, weight_decay, weight_decay_end, steps, style) for s in range(steps)]
    assert trainer.optimizer.weight_decay_schedule.current_step == steps
    first_norm = math.sqrt(sum(float(np.sum(g**2)) for _, g in recorder.before[0].values()))
    assert first_norm > 2 * clip_norm  # clipping really was active
    # ... on the multi-tensor step, every step (docs/adamwdl.rst, "The multi-tensor step")
    assert recorder.paths == [cpu_flat_path()] * steps
    trajectory = adamw_reference(initial, recorder.before, recorder.lrs, wds,
                                 lambda name: kit.expected_ratio(name, decay, kit.n_layers),
                                 beta1=0.8, beta2=0.95, eps=1e-6, clip_norm=clip_norm)
    for t, produced in enumerate(recorder.after):
        for name, value in produced.items():
            np.testing.assert_allclose(value, trajectory[t][name], rtol=1e-5, atol=1e-6, err_msg=f"{name} step {t}")
    return trainer, recorder


def check_step_learning_rates(kit: Kit, tmp_path, name, steps=10, **fields):
    """The lr of every optimizer step is ``learning_rate * schedule_factor``."""
    lr = fields.pop("learning_rate", 2e-3)
    options = dict(fields.get("lr_scheduler_kwargs") or {})
    warmup = fields.get("warmup_steps") or int(fields.get("warmup_ratio", 0.0) * steps)
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=lr, lr_scheduler_type=name, **fields)
    kit.trainer(args, callbacks=[recorder], layerwise_decay=0.8).train()
    formula_options = {**options, "learning_rate": lr}
    for key in ("num_cycles", "power", "min_lr"):
        if key in fields:
            formula_options.setdefault(key, fields[key])
    if "lr_end" in fields:
        formula_options["lr_end_ratio"] = fields["lr_end"] / lr
    expected = [lr * schedule_factor(name, s, warmup, steps, **formula_options) for s in range(steps)]
    assert recorder.lrs == pytest.approx(expected, rel=1e-6, abs=1e-12)
    if name != "constant":  # the comparison covered a changing schedule
        assert len(set(round(value, 12) for value in recorder.lrs)) > 2
    return recorder


def check_ema_is_the_float64_average_of_the_weights_the_run_produced(kit: Kit, tmp_path, decay=0.7, steps=6):
    model = kit.make_model()
    initial = parameters_numpy(model)
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=5e-3, ema_decay=decay, layerwise_decay=0.7)
    trainer = kit.trainer(args, model=model, callbacks=[recorder])
    trainer.train()
    assert trainer.ema.num_updates == steps == len(recorder.after)
    expected = ema_reference(initial, recorder.after, decay)
    for name, shadow in trainer.ema.shadow.items():
        np.testing.assert_allclose(shadow.numpy(), expected[name], rtol=1e-5, atol=1e-7, err_msg=name)
    # the live weights are the last step's, not the average
    final = parameters_numpy(model)
    for name, value in recorder.after[-1].items():
        np.testing.assert_array_equal(final[name], value, err_msg=name)
    return trainer, expected


def model_with(kit: Kit, weights: Dict[str, np.ndarray]) -> paddle.nn.Layer:
    """A fresh model holding ``weights`` (float64 arrays by structured name)."""
    model = kit.make_model(seed=1)
    for name, param in model.named_parameters():
        param.set_value(weights[name].astype(np.float32))
    model.eval()
    return model


def check_evaluation_uses_the_average(kit: Kit, tmp_path, decay=0.6):
    """``evaluate`` gives the loss of the trained weights as ``eval_loss`` and,
    with ``ema_eval`` on, the loss of the float64 EMA weights as
    ``eval_ema_loss``; it leaves the trained weights in the model bit for bit."""
    data = kit.make_dataset()
    metrics = {}
    for ema_eval in (True, False):
        model = kit.make_model()
        initial = parameters_numpy(model)
        recorder = make_recorder(kit)
        args = kit.args(tmp_path / str(ema_eval), max_steps=4, learning_rate=2e-2, ema_decay=decay,
                        ema_eval=ema_eval, per_device_eval_batch_size=len(data))
        trainer = kit.trainer(args, model=model, callbacks=[recorder])
        trainer.train()
        trained = parameters_numpy(model)
        metrics[ema_eval] = trainer.evaluate(eval_dataset=data)
        for name, value in parameters_numpy(model).items():
            np.testing.assert_array_equal(value, trained[name], err_msg=name)
    average = ema_reference(initial, recorder.after, decay)
    trained_loss = kit.loss(model_with(kit, trained), data)
    assert metrics[True]["eval_ema_loss"] == pytest.approx(kit.loss(model_with(kit, average), data), rel=1e-5)
    assert metrics[True]["eval_loss"] == pytest.approx(trained_loss, rel=1e-5)
    assert metrics[False]["eval_loss"] == pytest.approx(trained_loss, rel=1e-5)
    assert not any(key.startswith("eval_ema_") for key in metrics[False])
    assert abs(metrics[True]["eval_ema_loss"] - trained_loss) > 1e-4  # the two weight sets really differ


def check_save_model_writes_the_average(kit: Kit, tmp_path, decay=0.6):
    """``save_model(out)`` writes the trained model to ``out`` and the average to ``out/ema``."""
    model = kit.make_model()
    initial = parameters_numpy(model)
    recorder = make_recorder(kit)
    args = kit.args(tmp_path / "run", max_steps=3, learning_rate=2e-2, ema_decay=decay)
    trainer = kit.trainer(args, model=model, callbacks=[recorder])
    trainer.train()
    trained = parameters_numpy(model)
    out = tmp_path / "final"
    trainer.save_model(str(out))
    average = ema_reference(initial, recorder.after, decay)
    saved, saved_average = parameters_numpy(kit.load_model(str(out))), parameters_numpy(kit.load_model(str(out / "ema")))
    live = parameters_numpy(model)
    for name, value in trained.items():
        np.testing.assert_array_equal(saved[name], value, err_msg=name)
        np.testing.assert_allclose(saved_average[name], average[name], rtol=1e-5, atol=1e-7, err_msg=name)
        np.testing.assert_array_equal(live[name], value, err_msg=name)  # the trained weights are back
    return trainer


def snapshot(trainer) -> Dict[str, Any]:
    """Everything a resumed run must reproduce, as plain numbers and arrays."""
    optimizer_state = {
        key: value.numpy().astype(np.float64)
        for key, value in trainer.optimizer.state_dict().items()
        if isinstance(value, paddle.Tensor)
    }
    schedule = trainer.optimizer.weight_decay_schedule
    return {
        "weights": parameters_numpy(trainer.model),
        "optimizer": optimizer_state,
        "lr_step": trainer.lr_scheduler.last_epoch,
        "lr": trainer.lr_scheduler.get_lr(),
        "weight_decay_step": schedule.current_step,
        "weight_decay": trainer.optimizer._coeff,
        "ema": {name: value.numpy().astype(np.float64) for name, value in trainer.ema.shadow.items()},
        "ema_updates": trainer.ema.num_updates,
    }


def assert_same_snapshots(resumed: Dict[str, Any], uninterrupted: Dict[str, Any], leave_out: tuple = ()) -> None:
    """Equal bit for bit: the same operations on the same numbers in the same order."""
    for key in ("lr_step", "lr", "weight_decay_step", "weight_decay", "ema_updates"):
        if key not in leave_out:
            assert resumed[key] == uninterrupted[key], key
    for group in ("weights", "optimizer", "ema"):
        assert resumed[group].keys() == uninterrupted[group].keys(), group
        for name, value in uninterrupted[group].items():
            np.testing.assert_array_equal(resumed[group][name], value, err_msg=f"{group} {name}")


def checkpointed_run(kit: Kit, output_dir, resume=None, seed=7, **fields):
    """Six steps saving a checkpoint every three, resumed from ``resume`` if given.

    Optimizer checkpoints are keyed by generated names such as
    "linear_3.w_0_moment1_0"; a fresh name counter for each run gives the
    second run the names of the first, as a new process would. The resumed
    run starts from other weights (``seed``) that the checkpoint replaces."""
    with paddle.utils.unique_name.guard():
        model = kit.make_model(seed=seed)
        args = kit.args(output_dir, max_steps=6, save_strategy="steps", save_steps=3, **fields)
        trainer = kit.trainer(args, model=model)
        trainer.train(resume_from_checkpoint=resume)
    return trainer


# Every new field, with values that differ from the defaults.
EVERY_FIELD = {
    "layerwise_decay": 0.6,
    "lr_scheduler_type": "warmup_stable_decay",
    "lr_scheduler_kwargs": {"num_decay_steps": 4, "decay_style": "linear", "min_lr_ratio": 0.25},
    "weight_decay": 0.01,
    "weight_decay_end": 0.09,
    "weight_decay_incr_style": "cosine",
    "ema_decay": 0.95,
    "ema_eval": False,
}


def every_field(kit: Kit) -> Dict[str, Any]:
    return {**EVERY_FIELD, "layer_map": kit.block_regex}


def command_line(fields: Dict[str, Any]) -> List[str]:
    """``--name value`` for each field; a dict as a JSON object."""
    words = []
    for name, value in fields.items():
        words += [f"--{name}", json.dumps(value) if isinstance(value, dict) else str(value)]
    return words


def assert_every_field_reaches_the_trainer(kit: Kit, args) -> None:
    """The parsed arguments hold EVERY_FIELD, and the trainer uses each of them."""
    expected = every_field(kit)
    for name, value in expected.items():
        assert getattr(args, name) == value, name
    trainer = kit.trainer(args)
    total, warmup = 10, 0
    trainer.create_optimizer_and_scheduler(num_training_steps=total)
    assert trainer.layerwise_decay == 0.6 and trainer.optimizer.layerwise_decay == 0.6
    assert trainer.layer_map.pattern == kit.block_regex and trainer.n_layers == kit.n_layers
    schedule = trainer.optimizer.weight_decay_schedule
    assert (schedule.start_wd, schedule.end_wd, schedule.total_steps, schedule.style) == (0.01, 0.09, total, "cosine")
    lrs = []
    for _ in range(total + 1):
        lrs.append(trainer.lr_scheduler.get_lr())
        trainer.lr_scheduler.step()
    options = expected["lr_scheduler_kwargs"]
    assert lrs == pytest.approx(
        [args.learning_rate * schedule_factor("warmup_stable_decay", s, warmup, total, **options) for s in range(total + 1)]
    )
    assert trainer.ema.decay == 0.95 and trainer.args.ema_eval is False


# (fields, exception, text the message must contain)
BAD_FIELDS = [
    ({"layerwise_decay": 0.0}, ValueError, "layerwise_decay"),
    ({"layerwise_decay": -0.5}, ValueError, "layerwise_decay"),
    ({"layerwise_decay": float("nan")}, ValueError, "layerwise_decay"),
    ({"layerwise_decay": float("inf")}, ValueError, "layerwise_decay"),
    ({"layerwise_decay": "0.8x"}, ValueError, "layerwise_decay must be a float, got the string '0.8x'"),
    ({"layerwise_decay": [0.8]}, TypeError, "layerwise_decay"),
    ({"layer_map": "lama"}, ValueError, "layer_map"),
    ({"layer_map": r"layers\.\d+"}, ValueError, "layer_map"),
    ({"layer_map": "layers.(\\d+"}, ValueError, "layer_map"),
    ({"layer_map": 3}, TypeError, "layer_map"),
    ({"lr_scheduler_type": "cosine_annealing"}, ValueError, "lr_scheduler_type"),
    ({"lr_scheduler_kwargs": "min_lr_rate=0.1"}, ValueError, "lr_scheduler_kwargs"),
    ({"lr_scheduler_kwargs": ["min_lr_rate", 0.1]}, TypeError, "lr_scheduler_kwargs"),
    ({"ema_decay": 1.0}, ValueError, "ema_decay"),
    ({"ema_decay": -0.1}, ValueError, "ema_decay"),
    ({"ema_decay": float("nan")}, ValueError, "ema_decay"),
    ({"ema_decay": "high"}, ValueError, "ema_decay must be a float, got the string 'high'"),
    ({"learning_rate": "fast"}, ValueError, "learning_rate must be a float, got the string 'fast'"),
    ({"max_steps": "1.5"}, ValueError, "max_steps must be an int, got the string '1.5'"),
    ({"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"decay_styl": "linear"}}, ValueError,
     "lr_scheduler_kwargs has the key 'decay_styl', which lr_scheduler_type='warmup_stable_decay' does not take; "
     "valid keys: decay_ratio, decay_style, decay_type, lr_warmup_init, min_lr, min_lr_ratio, num_cycles, "
     "num_decay_steps, num_stable_steps, warmup_type"),
    ({"lr_scheduler_type": "cosine", "lr_scheduler_kwargs": {"num_training_steps": 5}}, ValueError,
     "lr_scheduler_kwargs has the key 'num_training_steps', which the Trainer sets itself"),
    ({"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"min_lr_ratio": "low"}}, ValueError,
     "lr_scheduler_kwargs['min_lr_ratio'] must be a float, got the string 'low'"),
    ({"ema_eval": "yes"}, TypeError, "ema_eval"),
    ({"weight_decay_end": -0.1, "weight_decay_incr_style": "linear"}, ValueError, "weight_decay_end"),
    ({"weight_decay_end": float("nan"), "weight_decay_incr_style": "linear"}, ValueError, "weight_decay_end"),
    ({"weight_decay_end": 0.1, "weight_decay_incr_style": "exponential"}, ValueError, "weight_decay_incr_style"),
    ({"weight_decay_incr_style": "linear"}, ValueError, "weight_decay_end"),
    ({"weight_decay": 0.0, "weight_decay_end": 0.1}, ValueError, "weight_decay_incr_style"),
]
