"""AdamW with layer-wise learning-rate decay (``AdamWDL``), exact on Paddle 3. See :doc:`/adamwdl`.

The class owns the parameters, Paddle's optimizer state and the public API,
and keeps nothing else between steps but the flat layout. A dygraph step
(:doc:`/adamwdl`, "One step"): :meth:`AdamWDL.step` reads the groups afresh
into an :class:`~paddle_llrd.optim.update_batch.UpdateBatch` each
(``_collect``, the only code that reads Paddle's optimizer internals for the
update); :func:`~paddle_llrd.optim.multi_tensor.multi_tensor_step` runs them
over the :class:`~paddle_llrd.optim.multi_tensor.FlatLayout` where it serves,
else Paddle's pass hands each parameter to
:func:`~paddle_llrd.optim.per_parameter.update_parameter` (the path of static
programs, ``to_static`` and fleet's wrappers too).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from operator import and_, attrgetter, is_not, itemgetter, not_
from typing import TYPE_CHECKING, Any, ClassVar

import paddle
from paddle.base import framework
from paddle.base.dygraph import base as imperative_base
from paddle.base.layer_helper import LayerHelper
from paddle.optimizer import AdamW

from ..layer_decay.layerwise import layerwise_lr_decay
from ..schedules.weight_decay import WeightDecaySchedule, claim_schedule
from .adamw_differences import warn_if_beta_pows_differ
from .checkpoint import (
    STRUCTURED_NAMES_KEY, WEIGHT_DECAY_SCHEDULE_KEY, has_saved_state, matched_state_dict, with_extra_entries,
)
from .eager import runs_eagerly_under_sot
from .gradient_clearing import clear_gradients
from .kernels import check_kernel_inputs, is_tensor
from .multi_tensor import PER_PARAMETER_ONLY, FlatLayout, foreign_gradients, multi_tensor_step
from .optimizer_checks import (
    check_added_group, check_layerwise_arguments, checked_adamwdl_arguments, group_with_weight_decay,
    refuse_groups_in_program,
)
from .param_lr_rows import ParamLrRow, param_lr_rows
from .param_state import ParamState, initial_beta_pow, missing_accumulator, on_cpu, refit_accumulators
from .per_parameter import (
    ParameterPass, append_decoupled_weight_decay, append_optimize_op, dygraph_gradient, updated_parameters,
)
from .ratios import LayerRatios, LrScale, is_pure_in_name, lr_attributes, resolve_update_scales
from .scheduled_decay import ScheduledDecay
from .update_batch import AdamSettings, UpdateBatch, UpdatePath

if TYPE_CHECKING:
    from paddle import Tensor
    from paddle.nn.clip import GradientClipBase
    from paddle.optimizer.lr import LRScheduler

__all__ = ["AdamWDL", "ParamLrRow", "STRUCTURED_NAMES_KEY", "UpdatePath", "WEIGHT_DECAY_SCHEDULE_KEY"]


_NAME = attrgetter("name")
_STOP_GRADIENT = attrgetter("stop_gradient")
_GRAD_OF = paddle.Tensor._grad_ivar
_LR_FACTOR = itemgetter("learning_rate")
_OPTIMIZE_ATTR = attrgetter("optimize_attr")


class AdamWDL(AdamW):
    # Its docstring (formula, arguments, example) follows the class, as in torch/optim/adamw.py.
    # The decay's lr rule (per_parameter.decay_scale): AdamWDL decays with the lr
    # before the layer ratio; a subclass with Paddle's lr_ratio rule sets True.
    _decay_with_ratio: ClassVar[bool] = False

    def __init__(  # (PaddleNLP's order of arguments, AdamW's first; docs: after the class)
        self, learning_rate: float | LRScheduler = 0.001, beta1: float | Tensor = 0.9, beta2: float | Tensor = 0.999,
        epsilon: float | Tensor = 1e-8, parameters: Sequence[Tensor] | Sequence[dict[str, Any]] | None = None,
        weight_decay: float | Tensor | WeightDecaySchedule = 0.01,
        apply_decay_param_fun: Callable[[str], bool] | None = None, grad_clip: GradientClipBase | None = None,
        lazy_mode: bool = False, multi_precision: bool = False, layerwise_decay: float | Tensor = 1.0,
        n_layers: int = 12, set_param_lr_fun: Callable[..., Any] | None = layerwise_lr_decay,
        name_dict: Mapping[str, str] | None = None, name: str | None = None, *,
        amsgrad: bool = False, use_multi_tensor: bool | None = None, num_threads: int | None = None,
    ) -> None:
        parameters = checked_adamwdl_arguments(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, parameters=parameters,
            weight_decay=weight_decay, apply_decay_param_fun=apply_decay_param_fun, layerwise_decay=layerwise_decay,
            n_layers=n_layers, set_param_lr_fun=set_param_lr_fun, name_dict=name_dict, use_multi_tensor=use_multi_tensor,
        )
        layout = FlatLayout(num_threads)  # (checks num_threads, whichever path)
        schedule = weight_decay if isinstance(weight_decay, WeightDecaySchedule) else None
        # before Paddle's constructor adds the parameter groups, noting those that follow the schedule
        self._scheduled_decay = ScheduledDecay(schedule)
        super().__init__(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, parameters=parameters,
            weight_decay=weight_decay if schedule is None else schedule(), apply_decay_param_fun=apply_decay_param_fun,
            grad_clip=grad_clip, lazy_mode=lazy_mode, multi_precision=multi_precision, amsgrad=amsgrad, name=name)
        self._pass: ParameterPass | None = None  # the per-parameter pass under way
        # The flat layout, the one state kept between steps besides Paddle's accumulators and the
        # schedule's position; None: the per-parameter path only.
        self._flat = None if use_multi_tensor is False else layout
        self._num_threads = layout.threads.count
        self._last_update_path: UpdatePath | None = None
        # The decay rule last asked, and its answers by name where it is pure in the name.
        self._pure_decays: tuple[Any, dict[str, bool] | None] = (None, None)
        self._params_name: dict[str, None] = {}  # ordered set, for a stable str()
        self._decay_answers(list(map(_NAME, self._listed_parameters())))
        self._ratios = LayerRatios.bound(set_param_lr_fun, (layerwise_decay, name_dict, n_layers),
                                         self._listed_parameters())
        if schedule is not None:
            claim_schedule(schedule, self)  # last: a failed constructor claims nothing

    def __str__(self) -> str:
        return "Weight Decay, params: " + ",".join(self._params_name)

    # ------------------------------------------------------- layer-wise decay
    def _set_layerwise(self, index: int, value: Any) -> None:
        settings = list(self._ratios.settings)
        settings[index] = value
        decay, name_dict, n_layers = settings
        check_layerwise_arguments(decay, n_layers, self._ratios.unbound, name_dict)  # before anything changes
        self._ratios = LayerRatios.bound(self._ratios.unbound, settings, self._listed_parameters())

    def _set_ratio_function(self, fun: Callable[[Any], Any] | None) -> None:
        self._ratios = self._ratios.replaced(fun, self._listed_parameters())

    # Assignable: the next update follows (ratios recomputed, checked first; a layout whose
    # ratios changed is made anew, as its description says).
    layerwise_decay = property(lambda self: self._ratios.settings[0], lambda self, v: self._set_layerwise(0, v),
                               doc="The ratio between adjacent layers; assigning it re-asks the ratios.")
    name_dict = property(lambda self: self._ratios.settings[1], lambda self, v: self._set_layerwise(1, v),
                         doc="``{param.name: structured name}``; assigning it re-asks the ratios.")
    n_layers = property(lambda self: self._ratios.settings[2], lambda self, v: self._set_layerwise(2, v),
                        doc="The number of blocks; assigning it re-asks the ratios.")
    set_param_lr_fun = property(
        lambda self: self._ratios.fun, _set_ratio_function,
        doc="The ratio function the updates ask, ``fn(param) -> ratio`` (``set_param_lr_fun`` bound to the "
            "layer settings); another one assigned is followed from the next update.")

    # --------------------------------------------------------------- accessors
    @property
    def weight_decay_schedule(self) -> WeightDecaySchedule | None:
        """The :class:`~paddle_llrd.WeightDecaySchedule` given as ``weight_decay``, or None."""
        return self._scheduled_decay.schedule

    @property
    def last_update_path(self) -> UpdatePath | None:
        """Which implementation the last update ran, and why not the fused one: an
        :class:`~paddle_llrd.optim.update_batch.UpdatePath` ``(path, reason)``, None before
        the first update. See :ref:`adamwdl-multi-tensor`.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> linear = paddle.nn.Linear(3, 2)
            >>> opt = AdamWDL(parameters=linear.parameters(), use_multi_tensor=False)
            >>> linear(paddle.ones([4, 3])).mean().backward()
            >>> opt.step()
            >>> opt.last_update_path
            UpdatePath(path='per_parameter', reason='use_multi_tensor=False')
        """
        return self._last_update_path

    num_threads = property(lambda self: self._num_threads, doc="The threads of a CPU step on the flat layout "
                           "(``num_threads=``, else ``PADDLE_LLRD_NUM_THREADS``, else the usable cores per local rank).")

    def _set_coeff(self, value: float) -> None:
        self._weight_decay = self._default_dict["weight_decay"] = float(value)

    _coeff = property(lambda self: self._weight_decay, _set_coeff)  # PaddleNLP's name (of the group in a pass)

    @property
    def _lr_to_coeff(self) -> dict[Any, Any]:
        """The decay factors ``1 - lr * coeff`` of the pass under way, by lr tensor (empty between passes)."""
        return {} if self._pass is None else self._pass.decay_factors

    def _listed_parameters(self) -> list[Any]:
        return [param for _, params in self._listed_groups() for param in params]

    def _listed_groups(self) -> list[tuple[dict[str, Any] | None, list[Any]]]:
        """``(group dict or None, parameters)`` per parameter group, in the optimizer's order."""
        if self._grouped():
            return [(group, group["params"]) for group in self._param_groups]
        return [(None, self._parameter_list or [])]

    def _grouped(self) -> bool:
        return bool(self._parameter_list) and isinstance(self._parameter_list[0], dict)

    def _decays(self, param: Any) -> bool:
        """``apply_decay_param_fun``'s answer now (True without one); a decayed parameter joins ``str(self)``."""
        return self._decay_answers([param.name])[0]

    def _decay_answers(self, names: list[str]) -> list[bool]:
        """``apply_decay_param_fun``'s answers for ``names`` at this update, as AdamW asks them: the
        rule held now, asked about each name (once per name if it declares ``pure_in_name = True``)."""
        rule = self._apply_decay_param_fun
        held, answers = self._pure_decays
        if held is not rule:  # (answers: None for a rule asked at every update)
            answers = {} if rule is not None and is_pure_in_name(rule) else None
            self._pure_decays = (rule, answers)
        if rule is None:
            decays = [True] * len(names)
        elif answers is None:
            decays = [bool(rule(name)) for name in names]
        else:
            decays = [answers[name] if name in answers else answers.setdefault(name, bool(rule(name)))
                      for name in names]
        self._params_name.update(dict.fromkeys(compress(names, decays)))
        return decays

    def _add_param_group(self, param_group: dict[str, Any]) -> None:
        check_added_group(param_group, self._param_groups)  # before it changes anything
        group_with_weight_decay(param_group)  # PaddleNLP's `coeff`
        follows_schedule = "weight_decay" not in param_group
        super()._add_param_group(param_group)
        if follows_schedule:
            self._scheduled_decay.follow(param_group)

    # ------------------------------------------------------------ the step
    @runs_eagerly_under_sot
    @imperative_base.no_grad()  # as paddle.optimizer.Optimizer.step, whose dygraph body this replaces
    def step(self) -> None:
        """Update the parameters once (eagerly under ``to_static``); with a weight-decay
        schedule, advance it. Example: the class's."""
        if not framework.in_dygraph_mode() or paddle.base.dygraph.base.in_to_static_mode():
            self._last_update_path = UpdatePath("per_parameter", "not a dygraph step")
            return super().step()
        groups = [(group, *_trained(params)) for group, params in self._listed_groups()]
        if self._grouped():  # Paddle's step: one _apply_optimize (and one pass) per group
            paddle_pass = super().step
        else:  # Paddle's step without groups, past this class's _apply_optimize
            apply = super()._apply_optimize
            paddle_pass = lambda: apply(None, None, [(p, dygraph_gradient(p)) for p in groups[0][1]])  # noqa: E731
        self._update(groups, paddle_pass)
        return None

    def _update(self, groups: list[tuple[dict[str, Any] | None, list[Any], list[Any]]],
                paddle_pass: Callable[[], Any], given_gradients: str | None = None) -> Any:
        """One dygraph update of ``groups`` (``(group, trained parameters, their gradients)``): collect,
        choose, run; the weight-decay schedule read before and advanced after (not on an overflow step)."""
        self._sync_weight_decay()
        batches = self._collect(groups)
        global_lr = self._global_lr_tensor()  # (set up first, as Paddle's pass does)
        overflow = self._overflow_step()
        path = PER_PARAMETER_ONLY if self._flat is None else multi_tensor_step(
            self._flat, batches, global_lr, overflow=overflow, state_of=self._state, given_gradients=given_gradients,
            with_ratio=self._decay_with_ratio)
        result = None
        if path.path == "per_parameter":
            check_kernel_inputs(batches, global_lr.dtype)
            self._pass = self._new_pass(batches)
            try:
                result = paddle_pass()
            finally:
                self._pass = None
        self._last_update_path = path
        if self._scheduled_decay.schedule is not None and self._scheduled_decay.finish_step(overflow):
            self._sync_weight_decay()
        return result

    def _collect(self, groups: list[tuple[dict[str, Any] | None, list[Any], list[Any]]]) -> list[UpdateBatch]:
        """An :class:`UpdateBatch` per group (its trained parameters with a gradient), read afresh:
        ratios and decay answers asked first (a bad one changes nothing), accumulators refit and made."""
        everything = [param for _, params, _ in groups for param in params]
        every_name = list(map(_NAME, everything))
        cache = self._ratios.cache
        if cache is not None and not all(map(cache.ratios.__contains__, every_name)):
            cache.ask(everything)
        if self._multi_precision:
            self._refit(everything)
        batches, start = [], 0
        for group, params, grads in groups:
            names = every_name[start:start + len(params)]
            start += len(params)
            self._make_accumulators(group, params, names)
            ratios = ([1.0] * len(params) if self.set_param_lr_fun is None
                      else None if cache is None else list(map(cache.ratios.__getitem__, names)))
            batches.append(UpdateBatch(
                settings=self._group_settings(group),
                grad_clip=self._grad_clip if group is None else group.get("grad_clip"),
                params=params, grads=grads, names=names, lr_factors=_lr_factors(params), ratios=ratios,
                decays=self._decay_answers(names),
                need_clip=list(map(is_not, map(getattr, params, repeat("need_clip"), repeat(True)), repeat(False))),
                regularizers=list(map(getattr, params, repeat("regularizer"), repeat(None))),
            ))
        return batches

    def _make_accumulators(self, group: dict[str, Any] | None, params: list[Any], names: list[str]) -> None:
        """Paddle's accumulators of parameters updated for the first time, as its pass makes them."""
        moments = self._accumulators.get(self._moment1_acc_str, {})
        if not self._master_weights and all(map(moments.__contains__, names)):
            return
        missing = [param for param, name in zip(params, names)
                   if self._accumulator_key(param, name) not in moments]
        if missing:
            block = framework.default_main_program().global_block()
            self._create_accumulators(block, missing if group is None else dict(group, params=missing))

    def _accumulator_key(self, param: Any, name: str | None = None) -> str:
        """The name Paddle keys ``param``'s accumulators by (its master weight's, if it has one)."""
        name = param.name if name is None else name
        master = self._master_weights.get(name)
        return name if master is None else master.name

    def _group_settings(self, group: dict[str, Any] | None) -> AdamSettings:
        """The :class:`AdamSettings` of ``group`` (None: the optimizer's current settings),
        read without selecting the group in the optimizer."""
        dygraph = framework.in_dygraph_mode()
        beta1, beta2, epsilon, lazy_mode, coeff = (
            (self._beta1, self._beta2, self._epsilon, self._lazy_mode, self._weight_decay) if group is None
            else [group.get(key, self._default_dict[key]) for key in _GROUP_SETTINGS])
        if dygraph and type(coeff) is not float and is_tensor(coeff):  # (Paddle's AdamW: its kernel's float attribute)
            coeff = float(coeff)
        return AdamSettings(beta1, beta2, _beta_value(beta1, dygraph), _beta_value(beta2, dygraph), epsilon, lazy_mode,
                            self._amsgrad, None if dygraph else self._get_auxiliary_var("found_inf"), dygraph, coeff)

    def _global_lr_tensor(self) -> Any:
        """The global lr tensor of this step (made, with what Paddle's pass sets up first, if need be)."""
        if getattr(self, "helper", None) is None:
            self.helper = LayerHelper(self.__class__.__name__)
        self._create_global_learning_rate()
        return self._global_learning_rate()

    def _overflow_step(self) -> bool:
        """Whether this is a dygraph AMP overflow step (``found_inf`` set), which updates nothing."""
        if not framework.in_dygraph_mode():
            return False
        found_inf = self._get_auxiliary_var("found_inf")
        return found_inf is not None and bool(found_inf)

    # ------------------------------------------------ Paddle's template methods
    @runs_eagerly_under_sot
    def minimize(self, loss: Tensor, startup_program: Any = None, parameters: Any = None, no_grad_set: Any = None) -> Any:
        """As ``paddle.optimizer.AdamW.minimize``; refused in a static program with a
        weight-decay schedule (``NotImplementedError``) or parameter groups
        (``TypeError``), before anything is added to it."""
        self._scheduled_decay.refuse_outside_dygraph()
        refuse_groups_in_program(self._grouped())
        return super().minimize(loss, startup_program=startup_program, parameters=parameters, no_grad_set=no_grad_set)

    @runs_eagerly_under_sot  # whoever calls it: apply_gradients(), minimize(), fleet's sharding optimizer
    def _apply_optimize(self, loss: Any, startup_program: Any, params_grads: Any, param_group_idx: int = 0) -> Any:
        apply = functools.partial(super()._apply_optimize, loss, startup_program, params_grads,
                                  param_group_idx=param_group_idx)
        if isinstance(params_grads, dict):  # one group of step()'s, which follows the schedule around them all
            return apply()
        if framework.in_dygraph_mode() and not paddle.base.dygraph.base.in_to_static_mode():
            updated = updated_parameters(params_grads)
            return self._update([(None, updated, list(map(_GRAD_OF, updated)))], apply,
                                given_gradients=foreign_gradients(params_grads))
        self._last_update_path = UpdatePath("per_parameter", "not a dygraph step")
        self._scheduled_decay.refuse_outside_dygraph()
        return apply()

    # Paddle builds a pass with one of these two, by IR (dygraph uses the first).
    def _create_optimization_pass(self, parameters_and_grads: Any, param_group_idx: int = 0) -> Any:
        return self._run_pass(super()._create_optimization_pass, parameters_and_grads, param_group_idx)

    def _pir_create_optimization_pass(self, parameters_and_grads: Any, param_group_idx: int = 0) -> Any:
        return self._run_pass(super()._pir_create_optimization_pass, parameters_and_grads, param_group_idx)

    def _run_pass(self, create_pass: Callable[..., Any], parameters_and_grads: Any, param_group_idx: int) -> Any:
        """Paddle's pass, which calls :meth:`_append_optimize_op` per parameter, in the
        :class:`ParameterPass` a dygraph update opened, else in one opened here (the
        ratios and decay rule asked before anything changes) until it ends."""
        if self._pass is not None:  # opened by _update for the whole step: this group's part of it
            self._pass.next_group()
            return create_pass(parameters_and_grads, param_group_idx=param_group_idx)
        self._scheduled_decay.refuse_outside_dygraph()  # (apply_gradients and a to_static graph skip minimize())
        pairs = parameters_and_grads["params"] if isinstance(parameters_and_grads, dict) else parameters_and_grads
        self._pass = self._new_pass(update_scales=self._asked_scales(updated_parameters(pairs)))
        try:
            return create_pass(parameters_and_grads, param_group_idx=param_group_idx)
        finally:
            self._pass = None

    def _new_pass(self, batches: Sequence[UpdateBatch] = (), update_scales: dict[str, LrScale] | None = None
                  ) -> ParameterPass:
        """A :class:`ParameterPass`, with what ``batches`` asked already."""
        if batches and update_scales is None:
            update_scales = self._asked_scales([param for batch in batches for param in batch.params])
        return ParameterPass(
            self._global_learning_rate, self._group_settings(None), ratios=self._ratios,
            ask_decays=self._decays, state_of=self._state, decay_op=self._append_decoupled_weight_decay,
            update_scales=update_scales, with_ratio=self._decay_with_ratio,
            decay_answers={name: d for batch in batches for name, d in zip(batch.names, batch.decays)},
            states=self._states([p for batch in batches for p in batch.params]),
        )

    def _update_param_group(self, parameters: dict[str, Any]) -> Any:
        selected = super()._update_param_group(parameters)
        if self._pass is not None:
            self._pass.settings = self._group_settings(None)  # the group's betas, epsilon, decay, lazy mode
        return selected

    # per_parameter.py: the per-parameter path in one module
    _append_optimize_op = append_optimize_op
    _append_decoupled_weight_decay = append_decoupled_weight_decay

    def _open_pass(self) -> ParameterPass:
        """A pass for an update outside one (a subclass's own call), kept until the next pass ends."""
        self._pass = self._new_pass()
        return self._pass

    # ---------------------------------------------------------- layer ratios
    def _asked_scales(self, params: list[Any]) -> dict[str, LrScale]:
        """``set_param_lr_fun`` asked about every parameter before any update (nothing on a
        dygraph AMP overflow step, so that a function is called once per update)."""
        if self._overflow_step():
            return {}
        if self._multi_precision and framework.in_dygraph_mode():
            self._refit(params)
        cache = self._ratios.cache
        if self.set_param_lr_fun is None or (cache is not None and all(p.name in cache.ratios for p in params)):
            return {}  # (the updates read the cache)
        return resolve_update_scales(self.set_param_lr_fun, cache, params)

    # ------------------------------------------------------ parameter states
    def _state(self, param: Any) -> ParamState:
        """``param``'s :class:`ParamState`, read from its accumulators (which exist)."""
        return self._states([param])[param.name]

    def _states(self, params: list[Any]) -> dict[str, ParamState]:
        """Each of ``params``' :class:`ParamState` by name, read from the accumulators by C-level passes."""
        names = keys = list(map(_NAME, params))
        masters, fallbacks = repeat(None), repeat(False)
        if self._multi_precision:
            masters = [self._master_weights[n] if self._uses_master(p) else None for p, n in zip(params, names)]
            keys = [n if m is None else m.name for n, m in zip(names, masters)]
            fallbacks = [m is not None and on_cpu(p) for p, m in zip(params, masters)]
        kinds = [self._moment1_acc_str, self._moment2_acc_str, self._moment2_acc_max_str if self._amsgrad else None,
                 self._beta1_pow_acc_str, self._beta2_pow_acc_str]
        columns = [repeat(None) if kind is None else map(self._accumulators[kind].__getitem__, keys) for kind in kinds]
        try:
            return dict(zip(names, map(ParamState, zip(*columns), masters, fallbacks)))
        except KeyError as missing:  # (before any update; AdamW raises too)
            raise missing_accumulator(self._accumulators, kinds, names, keys, missing.args[0]) from None

    def _uses_master(self, param: Any) -> bool:
        """Whether ``param`` is updated through a float32 master weight (``multi_precision``, float16/bfloat16)."""
        return self._multi_precision and self._is_dtype_fp16_or_bf16(param.dtype)

    def _refit(self, params: list[Any]) -> None:
        """Fit the accumulators of ``params`` cast since they were made (:func:`.param_state.refit_accumulators`)."""
        moments = self._accumulators.get(self._moment1_acc_str, {})
        refit_accumulators(params, moments_of=lambda param: moments.get(self._accumulator_key(param)),
                           is_half=self._is_dtype_fp16_or_bf16, uses_master=self._uses_master,
                           master_weights=self._master_weights, create_master=self._create_master_weight,
                           accumulators=self._accumulators)

    def _add_moments_pows(self, p: Any) -> None:
        """Paddle's accumulators of ``p``, started as an uninterrupted run starts them: with no loaded
        state for a parameter the loaded checkpoint has none of (it was frozen then; Paddle would assert,
        the uninterrupted run starts its moments at zero), and with beta powers at a Tensor beta's value."""
        holder, beta1, beta2 = self._accumulators_holder, self._beta1, self._beta2
        if holder and not has_saved_state(holder, p.name):
            self._accumulators_holder = {}
        self._beta1, self._beta2 = initial_beta_pow(beta1), initial_beta_pow(beta2)
        warn_if_beta_pows_differ(beta1, beta2, (self._beta1, self._beta2))
        try:
            super()._add_moments_pows(p)
        finally:
            self._accumulators_holder, self._beta1, self._beta2 = holder, beta1, beta2

    # ------------------------------------------------ the weight-decay schedule
    def _sync_weight_decay(self) -> None:
        """Set the coefficient of the next step from the schedule, if there is one (asked here:
        a step without one enters no other module for it)."""
        if self._scheduled_decay.schedule is not None:
            self._coeff = self._scheduled_decay.coefficient()

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
        return with_extra_entries(super().state_dict(), self._listed_parameters(), self.name_dict,
                                  self.weight_decay_schedule)

    def set_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of ``AdamWDL`` or ``paddle.optimizer.AdamW``, matched to the
        parameters by structured name, else by Paddle's name (:func:`.checkpoint.matched_state_dict`),
        with a weight-decay schedule's position. See :doc:`/adamwdl`."""
        state_dict = matched_state_dict(self, state_dict, self._listed_parameters(), name_dict=self.name_dict)
        if self._flat is not None:
            self._flat.drop()  # Paddle's loading replaces the accumulators' storage
        schedule_state = state_dict.get(WEIGHT_DECAY_SCHEDULE_KEY)
        state_dict = {k: v for k, v in state_dict.items() if k != WEIGHT_DECAY_SCHEDULE_KEY}
        self._scheduled_decay.load(schedule_state, lambda: super(AdamWDL, self).set_state_dict(state_dict),
                                   WEIGHT_DECAY_SCHEDULE_KEY)
        self._sync_weight_decay()

    @framework.non_static_only  # (AdamW's check: dygraph and to_static only)
    @runs_eagerly_under_sot
    def clear_grad(self, set_to_zero: bool = True) -> None:
        """As ``paddle.optimizer.AdamW.clear_grad``: each trained parameter's ``clear_gradient(set_to_zero)``,
        the large CPU gradients zeroed on the flat step's threads; run eagerly under ``to_static``."""
        params = self._listed_parameters()
        trained = list(compress(params, map(not_, map(_STOP_GRADIENT, params))))
        (clear_gradients if self._flat is None else self._flat.clear_gradients)(trained, set_to_zero)

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
        self._sync_weight_decay()
        coeffs = {id(p): self._group_settings(group).coeff for group, params in self._listed_groups() for p in params}
        return param_lr_rows(self, [p for p in self._listed_parameters() if not p.stop_gradient],
                             weight_decays=coeffs, ratios=self._ratios, decays=self._decays)


