"""One AdamWDL optimisation pass: what it asks first and what it keeps until it ends.

Paddle builds a pass per step (dygraph) or per program (``minimize``), one per
parameter group with groups. :class:`OptimizationPass`, a mixin that
:class:`~paddle_llrd.AdamWDL` puts before ``paddle.optimizer.AdamW`` in its
bases, wraps that pass:

* before any parameter changes, it asks ``set_param_lr_fun`` about every
  parameter of the pass (:func:`~paddle_llrd.optim.ratios.resolve_update_scales`),
  so that a function that raises, or a bad ratio, changes nothing;
* during the pass it keeps what is shared between parameters: the global lr
  times each distinct lr factor (one tensor per factor, not per parameter),
  the decay factor ``1 - lr * coeff`` per lr tensor (``_lr_to_coeff``), the
  fused-decay decisions and the Adam settings of the group being updated;
* when the pass ends, also by an exception, it drops all of them, since the
  next pass may have a new lr, weight decay or ratios.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import paddle
from paddle.base import framework

from .updates import AdamSettings
from .ratios import LrScale, RatioCache, is_tensor, resolve_update_scales, update_scale


class OptimizationPass:
    """Pass-scoped state of a ``paddle.optimizer.AdamW`` subclass with layer ratios (a mixin before it).

    The class using it sets ``set_param_lr_fun`` and ``_ratio_cache`` and
    calls :meth:`_start_without_pass` in its constructor.
    """

    set_param_lr_fun: Callable[[Any], Any] | None
    _ratio_cache: RatioCache | None
    # The Adam step's lr factor of each parameter of the pass (or of every
    # group of a grouped step()) from a ratio function that is not cached,
    # asked before any parameter changes.
    _update_scales: dict[str, LrScale]
    _step_update_scales: dict[str, LrScale] | None
    _lr_to_coeff: dict[Any, Any]
    _scaled_lrs: dict[float, Any]
    _pass_global_lr: Any
    _fused_coeffs: dict[Any, float | None]  # see UpdatePlan.fused_coeff_for
    _pass_settings: AdamSettings | None

    def _start_without_pass(self) -> None:
        """The state between passes (the constructor's)."""
        self._step_update_scales = None
        self._end_pass()

    # ----------------------------------------------------------- layer ratios
    def _active_ratio_cache(self) -> RatioCache | None:
        """The cache of a ratio function pure in the name, unless ``set_param_lr_fun`` was replaced since."""
        cache = self._ratio_cache
        if cache is None or self.set_param_lr_fun is not cache.fun:
            return None
        return cache

    def _update_scale(self, param: Any, optimize_attr: dict[str, Any] | None, base_scale: LrScale) -> LrScale:
        """:math:`s_p r_p`, the lr factor of the parameter's Adam step (``base_scale`` is :math:`s_p`)."""
        return update_scale(self.set_param_lr_fun, self._active_ratio_cache(), param, optimize_attr, base_scale)

    def _resolve_update_scales(self, params: Iterable[Any]) -> dict[str, LrScale]:
        """Ask ``set_param_lr_fun`` about every parameter before any update
        (:func:`~paddle_llrd.optim.ratios.resolve_update_scales`). Empty on a
        dygraph AMP overflow step, which updates nothing, so that a function
        is called once per update."""
        if framework.in_dygraph_mode():
            found_inf = self._get_auxiliary_var("found_inf")
            if found_inf is not None and bool(found_inf):
                return {}
        return resolve_update_scales(self.set_param_lr_fun, self._active_ratio_cache(), params)

    # -------------------------------------------------------- optimisation pass
    def _begin_pass(self, parameters_and_grads: Any) -> None:
        """What may fail on user input happens here, before any parameter changes:
        the schedule check and ``set_param_lr_fun`` for every parameter of the pass."""
        # Static programs built without minimize() (apply_gradients, a
        # to_static full graph) reach the schedule check here.
        self._refuse_schedule_outside_dygraph()
        if self._step_update_scales is not None:
            self._update_scales = self._step_update_scales
            return
        pairs = (
            parameters_and_grads["params"]
            if isinstance(parameters_and_grads, dict)
            else parameters_and_grads
        )
        self._update_scales = self._resolve_update_scales(
            param for param, grad in pairs if grad is not None and not param.stop_gradient
        )

    def _end_pass(self) -> None:
        self._update_scales = {}
        self._lr_to_coeff = {}
        self._scaled_lrs = {}
        self._pass_global_lr = None
        self._pass_settings = None
        self._fused_coeffs = {}

    def _run_pass(self, create_pass: Callable[..., Any], parameters_and_grads: Any, param_group_idx: int) -> Any:
        self._begin_pass(parameters_and_grads)
        try:
            return create_pass(parameters_and_grads, param_group_idx=param_group_idx)
        finally:
            self._end_pass()

    # Paddle builds a pass with one of these two, by IR (dygraph uses the first).
    def _create_optimization_pass(self, parameters_and_grads: Any, param_group_idx: int = 0) -> Any:
        return self._run_pass(super()._create_optimization_pass, parameters_and_grads, param_group_idx)

    def _pir_create_optimization_pass(self, parameters_and_grads: Any, param_group_idx: int = 0) -> Any:
        return self._run_pass(super()._pir_create_optimization_pass, parameters_and_grads, param_group_idx)

    # -------------------------------------------------------------- lr tensors
    def _lr_for_scale(self, scale: LrScale) -> Any:
        """The global lr times ``scale``, one tensor per distinct float per pass."""
        global_lr = self._pass_global_lr
        if global_lr is None:
            global_lr = self._pass_global_lr = self._global_learning_rate()
        if type(scale) is not float:
            if is_tensor(scale):
                return self._scale_lr(global_lr, scale)
            scale = float(scale)
        if scale == 1.0:
            return global_lr
        scaled = self._scaled_lrs.get(scale)
        if scaled is None:
            scaled = self._scaled_lrs[scale] = self._scale_lr(global_lr, scale)
        return scaled

    @staticmethod
    def _scale_lr(global_lr: Any, scale: Any) -> Any:
        if framework.in_dygraph_mode():
            return global_lr * scale
        with paddle.static.default_main_program()._lr_schedule_guard(
            is_with_opt=True
        ), framework.name_scope("scale_with_param_lr"):
            return global_lr * scale

    # ---------------------------------------------------- the group's settings
    def _update_param_group(self, parameters: dict[str, Any]) -> Any:
        self._pass_settings = None  # the group's betas, epsilon and lazy mode
        return super()._update_param_group(parameters)

    def _settings(self) -> AdamSettings:
        settings = self._pass_settings
        if settings is None:
            settings = self._pass_settings = AdamSettings.of(self)
        return settings
