"""What an AdamWDL update of one parameter needs that does not change between steps.

:class:`UpdatePlan` holds a parameter's accumulators, master weight, whether it
decays and how its kernel runs; :func:`plan_update` builds one. In dygraph the
optimizer keeps a plan per parameter and reuses it across steps (the lookups
``paddle.optimizer.AdamW`` repeats every step, done once); in a static
program every update builds its own, as the program is built once anyway.

The decay decision (fused coefficient or a separate decay op) depends on the
parameter's lr factor, its ratio and the weight decay, which may change
between steps; :meth:`UpdatePlan.fused_coeff_for` recomputes it only when one
of them did.
"""
from __future__ import annotations

from typing import Any

import paddle
from paddle.base import framework

from .ratios import LrScale, fused_decay_coeff

_NOT_DECIDED = object()


class UpdatePlan:
    """One parameter's update: its state tensors and the kernel's settings.

    ``moments`` are ``(moment1, moment2, moment2_max or None, beta1_pow,
    beta2_pow)``; ``master_weight`` the float32 copy of a float16/bfloat16
    parameter under ``multi_precision`` (else None); ``fp32_fallback`` whether
    the float32 kernel updates the master weight and casts it into the
    parameter (no half-precision ``adamw`` kernel on CPU).
    """

    __slots__ = ("decays", "moments", "master_weight", "fp32_fallback", "_decision_key", "_fused_coeff")

    def __init__(self, decays: bool, moments: tuple[Any, ...], master_weight: Any, fp32_fallback: bool) -> None:
        self.decays = decays
        self.moments = moments
        self.master_weight = master_weight
        self.fp32_fallback = fp32_fallback
        self._decision_key: Any = _NOT_DECIDED
        self._fused_coeff: float | None = None

    def fused_coeff_for(
        self, coeff: Any, base_scale: LrScale, update_scale: LrScale, *, force_general: bool, decided: dict[Any, Any]
    ) -> float | None:
        """The fused kernel's coefficient for this update, None for the separate decay op.

        Kept while ``coeff`` (the weight decay), ``base_scale`` (:math:`s_p`)
        and ``update_scale`` (:math:`s_p r_p`) are the same numbers; when one
        changes (a weight-decay schedule's next value) the decision is taken
        once per distinct key and pass (``decided``, which the optimizer empties
        after each pass), not per parameter. A Tensor among them always takes
        the separate op.
        """
        if not self.decays or force_general:
            return None
        if type(base_scale) is float and type(update_scale) is float and type(coeff) is float:
            key = (coeff, base_scale, update_scale)
            if key != self._decision_key:
                fused = decided.get(key, _NOT_DECIDED)
                if fused is _NOT_DECIDED:
                    fused = decided[key] = fused_decay_coeff(coeff, base_scale, update_scale)
                self._fused_coeff, self._decision_key = fused, key
            return self._fused_coeff
        return fused_decay_coeff(coeff, base_scale, update_scale)  # None for a Tensor among them


def plan_update(optimizer: Any, param: Any) -> UpdatePlan:
    """The plan of ``param``'s update with ``optimizer`` (an ``AdamWDL``) as it is now.

    The accumulators must exist (Paddle creates them at the start of a pass).
    """
    get = optimizer._get_accumulator_master
    moments = (
        get(optimizer._moment1_acc_str, param),
        get(optimizer._moment2_acc_str, param),
        get(optimizer._moment2_acc_max_str, param) if optimizer._amsgrad else None,
        get(optimizer._beta1_pow_acc_str, param),
        get(optimizer._beta2_pow_acc_str, param),
    )
    master = uses_master(optimizer, param)
    return UpdatePlan(
        decays=optimizer._decays(param),
        moments=moments,
        master_weight=optimizer._master_weights[param.name] if master else None,
        fp32_fallback=master and _on_cpu(param),
    )


def uses_master(optimizer: Any, param: Any) -> bool:
    """Whether ``optimizer`` updates ``param`` through a float32 master weight (``multi_precision``, float16/bfloat16)."""
    return optimizer._multi_precision and optimizer._is_dtype_fp16_or_bf16(param.dtype)


def _on_cpu(param: Any) -> bool:
    """Where Paddle has no half-precision ``adamw`` kernel (CPU: float32/float64 only)."""
    if framework.in_dygraph_mode():
        return param.place.is_cpu_place()
    return paddle.device.get_device() == "cpu"
