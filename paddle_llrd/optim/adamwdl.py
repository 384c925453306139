"""AdamW with layer-wise learning-rate decay (``AdamWDL``), exact on Paddle 3.

A drop-in for ``paddlenlp.ops.optimizer.AdamWDL`` (same constructor, same
intended numbers) that runs on Paddle 3, decays once per step, accepts a
``set_param_lr_fun`` that edits ``optimize_attr`` itself, works on CPU
(also with ``multi_precision``), and costs what ``paddle.optimizer.AdamW``
costs; beyond it, a :class:`~paddle_llrd.WeightDecaySchedule` as
``weight_decay`` and :meth:`AdamWDL.param_lr_table`. See :doc:`/adamwdl`.

The class owns the parameters, the optimizer state and the public API;
:mod:`paddle_llrd.optim.ratios` resolves and checks the layer ratios,
:mod:`paddle_llrd.optim.optimization_pass` asks for them before a pass changes
anything and keeps what the pass shares between parameters,
:mod:`paddle_llrd.optim.plan` holds what a parameter's update reuses across
steps, :mod:`paddle_llrd.optim.updates` runs the update paths,
:mod:`paddle_llrd.optim.accumulators` starts the moments and beta powers,
:mod:`paddle_llrd.optim.scheduled_weight_decay` follows a weight-decay schedule and
:mod:`paddle_llrd.optim.arguments` checks the constructor's arguments.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from paddle.base import framework
from paddle.optimizer import AdamW

from .accumulators import AdamAccumulators
from .multi_tensor import MultiTensorStep
from .updates import adamw_update, decay_factor, decoupled_decay, densify, is_static_sparse
from .arguments import (
    check_group,
    check_layerwise_arguments,
    check_non_negative,
    check_not_none,
    checked_parameters,
)
from ..layer_decay.layerwise import layerwise_lr_decay
from .ratios import LrScale, RatioCache, base_scale_of, is_pure_in_name, lr_attributes
from .optimization_pass import OptimizationPass
from .param_lr_rows import ParamLrRow, param_lr_rows
from .scheduled_weight_decay import WEIGHT_DECAY_SCHEDULE_KEY, ScheduledWeightDecay
from .sot_skip import run_eagerly_under_sot
from .plan import UpdatePlan, plan_update, uses_master
from ..schedules.weight_decay import WeightDecaySchedule

if TYPE_CHECKING:
    from paddle import Tensor
    from paddle.nn.clip import GradientClipBase
    from paddle.optimizer.lr import LRScheduler

__all__ = ["AdamWDL", "ParamLrRow", "WEIGHT_DECAY_SCHEDULE_KEY"]


run_eagerly_under_sot()


class AdamWDL(ScheduledWeightDecay, OptimizationPass, AdamAccumulators, AdamW):
    r"""AdamW with layer-wise learning-rate decay and exact decoupled weight decay.

    For a parameter :math:`p` with gradient :math:`g` at step :math:`t`, let
    :math:`\eta` be the global learning rate (a float or the current value of an
    ``LRScheduler``), :math:`s_p` the parameter's own lr factor
    ``p.optimize_attr['learning_rate']`` (from ``ParamAttr(learning_rate=...)``
    or its parameter group's ``learning_rate``), :math:`r_p` the ratio
    ``set_param_lr_fun(p)`` and :math:`\lambda` the weight decay. Then
    :math:`\eta_p = \eta\, s_p` and

    .. math::

        p &\leftarrow p\,(1 - \eta_p \lambda)
            \qquad\text{(decayed parameters only)}\\
        m &\leftarrow \beta_1 m + (1-\beta_1)\, g, \qquad
        v \leftarrow \beta_2 v + (1-\beta_2)\, g^2\\
        p &\leftarrow p - \eta_p r_p\,\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\,
            \frac{m}{\sqrt{v} + \epsilon\sqrt{1-\beta_2^t}}

    A parameter is decayed when ``apply_decay_param_fun(p.name)`` holds (every
    parameter if that function is None). The decay uses the lr *before* the
    layer ratio and happens once; the ratio scales only the Adam step. With
    ``multi_precision=True`` and a float16 or bfloat16 ``p``, both act on the
    float32 master weight and ``p`` becomes its cast. With the default
    :func:`~paddle_llrd.layerwise_lr_decay`, :math:`r_p` is
    ``layerwise_decay ** (n_layers - i)`` for encoder layer ``i``,
    ``layerwise_decay ** (n_layers + 1)`` for embeddings and 1 for the rest.

    ``set_param_lr_fun`` is called once per parameter and update with the
    parameter only (it is stored as ``functools.partial(set_param_lr_fun,
    layerwise_decay, name_dict, n_layers)``). If it returns a number,
    ``p.optimize_attr['learning_rate']`` is multiplied by it for this update;
    if it returns ``None`` it has set ``p.optimize_attr['learning_rate']``
    itself. Either way the attribute is restored after the update, also when
    the function or the update raises. A step asks the function about every
    parameter before it changes any, so a function that raises, or gives a
    ratio that is negative, not finite or not a number, leaves the weights
    and the optimizer state as they were. With ``set_param_lr_fun=None`` the
    optimizer gives exactly ``paddle.optimizer.AdamW``'s numbers.

    Fast path: Paddle's fused ``adamw`` kernel decays by
    :math:`1-\eta'\lambda'` and steps with :math:`\eta'`; ``AdamWDL`` gives it
    :math:`\eta' = \eta_p r_p` and :math:`\lambda' = \lambda / r_p`, so the
    decay is :math:`1-\eta_p\lambda` as above, in one kernel call per parameter.
    A ratio of 0, a non-finite or Tensor lr factor or ratio, or a sparse
    ``SelectedRows`` gradient take the general path instead: the decay as its
    own op (:meth:`_append_decoupled_weight_decay`), then the kernel without
    decay (``adam`` for sparse gradients).

    What an update needs that does not change between steps (the
    parameter's accumulators and master weight, whether it decays, the fused
    coefficient) is kept per parameter and reused across dygraph steps (so
    ``apply_decay_param_fun`` is asked once per parameter); a changed lr
    factor, ratio or weight decay is followed, and ``set_state_dict`` starts
    afresh. The ratios of a function that depends on the parameter's name
    only (the default :func:`~paddle_llrd.layerwise_lr_decay` and a
    :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` with a float ``layerwise_decay``,
    or any callable with ``pure_in_name = True``) are computed once per
    parameter; other functions are asked at every step.

    Weight-decay schedule: with ``weight_decay`` a
    :class:`~paddle_llrd.WeightDecaySchedule`, step :math:`s` (counted over
    the steps that updated the weights, not AMP overflow steps) uses
    :math:`\lambda = \text{schedule}(s)` for every parameter outside a group
    with its own ``weight_decay``; ``state_dict()`` stores the position under
    ``"weight_decay_schedule"``. It needs dygraph execution (``to_static``
    included): ``minimize()`` in a static program raises
    ``NotImplementedError``. See :doc:`/weight_decay`.

    Args:
        learning_rate (float|LRScheduler, optional): The global learning rate. Default 0.001.
        beta1 (float|Tensor, optional): Decay rate of the first moment. Default 0.9.
            A Tensor's value starts the bias correction's power
            :math:`\beta_1^t` (Paddle 3.3.1's ``AdamW`` starts it at 0.9 whatever
            the Tensor holds).
        beta2 (float|Tensor, optional): Decay rate of the second moment. Default 0.999.
            As ``beta1`` (Paddle's ``AdamW`` starts at 0.999).
        epsilon (float|Tensor, optional): Numerical-stability term. Default 1e-8.
        parameters (list|tuple|None, optional): Parameters to optimise, or a list of
            parameter-group dicts (keys ``params``, ``learning_rate`` (a factor
            of the global lr), ``weight_decay`` (or the legacy ``coeff``),
            ``beta1``, ``beta2``, ``epsilon``, ``lazy_mode``, ``grad_clip``).
            Required in dygraph mode.
        weight_decay (float|Tensor|WeightDecaySchedule, optional): The decoupled
            weight decay :math:`\lambda`, kept as ``self._coeff``, or a
            schedule of it (see above; then ``self._coeff`` is its current
            value). Default 0.01.
        apply_decay_param_fun (Callable[[str], bool]|None, optional): Decay only the
            parameters whose ``name`` it accepts. Default None (decay all).
        grad_clip (GradientClipBase|None, optional): Gradient clipping. Default None.
        lazy_mode (bool, optional): With sparse (``SelectedRows``) gradients, update
            the moments of the rows present only. Default False.
        multi_precision (bool, optional): Keep float32 master weights for float16
            and bfloat16 parameters. Default False.
        layerwise_decay (float|Tensor, optional): The ratio between adjacent
            layers. A Python ``float`` (``1`` is refused, write ``1.0``) or a
            Tensor. Default 1.0 (no layer-wise decay).
        n_layers (int, optional): The number of encoder layers. Default 12.
        set_param_lr_fun (Callable|None, optional): ``fn(layerwise_decay, name_dict,
            n_layers, param)`` returning the ratio :math:`r_p` (or ``None``, see
            above). Default :func:`~paddle_llrd.layerwise_lr_decay`. ``None``
            turns layer-wise decay off.
        name_dict (dict|None, optional): ``{param.name: structured name}``, built with
            ``{p.name: n for n, p in model.named_parameters()}``. Required by the
            default function when ``layerwise_decay != 1.0``.
        name (str|None, optional): Prefix of the accumulator names, as in Paddle.
        amsgrad (bool, optional): Keyword only. The AMSGrad variant, as in
            ``paddle.optimizer.AdamW``. Default False.

    Raises:
        TypeError: ``learning_rate``, ``beta1``, ``beta2`` or ``epsilon`` is
            None, ``layerwise_decay`` is not a float or Tensor (an ``int`` is
            refused), ``set_param_lr_fun`` is not callable, ``name_dict`` is not
            a mapping, (default function) ``n_layers`` is not an int, a
            parameter group's ``weight_decay`` is a ``WeightDecaySchedule``
            (only the optimizer-wide one can be), or ``parameters`` is None
            in dygraph mode (a static program may leave it out).
        ValueError: a float (or dygraph Tensor) ``learning_rate`` or
            ``weight_decay``, or a parameter group's ``learning_rate`` or
            ``weight_decay``, is NaN, infinite or negative (nothing is applied,
            also to the groups before it); ``layerwise_decay`` is negative or not finite, or (default
            function) ``n_layers`` is negative, a parameter's layer index is not
            below it, or ``layerwise_decay != 1.0`` and there is no ``name_dict``.
        KeyError: a trainable parameter is missing from ``name_dict`` (default
            function).

    At a step (before any parameter changes), ``set_param_lr_fun`` giving a
    ratio that is not a number or Tensor raises ``TypeError``, and one that
    is negative or not finite ``ValueError``, naming the parameter.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamWDL
        >>> from paddle_llrd.models.tiny_bert import (
        ...     TinyBertConfig, TinyBertForSequenceClassification)
        >>> config = TinyBertConfig(num_hidden_layers=2)
        >>> model = TinyBertForSequenceClassification(config)
        >>> name_dict = {p.name: n for n, p in model.named_parameters()}
        >>> opt = AdamWDL(learning_rate=1e-3, parameters=model.parameters(),
        ...               weight_decay=0.01, layerwise_decay=0.8, n_layers=2,
        ...               name_dict=name_dict,
        ...               apply_decay_param_fun=lambda n: not n.endswith(".b_0"))
        >>> loss = paddle.nn.functional.cross_entropy(
        ...     model(paddle.randint(0, 100, [8, 16])), paddle.randint(0, 2, [8]))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> opt._lr_to_coeff
        {}
    """

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
    ) -> None:
        check_not_none(learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon)
        check_non_negative(learning_rate, "`learning_rate`")
        if not isinstance(weight_decay, WeightDecaySchedule):  # a schedule checks its values itself
            check_non_negative(weight_decay, "`weight_decay`")
        parameters = checked_parameters(parameters)
        check_layerwise_arguments(layerwise_decay, n_layers, set_param_lr_fun, name_dict)
        if not (use_multi_tensor is None or isinstance(use_multi_tensor, bool)):
            raise TypeError(
                f"AdamWDL: `use_multi_tensor` must be None, True or False, got {use_multi_tensor!r}."
            )
        weight_decay = self._follow_schedule(weight_decay)
        super().__init__(
            learning_rate=learning_rate,
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
            parameters=parameters,
            weight_decay=weight_decay,
            apply_decay_param_fun=apply_decay_param_fun,
            grad_clip=grad_clip,
            lazy_mode=lazy_mode,
            multi_precision=multi_precision,
            amsgrad=amsgrad,
            name=name,
        )
        self.layerwise_decay = layerwise_decay
        self.n_layers = n_layers
        self.name_dict = name_dict
        self.set_param_lr_fun = (
            None
            if set_param_lr_fun is None
            else functools.partial(set_param_lr_fun, layerwise_decay, name_dict, n_layers)
        )
        # A function pure in the parameter name (with a float decay) has its
        # ratios computed once; any other function runs every update.
        self._ratio_cache = (
            RatioCache(self.set_param_lr_fun)
            if is_pure_in_name(set_param_lr_fun) and isinstance(layerwise_decay, float)
            else None
        )
        self._start_without_pass()
        # Per parameter name, what its dygraph updates reuse across steps;
        # emptied when the optimizer state is replaced (set_state_dict).
        self._plans: dict[str, UpdatePlan] = {}
        # Tests (and debugging) set this to route every decay through the
        # separate op instead of the fused kernel.
        self._force_general_decay = False
        # The multi-tensor dygraph step (multi_tensor.py); None: the per-parameter path only.
        self._multi_tensor = None if use_multi_tensor is False else MultiTensorStep()
        self._params_name: dict[str, None] = {}  # ordered set, for a stable str()
        for param in self._listed_parameters():
            if self._decays(param):
                self._params_name[param.name] = None
            if not param.stop_gradient and self._ratio_cache is not None:
                self._ratio_cache.ratio(param)

    def _listed_parameters(self) -> list[Any]:
        if not self._parameter_list:
            return []
        if isinstance(self._parameter_list[0], dict):
            return [p for group in self._param_groups for p in group["params"]]
        return list(self._parameter_list)

    # ------------------------------------------------------- public-ish state
    def __str__(self) -> str:
        return "Weight Decay, params: " + ",".join(self._params_name)

    def _decays(self, param: Any) -> bool:
        return self._apply_decay_param_fun is None or bool(
            self._apply_decay_param_fun(param.name)
        )

    # ----------------------------------------------------------- param groups
    def _add_param_group(self, param_group: dict[str, Any]) -> None:
        check_group(param_group, "a parameter group")  # the constructor's groups: again, cheap
        # PaddleNLP's groups call the weight decay `coeff`; AdamW's `weight_decay`.
        if "coeff" in param_group:
            coeff = param_group["coeff"]
            if "weight_decay" in param_group and param_group["weight_decay"] != coeff:
                raise ValueError(
                    "AdamWDL: a parameter group sets both `weight_decay` "
                    f"({param_group['weight_decay']!r}) and its legacy name `coeff` "
                    f"({coeff!r}); give one of them."
                )
            param_group["weight_decay"] = coeff
        super()._add_param_group(param_group)

    def step(self) -> None:
        """Update the parameters once; with a weight-decay schedule, advance it.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> linear = paddle.nn.Linear(3, 2)
            >>> opt = AdamWDL(learning_rate=0.01, parameters=linear.parameters())
            >>> linear(paddle.ones([4, 3])).mean().backward()
            >>> opt.step()
            >>> opt.clear_grad()
        """
        # The one call site of the multi-tensor path: it returns False where
        # the per-parameter step below must run instead.
        if self._multi_tensor is not None and self._multi_tensor.step(self):
            return None
        grouped = bool(self._parameter_list) and isinstance(self._parameter_list[0], dict)
        if not grouped or not framework.in_dygraph_mode():
            return super().step()  # one pass, which asks set_param_lr_fun first (_begin_pass)
        # One pass per group: ask set_param_lr_fun about every group's
        # parameters before the first group changes anything.
        self._step_update_scales = self._resolve_update_scales(
            param
            for group in self._param_groups
            for param in group["params"]
            if not param.stop_gradient and param._grad_ivar() is not None
        )
        try:
            return super().step()
        finally:
            self._step_update_scales = None

    def set_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of ``AdamWDL`` or ``paddle.optimizer.AdamW``.

        With a weight-decay schedule, its position is restored from
        ``"weight_decay_schedule"``; a checkpoint without that entry (from
        ``AdamW``, or an ``AdamWDL`` with a float ``weight_decay``) leaves the
        schedule where it is, with a ``UserWarning``. The update plans are
        made afresh at the next step.
        """
        self._plans.clear()  # their accumulators and master weights may be replaced
        if self._multi_tensor is not None:
            self._multi_tensor.invalidate()  # laid out afresh from the loaded state at the next step
        return super().set_state_dict(state_dict)

    def clear_grad(self, set_to_zero: bool = True) -> None:
        """As ``paddle.optimizer.AdamW.clear_grad``; on the multi-tensor path
        ``set_to_zero=True`` zeroes each group's flat gradient buffer in one op."""
        if self._multi_tensor is not None and self._multi_tensor.clear_grad(self, set_to_zero):
            return None
        return super().clear_grad(set_to_zero)

    load_state_dict = set_state_dict

    # ------------------------------------------------------------- inspection
    def param_lr_table(self) -> list[ParamLrRow]:
        r"""What each trainable parameter gets at the next step, one :class:`ParamLrRow` each.

        In the optimizer's order, frozen parameters left out; the fields are
        described at :class:`~paddle_llrd.optim.adamwdl.ParamLrRow` (``layer_id``
        from a :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap`, the default
        :func:`~paddle_llrd.layerwise_lr_decay`, or any ratio function with a
        ``layer_id(structured_name, n_layers)`` method). Ratio functions are
        called as in a step (one returning None has its edit read and
        undone); the cached ones are not.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> from paddle_llrd.models.tiny_bert import (
            ...     TinyBertConfig, TinyBertForSequenceClassification)
            >>> config = TinyBertConfig(num_hidden_layers=2)
            >>> model = TinyBertForSequenceClassification(config)
            >>> named = dict(model.named_parameters())
            >>> name_dict = {p.name: n for n, p in named.items()}
            >>> no_decay = {p.name for n, p in named.items() if n.endswith("bias")}
            >>> opt = AdamWDL(learning_rate=0.1, parameters=model.parameters(),
            ...               weight_decay=0.01, layerwise_decay=0.5, n_layers=2,
            ...               name_dict=name_dict,
            ...               apply_decay_param_fun=lambda n: n not in no_decay)
            >>> shown = ("linear1.bias", "word_embeddings", "classifier")
            >>> for row in opt.param_lr_table():
            ...     if any(part in row.name for part in shown):
            ...         print(f"{row.name:40s} {row.layer_id} {row.ratio:.3f} "
            ...               f"{row.lr:.4f} {row.decayed} {row.weight_decay}")
            bert.embeddings.word_embeddings.weight   0 0.125 0.0125 True 0.01
            bert.encoder.layers.0.linear1.bias       1 0.250 0.0250 False 0.0
            bert.encoder.layers.1.linear1.bias       2 0.500 0.0500 False 0.0
            classifier.weight                        3 1.000 0.1000 True 0.01
            classifier.bias                          3 1.000 0.1000 False 0.0
        """
        return param_lr_rows(self)

    # --------------------------------------------------------------- updates
    def _plan(self, param: Any) -> UpdatePlan:
        """``param``'s :class:`~paddle_llrd.optim.plan.UpdatePlan`: kept across dygraph steps, per update in a program."""
        plan = self._plans.get(param.name)
        if plan is None:
            plan = plan_update(self, param)
            if plan.decays:
                self._params_name[param.name] = None
            if framework.in_dygraph_mode():
                self._plans[param.name] = plan
        return plan

    def _append_optimize_op(self, block: Any, param_and_grad: Any) -> Any:
        if isinstance(param_and_grad, dict):
            param_and_grad = self._update_param_group(param_and_grad)
        param, grad = param_and_grad
        optimize_attr = getattr(param, "optimize_attr", None)  # lr_attributes, inlined: per update
        if optimize_attr is not None and "learning_rate" not in optimize_attr:
            optimize_attr = None
        base_scale = 1.0 if optimize_attr is None else optimize_attr["learning_rate"]
        update_scale = self._update_scales.get(param.name)
        if update_scale is None:  # a cached ratio (or an update outside a pass)
            cache = self._active_ratio_cache()
            ratio = None if cache is None else cache.ratios.get(param.name)
            if ratio is None:
                update_scale = self._update_scale(param, optimize_attr, base_scale)
            else:
                update_scale = base_scale * ratio
        if optimize_attr is not None:
            optimize_attr["learning_rate"] = update_scale  # for this update only
        try:
            plan = self._plans.get(param.name) or self._plan(param)
            settings = self._settings()
            # Paddle 3.3.1's adamw kernel for SelectedRows gradients reads its
            # attributes wrongly and crashes (as paddle.optimizer.AdamW does),
            # so sparse gradients take the adam kernel and the separate decay.
            sparse = grad.is_selected_rows() if settings.dygraph else is_static_sparse(grad)
            if sparse and not settings.lazy_mode and settings.dygraph:
                grad, sparse = densify(param, grad), False
            fused_coeff = None if sparse else plan.fused_coeff_for(
                self._weight_decay, base_scale, update_scale,
                force_general=self._force_general_decay, decided=self._fused_coeffs,
            )
            if plan.decays and fused_coeff is None:
                self._append_decoupled_weight_decay(block, param_and_grad, lr_scale=base_scale)
            return self._append_adamw(
                block, param, grad, plan, lr=self._lr_for_scale(update_scale), coeff=fused_coeff, adam_kernel=sparse
            )
        finally:
            if optimize_attr is not None:
                optimize_attr["learning_rate"] = base_scale

    def _append_adamw(
        self, block: Any, param: Any, grad: Any, plan: UpdatePlan, *, lr: Any, coeff: float | None, adam_kernel: bool
    ) -> Any:
        """The kernel update (:func:`~paddle_llrd.optim.updates.adamw_update`) with this group's settings."""
        return adamw_update(block, param, grad, lr, plan, self._settings(), coeff=coeff, adam_kernel=adam_kernel)

    def _append_decoupled_weight_decay(
        self, block: Any, param_and_grad: Any, lr_scale: LrScale | None = None
    ) -> Any:
        r"""Decoupled weight decay as its own op: ``target *= 1 - lr * lr_scale * coeff``.

        ``target`` is the float32 master weight for float16/bfloat16 parameters
        under ``multi_precision``, else the parameter. ``lr_scale`` defaults to
        ``param.optimize_attr['learning_rate']``. The factor ``1 - lr * coeff`` is
        computed once per lr tensor and pass (``self._lr_to_coeff``); on an AMP
        overflow step (``found_inf``) of a static program it is 1.
        """
        if isinstance(param_and_grad, dict):
            param_and_grad = self._update_param_group(param_and_grad)
        param = param_and_grad[0]
        plan = self._plans.get(param.name)
        if plan is None:  # in a program, or called outside an update: no accumulators needed
            if not self._decays(param):
                return None
            target = self._master_weights[param.name] if uses_master(self, param) else param
        elif not plan.decays:
            return None
        else:
            target = param if plan.master_weight is None else plan.master_weight
        if lr_scale is None:
            lr_scale = base_scale_of(lr_attributes(param))
        lr = self._lr_for_scale(lr_scale)
        factor = self._lr_to_coeff.get(lr)
        if factor is None:
            factor = self._lr_to_coeff[lr] = decay_factor(lr, self._weight_decay, self._settings().found_inf)
        return decoupled_decay(block, target, factor)