# As torch/optim/adamw.py: the reference (formula, arguments, example) set apart from the code.
AdamWDL.__doc__ = r"""AdamW with layer-wise learning-rate decay and exact decoupled weight decay.

For a parameter :math:`p` with gradient :math:`g` at step :math:`t`, with :math:`\eta` the
global learning rate, :math:`s_p` its lr factor ``p.optimize_attr['learning_rate']``, :math:`r_p`
the ratio ``set_param_lr_fun(p)``, :math:`\lambda` the weight decay and :math:`\eta_p = \eta\, s_p`:

.. math::

    p &\leftarrow p\,(1 - \eta_p \lambda)
        \qquad\text{(for a parameter that decays)}\\
    m &\leftarrow \beta_1 m + (1-\beta_1)\, g, \qquad
    v \leftarrow \beta_2 v + (1-\beta_2)\, g^2\\
    p &\leftarrow p - \eta_p r_p\,\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\,
        \frac{m}{\sqrt{v} + \epsilon\sqrt{1-\beta_2^t}}

A parameter decays where ``apply_decay_param_fun(p.name)`` is true (all without one).
With ``set_param_lr_fun=None`` the numbers are ``paddle.optimizer.AdamW``'s, bit
for bit. Ratios, update paths and checks: :doc:`/adamwdl`.

Args:
    learning_rate (float|LRScheduler): :math:`\eta`. Default 0.001.
    beta1, beta2, epsilon (float|Tensor): as in Adam. Defaults 0.9, 0.999, 1e-8.
    parameters (list|None): parameters, or parameter-group dicts (keys ``params``, ``learning_rate``
        (a factor of :math:`\eta`), ``weight_decay``/``coeff``, ``beta1``, ``beta2``, ``epsilon``,
        ``lazy_mode``, ``grad_clip``). Required in dygraph mode.
    weight_decay (float|Tensor|WeightDecaySchedule): :math:`\lambda`, or a schedule of it
        (:doc:`/weight_decay`). Default 0.01.
    apply_decay_param_fun (Callable[[str], bool]|None): decay only the parameters whose name it
        accepts. Default None (all).
    grad_clip (GradientClipBase|None): gradient clipping. Default None.
    lazy_mode (bool): sparse gradients update only their rows' moments. Default False.
    multi_precision (bool): float32 master weights for float16/bfloat16. Default False.
    layerwise_decay (float|Tensor): the ratio between adjacent layers. Default 1.0.
    n_layers (int): the number of encoder layers. Default 12.
    set_param_lr_fun (Callable|None): ``fn(layerwise_decay, name_dict, n_layers, param)`` giving
        :math:`r_p` (or None after editing ``optimize_attr``). Default :func:`~paddle_llrd.layerwise_lr_decay`.
    name_dict (dict|None): ``{param.name: structured name}``.
    name (str|None): prefix of the accumulator names.
    amsgrad (bool): keyword only; AMSGrad. Default False.
    use_multi_tensor (bool|None): keyword only; None/True: the flat layout's step
        where it applies (:ref:`adamwdl-multi-tensor`); False: one call per parameter.
    num_threads (int|None): keyword only; threads of the flat step on CPU. None:
        ``PADDLE_LLRD_NUM_THREADS``, else the usable cores divided among the local ranks.

Raises:
    TypeError, ValueError: an argument (or a group's) of the wrong type or out of range,
        named; at a step, before any change: a bad ratio, parameters of two dtypes.
    KeyError: a trainable parameter is missing from ``name_dict`` (default function).

Examples:
    >>> import paddle
    >>> from paddle_llrd import AdamWDL
    >>> from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
    >>> model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=2))
    >>> opt = AdamWDL(learning_rate=1e-3, parameters=model.parameters(), weight_decay=0.01,
    ...               layerwise_decay=0.8, n_layers=2, name_dict={p.name: n for n, p in model.named_parameters()},
    ...               apply_decay_param_fun=lambda n: not n.endswith(".b_0"))
    >>> logits = model(paddle.randint(0, 100, [8, 16]))
    >>> paddle.nn.functional.cross_entropy(logits, paddle.randint(0, 2, [8])).backward()
    >>> opt.step()
    >>> opt.clear_grad()
"""


