"""A float16 PaddleFormers Trainer run on a GPU whose first steps overflow:
the EMA and the weight-decay schedule advance once per step that changed the
weights, and the EMA is the float64 average of the weights those steps made.

The float16 runs are skipped without a CUDA build of Paddle and a visible
GPU (a CPU disables ``GradScaler``, so no step can overflow there);
``scripts/gpu_check.sh`` runs them when it is given a PaddleFormers
interpreter with a CUDA Paddle (``.venv-paddleformers-gpu`` or
``PADDLEFORMERS_PYTHON``). The float32 run of the same watcher and checks
runs everywhere, so that they are known to work before a GPU runs them."""
from __future__ import annotations

import numpy as np
import paddle
import pytest
from llrd_kit import KIT
from trainer_checks import ema_reference, parameters_numpy


def visible_gpu_count() -> int:
    if not paddle.device.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


needs_gpu = pytest.mark.skipif(visible_gpu_count() == 0, reason="needs a CUDA build of Paddle and a visible GPU")

STEPS = 8
EMA_DECAY = 0.7


@pytest.fixture
def on_gpu():
    previous = paddle.device.get_device()
    paddle.set_device("gpu:0")
    yield
    paddle.set_device(previous)


class StepWatcher(KIT.callback_class):
    """Whether each optimizer step changed any weight (seen in the weights
    themselves, not in the scaler's flag), and the weights after each that did."""

    def __init__(self):
        self.changed = []
        self.produced = []
        self._before = None

    def on_optimizer_begin(self, args, state, control, model=None, **kwargs):
        self._before = parameters_numpy(model)

    def on_optimizer_end(self, args, state, control, model=None, **kwargs):
        after = parameters_numpy(model)
        changed = any(not np.array_equal(after[name], self._before[name]) for name in after)
        self.changed.append(changed)
        if changed:
            self.produced.append(after)


def train_watched(tmp_path, **fields):
    """A Trainer run of STEPS steps with an EMA and a weight-decay schedule,
    watched by a StepWatcher; returns the trainer, the watcher and the weights the EMA starts from."""
    args = KIT.args(
        tmp_path, max_steps=STEPS, learning_rate=5e-3, ema_decay=EMA_DECAY, layerwise_decay=0.7,
        weight_decay=0.0, weight_decay_end=0.1, weight_decay_incr_style="linear", **fields,
    )
    watcher = StepWatcher()
    model = KIT.make_model()
    trainer = KIT.trainer(args, model=model, callbacks=[watcher])
    if trainer.do_grad_scaling:
        # A loss scale of 2**40 overflows float16 gradients; each overflow step
        # divides it by 2**10, so the first few steps are skipped and the rest train.
        trainer.scaler.set_decr_every_n_nan_or_inf(1)
        trainer.scaler.set_decr_ratio(2.0**-10)
    initial = parameters_numpy(model)  # after the Trainer's O2 cast, where the EMA starts
    trainer.train()
    return trainer, watcher, initial


def assert_one_advance_per_applied_step(trainer, watcher, initial) -> int:
    """The EMA, the weight-decay schedule and the lr schedule each advanced
    once per step that changed the weights; the EMA is their float64 average."""
    applied = sum(watcher.changed)
    assert len(watcher.changed) == STEPS and trainer.state.global_step == STEPS
    assert trainer.ema.num_updates == applied
    assert trainer.optimizer.weight_decay_schedule.current_step == applied
    assert trainer.lr_scheduler.last_epoch == applied  # PaddleFormers steps it only after an applied step
    expected = ema_reference(initial, watcher.produced, EMA_DECAY)
    for name, shadow in trainer.ema.shadow.items():
        np.testing.assert_allclose(shadow.numpy().astype(np.float64), expected[name], rtol=0, atol=1e-5, err_msg=name)
    return applied


@needs_gpu
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_overflow_steps_advance_neither_the_ema_nor_the_weight_decay_schedule(tmp_path, on_gpu, level):
    trainer, watcher, initial = train_watched(tmp_path, fp16=True, fp16_opt_level=level, scale_loss=2.0**40)
    assert trainer.do_grad_scaling
    applied = assert_one_advance_per_applied_step(trainer, watcher, initial)
    assert watcher.changed[0] is False and 0 < applied < STEPS, watcher.changed


def test_without_amp_every_step_advances_them_once(tmp_path):
    """The float32 run of the same watcher and checks (any device): no step is skipped."""
    trainer, watcher, initial = train_watched(tmp_path)
    assert not trainer.do_grad_scaling
    assert assert_one_advance_per_applied_step(trainer, watcher, initial) == STEPS
