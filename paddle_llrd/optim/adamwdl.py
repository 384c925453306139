"""AdamW with layer-wise learning-rate decay (``AdamWDL``), exact on Paddle 3. See :doc:`/adamwdl`.

The class owns the parameters, the optimizer state and the public API, and
overrides the Paddle hooks it must. One step, top to bottom:
:meth:`AdamWDL.step` -> :func:`~paddle_llrd.optim.dispatch.multi_tensor_step`
(the multi-tensor step, where the dispatch allows it) or Paddle's pass ->
``_run_pass`` (ratios and decay rule asked, an
:class:`~paddle_llrd.optim.updates.UpdatePass` opened) -> per parameter
:meth:`AdamWDL._append_optimize_op` -> :func:`~paddle_llrd.optim.dispatch.parameter_route`
-> :func:`~paddle_llrd.optim.kernels.adamw_update`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import paddle
from paddle.base import framework
from paddle.base.dygraph import base as imperative_base
from paddle.base.layer_helper import LayerHelper
from paddle.optimizer import AdamW

from ..layer_decay.layerwise import layerwise_lr_decay
from ..schedules.weight_decay import WeightDecaySchedule, claim_schedule
from .optimizer_checks import check_added_group, checked_adamwdl_arguments, group_with_weight_decay, refuse_groups_in_program
from .checkpoint import STRUCTURED_NAMES_KEY, matched_state_dict, structured_names_record
from .dispatch import MULTI_TENSOR, UpdatePath, multi_tensor_step, parameter_route
from .eager import runs_eagerly_under_sot
from .kernels import adamw_kernel, adamw_update, decoupled_decay
from .multi_tensor import MultiTensorStep
from .param_lr_rows import ParamLrRow, param_lr_rows
from .scheduled_decay import ScheduledDecay
from .ratios import RatioCache, is_pure_in_name, resolve_update_scales, update_scale
from .updates import (
    LrScale,
    UpdatePass,
    UpdatePlan,
    accumulators_as_started,
    base_scale_of,
    lr_attributes,
    plan_update,
    refit_plans,
    uses_master,
)

if TYPE_CHECKING:
    from paddle import Tensor
    from paddle.nn.clip import GradientClipBase
    from paddle.optimizer.lr import LRScheduler

__all__ = ["AdamWDL", "ParamLrRow", "UpdatePath", "STRUCTURED_NAMES_KEY", "WEIGHT_DECAY_SCHEDULE_KEY"]

# The entry of the optimizer's state_dict() that holds its schedule's state.
WEIGHT_DECAY_SCHEDULE_KEY = "weight_decay_schedule"
# The entries of state_dict() beyond paddle.optimizer.AdamW's, none of them a Tensor.
EXTRA_STATE_KEYS = (WEIGHT_DECAY_SCHEDULE_KEY, STRUCTURED_NAMES_KEY)

class AdamWDL(AdamW):
    r"""AdamW with layer-wise learning-rate decay and exact decoupled weight decay.

    For a parameter :math:`p` with gradient :math:`g` at step :math:`t`, with
    :math:`\eta` the global learning rate, :math:`s_p` its lr factor
    ``p.optimize_attr['learning_rate']``, :math:`r_p` the ratio
    ``set_param_lr_fun(p)``, :math:`\lambda` the weight decay and
    :math:`\eta_p = \eta\, s_p`:

    .. math::

        p &\leftarrow p\,(1 - \eta_p \lambda)
            \qquad\text{(for a parameter that decays)}\\
        m &\leftarrow \beta_1 m + (1-\beta_1)\, g, \qquad
        v \leftarrow \beta_2 v + (1-\beta_2)\, g^2\\
        p &\leftarrow p - \eta_p r_p\,\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\,
            \frac{m}{\sqrt{v} + \epsilon\sqrt{1-\beta_2^t}}

    A parameter decays where ``apply_decay_param_fun(p.name)`` is true (all without one).
    With ``set_param_lr_fun=None`` the numbers are ``paddle.optimizer.AdamW``'s,
    bit for bit. How the ratios are asked and cached, the update paths, the
    multi-tensor step and the checks are described in :doc:`/adamwdl`.

    Args:
        learning_rate (float|LRScheduler): :math:`\eta`. Default 0.001.
        beta1, beta2, epsilon (float|Tensor): as in Adam. Defaults 0.9, 0.999, 1e-8.
        parameters (list|None): parameters, or parameter-group dicts (keys
            ``params``, ``learning_rate`` (a factor of :math:`\eta`),
            ``weight_decay``/``coeff``, ``beta1``, ``beta2``, ``epsilon``,
            ``lazy_mode``, ``grad_clip``). Required in dygraph mode.
        weight_decay (float|Tensor|WeightDecaySchedule): :math:`\lambda`, or a
            schedule of it (:doc:`/weight_decay`). Default 0.01.
        apply_decay_param_fun (Callable[[str], bool]|None): decay only the
            parameters whose name it accepts. Default None (all).
        grad_clip (GradientClipBase|None): gradient clipping. Default None.
        lazy_mode (bool): sparse gradients update only their rows' moments. Default False.
        multi_precision (bool): float32 master weights for float16/bfloat16. Default False.
        layerwise_decay (float|Tensor): the ratio between adjacent layers. Default 1.0.
        n_layers (int): the number of encoder layers. Default 12.
        set_param_lr_fun (Callable|None): ``fn(layerwise_decay, name_dict,
            n_layers, param)`` giving :math:`r_p` (or None after editing
            ``optimize_attr``). Default :func:`~paddle_llrd.layerwise_lr_decay`.
        name_dict (dict|None): ``{param.name: structured name}``.
        name (str|None): prefix of the accumulator names.
        amsgrad (bool): keyword only; AMSGrad. Default False.
        use_multi_tensor (bool|None): keyword only; None/True: one kernel call
            per group of like parameters where that applies
            (:ref:`adamwdl-multi-tensor`); False: one call per parameter.
        num_threads (int|None): keyword only; threads of the multi-tensor
            step's CPU kernels. None: ``PADDLE_LLRD_NUM_THREADS``, else the
            usable cores divided among the local ranks.

    Raises:
        TypeError, ValueError: an argument (or a group's) of the wrong type or out of
            range, named; at a step, a ratio that is no finite number >= 0, before any
            parameter changes (the cases: :doc:`/adamwdl`).
        KeyError: a trainable parameter is missing from ``name_dict`` (default function).

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamWDL
        >>> from paddle_llrd.models.tiny_bert import (
        ...     TinyBertConfig, TinyBertForSequenceClassification)
        >>> model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=2))
        >>> opt = AdamWDL(learning_rate=1e-3, parameters=model.parameters(),
        ...               weight_decay=0.01, layerwise_decay=0.8, n_layers=2,
        ...               name_dict={p.name: n for n, p in model.named_parameters()},
        ...               apply_decay_param_fun=lambda n: not n.endswith(".b_0"))
        >>> loss = paddle.nn.functional.cross_entropy(
        ...     model(paddle.randint(0, 100, [8, 16])), paddle.randint(0, 2, [8]))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
    """

    # The decay's lr rule (dispatch.decay_scale): AdamWDL decays with the lr
    # before the layer ratio; a subclass with Paddle's lr_ratio rule sets True.
    _decay_with_ratio: ClassVar[bool] = False

    def __init__(
        self,
        learning_rate: float | LRScheduler = 0.001,
        beta1: float | Tensor = 0.9,
        beta2: float | Tensor = 0.999,
        epsilon: float | Tensor = 1e-8,
        parameters: Sequence[Tensor] | Sequence[dict[str, Any]] | None = None,
        weight_decay: float | Tensor | WeightDecaySchedule = 0.01,
        apply_decay_param_fun: Callable[[str], bool] | None = None,
        grad_clip: GradientClipBase | None = None,
        lazy_mode: bool = False,
        multi_precision: bool = False,
        layerwise_decay: float | Tensor = 1.0,
        n_layers: int = 12,
        set_param_lr_fun: Callable[..., Any] | None = layerwise_lr_decay,
        name_dict: Mapping[str, str] | None = None,
        name: str | None = None,
        *,
        amsgrad: bool = False,
        use_multi_tensor: bool | None = None,
        num_threads: int | None = None,
    ) -> None:
        parameters = checked_adamwdl_arguments(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, parameters=parameters,
            weight_decay=weight_decay, apply_decay_param_fun=apply_decay_param_fun, layerwise_decay=layerwise_decay,
            n_layers=n_layers, set_param_lr_fun=set_param_lr_fun, name_dict=name_dict, use_multi_tensor=use_multi_tensor,
        )
        multi_tensor = MultiTensorStep(num_threads)  # (checks num_threads, whichever path)
        # Paddle's constructor adds the parameter groups (_add_param_group),
        # which notes the groups that follow the schedule.
        self._scheduled_decay: ScheduledDecay | None = None
        if isinstance(weight_decay, WeightDecaySchedule):
            self._scheduled_decay = ScheduledDecay(weight_decay)
            weight_decay = weight_decay()
        super().__init__(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, parameters=parameters,
            weight_decay=weight_decay, apply_decay_param_fun=apply_decay_param_fun, grad_clip=grad_clip,
            lazy_mode=lazy_mode, multi_precision=multi_precision, amsgrad=amsgrad, name=name,
        )
        self.layerwise_decay = layerwise_decay
        self.n_layers = n_layers
        self.name_dict = name_dict
        self.set_param_lr_fun = None if set_param_lr_fun is None else functools.partial(
            set_param_lr_fun, layerwise_decay, name_dict, n_layers)
        # A function pure in the parameter name (with a float decay) has its
        # ratios computed once; any other function runs every update.
        pure = is_pure_in_name(set_param_lr_fun) and isinstance(layerwise_decay, float)
        self._ratio_cache = RatioCache(self.set_param_lr_fun) if pure else None
        # The update scales and decay answers of a grouped step(), asked before its first group's pass.
        self._step_asked: tuple[dict[str, LrScale], dict[str, bool]] | None = None
        self._pass: UpdatePass | None = None  # the optimisation pass under way
        # Per parameter name, what its dygraph updates reuse; emptied by set_state_dict.
        self._plans: dict[str, UpdatePlan] = {}
        self._force_general_decay = False  # tests: every decay as the separate op
        # The multi-tensor dygraph step (multi_tensor.py); None: the per-parameter path only.
        self._multi_tensor = None if use_multi_tensor is False else multi_tensor
        self._last_update_path: UpdatePath | None = None
        self._params_name: dict[str, None] = {}  # ordered set, for a stable str()
        for param in self._listed_parameters():
            if self._decays(param):
                self._params_name[param.name] = None
            if not param.stop_gradient and self._ratio_cache is not None:
                self._ratio_cache.ratio(param)
        if self._scheduled_decay is not None:
            claim_schedule(self._scheduled_decay.schedule, self)  # last: a failed constructor claims nothing

    def __str__(self) -> str:
        return "Weight Decay, params: " + ",".join(self._params_name)

    @property
    def weight_decay_schedule(self) -> WeightDecaySchedule | None:
        """The :class:`~paddle_llrd.WeightDecaySchedule` given as ``weight_decay``, or None."""
        return None if self._scheduled_decay is None else self._scheduled_decay.schedule

    def _set_coeff(self, value: float) -> None:
        self._weight_decay = self._default_dict["weight_decay"] = float(value)

    # PaddleNLP's name of the weight decay (of the group being updated, in a pass).
    _coeff = property(lambda self: self._weight_decay, _set_coeff)

    @property
    def _lr_to_coeff(self) -> dict[Any, Any]:
        """The decay factors ``1 - lr * coeff`` of the pass under way, by lr tensor (empty between passes)."""
        return {} if self._pass is None else self._pass.decay_factors

    def _listed_parameters(self) -> list[Any]:
        if not self._parameter_list:
            return []
        if self._grouped():
            return [p for group in self._param_groups for p in group["params"]]
        return list(self._parameter_list)

    def _grouped(self) -> bool:
        return bool(self._parameter_list) and isinstance(self._parameter_list[0], dict)

    def _decays(self, param: Any) -> bool:
        return self._apply_decay_param_fun is None or bool(self._apply_decay_param_fun(param.name))

    def _plan_and_decays(self, param: Any, answer: bool | None) -> tuple[UpdatePlan, bool]:
        """``param``'s kept plan (made now if need be) and whether it decays at this update:
        the plan's kept answer, else ``answer`` if ``apply_decay_param_fun`` was asked already
        this step, else asked now (a rule not pure in the name is asked at every update,
        as ``paddle.optimizer.AdamW`` asks)."""
        plan = self._plans.get(param.name) or self._plan(param, answer)
        decays = plan.decays
        if decays is None:
            decays = self._decays(param) if answer is None else answer
            if decays:
                self._params_name[param.name] = None
        return plan, decays

    def _add_param_group(self, param_group: dict[str, Any]) -> None:
        check_added_group(param_group, self._param_groups)  # before it changes anything
        group_with_weight_decay(param_group)  # PaddleNLP's `coeff`
        follows_schedule = "weight_decay" not in param_group
        super()._add_param_group(param_group)
        if follows_schedule and self._scheduled_decay is not None:
            self._scheduled_decay.follow(param_group)

    # ------------------------------------------------------------ the step
    @runs_eagerly_under_sot
    @imperative_base.no_grad()  # as paddle.optimizer.Optimizer.step, whose body this replaces in dygraph
    def step(self) -> None:
        """Update the parameters once (eagerly under ``to_static``); with a weight-decay
        schedule, advance it.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> linear = paddle.nn.Linear(3, 2)
            >>> opt = AdamWDL(learning_rate=0.01, parameters=linear.parameters())
            >>> linear(paddle.ones([4, 3])).mean().backward()
            >>> opt.step()
            >>> opt.clear_grad()
        """
        dygraph = framework.in_dygraph_mode() and not paddle.base.dygraph.base.in_to_static_mode()
        if self._multi_tensor is not None and dygraph and multi_tensor_step(self):
            self._last_update_path = MULTI_TENSOR
            return None
        self._last_update_path = self._per_parameter_path(dygraph)
        if not self._grouped():
            if dygraph:  # Paddle's step, but past this class's _apply_optimize, which would try the flat step again
                return self._apply_per_parameter(None, None, self._params_grads())
            return super().step()  # one _apply_optimize: the schedule and the ratios inside
        # Parameter groups make one _apply_optimize (and one pass) each: ask
        # set_param_lr_fun and apply_decay_param_fun about every group's
        # parameters before the first group changes anything, and follow the
        # schedule around them all.
        if framework.in_dygraph_mode():
            self._step_asked = self._ask_before_updates([
                param for group in self._param_groups for param in group["params"]
                if not param.stop_gradient and param._grad_ivar() is not None
            ])
        self._sync_weight_decay()
        try:
            super().step()
        finally:
            self._step_asked = None
        self._finish_scheduled_step()
        return None

    def _listed_groups(self) -> list[tuple[dict[str, Any] | None, list[Any]]]:
        """``(group dict or None, parameters)`` per parameter group, in the optimizer's order."""
        if self._grouped():
            return [(group, group["params"]) for group in self._param_groups]
        return [(None, self._parameter_list or [])]

    def _global_lr_tensor(self) -> Any:
        """The global lr tensor of this step (made, with what Paddle's pass sets up first, if need be)."""
        if getattr(self, "helper", None) is None:
            self.helper = LayerHelper(self.__class__.__name__)
        self._create_global_learning_rate()
        return self._global_learning_rate()

    @runs_eagerly_under_sot
    def minimize(self, loss: Tensor, startup_program: Any = None, parameters: Any = None, no_grad_set: Any = None) -> Any:
        """As ``paddle.optimizer.AdamW.minimize``; refused in a static program with a
        weight-decay schedule (``NotImplementedError``) or parameter groups
        (``TypeError``), before anything is added to it."""
        self._refuse_schedule_outside_dygraph()
        refuse_groups_in_program(self._grouped())
        return super().minimize(loss, startup_program=startup_program, parameters=parameters, no_grad_set=no_grad_set)

    @property
    def last_update_path(self) -> UpdatePath | None:
        """Which implementation the last update ran, and why not the multi-tensor one:
        an :class:`~paddle_llrd.optim.dispatch.UpdatePath` ``(path, reason)``, None before
        the first update. See :ref:`adamwdl-multi-tensor`.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> linear = paddle.nn.Linear(3, 2)
            >>> opt = AdamWDL(parameters=linear.parameters(), set_param_lr_fun=None,
            ...               grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
            >>> linear(paddle.ones([4, 3])).mean().backward()
            >>> opt.step()
            >>> opt.last_update_path
            UpdatePath(path='multi_tensor', reason=None)
            >>> opt = AdamWDL(parameters=linear.parameters(), use_multi_tensor=False)
            >>> opt.step()
            >>> opt.last_update_path
            UpdatePath(path='per_parameter', reason='use_multi_tensor=False')
        """
        return self._last_update_path

    def _per_parameter_path(self, dygraph: bool = True) -> UpdatePath:
        """The per-parameter path, with why the multi-tensor step was refused."""
        if self._multi_tensor is None:
            return UpdatePath("per_parameter", "use_multi_tensor=False")
        if not dygraph:
            return UpdatePath("per_parameter", "not a dygraph step")
        return UpdatePath("per_parameter", self._multi_tensor.last_reason)

    def _params_grads(self) -> list[tuple[Any, Any]]:
        """The ``(parameter, gradient)`` pairs Paddle's dygraph ``step()`` hands its pass
        (trained parameters with a gradient, a ``main_grad`` where one is set)."""
        pairs = []
        for param in self._parameter_list or []:
            if param.stop_gradient:
                continue
            main_grad = getattr(param, "main_grad", None)
            grad = main_grad if main_grad is not None else param._grad_ivar()
            if grad is not None:
                pairs.append((param, grad))
        return pairs

    @runs_eagerly_under_sot  # whoever calls it: apply_gradients(), minimize(), fleet's sharding optimizer
    def _apply_optimize(self, loss: Any, startup_program: Any, params_grads: Any, param_group_idx: int = 0) -> Any:
        # A dygraph caller other than step() (fleet's sharding optimizer hands
        # one rank's parameters) gets the multi-tensor step where it applies.
        if isinstance(params_grads, list) and framework.in_dygraph_mode():
            dygraph = not paddle.base.dygraph.base.in_to_static_mode()
            if self._multi_tensor is not None and dygraph and multi_tensor_step(self, params_grads):
                self._last_update_path = MULTI_TENSOR
                return None
            self._last_update_path = self._per_parameter_path(dygraph)
        return self._apply_per_parameter(loss, startup_program, params_grads, param_group_idx)

    def _apply_per_parameter(self, loss: Any, startup_program: Any, params_grads: Any, param_group_idx: int = 0) -> Any:
        """Paddle's ``_apply_optimize`` (clipping, then the pass): the per-parameter path.
        One call per step without parameter groups: the schedule is read before it and
        advanced after it. Groups call it once per group, and step() follows the
        schedule around them."""
        if self._scheduled_decay is None or isinstance(params_grads, dict):
            return super()._apply_optimize(loss, startup_program, params_grads, param_group_idx=param_group_idx)
        self._refuse_schedule_outside_dygraph()
        self._sync_weight_decay()
        result = super()._apply_optimize(loss, startup_program, params_grads, param_group_idx=param_group_idx)
        self._finish_scheduled_step()
        return result

    # Paddle builds a pass with one of these two, by IR (dygraph uses the first).
    def _create_optimization_pass(self, parameters_and_grads: Any, param_group_idx: int = 0) -> Any:
        return self._run_pass(super()._create_optimization_pass, parameters_and_grads, param_group_idx)

    def _pir_create_optimization_pass(self, parameters_and_grads: Any, param_group_idx: int = 0) -> Any:
        return self._run_pass(super()._pir_create_optimization_pass, parameters_and_grads, param_group_idx)

    def _run_pass(self, create_pass: Callable[..., Any], parameters_and_grads: Any, param_group_idx: int) -> Any:
        """One optimisation pass: the ratios asked before anything changes, then Paddle's
        pass, which calls :meth:`_append_optimize_op` per parameter; the pass's
        :class:`~paddle_llrd.optim.updates.UpdatePass` lives until it ends."""
        # What may fail on user input happens first (apply_gradients and a
        # to_static full graph build a program without minimize()).
        self._refuse_schedule_outside_dygraph()
        asked = self._step_asked
        if asked is None:
            grouped = isinstance(parameters_and_grads, dict)
            pairs = parameters_and_grads["params"] if grouped else parameters_and_grads
            asked = self._ask_before_updates(
                [param for param, grad in pairs if grad is not None and not param.stop_gradient]
            )
        self._pass = self._new_pass(*asked)
        try:
            return create_pass(parameters_and_grads, param_group_idx=param_group_idx)
        finally:
            self._pass = None

    def _new_pass(
        self, update_scales: dict[str, LrScale] | None = None, decay_answers: dict[str, bool] | None = None
    ) -> UpdatePass:
        cache = self._active_ratio_cache()
        return UpdatePass(self._global_learning_rate, self._update_scale, update_scales,
                          None if cache is None else cache.ratios, decay_answers=decay_answers)

    def _current_pass(self) -> UpdatePass:
        """The pass under way; an update outside a pass gets one, kept until the next pass ends."""
        update = self._pass
        if update is None:
            update = self._pass = self._new_pass()
        return update

    def _update_param_group(self, parameters: dict[str, Any]) -> Any:
        if self._pass is not None:
            self._pass.next_group()  # the group's betas, epsilon and lazy mode
        return super()._update_param_group(parameters)

    def _before_updates(self, params: list[Any]) -> dict[str, LrScale]:
        """Ask ``set_param_lr_fun`` about every parameter (a bad ratio changes nothing),
        then, under ``multi_precision``, fit the plans of parameters cast since their
        last update (:func:`~paddle_llrd.optim.updates.refit_plans`); the update scales."""
        update_scales = self._resolve_update_scales(params)
        if self._multi_precision and self._plans and framework.in_dygraph_mode():
            refit_plans(self, params)
        return update_scales

    def _ask_before_updates(self, params: list[Any]) -> tuple[dict[str, LrScale], dict[str, bool]]:
        """:meth:`_before_updates`, then ``apply_decay_param_fun`` about every parameter whose
        answer is not kept (nothing on a dygraph AMP overflow step): the pass's update scales
        and decay answers, before any parameter changes."""
        update_scales = self._before_updates(params)
        if self._apply_decay_param_fun is None or self._overflow_step():
            return update_scales, {}
        plans = self._plans
        decay_answers = {}
        for param in params:
            plan = plans.get(param.name)
            if plan is None or plan.decays is None:
                decay_answers[param.name] = self._decays(param)
        return update_scales, decay_answers

    # ---------------------------------------------------------- layer ratios
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
        """Ask ``set_param_lr_fun`` about every parameter before any update (empty on a
        dygraph AMP overflow step, so that a function is called once per update)."""
        if self._overflow_step():
            return {}
        return resolve_update_scales(self.set_param_lr_fun, self._active_ratio_cache(), params)

    def _overflow_step(self) -> bool:
        """Whether this is a dygraph AMP overflow step (``found_inf`` set), which updates nothing."""
        if not framework.in_dygraph_mode():
            return False
        found_inf = self._get_auxiliary_var("found_inf")
        return found_inf is not None and bool(found_inf)

    # ---------------------------------------------------- one parameter's update
    def _plan(self, param: Any, decays: bool | None = None) -> UpdatePlan:
        """A new :class:`~paddle_llrd.optim.updates.UpdatePlan` of ``param``, kept across
        dygraph steps (``decays``: ``apply_decay_param_fun``'s answer, if asked already)."""
        decay_fun = self._apply_decay_param_fun
        plan = plan_update(self, param, cache_decay=decay_fun is None or is_pure_in_name(decay_fun), decays=decays)
        if plan.decays:
            self._params_name[param.name] = None
        if framework.in_dygraph_mode():
            self._plans[param.name] = plan
        return plan

    def _append_optimize_op(self, block: Any, param_and_grad: Any) -> Any:
        if isinstance(param_and_grad, dict):
            param_and_grad = self._update_param_group(param_and_grad)
        param, grad = param_and_grad
        update = self._pass or self._current_pass()
        optimize_attr = getattr(param, "optimize_attr", None)  # lr_attributes, inlined: per update
        if optimize_attr is not None and "learning_rate" not in optimize_attr:
            optimize_attr = None
        base_scale = 1.0 if optimize_attr is None else optimize_attr["learning_rate"]
        update_scale = update.update_scale(param, optimize_attr, base_scale)
        if optimize_attr is not None:
            optimize_attr["learning_rate"] = update_scale  # for this update only
        try:
            plan, decays = self._plan_and_decays(param, update.decay_answers.get(param.name))
            grad, route = parameter_route(
                param, grad, decays, self._weight_decay, base_scale, update_scale, update.settings(self),
                with_ratio=self._decay_with_ratio, force_general=self._force_general_decay, memo=update.routes,
            )
            if route.separate_decay_scale is not None:
                self._append_decoupled_weight_decay(block, param_and_grad, lr_scale=route.separate_decay_scale, decays=True)
            return self._append_adamw(
                block, param, grad, plan, lr=update.lr(update_scale), coeff=route.fused_coeff, adam_kernel=route.adam_kernel
            )
        finally:
            if optimize_attr is not None:
                optimize_attr["learning_rate"] = base_scale

    def _append_adamw(
        self, block: Any, param: Any, grad: Any, plan: UpdatePlan, *, lr: Any, coeff: float | None, adam_kernel: bool
    ) -> Any:
        """The kernel update with this group's settings (:mod:`~paddle_llrd.optim.kernels`)."""
        settings = self._current_pass().settings(self)
        if settings.dygraph and not adam_kernel:
            return adamw_kernel(
                param, grad, lr, plan.moments, plan.master_weight, settings.beta1_value, settings.beta2_value,
                settings.epsilon, coeff, settings.lazy_mode, settings.amsgrad, plan.fp32_fallback,
            )
        return adamw_update(block, param, grad, lr, plan, settings, coeff=coeff, adam_kernel=adam_kernel)

    def _append_decoupled_weight_decay(
        self, block: Any, param_and_grad: Any, lr_scale: LrScale | None = None, *, decays: bool | None = None
    ) -> Any:
        r"""The separate decay op: ``target *= 1 - lr * lr_scale * coeff`` on the master
        weight (``multi_precision``) or the parameter, if it ``decays`` (default: the
        plan's or ``apply_decay_param_fun``'s answer); ``lr_scale`` defaults to
        :math:`s_p`. The factor is made once per lr tensor and pass (``_lr_to_coeff``)."""
        if isinstance(param_and_grad, dict):
            param_and_grad = self._update_param_group(param_and_grad)
        param = param_and_grad[0]
        plan = self._plans.get(param.name)
        if decays is None:
            decays = plan.decays if plan is not None and plan.decays is not None else self._decays(param)
        if not decays:
            return None
        if plan is None:  # in a program, or called outside an update: no accumulators needed
            target = self._master_weights[param.name] if uses_master(self, param) else param
        else:
            target = plan.decay_target(param)
        if lr_scale is None:
            lr_scale = base_scale_of(lr_attributes(param))
        update = self._current_pass()
        lr = update.lr(lr_scale)
        factor = update.decay_factor(lr, self._weight_decay, update.settings(self).found_inf)
        return decoupled_decay(block, target, factor)

    def _add_moments_pows(self, p: Any) -> None:
        with accumulators_as_started(self, p):  # a parameter new to the checkpoint, Tensor betas
            return super()._add_moments_pows(p)

    # ------------------------------------------------ the weight-decay schedule
    def _sync_weight_decay(self) -> None:
        """Set the coefficient of the next step from the schedule, if there is one."""
        if self._scheduled_decay is not None:
            self._coeff = self._scheduled_decay.coefficient()

    def _finish_scheduled_step(self) -> None:
        """Advance the schedule, if there is one, after a step that was no AMP overflow."""
        if self._scheduled_decay is not None and self._scheduled_decay.finish_step(self._get_auxiliary_var("found_inf")):
            self._sync_weight_decay()

    def _refuse_schedule_outside_dygraph(self) -> None:
        if self._scheduled_decay is not None:
            self._scheduled_decay.refuse_outside_dygraph()

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """``paddle.optimizer.AdamW``'s state dict, plus ``"structured_names"`` (``{param.name:
        structured name}``, by which :meth:`set_state_dict` matches the state when Paddle's names
        moved) and, with a schedule, ``"weight_decay_schedule"`` (its position).

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> model = paddle.nn.Sequential(paddle.nn.Linear(2, 2))
            >>> opt = AdamWDL(parameters=model.parameters(),
            ...               name_dict={p.name: n for n, p in model.named_parameters()})
            >>> model(paddle.ones([1, 2])).sum().backward()
            >>> opt.step()
            >>> list(opt.state_dict()["structured_names"].values())
            ['0.weight', '0.bias']
        """
        state = super().state_dict()
        if any(key not in ("LR_Scheduler", WEIGHT_DECAY_SCHEDULE_KEY) for key in state):
            # with no parameter state an entry would make AdamW expect some (it asserts then)
            state[STRUCTURED_NAMES_KEY] = structured_names_record(self._listed_parameters(), self.name_dict)
        if self._scheduled_decay is not None:
            state[WEIGHT_DECAY_SCHEDULE_KEY] = self._scheduled_decay.schedule.state_dict()
        return state

    def set_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of ``AdamWDL`` or ``paddle.optimizer.AdamW``, matched to the
        parameters by structured name where both sides know it, by Paddle's name otherwise
        (:func:`~paddle_llrd.optim.checkpoint.matched_state_dict`, which says what it
        refuses and warns about); restores a weight-decay schedule's position (a
        checkpoint without one warns and leaves it). The update plans start afresh.
        See :doc:`/adamwdl` (checkpoints)."""
        state_dict = matched_state_dict(self, state_dict, self._listed_parameters(), name_dict=self.name_dict)
        self._plans.clear()  # their accumulators and master weights may be replaced
        if self._multi_tensor is not None:
            self._multi_tensor.invalidate()  # laid out afresh from the loaded state at the next step
        schedule_state = state_dict.get(WEIGHT_DECAY_SCHEDULE_KEY)
        state_dict = {k: v for k, v in state_dict.items() if k != WEIGHT_DECAY_SCHEDULE_KEY}
        if self._scheduled_decay is None:
            return super().set_state_dict(state_dict)
        self._scheduled_decay.load(schedule_state, lambda: super(AdamWDL, self).set_state_dict(state_dict),
                                   WEIGHT_DECAY_SCHEDULE_KEY)
        self._sync_weight_decay()
        return None

    @runs_eagerly_under_sot
    def clear_grad(self, set_to_zero: bool = True) -> None:
        """As ``paddle.optimizer.AdamW.clear_grad``; on the multi-tensor path
        ``set_to_zero=True`` zeroes each group's flat gradient buffer in one op."""
        if self._multi_tensor is not None and self._multi_tensor.clear_grad(self._listed_groups(), set_to_zero):
            return None
        return super().clear_grad(set_to_zero)

    load_state_dict = set_state_dict

    # ------------------------------------------------------------- inspection
    def param_lr_table(self) -> list[ParamLrRow]:
        r"""What each trainable parameter gets at the next step, one :class:`ParamLrRow` each
        (in the optimizer's order, frozen parameters left out); see :doc:`/adamwdl`.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> linear = paddle.nn.Linear(2, 2)
            >>> opt = AdamWDL(learning_rate=0.1, parameters=linear.parameters(),
            ...               set_param_lr_fun=None)
            >>> [(row.ratio, row.lr, row.weight_decay) for row in opt.param_lr_table()]
            [(1.0, 0.1, 0.01), (1.0, 0.1, 0.01)]
        """
        return param_lr_rows(self)

