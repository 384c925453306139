"""Training scenarios that tests/test_gpu.py runs on a GPU (float16/bfloat16,
``GradScaler``) and tests/test_gpu_scenarios.py runs on the CPU in float32,
so that the references and the bookkeeping of the GPU checks run in CI too.

Each scenario trains the tiny BERT-shaped model of ``mode_runner`` and checks
it against the float64 NumPy AdamW of ``reference_adamw``, fed with the
gradients the optimizer was actually given, and against formulas written out
here (the weight-decay ramp, the EMA recursion, the beta powers).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import paddle

import mode_runner as runner
from operator_off import flat_path
from paddle_llrd import AdamWDL, ExponentialMovingAverage, WeightDecaySchedule, layer_decay_param_groups
from paddle_llrd.integrations.averaging import step_changed_weights
from reference_adamw import ReferenceAdamW, layer_ratio

NUM_STEPS = 5
# The weight-decay ramp of the schedule scenarios: start, end, length (style linear).
WD_START, WD_END, WD_STEPS = 0.05, 0.3, 3
EMA_DECAY = 0.5


def scheduled_weight_decay(step: int) -> float:
    """Megatron's linear ramp, clamped: the coefficient of optimizer step ``step`` (0-based)."""
    return WD_START + (WD_END - WD_START) * min(step, WD_STEPS) / WD_STEPS


def start_model(dtype: str = "float32") -> paddle.nn.Layer:
    """The runner's model at its fixed initial weights, cast to ``dtype``."""
    model = runner.build_model()
    init = runner.initial_weights(model)
    for name, param in model.named_parameters():
        param.set_value(init[name])
    if dtype != "float32":
        model.to(dtype=dtype)
    return model


def make_adamwdl(model: paddle.nn.Layer, learning_rate: Any, **options: Any) -> AdamWDL:
    """The runner's AdamWDL (mask, layer decay, betas), ``options`` overriding its arguments."""
    name_dict = {param.name: name for name, param in model.named_parameters()}
    settings = dict(
        learning_rate=learning_rate,
        beta1=runner.BETA1,
        beta2=runner.BETA2,
        epsilon=runner.EPSILON,
        parameters=model.parameters(),
        weight_decay=runner.WEIGHT_DECAY,
        apply_decay_param_fun=lambda param_name: runner.is_decayed(name_dict[param_name]),
        layerwise_decay=runner.LAYERWISE_DECAY,
        n_layers=runner.NUM_LAYERS,
        name_dict=name_dict,
    )
    settings.update(options)
    return AdamWDL(**settings)


def updated_weights(model, opt) -> Dict[str, np.ndarray]:
    """The weights the optimizer keeps: the float32 master weight of a
    float16/bfloat16 parameter, else the parameter."""
    weights = {}
    for name, param in model.named_parameters():
        master = opt._master_weights.get(param.name)
        weights[name] = (master if master is not None else param).astype("float32").numpy()
    return weights


def optimizer_state(model, opt) -> Dict[str, np.ndarray]:
    """Weights, parameters and every accumulator, as float32 arrays."""
    state = {f"{name}/weight": value for name, value in updated_weights(model, opt).items()}
    for name, param in model.named_parameters():
        state[f"{name}/param"] = param.astype("float32").numpy()
    for accumulator, per_param in opt._accumulators.items():
        for param_name, tensor in per_param.items():
            state[f"{param_name}/{accumulator}"] = tensor.astype("float32").numpy()
    return state


def reference_for(model, opt=None, **options: Any) -> ReferenceAdamW:
    """A float64 AdamW starting from the weights (as float64) the optimizer will update."""
    if opt is None:
        start = {name: param.astype("float32").numpy() for name, param in model.named_parameters()}
    else:
        start = updated_weights(model, opt)
    settings = dict(weight_decay=runner.WEIGHT_DECAY, beta1=runner.BETA1, beta2=runner.BETA2, epsilon=runner.EPSILON)
    settings.update(options)
    return ReferenceAdamW({name: value.astype("float64") for name, value in start.items()}, **settings)


def reference_step(reference: ReferenceAdamW, grads: Dict[str, np.ndarray], lr: float, **overrides: Any) -> None:
    """One AdamWDL step of the reference with the runner's ratios, lr scales and mask."""
    options = dict(
        ratio=lambda name: layer_ratio(name, runner.LAYERWISE_DECAY, runner.NUM_LAYERS),
        lr_scale=lambda name: runner.PARAM_LR_SCALES.get(name, 1.0),
        decay=runner.is_decayed,
    )
    options.update(overrides)
    reference.step(grads, lr, **options)


def assert_close_to_reference(model, opt, reference: ReferenceAdamW, atol: float = 1e-5) -> None:
    actual = updated_weights(model, opt)
    worst = max(
        ((name, float(np.max(np.abs(actual[name] - reference.params[name])))) for name in actual),
        key=lambda item: item[1],
    )
    assert worst[1] <= atol, f"largest |difference| to the float64 reference: {worst}"


