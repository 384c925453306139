"""AdamW with layer-wise learning-rate decay (``AdamWDL``), exact on Paddle 3.

A drop-in for ``paddlenlp.ops.optimizer.AdamWDL`` (same constructor, same
intended numbers) that runs on Paddle 3, decays once per step, accepts a
``set_param_lr_fun`` that edits ``optimize_attr`` itself, works on CPU
(also with ``multi_precision``), and costs what ``paddle.optimizer.AdamW``
costs; beyond it, a :class:`~paddle_llrd.WeightDecaySchedule` as
``weight_decay`` and :meth:`AdamWDL.param_lr_table`. See :doc:`/adamwdl`.

One class over ``paddle.optimizer.AdamW``, in PyTorch's shape: it owns the
parameters, the optimizer state (the update plans, the weight-decay
schedule's position) and the public API, and overrides the Paddle hooks it
must. What a step does is plain functions and small objects beside it:
:mod:`paddle_llrd.optim.ratios` asks ``set_param_lr_fun`` (before anything
changes) and :mod:`paddle_llrd.optim.updates` holds one parameter's update
(the pass's shared tensors, the plan, the decay decision, the kernels);
:mod:`paddle_llrd.optim.arguments` checks the constructor's arguments and
:mod:`paddle_llrd.optim.param_lr_rows` makes :meth:`AdamWDL.param_lr_table`.

A step, top to bottom: :meth:`AdamWDL.step` (or ``minimize``) ->
``_apply_optimize`` (the weight-decay schedule around it) ->
``_create_optimization_pass`` (ratios asked, an
:class:`~paddle_llrd.optim.updates.UpdatePass` opened; the dispatch point of
the update paths) -> per parameter :meth:`AdamWDL._append_optimize_op`.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import paddle
from paddle.base import framework
from paddle.base.layer_helper import LayerHelper
from paddle.optimizer import AdamW

from ..layer_decay.layerwise import layerwise_lr_decay, warn_if_n_layers_exceeds_read_blocks, warn_if_no_encoder_layers
from ..schedules.weight_decay import WeightDecaySchedule, claim_schedule
from .arguments import (
    check_adamw_arguments,
    check_added_group,
    check_decay_factor,
    check_layerwise_arguments,
    checked_parameters,
    refuse_groups_in_program,
)
from .checkpoint import STRUCTURED_NAMES_KEY, matched_state_dict, structured_names_record
from .dispatch import multi_tensor_refusal, parameter_route
from .eager import runs_eagerly_under_sot
from .kernels import adamw_update, decoupled_decay, is_tensor
from .multi_tensor import LayoutInput, MultiTensorStep, StepContext
from .param_lr_rows import ParamLrRow, param_lr_rows
from .ratios import RatioCache, is_pure_in_name, resolve_update_scales, update_scale
from .updates import (
    AdamSettings,
    LrScale,
    UpdatePass,
    UpdatePlan,
    base_scale_of,
    initial_beta_pow,
    lr_attributes,
    plan_update,
    uses_master,
)

if TYPE_CHECKING:
    from paddle import Tensor
    from paddle.nn.clip import GradientClipBase
    from paddle.optimizer.lr import LRScheduler

__all__ = ["AdamWDL", "ParamLrRow", "STRUCTURED_NAMES_KEY", "WEIGHT_DECAY_SCHEDULE_KEY"]

# The entry of the optimizer's state_dict() that holds its schedule's state.
WEIGHT_DECAY_SCHEDULE_KEY = "weight_decay_schedule"
# The entries of state_dict() beyond paddle.optimizer.AdamW's, none of them a Tensor.
EXTRA_STATE_KEYS = (WEIGHT_DECAY_SCHEDULE_KEY, STRUCTURED_NAMES_KEY)

class AdamWDL(AdamW):
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
    parameter's accumulators and master weight, the fused coefficient) is
    kept per parameter and reused across dygraph steps; a changed lr factor,
    ratio or weight decay is followed, under ``multi_precision`` a parameter
    cast to another dtype (or, with a master weight, moved to another place)
    gets a new plan (cast to float16/bfloat16, its float32 master weight;
    a cast the state cannot serve raises ``RuntimeError``), and ``set_state_dict``
    starts afresh. ``apply_decay_param_fun`` is asked at every update, as
    ``paddle.optimizer.AdamW`` asks it (a rule may change over time, e.g. no
    decay during warmup); one with ``pure_in_name = True`` once per
    parameter. The ratios of a function that depends on the parameter's name
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
        use_multi_tensor (bool|None, optional): Keyword only. None (default) or
            True: a dygraph step makes one ``adamw`` kernel call per group of
            parameters that share dtype, place, parameter group, lr factor,
            ratio, decay and beta powers (views of flat buffers;
            :mod:`paddle_llrd.optim.multi_tensor`), wherever that applies,
            with the per-parameter path's numbers bit for bit. False: one
            call per parameter. See :ref:`adamwdl-multi-tensor`.
        num_threads (int|None, optional): Keyword only. The threads that share
            the multi-tensor step's kernel calls on CPU (large groups split
            into contiguous chunks, the same bits as one call). None
            (default): the environment variable ``PADDLE_LLRD_NUM_THREADS``,
            else the cores this process may use divided among the local
            ranks of a ``paddle.distributed`` launch. ``1``: one thread.

    Raises:
        TypeError: ``learning_rate``, ``beta1``, ``beta2``, ``epsilon`` or
            ``weight_decay`` (or a group's) is None or of the wrong type (a
            str, a bool), ``apply_decay_param_fun`` is not callable,
            ``parameters`` holds something other than parameters or group
            dicts, ``use_multi_tensor`` is not None, True or False,
            ``num_threads`` is not an int,
            ``layerwise_decay`` is not a float or Tensor (an ``int`` is
            refused), ``set_param_lr_fun`` is not callable, ``name_dict`` is not
            a mapping, (default function) ``n_layers`` is not an int, a
            parameter group's ``weight_decay`` is a ``WeightDecaySchedule``
            (only the optimizer-wide one can be), or ``parameters`` is None
            in dygraph mode (a static program may leave it out).
        ValueError: a float (or dygraph Tensor) ``learning_rate`` or
            ``weight_decay``, or a parameter group's ``learning_rate`` or
            ``weight_decay``, is NaN, infinite or negative, ``num_threads``
            (or ``PADDLE_LLRD_NUM_THREADS``) is below 1, a beta (or a
            group's) is outside [0, 1), an ``epsilon`` negative, the decay
            factor :math:`1 - \eta s \lambda` negative for the lr known now,
            a parameter is listed twice, or the ``WeightDecaySchedule`` is
            another live optimizer's (nothing is applied, also to the groups
            before it); ``layerwise_decay`` is negative or not finite, or (default
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
        check_adamw_arguments(
            learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
            weight_decay=weight_decay, apply_decay_param_fun=apply_decay_param_fun,
        )
        parameters = checked_parameters(parameters)
        check_decay_factor(learning_rate, weight_decay, parameters)
        check_layerwise_arguments(layerwise_decay, n_layers, set_param_lr_fun, name_dict)
        warn_if_no_encoder_layers(set_param_lr_fun, layerwise_decay, name_dict, parameters)
        warn_if_n_layers_exceeds_read_blocks(set_param_lr_fun, layerwise_decay, n_layers, name_dict, parameters)
        if not (use_multi_tensor is None or isinstance(use_multi_tensor, bool)):
            raise TypeError(
                f"AdamWDL: `use_multi_tensor` must be None, True or False, got {use_multi_tensor!r}."
            )
        multi_tensor = MultiTensorStep(num_threads)  # (checks num_threads, whichever path)
        # Paddle's constructor adds the parameter groups (_add_param_group),
        # which notes the groups that follow the schedule.
        self._weight_decay_schedule: WeightDecaySchedule | None = None
        self._groups_following_schedule: list[dict[str, Any]] = []
        if isinstance(weight_decay, WeightDecaySchedule):
            self._weight_decay_schedule = weight_decay
            weight_decay = weight_decay()
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
        # The update scales and decay answers of a grouped step(), asked before its first group's pass.
        self._step_asked: tuple[dict[str, LrScale], dict[str, bool]] | None = None
        self._pass: UpdatePass | None = None  # the optimisation pass under way
        # Per parameter name, what its dygraph updates reuse across steps;
        # emptied when the optimizer state is replaced (set_state_dict).
        self._plans: dict[str, UpdatePlan] = {}
        # Tests (and debugging) set this to route every decay through the
        # separate op instead of the fused kernel.
        self._force_general_decay = False
        # The multi-tensor dygraph step (multi_tensor.py); None: the per-parameter path only.
        self._multi_tensor = None if use_multi_tensor is False else multi_tensor
        self._params_name: dict[str, None] = {}  # ordered set, for a stable str()
        for param in self._listed_parameters():
            if self._decays(param):
                self._params_name[param.name] = None
            if not param.stop_gradient and self._ratio_cache is not None:
                self._ratio_cache.ratio(param)
        if self._weight_decay_schedule is not None:
            claim_schedule(self._weight_decay_schedule, self)  # last: a failed constructor claims nothing

    # ------------------------------------------------------- public-ish state
    def __str__(self) -> str:
        return "Weight Decay, params: " + ",".join(self._params_name)

    @property
    def weight_decay_schedule(self) -> WeightDecaySchedule | None:
        """The :class:`~paddle_llrd.WeightDecaySchedule` given as ``weight_decay``, or None."""
        return self._weight_decay_schedule

    @property
    def _coeff(self) -> float:
        """The weight decay :math:`\\lambda` (of the group being updated, in a pass)."""
        return self._weight_decay

    @_coeff.setter
    def _coeff(self, value: float) -> None:
        self._weight_decay = float(value)
        self._default_dict["weight_decay"] = float(value)

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
        return self._apply_decay_param_fun is None or bool(
            self._apply_decay_param_fun(param.name)
        )

    def _add_param_group(self, param_group: dict[str, Any]) -> None:
        check_added_group(param_group, self._param_groups)  # before it changes anything
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
        follows_schedule = "weight_decay" not in param_group
        super()._add_param_group(param_group)
        if follows_schedule:
            self._groups_following_schedule.append(param_group)

    # ------------------------------------------------------------ the step
    @runs_eagerly_under_sot
    def step(self) -> None:
        """Update the parameters once; with a weight-decay schedule, advance it.

        Runs eagerly under ``paddle.jit.to_static`` (SOT), as
        ``paddle.optimizer.AdamW.step`` does.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import AdamWDL
            >>> linear = paddle.nn.Linear(3, 2)
            >>> opt = AdamWDL(learning_rate=0.01, parameters=linear.parameters())
            >>> linear(paddle.ones([4, 3])).mean().backward()
            >>> opt.step()
            >>> opt.clear_grad()
        """
        if self._multi_tensor is not None and self._multi_tensor_step():
            return None
        if not self._grouped():
            return super().step()  # one _apply_optimize: the schedule and the ratios inside
        # Parameter groups make one _apply_optimize (and one pass) each: ask
        # set_param_lr_fun and apply_decay_param_fun about every group's
        # parameters before the first group changes anything, and follow the
        # schedule around them all.
        if framework.in_dygraph_mode():
            self._step_asked = self._ask_before_updates(
                [
                    param
                    for group in self._param_groups
                    for param in group["params"]
                    if not param.stop_gradient and param._grad_ivar() is not None
                ]
            )
        schedule = self._weight_decay_schedule
        if schedule is not None:
            self._sync_weight_decay()
        try:
            super().step()
        finally:
            self._step_asked = None
        if schedule is not None:
            self._finish_scheduled_step()
        return None

    def _multi_tensor_step(self) -> bool:
        """The step on the multi-tensor path, where :func:`~paddle_llrd.optim.dispatch.multi_tensor_refusal`
        allows it and its layout holds every trained parameter; False (nothing changed) otherwise."""
        multi_tensor = self._multi_tensor
        reason = multi_tensor_refusal(self)
        if reason is not None:
            multi_tensor.refuse(reason)
            return False
        schedule = self._weight_decay_schedule
        if schedule is not None:
            self._sync_weight_decay()
        if not multi_tensor.step(self._multi_tensor_context()):
            return False
        if schedule is not None:
            self._finish_scheduled_step()
        return True

    def _listed_groups(self) -> list[tuple[dict[str, Any] | None, list[Any]]]:
        """``(group dict or None, parameters)`` per parameter group, in the optimizer's order."""
        if self._grouped():
            return [(group, group["params"]) for group in self._param_groups]
        return [(None, self._parameter_list or [])]

    def _multi_tensor_context(self) -> StepContext:
        """What this step's :class:`~paddle_llrd.optim.multi_tensor.StepContext` hands the multi-tensor step."""
        groups = self._listed_groups()
        if getattr(self, "helper", None) is None:  # what Paddle's pass sets up first (the lr and accumulators need it)
            self.helper = LayerHelper(self.__class__.__name__)
        self._create_global_learning_rate()
        defaults = self._default_dict
        return StepContext(
            groups=groups,
            settings=[AdamSettings.of_group(self, group) for group, _ in groups],
            coeffs=[
                self._weight_decay if group is None else group.get("weight_decay", defaults["weight_decay"])
                for group, _ in groups
            ],
            global_lr=self._global_learning_rate(),
            decay_rule=self._apply_decay_param_fun,
            with_ratio=self._decay_with_ratio,
            force_general=self._force_general_decay,
            prepare=self._layout_inputs,
        )

    def _layout_inputs(
        self, trained: list[tuple[dict[str, Any] | None, list[Any]]], decay_answers: dict[int, bool]
    ) -> list[list[LayoutInput]]:
        """For a multi-tensor layout: the ratio function asked and the plans fitted
        (:meth:`_before_updates`), the accumulators and plans made, and per trained
        parameter its plan, cached ratio and decay answer (``decay_answers``'s, by
        id of the parameter, where this step asked already)."""
        self._before_updates([param for _, params in trained for param in params])
        block = framework.default_main_program().global_block()
        cache = self._active_ratio_cache()
        inputs = []
        for group, params in trained:
            if params:
                self._create_accumulators(block, params if group is None else dict(group, params=params))
            group_inputs = []
            for param in params:
                plan = self._plans.get(param.name) or self._plan(param)
                decays = plan.decays
                if decays is None:  # asked at every update (this step's answer if asked)
                    decays = decay_answers.get(id(param))
                    if decays is None:
                        decays = self._decays(param)
                    if decays:
                        self._params_name[param.name] = None
                group_inputs.append(LayoutInput(plan, 1.0 if cache is None else cache.ratio(param), decays))
            inputs.append(group_inputs)
        return inputs

    @runs_eagerly_under_sot
    def minimize(self, loss: Tensor, startup_program: Any = None, parameters: Any = None, no_grad_set: Any = None) -> Any:
        """As ``paddle.optimizer.AdamW.minimize``; refused in a static program with a
        weight-decay schedule (``NotImplementedError``) or parameter groups
        (``TypeError``), before anything is added to it."""
        self._refuse_schedule_outside_dygraph()
        refuse_groups_in_program(self._grouped())
        return super().minimize(loss, startup_program=startup_program, parameters=parameters, no_grad_set=no_grad_set)

    @runs_eagerly_under_sot  # whoever calls it: apply_gradients(), fleet's sharding optimizer
    def _apply_optimize(self, loss: Any, startup_program: Any, params_grads: Any, param_group_idx: int = 0) -> Any:
        # One call per step without parameter groups: the schedule is read
        # before it and advanced after it. Groups call it once per group, and
        # step() follows the schedule around them.
        if self._weight_decay_schedule is None or isinstance(params_grads, dict):
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
        """One optimisation pass: the ratios asked before anything changes, then the updates.

        The pass's :class:`~paddle_llrd.optim.updates.UpdatePass` lives until
        the pass ends, also by an exception: the next pass may have another
        lr, weight decay or ratios.
        """
        # What may fail on user input happens first: the schedule check (a
        # static program built without minimize(): apply_gradients, a
        # to_static full graph), then set_param_lr_fun, the parameters'
        # dtypes and apply_decay_param_fun for every parameter
        # (_ask_before_updates).
        self._refuse_schedule_outside_dygraph()
        asked = self._step_asked
        if asked is None:
            pairs = (
                parameters_and_grads["params"]
                if isinstance(parameters_and_grads, dict)
                else parameters_and_grads
            )
            asked = self._ask_before_updates(
                [param for param, grad in pairs if grad is not None and not param.stop_gradient]
            )
        self._pass = self._new_pass(*asked)
        try:
            # The dispatch point of the update paths. Per parameter: Paddle's
            # pass creates the accumulators and calls _append_optimize_op
            # once per parameter.
            return create_pass(parameters_and_grads, param_group_idx=param_group_idx)
        finally:
            self._pass = None

    def _new_pass(
        self, update_scales: dict[str, LrScale] | None = None, decay_answers: dict[str, bool] | None = None
    ) -> UpdatePass:
        cache = self._active_ratio_cache()
        return UpdatePass(
            self._global_learning_rate,
            ask=self._update_scale,
            update_scales=update_scales,
            cached_ratios=None if cache is None else cache.ratios,
            ask_decay=self._decays,
            decay_answers=decay_answers,
        )

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
        """What a step asks and checks before it changes any parameter; the update scales.

        ``set_param_lr_fun`` about every parameter (a function that raises,
        or a bad ratio, changes nothing), then, under ``multi_precision``,
        the dygraph plans of the parameters cast or moved since their last
        update (:meth:`_refit_plans`). Without ``multi_precision`` a plan
        holds what it would hold after a cast (the same moments, no master
        weight), which is what ``paddle.optimizer.AdamW`` uses too.
        """
        update_scales = self._resolve_update_scales(params)
        if self._multi_precision and self._plans and framework.in_dygraph_mode():
            self._refit_plans(params)
        return update_scales

    def _ask_before_updates(self, params: list[Any]) -> tuple[dict[str, LrScale], dict[str, bool]]:
        """:meth:`_before_updates`, then ``apply_decay_param_fun`` about every parameter
        whose answer is not kept: the update scales and the decay answers of a pass.

        A rule that raises does so before any parameter, moment or beta power
        changed (the multi-tensor path asks it at its layout, before its
        update, too). Nothing is asked on a dygraph AMP overflow step, which
        updates nothing.
        """
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
        """Ask ``set_param_lr_fun`` about every parameter before any update
        (:func:`~paddle_llrd.optim.ratios.resolve_update_scales`). Empty on a
        dygraph AMP overflow step, which updates nothing, so that a function
        is called once per update."""
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
        """A new :class:`~paddle_llrd.optim.updates.UpdatePlan` of ``param``: kept across dygraph steps
        while ``param`` keeps its dtype (:meth:`UpdatePlan.fits <paddle_llrd.optim.updates.UpdatePlan.fits>`),
        made per update in a program. ``decays``: ``apply_decay_param_fun``'s answer, if asked already."""
        decay_fun = self._apply_decay_param_fun
        plan = plan_update(self, param, cache_decay=decay_fun is None or is_pure_in_name(decay_fun), decays=decays)
        if plan.decays:
            self._params_name[param.name] = None
        if framework.in_dygraph_mode():
            self._plans[param.name] = plan
        return plan

    def _refit_plans(self, params: list[Any]) -> None:
        """Drop the plans of ``params`` that no longer fit them (cast to another dtype) since
        they were made, fitting the optimizer state to the new dtype; refuse, naming the
        parameter and before anything changes, a cast the state cannot serve.

        A parameter cast to float16/bfloat16 under ``multi_precision`` gets
        its float32 master weight (from its value now) and keeps its float32
        moments, under the names an optimizer built for the cast model gives
        them, so that checkpoints load either way; a move keeps the state as
        it is (as ``paddle.optimizer.AdamW`` does).
        """
        plans = self._plans
        stale = []
        for param in params:
            plan = plans.get(param.name)
            if plan is not None and not plan.fits(param):
                stale.append((param, plan))
        for param, plan in stale:
            self._check_cast(param, plan)
        for param, _ in stale:
            if uses_master(self, param) and param.name not in self._master_weights:
                master = self._create_master_weight(param)
                _rename_accumulators(self._accumulators, param.name, master.name)
            del plans[param.name]

    def _check_cast(self, param: Any, stale: UpdatePlan) -> None:
        """``RuntimeError`` naming ``param`` if its state (made for ``stale``'s dtype) cannot serve its dtype now."""
        wants_master = uses_master(self, param)
        master = self._master_weights.get(param.name)
        moment_dtype = stale.moments[0].dtype
        state_dtype = paddle.float32 if self._is_dtype_fp16_or_bf16(param.dtype) else param.dtype
        if moment_dtype != state_dtype or (master is not None and not wants_master):
            held = f"{moment_dtype} moments" + (" and a float32 master weight" if master is not None else "")
            raise RuntimeError(
                f"AdamWDL: parameter {param.name!r} was cast from {stale.dtype} to {param.dtype} after the "
                f"optimizer created its state ({held}), which cannot serve a {param.dtype} parameter; "
                "cast the model before building the optimizer."
            )

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
            plan = self._plans.get(param.name) or self._plan(param, update.decay_answers.get(param.name))
            decays = plan.decays
            if decays is None:  # asked at every update (before the pass), as paddle.optimizer.AdamW asks
                decays = update.decays(param)
                if decays:
                    self._params_name[param.name] = None
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
        """The kernel update (:func:`~paddle_llrd.optim.kernels.adamw_update`) with this group's settings."""
        settings = self._current_pass().settings(self)
        return adamw_update(block, param, grad, lr, plan, settings, coeff=coeff, adam_kernel=adam_kernel)

    def _append_decoupled_weight_decay(
        self, block: Any, param_and_grad: Any, lr_scale: LrScale | None = None, *, decays: bool | None = None
    ) -> Any:
        r"""Decoupled weight decay as its own op: ``target *= 1 - lr * lr_scale * coeff``.

        ``target`` is the float32 master weight for float16/bfloat16 parameters
        under ``multi_precision``, else the parameter. ``lr_scale`` defaults to
        ``param.optimize_attr['learning_rate']``; ``decays`` (whether the
        parameter decays) to the plan's or ``apply_decay_param_fun``'s answer.
        The factor ``1 - lr * coeff`` is computed once per lr tensor and pass
        (``self._lr_to_coeff``); on an AMP overflow step (``found_inf``) of a
        static program it is 1.
        """
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
        """Paddle's accumulators, with beta powers that start at a Tensor beta's value.

        Paddle 3.3.1's AdamW starts them at 0.9/0.999 for Tensor betas. In
        dygraph the value is read here; a program starts them at
        ``UNSET_BETA_POW`` and its first update sets them
        (:func:`~paddle_llrd.optim.updates.start_beta_pows`).
        """
        holder = self._accumulators_holder
        if holder and not _has_saved_state(holder, p.name):
            # A parameter that was frozen when the checkpoint was saved has no
            # moments in it; Paddle asserts there, an uninterrupted run starts
            # them at zero, and so does this one.
            self._accumulators_holder = {}
            try:
                return self._add_moments_pows(p)
            finally:
                self._accumulators_holder = holder

        beta1, beta2 = self._beta1, self._beta2
        if not (is_tensor(beta1) or is_tensor(beta2)):
            return super()._add_moments_pows(p)

        self._beta1, self._beta2 = initial_beta_pow(beta1), initial_beta_pow(beta2)
        try:
            return super()._add_moments_pows(p)
        finally:
            self._beta1, self._beta2 = beta1, beta2

    # ------------------------------------------------ the weight-decay schedule
    def _sync_weight_decay(self) -> None:
        """Set the coefficient of the next step from the schedule, if there is one."""
        schedule = self._weight_decay_schedule
        if schedule is None:
            return
        coeff = float(schedule())
        self._coeff = coeff
        for group in self._groups_following_schedule:
            group["weight_decay"] = coeff

    def _finish_scheduled_step(self) -> None:
        """Advance the schedule after a step, unless the step was an AMP overflow (a no-op)."""
        found_inf = self._get_auxiliary_var("found_inf")
        if found_inf is not None and bool(found_inf.item() if is_tensor(found_inf) else found_inf):
            return
        self._weight_decay_schedule.step()
        self._sync_weight_decay()

    def _refuse_schedule_outside_dygraph(self) -> None:
        if self._weight_decay_schedule is not None and not framework.in_dygraph_mode():
            raise NotImplementedError(
                "AdamWDL: a WeightDecaySchedule as `weight_decay` needs dygraph execution "
                "(eager, or paddle.jit.to_static, whose optimizer step runs eagerly): a static "
                "program fixes the weight-decay coefficient when it is built. Give a float "
                "`weight_decay` for static programs."
            )

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """``paddle.optimizer.AdamW``'s state dict, plus ``"structured_names"`` and
        ``"weight_decay_schedule"``.

        ``"structured_names"`` (once there is parameter state): ``{param.name:
        structured name}`` of every parameter of the optimizer, from
        ``name_dict`` (None for a parameter without an entry), by which
        :meth:`set_state_dict` matches the state when Paddle's names have
        moved; ``paddle.optimizer.AdamW.set_state_dict`` ignores it.
        ``"weight_decay_schedule"``: the schedule's
        :meth:`~paddle_llrd.WeightDecaySchedule.state_dict`, when
        ``weight_decay`` is a schedule.

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
        if self._weight_decay_schedule is not None:
            state[WEIGHT_DECAY_SCHEDULE_KEY] = self._weight_decay_schedule.state_dict()
        return state

    def set_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of ``AdamWDL`` or ``paddle.optimizer.AdamW``.

        With a weight-decay schedule, its position is restored from
        ``"weight_decay_schedule"``; a checkpoint without that entry (from
        ``AdamW``, or an ``AdamWDL`` with a float ``weight_decay``) leaves the
        schedule where it is, with a ``UserWarning`` (a bad entry changes
        nothing). The update plans are made afresh at the next step.

        Entries are matched to parameters by structured name where the
        checkpoint's ``"structured_names"`` and this optimizer's
        ``name_dict`` both know it (so a resume script whose Paddle names
        moved, one more layer built before the model, continues as the
        uninterrupted run), by Paddle's parameter name otherwise (a
        checkpoint of ``paddle.optimizer.AdamW`` or an older AdamWDL). When
        some entries belong to no parameter of this optimizer while some
        parameter has no saved state: ``ValueError`` naming both, before
        anything is loaded (a ``UserWarning`` naming the unused entries when
        every parameter has its state). A parameter without saved state
        otherwise starts afresh: silently if the checkpoint lists it (frozen
        when saved), with a ``UserWarning`` naming it if it does not. See
        :func:`~paddle_llrd.optim.checkpoint.matched_state_dict`.
        """
        state_dict = matched_state_dict(self, state_dict, self._listed_parameters(), name_dict=self.name_dict)
        self._plans.clear()  # their accumulators and master weights may be replaced
        if self._multi_tensor is not None:
            self._multi_tensor.invalidate()  # laid out afresh from the loaded state at the next step
        schedule_state = state_dict.get(WEIGHT_DECAY_SCHEDULE_KEY)
        if schedule_state is not None:
            state_dict = {k: v for k, v in state_dict.items() if k != WEIGHT_DECAY_SCHEDULE_KEY}
        schedule = self._weight_decay_schedule
        if schedule is None:
            super().set_state_dict(state_dict)
            return
        if schedule_state is None:
            warnings.warn(
                f"AdamWDL.set_state_dict: the checkpoint has no {WEIGHT_DECAY_SCHEDULE_KEY!r} "
                f"entry; the weight-decay schedule stays at step {schedule.current_step}.",
                UserWarning,
                stacklevel=2,
            )
            super().set_state_dict(state_dict)
            return
        previous_step = schedule.current_step
        schedule.set_state_dict(schedule_state)  # checks the entry before changing anything
        try:
            super().set_state_dict(state_dict)
        except BaseException:
            schedule.current_step = previous_step
            raise
        self._sync_weight_decay()

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


def _rename_accumulators(accumulators: dict[str, dict[str, Any]], old: str, new: str) -> None:
    """Key ``old``'s accumulators by ``new`` (a master weight's name), and name them so.

    Paddle keys and names the accumulators of a float16/bfloat16 parameter
    under ``multi_precision`` after its master weight
    (``<param>_fp32_master_0_moment1_0``), and a checkpoint by those names.
    """
    for per_param in accumulators.values():
        accumulator = per_param.pop(old, None)
        if accumulator is None:
            continue
        if accumulator.name.startswith(old):
            accumulator.name = new + accumulator.name[len(old):]
        per_param[new] = accumulator


def _has_saved_state(holder: Mapping[str, Any], param_name: str) -> bool:
    """Whether a loaded optimizer state holds accumulators of ``param_name``
    (Paddle names them ``<param name>_<accumulator>_<n>``)."""
    prefix = param_name + "_"
    return any(key.startswith(prefix) for key in holder)