# A parameter group's own settings, else the optimizer's (_default_dict), in AdamSettings' order.
_GROUP_SETTINGS = ("beta1", "beta2", "epsilon", "lazy_mode", "weight_decay")


def _beta_value(beta: Any, dygraph: bool) -> Any:
    """A dygraph Tensor beta's value; a PIR program passes the Value itself (a legacy op, see ``beta1``)."""
    return beta.item(0) if dygraph and type(beta) is not float and is_tensor(beta) else beta


def _lr_factors(params: list[Any]) -> list[Any]:
    """:math:`s_p` of each parameter (None without an ``optimize_attr``), by one C-level pass where all have one."""
    try:
        return list(map(_LR_FACTOR, map(_OPTIMIZE_ATTR, params)))
    except (AttributeError, KeyError, TypeError):
        return [attributes["learning_rate"] if attributes else None for attributes in map(lr_attributes, params)]


def _trained(params: list[Any]) -> tuple[list[Any], list[Any]]:
    """The parameters of ``params`` that train and have a gradient, and their gradients, by
    C-level passes (at every step)."""
    grads = list(map(_GRAD_OF, params))
    kept = list(map(and_, map(not_, map(_STOP_GRADIENT, params)), map(is_not, grads, repeat(None))))
    return list(compress(params, kept)), list(compress(grads, kept))