def exact_gradients(model, rng: np.random.RandomState) -> Dict[str, np.ndarray]:
    """Backward of ``sum(p * G)`` with ``G`` representable in the parameter's
    dtype, so that every gradient is exactly ``G``; returns ``G`` in float64."""
    grads = {
        name: paddle.to_tensor(rng.standard_normal(param.shape).astype("float32")).astype(param.dtype)
        for name, param in model.named_parameters()
    }
    loss = paddle.add_n(
        [(param.astype("float32") * grads[name].astype("float32")).sum() for name, param in model.named_parameters()]
    )
    loss.backward()
    for name, param in model.named_parameters():
        np.testing.assert_array_equal(param.grad.astype("float32").numpy(), grads[name].astype("float32").numpy())
    return {name: grad.astype("float32").numpy().astype("float64") for name, grad in grads.items()}


# --------------------------------------------------------------------------- scenarios
def check_tensor_betas(dtype: str, beta1: float = 0.8, beta2: float = 0.95) -> None:
    """Tensor betas with master weights: the numbers of those betas, and beta
    powers at ``beta**(steps + 1)`` (Paddle 3.3.1's AdamW starts them at 0.9/0.999)."""
    model = start_model(dtype)
    scheduler = runner.make_learning_rate("scheduler")
    opt = make_adamwdl(
        model, scheduler, beta1=paddle.to_tensor(beta1), beta2=paddle.to_tensor(beta2), multi_precision=True
    )
    reference = reference_for(model, beta1=beta1, beta2=beta2)
    rng = np.random.RandomState(3)
    for _ in range(NUM_STEPS):
        grads = exact_gradients(model, rng)
        lr = opt.get_lr()
        opt.step()
        opt.clear_grad()
        scheduler.step()
        reference_step(reference, grads, lr)
    for param in model.parameters():
        for accumulator, beta in ((opt._beta1_pow_acc_str, beta1), (opt._beta2_pow_acc_str, beta2)):
            power = float(opt._accumulators[accumulator][param.name].item())
            np.testing.assert_allclose(power, beta ** (NUM_STEPS + 1), rtol=1e-6, err_msg=f"{param.name} {accumulator}")
    assert_close_to_reference(model, opt, reference)


def expected_group_ratio(name: str) -> float:
    return layer_ratio(name, runner.LAYERWISE_DECAY, runner.NUM_LAYERS)


def expected_group_decay(name: str, ndim: int) -> float:
    """layer_decay_param_groups' rule: no decay for bias/norm names and 1-D parameters."""
    return 0.0 if ("bias" in name or "norm" in name or ndim <= 1) else runner.WEIGHT_DECAY


def check_layer_decay_groups_with_paddle_adamw(amp_level: Optional[str]) -> None:
    """``layer_decay_param_groups`` with ``paddle.optimizer.AdamW``: each
    parameter steps and decays with the global lr times its layer ratio times
    its own ParamAttr lr factor (the runner's model gives the pooler 2 and the
    classifier 0.5; Paddle's AdamW decays with the group's lr). ``amp_level``
    "O2": float16 weights, float32 master weights and a ``GradScaler``; None:
    float32."""
    model = start_model()
    own_factors = {name: float(param.optimize_attr["learning_rate"]) for name, param in model.named_parameters()}
    assert sorted(set(own_factors.values())) == [0.5, 1.0, 2.0]  # the factors matter below
    shapes = {name: len(param.shape) for name, param in model.named_parameters()}
    groups = layer_decay_param_groups(model, runner.LAYERWISE_DECAY, weight_decay=runner.WEIGHT_DECAY, layer_map="bert")
    scheduler = runner.make_learning_rate("scheduler")
    opt = paddle.optimizer.AdamW(
        learning_rate=scheduler, beta1=runner.BETA1, beta2=runner.BETA2, epsilon=runner.EPSILON,
        parameters=groups, multi_precision=amp_level == "O2",
    )
    scaler = None
    if amp_level is not None:
        if amp_level == "O2":
            model, opt = paddle.amp.decorate(models=model, optimizers=opt, level="O2", dtype="float16")
            assert any(param.dtype == paddle.float16 for param in model.parameters())
        scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**10)
    reference = reference_for(model)  # master weights start as the float16 values
    for batch in runner.batches(num_steps=NUM_STEPS):
        tensors = {key: paddle.to_tensor(value) for key, value in batch.items()}
        with paddle.amp.auto_cast(enable=amp_level is not None, level=amp_level or "O1", dtype="float16"):
            loss = runner.loss_fn(model, **tensors)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        grads = {name: param.grad.astype("float32").numpy().astype("float64") for name, param in model.named_parameters()}
        assert all(np.isfinite(grad).all() for grad in grads.values())
        lr = opt.get_lr()
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        opt.clear_grad()
        scheduler.step()
        reference.step(
            grads, lr, lr_scale=lambda name: expected_group_ratio(name) * own_factors[name],
            weight_decay=lambda name: expected_group_decay(name, shapes[name])
        )
    assert_close_to_reference(model, opt, reference)


