"""Differential test: AdamWDL on generated cases against the float64 reference.

Hypothesis draws a set of parameters (shapes; float32, or float16/bfloat16
with ``multi_precision`` on CPU; a sparse embedding), how they are handed to
the optimizer (a list, or parameter groups with their own ``learning_rate``,
``weight_decay``, betas, epsilon, ``grad_clip`` and ``lazy_mode``), where the
layer ratios come from (the default ``layerwise_lr_decay``, a ``LayerMap``, a
custom function returning floats -- 0 and 1e-13 included, which the fused
kernel cannot serve -- or Tensors, or none at all), the learning rate (a float
or a scheduler), the weight decay (a float, a Tensor or a
``WeightDecaySchedule``), ``apply_decay_param_fun``, clipping, ``amsgrad``,
``lazy_mode``, and a run of several steps with, optionally, an AMP overflow
step, a checkpoint resume into a fresh optimizer, and a parameter that is
frozen when the optimizer is built and unfrozen later.

After every step every weight (and every float32 master weight) is compared
with :class:`reference_adamw.ReferenceAdamW`, which is fed the gradients the
optimizer was given and the options written out from the case, never the
optimizer's own numbers. Only the public API is used.

Every case runs twice, on AdamWDL's multi-tensor step and on its
per-parameter path (``use_multi_tensor=False``): both match the reference,
give the same bits at every step, and the multi-tensor path runs exactly in
the cases it serves (:func:`multi_tensor_applies`).

The named features each have an explicit case as well
(``test_named_feature_matches_float64_reference``), so that they are exercised
whatever the (derandomized) search draws.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from typing import Any

import numpy as np
import paddle
import pytest
from hypothesis import HealthCheck, given, settings
from paddle import nn
from paddle.utils import unique_name

from paddle_llrd import AdamWDL, LinearDecayWithWarmup, WeightDecaySchedule
from paddle_llrd.layer_decay.layer_maps import LayerMap
from differential_cases import (
    N_LAYERS,
    TENSOR_BETAS,
    Case,
    GroupCase,
    ParamCase,
    cases,
    group_of,
    lr_at,
    lr_scale_of,
    ratio_of,
    schedule_arguments,
    structured_name,
    weight_decay_at,
)
from reference_adamw import ReferenceAdamW, clip_by_global_norm
from adamwdl_runs import named_gradients

RTOL, ATOL = 1e-5, 1e-6  # a float32 weight or master weight against float64
# a float16/bfloat16 weight is its master weight rounded: within one unit in
# the last place of the reference (10 and 7 stored mantissa bits)
HALF_RTOL = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


# ------------------------------------------------------------- the run
class Run:
    """Builds the parameters and the optimizer of a case; steps it; re-builds it from a checkpoint."""

    def __init__(self, case: Case, use_multi_tensor: bool | None = None):
        self.case = case
        self.use_multi_tensor = use_multi_tensor
        self.names = [structured_name(p, i) for i, p in enumerate(case.params)]
        self.params: list[paddle.Tensor] = []
        rng = np.random.default_rng(case.seed)
        for spec in case.params:
            param = paddle.create_parameter(
                list(spec.shape),
                "float32",
                attr=paddle.ParamAttr(learning_rate=spec.lr_attr),
                default_initializer=nn.initializer.Assign(rng.standard_normal(spec.shape).astype("float32")),
            )
            if spec.dtype != "float32":
                param = self._as_half(param, spec)
            param.stop_gradient = spec.unfrozen_at > 0
            self.params.append(param)
        self.by_name = dict(zip(self.names, self.params))
        self.name_dict = {p.name: n for n, p in self.by_name.items()}
        self.scheduler: paddle.optimizer.lr.LRScheduler | None = None
        self.optimizer = self._build()

    @staticmethod
    def _as_half(param: paddle.Tensor, spec: ParamCase) -> paddle.Tensor:
        half = paddle.create_parameter(
            list(spec.shape),
            spec.dtype,
            attr=paddle.ParamAttr(learning_rate=spec.lr_attr),
            default_initializer=nn.initializer.Constant(0.0),
        )
        half.set_value(param.astype(spec.dtype))
        return half

    def _ratio_function(self):
        case = self.case
        ratios = {p.name: ratio_of(case, spec, i) for i, (spec, p) in enumerate(zip(case.params, self.params))}
        if case.ratios == "layerwise":
            return dict(layerwise_decay=case.layerwise_decay, name_dict=self.name_dict)
        if case.ratios == "layer_map":
            return dict(
                layerwise_decay=case.layerwise_decay,
                name_dict=self.name_dict,
                set_param_lr_fun=LayerMap(n_layers=N_LAYERS, family="bert"),
            )
        if case.ratios == "none":
            return dict(set_param_lr_fun=None)
        as_tensor = case.ratios == "tensor"

        def ratio(decay_rate, name_dict, n_layers, param):
            value = ratios[param.name]
            return paddle.to_tensor(value, dtype="float32") if as_tensor else value

        return dict(layerwise_decay=0.9, set_param_lr_fun=ratio)

    def _build(self) -> AdamWDL:
        case = self.case
        if case.lr == "step_decay":
            self.scheduler = paddle.optimizer.lr.StepDecay(case.base_lr, step_size=2, gamma=0.5)
        elif case.lr == "warmup":
            self.scheduler = LinearDecayWithWarmup(case.base_lr, total_steps=case.steps + 1, warmup=2)
        learning_rate = case.base_lr if self.scheduler is None else self.scheduler
        if case.weight_decay_kind == "tensor":
            weight_decay: Any = paddle.to_tensor(case.weight_decay, dtype="float32")
        elif case.weight_decay_kind in ("linear", "cosine"):
            weight_decay = WeightDecaySchedule(*schedule_arguments(case), style=case.weight_decay_kind)
        else:
            weight_decay = case.weight_decay
        if case.groups is None:
            parameters: Any = list(self.params)
        else:
            parameters = []
            for index, group in enumerate(case.groups):
                entry: dict[str, Any] = {
                    "params": [p for spec, p in zip(case.params, self.params) if spec.group == index]
                }
                for key in ("learning_rate", "weight_decay", "beta1", "beta2", "epsilon", "lazy_mode"):
                    if getattr(group, key) is not None:
                        entry[key] = getattr(group, key)
                if group.clip_norm is not None:
                    entry["grad_clip"] = nn.ClipGradByGlobalNorm(group.clip_norm)
                parameters.append(entry)
        decayed = {p.name for spec, p in zip(case.params, self.params) if spec.decayed}
        return AdamWDL(
            learning_rate=learning_rate,
            parameters=parameters,
            weight_decay=weight_decay,
            apply_decay_param_fun=(lambda name: name in decayed) if case.decay_filter else None,
            grad_clip=nn.ClipGradByGlobalNorm(case.clip_norm) if case.clip_norm is not None else None,
            lazy_mode=case.lazy_mode,
            multi_precision=case.multi_precision,
            n_layers=N_LAYERS,
            amsgrad=case.amsgrad,
            use_multi_tensor=self.use_multi_tensor,
            **self._betas(),
            **self._ratio_function(),
        )

    def _betas(self) -> dict[str, Any]:
        if not self.case.tensor_betas:
            return {}
        return {key: paddle.to_tensor(value, dtype="float32") for key, value in zip(("beta1", "beta2"), TENSOR_BETAS)}

    def resume(self, checkpoint: dict[str, Any]) -> None:
        """A fresh optimizer (and scheduler and weight-decay schedule) loads ``checkpoint``."""
        self.optimizer = self._build()
        self.optimizer.set_state_dict(checkpoint)

    def backward(self, step: int, rng: np.random.Generator) -> None:
        """loss = sum(p * G) (for a sparse table: of the rows looked up), G standard normal."""
        terms = []
        for spec, param in zip(self.case.params, self.params):
            if spec.unfrozen_at == step and step > 0:
                param.stop_gradient = False
            if spec.sparse:
                rows = spec.shape[0]
                ids = rng.integers(0, rows // 2, (5,)) + (step % 2) * (rows // 2)  # half the rows per step
                looked_up = nn.functional.embedding(paddle.to_tensor(ids), param, sparse=True)
                weights = rng.standard_normal((5, spec.shape[1])).astype("float32")
                terms.append((looked_up * paddle.to_tensor(weights)).sum())
            else:
                weights = rng.standard_normal(spec.shape).astype("float32")
                terms.append((param.astype("float32") * paddle.to_tensor(weights)).sum())
        paddle.add_n(terms).backward()

    def gradients(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The float64 gradients the optimizer is given, by structured name, and the rows of sparse ones."""
        grads, rows = named_gradients(self.by_name.items())
        assert set(rows) == {n for n, spec in zip(self.names, self.case.params) if spec.sparse and n in grads}
        return grads, rows

    def master_weights(self) -> dict[str, np.ndarray]:
        masters = self.optimizer.state_dict().get("master_weights", {})
        return {name: masters[p.name].numpy().astype(np.float64) for name, p in self.by_name.items() if p.name in masters}


