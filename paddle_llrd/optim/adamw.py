r"""``paddle_llrd.AdamW``: ``paddle.optimizer.AdamW`` with ``lr_ratio`` working on every device.

Paddle's ``AdamW(lr_ratio=fn)`` scales a parameter's learning rate by
``fn(param)`` for both the decay and the Adam step; Paddle 3.3.1 implements it
in its CUDA and XPU kernels only and raises ``NotImplementedError: 'lr_ratio'
is unimplemented in CPU`` elsewhere. :class:`AdamW` is the same optimizer on
:class:`~paddle_llrd.AdamWDL`'s update paths, which put the ratio into the
learning rate they give the kernel; it differs from ``AdamWDL`` only in the
decay's learning rate (``AdamWDL`` decays with the lr before the ratio).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..checks import checks_named, is_non_negative_number, is_real_number
from .adamwdl import AdamWDL
from .ratios import is_pure_in_name

if TYPE_CHECKING:
    from paddle import Tensor
    from paddle.nn.clip import GradientClipBase
    from paddle.optimizer.lr import LRScheduler

__all__ = ["AdamW"]


class CheckedLrRatio:
    """``lr_ratio(param)``, refused by name unless it is a finite number >= 0.

    Paddle's kernels take the ratio as a float attribute, so a Tensor or
    ``None`` is no ratio. Keeps ``lr_ratio``'s ``pure_in_name`` declaration
    (:func:`~paddle_llrd.optim.ratios.is_pure_in_name`).

    Examples:
        >>> import paddle
        >>> p = paddle.create_parameter([1], "float32")
        >>> CheckedLrRatio(lambda param: 0.5)(p)
        0.5
        >>> CheckedLrRatio(lambda param: None)(p)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: AdamW: `lr_ratio` returned NoneType None for ...; it must return a float >= 0 ...
    """

    def __init__(self, lr_ratio: Callable[[Any], float]) -> None:
        self.lr_ratio = lr_ratio
        self.pure_in_name = is_pure_in_name(lr_ratio)

    def __call__(self, param: Any) -> float:
        ratio = self.lr_ratio(param)
        if not is_real_number(ratio):
            raise TypeError(
                f"AdamW: `lr_ratio` returned {type(ratio).__name__} {ratio!r} for {param.name!r}; it must return "
                "a float >= 0 (the factor of the parameter's learning rate), as for paddle.optimizer.AdamW."
            )
        if not is_non_negative_number(ratio):
            raise ValueError(
                f"AdamW: `lr_ratio` returned {ratio!r} for {param.name!r}; a learning-rate ratio must be a "
                "finite number >= 0."
            )
        return float(ratio)


class AdamW(AdamWDL):
    r"""``paddle.optimizer.AdamW``, with ``lr_ratio`` on every device (CPU included).

    For a parameter :math:`p` with gradient :math:`g`, let :math:`\eta` be the
    global learning rate, :math:`s_p` its own lr factor
    (``p.optimize_attr['learning_rate']``, from ``ParamAttr`` or its group),
    :math:`r_p` = ``lr_ratio(p)`` (1 without ``lr_ratio``) and :math:`\lambda`
    the weight decay. With :math:`\eta_p = \eta\, s_p\, r_p`:

    .. math::

        p &\leftarrow p\,(1 - \eta_p \lambda)
            \qquad\text{(decayed parameters only)}\\
        p &\leftarrow p - \eta_p\,\frac{\sqrt{1-\beta_2^t}}{1-\beta_1^t}\,
            \frac{m}{\sqrt{v} + \epsilon\sqrt{1-\beta_2^t}}

    with the moments :math:`m, v` as in Adam: Paddle's semantics (its
    ``test_adamw_op.py`` reference ``adamw_step``: ``lr = lr * lr_ratio;
    param *= 1 - lr * coeff``), where :class:`~paddle_llrd.AdamWDL` decays with
    :math:`\eta\, s_p` and scales only the step by the ratio. Without
    ``lr_ratio`` the numbers are ``paddle.optimizer.AdamW``'s, bit for bit.

    ``lr_ratio`` is asked about every parameter at every update, before any
    parameter of the step changes (a ratio function with ``pure_in_name =
    True`` is asked once per parameter); a ratio that is not a finite float
    :math:`\ge 0` raises, naming ``lr_ratio`` and the parameter. The update
    paths, checkpoints (``paddle.optimizer.AdamW``'s keys), argument checks,
    ``multi_precision`` on CPU, sparse gradients, Tensor betas, a
    :class:`~paddle_llrd.WeightDecaySchedule` as ``weight_decay``, and every
    execution mode are :class:`~paddle_llrd.AdamWDL`'s (see :doc:`/adamwdl`).

    Args:
        learning_rate (float|LRScheduler, optional): As in ``paddle.optimizer.AdamW``. Default 0.001.
        beta1 (float|Tensor, optional): Default 0.9.
        beta2 (float|Tensor, optional): Default 0.999.
        epsilon (float|Tensor, optional): Default 1e-8.
        parameters (list|tuple|None, optional): Parameters or parameter-group dicts.
        weight_decay (float|Tensor|WeightDecaySchedule, optional): :math:`\lambda`. Default 0.01.
        use_lowprecision_moment (bool, optional): As in ``paddle.optimizer.AdamW``:
            keep the moments of float16/bfloat16 parameters in their dtype
            (on a GPU; CPU has no half-precision kernel). Default False.
        lr_ratio (Callable[[Tensor], float]|None, optional): The ratio
            :math:`r_p` of each parameter's learning rate. Default None.
        apply_decay_param_fun (Callable[[str], bool]|None, optional): Decay only the
            parameters whose ``name`` it accepts. Default None (decay all).
        grad_clip (GradientClipBase|None, optional): Default None.
        lazy_mode (bool, optional): Default False.
        multi_precision (bool, optional): float32 master weights for
            float16/bfloat16 parameters (on CPU too). Default False.
        amsgrad (bool, optional): Default False.
        name (str|None, optional): Prefix of the accumulator names.

    Raises:
        TypeError: ``lr_ratio`` is not callable, or an argument has the wrong
            type (named, as in :class:`~paddle_llrd.AdamWDL`).
        ValueError: an argument is out of range (named, as in
            :class:`~paddle_llrd.AdamWDL`).

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamW
        >>> first, second = paddle.nn.Linear(2, 2), paddle.nn.Linear(2, 1)
        >>> ratios = {p.name: 0.5 for p in first.parameters()}
        >>> opt = AdamW(learning_rate=0.1, weight_decay=0.5,
        ...             parameters=[*first.parameters(), *second.parameters()],
        ...             lr_ratio=lambda p: ratios.get(p.name, 1.0))
        >>> before = first.weight.numpy().copy()
        >>> (second(first(paddle.ones([1, 2]))) * 0.0).sum().backward()
        >>> opt.step()
        >>> # zero gradients: w *= 1 - lr * ratio * weight_decay = 1 - 0.1 * 0.5 * 0.5
        >>> print(f"{float((first.weight.numpy() / before).mean()):.3f}")
        0.975
    """

    # The decay's learning rate includes the ratio (Paddle's lr_ratio semantics).
    _decay_with_ratio = True

    def __init__(  # paddle.optimizer.AdamW's signature
        self,
        learning_rate: float | LRScheduler = 0.001, beta1: float | Tensor = 0.9, beta2: float | Tensor = 0.999,
        epsilon: float | Tensor = 1e-8, parameters: Sequence[Tensor] | Sequence[dict[str, Any]] | None = None,
        weight_decay: float | Tensor = 0.01,
        use_lowprecision_moment: bool = False,
        lr_ratio: Callable[[Tensor], float] | None = None,
        apply_decay_param_fun: Callable[[str], bool] | None = None,
        grad_clip: GradientClipBase | None = None,
        lazy_mode: bool = False,
        multi_precision: bool = False,
        amsgrad: bool = False,
        name: str | None = None,
    ) -> None:
        if lr_ratio is not None and not callable(lr_ratio):
            raise TypeError(
                "AdamW: `lr_ratio` must be callable (fn(param) -> float, the factor of the parameter's "
                f"learning rate) or None, got {type(lr_ratio).__name__} {lr_ratio!r}."
            )
        if not isinstance(use_lowprecision_moment, bool):
            raise TypeError(
                f"AdamW: `use_lowprecision_moment` must be a bool, got {type(use_lowprecision_moment).__name__}."
            )
        with checks_named("AdamW"):  # AdamWDL's checks, run once, name AdamW
            super().__init__(
                learning_rate, beta1, beta2, epsilon, parameters, weight_decay, apply_decay_param_fun, grad_clip,
                lazy_mode, multi_precision, set_param_lr_fun=None, name=name, amsgrad=amsgrad,
            )
        self._use_lowprecision_moment = use_lowprecision_moment  # read by Paddle's _add_moments_pows
        self._lr_ratio = lr_ratio
        if lr_ratio is not None:
            self.set_param_lr_fun = CheckedLrRatio(lr_ratio)  # (cached where it declares pure_in_name)

    def _add_param_group(self, param_group: dict[str, Any]) -> None:
        with checks_named("AdamW"):  # a group added later is refused naming AdamW too
            super()._add_param_group(param_group)

    def _update(self, *args: Any, **kwargs: Any) -> Any:
        with checks_named("AdamW"):  # a step's refusals name AdamW too
            return super()._update(*args, **kwargs)

    def set_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As ``AdamWDL.set_state_dict``, its refusals and warnings naming AdamW."""
        with checks_named("AdamW"):
            super().set_state_dict(state_dict)

    load_state_dict = set_state_dict