def check_weight_decay_schedule_on_the_multi_tensor_path(dtype: str, amsgrad: bool = False) -> None:
    """Every step on the multi-tensor path (:func:`operator_off.flat_path`: the fused operator on
    CPU, Paddle's kernels on a GPU) while a schedule changes the coefficient (and with it the
    fused-decay decision), with master weights for float16/bfloat16 parameters (on CPU, which
    has no half-precision kernel, the update in float32 cast back), and the float64
    reference's numbers; ``amsgrad`` adds the kernel's ``moment2_max``."""
    model = start_model(dtype)
    schedule = WeightDecaySchedule(WD_START, WD_END, total_steps=WD_STEPS, style="linear")
    # beta2 = 0.9: the second moment forgets fast enough to fall between
    # steps, where amsgrad's maximum differs from it.
    opt = make_adamwdl(model, runner.BASE_LR, weight_decay=schedule, multi_precision=True, amsgrad=amsgrad, beta2=0.9)
    reference = reference_for(model, amsgrad=amsgrad, beta2=0.9)
    rng = np.random.RandomState(5)
    paths = []
    for step in range(NUM_STEPS):
        grads = exact_gradients(model, rng)
        opt.step()
        paths.append(tuple(opt.last_update_path))
        opt.clear_grad()
        reference_step(reference, grads, runner.BASE_LR, weight_decay=scheduled_weight_decay(step))
    assert paths == [flat_path()] * NUM_STEPS
    params = list(model.parameters())
    half = dtype in ("float16", "bfloat16")
    assert set(opt._master_weights) == ({param.name for param in params} if half else set())
    maxima = [key for key in opt.state_dict() if "moment2_max" in key]
    assert len(maxima) == (len(params) if amsgrad else 0)
    assert schedule.current_step == NUM_STEPS
    assert_close_to_reference(model, opt, reference)


def check_overflow_leaves_ema_schedule_and_weights(*, amp: bool, grouped: bool, overflow_step: int = 2) -> None:
    """An AdamWDL with a weight-decay schedule and an EMA updated when
    ``step_changed_weights`` says the step changed the weights (what the
    Trainer integration does). With ``amp`` (GPU only) step ``overflow_step``
    overflows under a ``GradScaler``: the weights, the accumulators, the EMA
    and the schedule stay as they were, and the run afterwards is the float64
    run without that step. Without ``amp`` every step counts."""
    model = start_model()
    schedule = WeightDecaySchedule(WD_START, WD_END, total_steps=WD_STEPS, style="linear")
    params = list(model.parameters())
    parameters = [{"params": params[::2]}, {"params": params[1::2]}] if grouped else params
    opt = make_adamwdl(model, runner.BASE_LR, weight_decay=schedule, parameters=parameters)
    ema = ExponentialMovingAverage(model, decay=EMA_DECAY)
    ema.register()
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**10, decr_every_n_nan_or_inf=1) if amp else None
    reference = reference_for(model)
    # Groups replace the ParamAttr lr factors by their learning_rate (1 here).
    lr_scale = 1.0 if grouped else (lambda name: runner.PARAM_LR_SCALES.get(name, 1.0))
    expected_average = {name: param.numpy().astype("float64") for name, param in model.named_parameters()}
    applied = 0
    for step, batch in enumerate(runner.batches(num_steps=NUM_STEPS)):
        tensors = {key: paddle.to_tensor(value) for key, value in batch.items()}
        with paddle.amp.auto_cast(enable=amp, level="O1", dtype="float16"):
            loss = runner.loss_fn(model, **tensors)
        overflow = amp and step == overflow_step
        if overflow:
            loss = loss * float("inf")  # every gradient becomes inf or nan
            before = optimizer_state(model, opt)
            before_average = {name: value.numpy() for name, value in ema.shadow.items()}
            before_counts = (ema.num_updates, schedule.current_step)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        grads = {name: param.grad.astype("float32").numpy().astype("float64") for name, param in model.named_parameters()}
        lr = opt.get_lr()
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        opt.clear_grad()
        if step_changed_weights(None, scaler):
            ema.update()
        if overflow:
            after = optimizer_state(model, opt)
            changed = [key for key in before if not np.array_equal(before[key], after[key], equal_nan=True)]
            assert not changed, f"the overflow step changed {changed}"
            assert (ema.num_updates, schedule.current_step) == before_counts
            for name, value in ema.shadow.items():
                np.testing.assert_array_equal(value.numpy(), before_average[name], err_msg=name)
            continue
        assert all(np.isfinite(grad).all() for grad in grads.values())
        reference_step(reference, grads, lr, lr_scale=lr_scale, weight_decay=scheduled_weight_decay(applied))
        applied += 1
        for name, param in model.named_parameters():
            weight = param.numpy().astype("float64")
            expected_average[name] = EMA_DECAY * expected_average[name] + (1.0 - EMA_DECAY) * weight
    assert applied == NUM_STEPS - (1 if amp else 0)
    assert ema.num_updates == applied and schedule.current_step == applied
    assert_close_to_reference(model, opt, reference)
    for name, value in ema.shadow.items():
        np.testing.assert_allclose(value.numpy().astype("float64"), expected_average[name], rtol=0, atol=1e-6, err_msg=name)