def _saved_and_loaded(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` written with ``paddle.save`` and read back, as a resumed run reads it."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "optimizer.pdopt")
        paddle.save(state, path)
        return paddle.load(path)


def reference_step(case: Case, reference: ReferenceAdamW, grads: dict, rows: dict, step: int, applied: int) -> None:
    specs = {structured_name(p, i): (i, p) for i, p in enumerate(case.params)}
    clipped = {}
    for group_index in range(len(case.groups) if case.groups is not None else 1):
        members = {n: g for n, g in grads.items() if case.groups is None or specs[n][1].group == group_index}
        clip_norm = case.clip_norm
        if case.groups is not None and case.groups[group_index].clip_norm is not None:
            clip_norm = case.groups[group_index].clip_norm
        clipped.update(clip_by_global_norm(members, clip_norm) if clip_norm is not None and members else members)

    def option(key: str):
        return lambda name: getattr(group_of(case, specs[name][1]), key)

    def lazy(name: str) -> bool:
        own = group_of(case, specs[name][1]).lazy_mode
        return case.lazy_mode if own is None else own

    default_decay = weight_decay_at(case, applied)
    reference.step(
        clipped,
        lr_at(case, step),
        ratio=lambda name: ratio_of(case, specs[name][1], specs[name][0]),
        lr_scale=lambda name: lr_scale_of(case, specs[name][1]),
        decay=lambda name: specs[name][1].decayed or not case.decay_filter,
        weight_decay=lambda name: (
            default_decay if group_of(case, specs[name][1]).weight_decay is None else group_of(case, specs[name][1]).weight_decay
        ),
        beta1=option("beta1"),
        beta2=option("beta2"),
        epsilon=option("epsilon"),
        rows=lambda name: rows.get(name) if lazy(name) else None,
    )


def assert_matches_reference(case: Case, run: Run, reference: ReferenceAdamW, step: int) -> None:
    masters = run.master_weights()
    for index, (name, param) in enumerate(run.by_name.items()):
        expected = reference.params[name]
        dtype = case.params[index].dtype
        context = f"{name} ({dtype}) after step {step} of {case}"
        if dtype == "float32":
            np.testing.assert_allclose(param.numpy(), expected, rtol=RTOL, atol=ATOL, err_msg=context)
            continue
        if name in masters:
            np.testing.assert_allclose(masters[name], expected, rtol=RTOL, atol=ATOL, err_msg=f"master of {context}")
        value = param.astype("float32").numpy().astype(np.float64)
        np.testing.assert_allclose(value, expected, rtol=HALF_RTOL[dtype], atol=ATOL, err_msg=context)


def multi_tensor_applies(case: Case) -> bool:
    """Whether AdamWDL's multi-tensor step serves ``case`` (written out from the rules in its docs)."""
    return (
        not any(spec.sparse for spec in case.params)
        and case.ratios in ("layerwise", "layer_map", "none")
        # (a Tensor weight_decay is read as a float by Paddle's AdamW; a group's float betas replace Tensor ones)
        and not (
            case.tensor_betas
            and (case.groups is None or any(g.beta1 is None or g.beta2 is None for g in case.groups))
        )
    )


def run_case(case: Case, use_multi_tensor: bool | None = None) -> tuple[list[dict[str, np.ndarray]], int]:
    """Run ``case`` against the reference; returns every weight and master weight after
    each step, and how many steps took the multi-tensor path."""
    paddle.disable_static()
    trajectory: list[dict[str, np.ndarray]] = []
    multi_tensor_steps = 0
    with contextlib.ExitStack() as names:
        # Each optimizer creates its accumulators (lazily, at its first step)
        # under names of its own, as in a process of its own: a checkpoint's
        # keys are those a fresh process gives.
        names.enter_context(unique_name.guard())
        run = Run(case, use_multi_tensor)
        initial = {name: p.astype("float32").numpy() for name, p in run.by_name.items()}
        betas = {}
        if case.tensor_betas:
            betas = {key: float(np.float32(value)) for key, value in zip(("beta1", "beta2"), TENSOR_BETAS)}
        reference = ReferenceAdamW(initial, amsgrad=case.amsgrad, **betas)
        rng = np.random.default_rng(case.seed + 1)
        applied = 0  # steps that changed the weights (the weight-decay schedule's count)
        for step in range(case.steps):
            if step == case.resume_at:
                checkpoint = _saved_and_loaded(run.optimizer.state_dict())
                names.close()
                names.enter_context(unique_name.guard())
                run.resume(checkpoint)
            overflow = step == case.overflow_at
            if overflow:
                run.optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(True))
            run.backward(step, rng)
            grads, rows = run.gradients()
            before = {name: p.astype("float32").numpy() for name, p in run.by_name.items()}
            run.optimizer.step()
            multi_tensor_steps += run.optimizer.last_update_path.path != "per_parameter"
            run.optimizer.clear_grad()
            if overflow:
                run.optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(False))
                for name, param in run.by_name.items():
                    np.testing.assert_array_equal(param.astype("float32").numpy(), before[name], err_msg=f"{name}: overflow step of {case}")
            else:
                reference_step(case, reference, grads, rows, step, applied)
                applied += 1
            if run.scheduler is not None:
                run.scheduler.step()
            assert_matches_reference(case, run, reference, step)
            snapshot = {name: p.numpy().copy() for name, p in run.by_name.items()}
            snapshot.update({f"master {n}": m for n, m in run.master_weights().items()})
            trajectory.append(snapshot)
    return trajectory, multi_tensor_steps


def run_both_paths(case: Case) -> None:
    """``case`` on the multi-tensor and the per-parameter path: each matches the
    reference, and the two give the same bits at every step."""
    multi, multi_steps = run_case(case, use_multi_tensor=None)
    single, single_steps = run_case(case, use_multi_tensor=False)
    assert single_steps == 0
    if multi_tensor_applies(case):
        assert multi_steps > 0, f"the multi-tensor path never ran for {case}"
    else:
        assert multi_steps == 0, f"the multi-tensor path ran for {case}, which it does not serve"
    for step, (got, expected) in enumerate(zip(multi, single)):
        assert got.keys() == expected.keys()
        for name in got:
            np.testing.assert_array_equal(
                got[name], expected[name], err_msg=f"{name}: multi-tensor != per-parameter after step {step} of {case}"
            )


# ------------------------------------------------ named features, explicitly
EMBEDDING = ParamCase(shape=(8, 3), position="embeddings", sparse=True)
DENSE = (ParamCase(shape=(4, 3), position="layer0"), ParamCase(shape=(3,), position="layer1", decayed=False))
EXAMPLES = {
    "fused_layerwise": Case(params=(*DENSE, ParamCase(shape=(2, 2))), ratios="layerwise", layerwise_decay=0.5),
    "general_zero_and_tiny_ratios": Case(
        params=(ParamCase(ratio=0.0), ParamCase(shape=(2, 3), ratio=1e-13), ParamCase(shape=(5,), ratio=0.5)),
        ratios="function",
    ),
    "tensor_ratios": Case(params=(ParamCase(ratio=0.25), ParamCase(shape=(4,), ratio=1.5)), ratios="tensor"),
    "groups_own_settings_and_clip": Case(
        params=(*DENSE, ParamCase(shape=(2, 2), group=1), ParamCase(shape=(3,), group=1, position="embeddings")),
        groups=(
            GroupCase(learning_rate=0.5, weight_decay=0.3, beta1=0.8, beta2=0.95, epsilon=1e-6, clip_norm=0.5),
            GroupCase(learning_rate=2.0),
        ),
        clip_norm=3.0,
        decay_filter=True,
    ),
    "sparse_lazy": Case(params=(EMBEDDING, *DENSE), lazy_mode=True, steps=4),
    "sparse_dense_mode": Case(params=(EMBEDDING, *DENSE), lazy_mode=False, steps=4),
    "sparse_group_lazy_overrides": Case(
        params=(EMBEDDING, dataclasses.replace(DENSE[0], group=1)),
        groups=(GroupCase(lazy_mode=True), GroupCase()),
        lazy_mode=False,
    ),
    "amsgrad_general_path": Case(params=(ParamCase(ratio=0.0), ParamCase(shape=(4,), ratio=0.5)), ratios="tensor", amsgrad=True),
    "amsgrad_after_resume": Case(params=DENSE, amsgrad=True, steps=5, resume_at=2),
    "amsgrad_sparse_lazy": Case(params=(EMBEDDING, *DENSE), amsgrad=True, lazy_mode=True),
    "amsgrad_sparse_dense_mode": Case(params=(EMBEDDING, *DENSE), amsgrad=True, lazy_mode=False),
    "tensor_weight_decay": Case(params=DENSE, weight_decay=0.3, weight_decay_kind="tensor"),
    "unfrozen_after_build": Case(
        params=(DENSE[0], ParamCase(shape=(3, 2), position="layer1", unfrozen_at=2)), steps=5
    ),
    "overflow_step_with_schedules": Case(
        params=DENSE, lr="step_decay", weight_decay_kind="cosine", weight_decay=0.2, overflow_at=1, steps=5
    ),
    "resume_with_warmup_and_schedule": Case(
        params=(*DENSE, EMBEDDING), lr="warmup", weight_decay_kind="linear", resume_at=2, steps=5, lazy_mode=True
    ),
    # Paddle 3.3.1's AdamW cannot go on from a checkpoint taken while a
    # parameter was frozen once that parameter, listed first, is unfrozen (a
    # bare "AssertionError: Optimizer set error, ..._moment1_0 should in state
    # dict"); an uninterrupted run gives it fresh moments, so must a resumed one.
    "unfrozen_after_resume": Case(
        params=(ParamCase(shape=(3, 2), position="layer1", unfrozen_at=2), DENSE[0]), resume_at=2, steps=4
    ),
    # Paddle 3.3.1's AdamW starts the beta powers at 0.9/0.999 whatever the Tensors hold.
    "tensor_betas": Case(params=(*DENSE, EMBEDDING), tensor_betas=True, lazy_mode=True, resume_at=2, steps=5),
    "half_master_weights": Case(
        params=(
            ParamCase(shape=(4, 3), dtype="float16", position="layer0"),
            ParamCase(shape=(5,), dtype="bfloat16", position="embeddings"),
            ParamCase(shape=(2, 2)),
        ),
        resume_at=2,
        overflow_at=1,
        steps=5,
    ),
    "no_ratio_function": Case(params=(*DENSE, EMBEDDING), ratios="none", lazy_mode=True, clip_norm=0.5),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_named_feature_matches_float64_reference(name: str) -> None:
    run_both_paths(EXAMPLES[name])


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
@given(case=cases())
def test_generated_case_matches_float64_reference(case: Case) -> None:
    run_both_paths(case)
