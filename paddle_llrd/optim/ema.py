"""Exponential moving average (EMA) of a model's trainable parameters.

A working replacement for ``paddlenlp.ops.optimizer.ExponentialMovingAverage``
(same constructor and the same four methods); what PaddleNLP's gets wrong on
Paddle 3 is listed in docs/ema.rst, "What differs from PaddleNLP's class".
"""
from __future__ import annotations

import contextlib
import math
import operator
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import paddle

from ..checks import checked_choice, checked_count, checked_in_range, checked_positive, is_real_number
from ..warning_classes import CheckpointMatchWarning, stacklevel_outside_package
from .eager import runs_eagerly_under_sot
from .ema_layout import FlatSegment, check_shadow_shape, checked_shadows, flat_segments, fused_update, storage
from .threads import FlatThreads

__all__ = ["WARMUP_STYLES", "ExponentialMovingAverage", "checked_ema_decay", "ema_horizon", "warmup_decay"]

_LOW_PRECISION = (paddle.float16, paddle.bfloat16)
_STATE_KEYS = ("decay", "warmup", "num_updates", "shadow")
# Entries a state_dict written before the warm-up had styles lacks; their defaults are that warm-up's.
_WARMUP_STATE_DEFAULTS = {"warmup_style": "tensorflow", "warmup_power": 2.0 / 3.0, "warmup_gamma": 1.0}
#: The decay warm-up rules: TensorFlow's ``num_updates`` rule and timm's ``ModelEmaV3`` rule.
WARMUP_STYLES = ("tensorflow", "timm")


def _validated_warmup(warmup: Any) -> bool:
    if not isinstance(warmup, (bool, np.bool_)):
        raise TypeError(f"warmup must be a bool, got {type(warmup).__name__} {warmup!r}")
    return bool(warmup)


def checked_ema_decay(value: Any, argument: str = "decay", *, advice: str = "") -> float:
    """An EMA's decay as a float in ``[0, 1)``: the one rule for the
    constructor, the ``decay`` setter, ``set_state_dict`` and the Trainer's
    ``ema_decay`` field.

    ``1`` is refused: the average would stay at the registered weights for
    ever. ``advice``, when given, follows the range in the message.

    Raises:
        TypeError: not a real number (a bool is refused).
        ValueError: outside ``[0, 1)`` or NaN.

    Examples:
        >>> checked_ema_decay(0.999)
        0.999
        >>> checked_ema_decay(1.0)
        Traceback (most recent call last):
        ...
        ValueError: `decay` must be in [0, 1), got 1.0 (1 would keep the registered weights as the average for ever).
    """
    if not advice and is_real_number(value) and float(value) == 1.0:
        advice = "1 would keep the registered weights as the average for ever"
    return checked_in_range(value, argument, low=0.0, high=1.0, high_open=True, advice=advice)


def warmup_decay(decay: float, num_updates: int, style: str, power: float = 2.0 / 3.0, gamma: float = 1.0) -> float:
    r"""The decay of update number ``num_updates + 1`` under a warm-up:
    ``min(decay, (1 + n) / (10 + n))`` (``"tensorflow"``) or
    ``min(decay, 1 - (1 + n / gamma) ** -power)`` (``"timm"``, ``ModelEmaV3``),
    with ``n = num_updates``.

    Examples:
        >>> warmup_decay(0.999, 0, "timm"), warmup_decay(0.999, 7, "timm")
        (0.0, 0.75)
        >>> warmup_decay(0.999, 0, "tensorflow")
        0.1
    """
    if style == "timm":
        return min(decay, 1.0 - (1.0 + num_updates / gamma) ** -power)
    return min(decay, (1.0 + num_updates) / (10.0 + num_updates))


def ema_horizon(decay: float) -> float:
    """How many updates an average of constant ``decay`` covers, ``1 / (1 - decay)``
    (``inf`` for 1): the weight of an update falls by ``1/e`` over about that many.

    Examples:
        >>> round(ema_horizon(0.999))
        1000
    """
    return math.inf if decay >= 1.0 else 1.0 / (1.0 - decay)


def _unwrap(model: paddle.nn.Layer) -> paddle.nn.Layer:
    """The layer whose parameter names the EMA uses: ``paddle.DataParallel``
    (and fleet's wrappers, which keep the user's layer in ``_layers``) add a
    ``_layers.`` prefix that would tie checkpoints to the wrapping."""
    while isinstance(model, paddle.DataParallel) or (
        type(model).__module__.startswith("paddle.distributed")
        and isinstance(getattr(model, "_layers", None), paddle.nn.Layer)
    ):
        model = model._layers
    return model


def _shadow_dtype(param: paddle.Tensor) -> paddle.dtype:
    """float32 for float16/bfloat16 parameters, else the parameter's dtype."""
    return paddle.float32 if param.dtype in _LOW_PRECISION else param.dtype


def _loaded_shadow(name: str, value: Any, param: paddle.Tensor, shadow: Any = None) -> paddle.Tensor:
    """A checkpoint's shadow for ``param``, checked and as a tensor of the dtype of the ``shadow``
    it replaces (a float64 one a user assigned stays float64), else of ``param``'s shadow dtype."""
    where = f"state_dict['shadow'][{name!r}]"
    if isinstance(value, np.ndarray):
        real = value.dtype.kind in "fiu"
    elif isinstance(value, paddle.Tensor):
        real = value.is_floating_point() or paddle.is_integer(value)
    else:
        raise TypeError(f"{where} must be a paddle.Tensor or numpy.ndarray, got {type(value).__name__}")
    if not real:
        raise TypeError(f"{where} must hold real numbers (a float or int dtype), got dtype {value.dtype}")
    check_shadow_shape(where, value, param)
    dtype = shadow.dtype if isinstance(shadow, paddle.Tensor) and shadow.is_floating_point() else _shadow_dtype(param)
    if isinstance(value, np.ndarray):
        return paddle.to_tensor(value, dtype=dtype, place=param.place)
    return value if value.dtype == dtype else paddle.cast(value, dtype)


def _checked_steps(value: Any, method: str) -> int:
    return checked_count(value, "optimizer_steps", owner=f"ExponentialMovingAverage.{method}",
                         meaning="how many optimizer steps the average has followed")


def _warn_if_other_steps(followed: int, optimizer_steps: int) -> None:
    """A :class:`~paddle_llrd.CheckpointMatchWarning` when an EMA state that followed ``followed``
    optimizer steps is loaded beside weights of ``optimizer_steps`` steps."""
    if followed != optimizer_steps:
        warnings.warn(
            f"the EMA state followed {followed} optimizer steps, the weights it is loaded beside "
            f"{optimizer_steps}: the average is not the one an uninterrupted run has at this step (saved at "
            "another moment than the weights?); load the EMA saved with these weights",
            CheckpointMatchWarning,
            stacklevel=stacklevel_outside_package(),
        )


class ExponentialMovingAverage:
    r"""Exponential moving average of the trainable parameters of ``model``.

    Each :meth:`update` moves every shadow (the average) towards its
    parameter ``p``:

    .. math::

        \text{shadow} \leftarrow d_n \cdot \text{shadow} + (1 - d_n) \cdot p,

    .. math::

        d_n = \begin{cases}
            \min\!\left(\text{decay}, \dfrac{1 + n}{10 + n}\right) & \text{warmup, style tensorflow} \\
            \min\!\left(\text{decay}, 1 - (1 + n / \gamma)^{-p}\right) & \text{warmup, style timm} \\
            \text{decay} & \text{otherwise}
        \end{cases}

    where ``n`` is the number of updates made before this one
    (:attr:`num_updates`). :meth:`register` starts the shadows at the current
    parameter values. The parameters are those with ``stop_gradient == False``
    at :meth:`register` time, keyed by their structured names
    (``model.named_parameters()``; a model wrapped in ``paddle.DataParallel``
    is unwrapped, so the names and checkpoints are those of the inner layer).

    :meth:`update` works in place on the shadows, outside autograd, and keeps
    the same tensor objects from call to call: views of flat buffers laid out
    like the parameters' storage, so that each update is a few ops per
    buffer; their storage changes only when the parameters' storage does
    (the first multi-tensor ``AdamWDL`` step makes the parameters views of
    flat buffers, and the shadows follow). Shadows of
    float16/bfloat16 parameters are float32, so that many small steps of
    ``(1 - d) * p`` are not rounded away; other shadows have the parameter's
    dtype.

    :meth:`apply_shadow` writes the shadows into the parameters themselves
    (in place: the model's output changes, and an optimizer holding the
    parameters keeps working) after backing up their values;
    :meth:`restore` writes the backup back, bit for bit.
    :meth:`average_parameters` does both around a ``with`` block.

    Args:
        model (paddle.nn.Layer): The model whose parameters are averaged.
        decay (float, optional): The decay ``d`` in ``[0, 1)``; ``0`` copies
            the parameters. Default ``0.999``.
        warmup (bool, optional): Keyword only. Use a smaller decay early on,
            so that the average forgets the initial weights quickly.
            Default ``False``.
        warmup_style (str, optional): Keyword only. The warm-up's rule:
            ``"tensorflow"`` (default), ``min(decay, (1 + n) / (10 + n))``,
            the ``num_updates`` rule of TensorFlow's
            ``ExponentialMovingAverage``; or ``"timm"``,
            ``min(decay, 1 - (1 + n / warmup_gamma) ** -warmup_power)``,
            timm's ``ModelEmaV3``.
        warmup_power (float, optional): Keyword only. ``p`` of the
            ``"timm"`` rule, ``> 0``. Default ``2/3`` (timm's; it suggests
            ``3/4`` for runs of about 100k steps or fewer).
        warmup_gamma (float, optional): Keyword only. ``gamma`` of the
            ``"timm"`` rule, ``> 0``. Default ``1``.
        num_threads (int|None, optional): Keyword only. The threads that
            share the update of a large CPU segment (contiguous chunks, the
            same bits as one op). None (default): as ``AdamWDL``'s
            ``num_threads`` (``PADDLE_LLRD_NUM_THREADS``, else the cores
            this process may use divided among the local ranks). ``1``: one
            thread.

    Attributes:
        shadow (dict[str, paddle.Tensor]): parameter name -> its average.
        backup (dict[str, paddle.Tensor]): parameter name -> its live value,
            while the shadows are applied; empty otherwise.
        num_updates (int): number of :meth:`update` calls since
            :meth:`register`.

    Raises:
        TypeError: ``model`` is not a ``paddle.nn.Layer``, ``decay``,
            ``warmup_power`` or ``warmup_gamma`` is not a real number,
            ``warmup`` is not a bool or ``num_threads`` not an int.
        ValueError: ``decay`` is outside ``[0, 1)`` or NaN, ``warmup_style``
            is not one of :data:`WARMUP_STYLES`, ``warmup_power`` or
            ``warmup_gamma`` is not a finite number > 0, or ``num_threads``
            (or ``PADDLE_LLRD_NUM_THREADS``) is below 1.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import ExponentialMovingAverage
        >>> model = paddle.nn.Linear(2, 1, bias_attr=False)
        >>> model.weight.set_value(paddle.full([2, 1], 4.0))
        >>> ema = ExponentialMovingAverage(model, decay=0.75)
        >>> ema.register()
        >>> model.weight.set_value(paddle.zeros([2, 1]))   # e.g. an optimizer step
        >>> ema.update()                                    # 0.75 * 4 + 0.25 * 0
        >>> ema.shadow["weight"].numpy().ravel()
        array([3., 3.], dtype=float32)
        >>> x = paddle.ones([1, 2])
        >>> with ema.average_parameters():                  # evaluate with the average
        ...     model(x).item()
        6.0
        >>> model(x).item()                                 # the live weights are back
        0.0
    """

    def __init__(
        self,
        model: paddle.nn.Layer,
        decay: float = 0.999,
        *,
        warmup: bool = False,
        warmup_style: str = "tensorflow",
        warmup_power: float = 2.0 / 3.0,
        warmup_gamma: float = 1.0,
        num_threads: int | None = None,
    ) -> None:
        if not isinstance(model, paddle.nn.Layer):
            raise TypeError(f"model must be a paddle.nn.Layer, got {type(model).__name__}")
        # How many threads share a large CPU segment's update (threads.py).
        threads = FlatThreads(num_threads, owner="ExponentialMovingAverage: `num_threads`")
        self.model = model
        self.decay = decay
        self.warmup = warmup
        self.warmup_style = warmup_style
        self.warmup_power = warmup_power
        self.warmup_gamma = warmup_gamma
        self.shadow: dict[str, paddle.Tensor] = {}
        self.backup: dict[str, paddle.Tensor] = {}
        self.num_updates = 0
        self._params: dict[str, paddle.Tensor] = {}
        # The shadows as flat segments, for the shadow tensors and the storage of
        # the parameters and shadows recorded beside them (laid out anew when one changes).
        self._segments: list[FlatSegment] | None = None
        self._laid_out_for: tuple[list[paddle.Tensor], Any] = ([], None)
        self._threads = threads

    @property
    def decay(self) -> float:
        """The configured decay ``d`` (validated on assignment)."""
        return self._decay

    @decay.setter
    def decay(self, value: float) -> None:
        self._decay = checked_ema_decay(value, "decay")

    @property
    def warmup(self) -> bool:
        """Whether the decay warm-up (:attr:`warmup_style`) is on."""
        return self._warmup

    @warmup.setter
    def warmup(self, value: bool) -> None:
        self._warmup = _validated_warmup(value)

    @property
    def warmup_style(self) -> str:
        """The warm-up's rule, one of :data:`WARMUP_STYLES` (validated on assignment)."""
        return self._warmup_style

    @warmup_style.setter
    def warmup_style(self, value: str) -> None:
        self._warmup_style = checked_choice(value, "warmup_style", WARMUP_STYLES)

    @property
    def warmup_power(self) -> float:
        """``p`` of the ``"timm"`` warm-up (validated on assignment)."""
        return self._warmup_power

    @warmup_power.setter
    def warmup_power(self, value: float) -> None:
        self._warmup_power = checked_positive(value, "warmup_power", owner="ExponentialMovingAverage")

    @property
    def warmup_gamma(self) -> float:
        """``gamma`` of the ``"timm"`` warm-up (validated on assignment)."""
        return self._warmup_gamma

    @warmup_gamma.setter
    def warmup_gamma(self, value: float) -> None:
        self._warmup_gamma = checked_positive(value, "warmup_gamma", owner="ExponentialMovingAverage")

    @property
    def num_threads(self) -> int:
        """The threads an update of CPU parameters uses (``num_threads=``, else as ``AdamWDL``'s)."""
        return self._threads.count

    @property
    def registered(self) -> bool:
        """Whether :meth:`register` (or :meth:`set_state_dict`) created the shadows."""
        return bool(self._params)

    @property
    def applied(self) -> bool:
        """Whether the shadows are in the model now (between :meth:`apply_shadow` and :meth:`restore`)."""
        return bool(self.backup)

    def current_decay(self) -> float:
        r"""The decay the next :meth:`update` uses: ``decay``, or with warm-up
        :func:`warmup_decay` of ``n = num_updates`` (for ``"tensorflow"``
        :math:`\min(\text{decay}, (1 + n) / (10 + n))`).

        Examples:
            >>> import paddle
            >>> from paddle_llrd import ExponentialMovingAverage
            >>> model = paddle.nn.Linear(2, 2)
            >>> ema = ExponentialMovingAverage(model, decay=0.99, warmup=True)
            >>> ema.current_decay()        # (1 + 0) / (10 + 0)
            0.1
            >>> ema.num_updates = 990
            >>> ema.current_decay()        # min(0.99, 991 / 1000)
            0.99
            >>> timm = ExponentialMovingAverage(model, decay=0.99, warmup=True, warmup_style="timm")
            >>> timm.num_updates = 7
            >>> timm.current_decay()       # min(0.99, 1 - (1 + 7) ** (-2/3))
            0.75
        """
        if not self._warmup:
            return self._decay
        return warmup_decay(self._decay, self.num_updates, self._warmup_style, self._warmup_power, self._warmup_gamma)

    def _trainable_parameters(self) -> dict[str, paddle.Tensor]:
        return {name: p for name, p in _unwrap(self.model).named_parameters() if not p.stop_gradient}

    def _require_registered(self, method: str) -> None:
        if not self._params:
            raise RuntimeError(f"ExponentialMovingAverage.{method}() called before register(): call ema.register() once the model is built")

    def register(self) -> None:
        """Start the shadows at the current values of the parameters with
        ``stop_gradient == False`` and reset :attr:`num_updates` to 0.

        Raises:
            RuntimeError: the shadows are applied (call :meth:`restore` first).
            ValueError: the model has no trainable parameter.
        """
        if self.applied:
            raise RuntimeError("register() called while the shadows are applied: call restore() first")
        params = self._trainable_parameters()
        if not params:
            raise ValueError("model has no parameter with stop_gradient == False to average")
        shadow = {}
        with paddle.no_grad():
            for name, param in params.items():
                if param.dtype in _LOW_PRECISION:
                    shadow[name] = paddle.cast(param, paddle.float32)
                else:
                    shadow[name] = param.detach().clone()
                shadow[name].stop_gradient = True
        self._params = params
        self.shadow = shadow
        self._segments = None
        self._flat_segments()
        self.num_updates = 0

    @runs_eagerly_under_sot
    def update(self) -> None:
        r"""One averaging step for every registered parameter ``p``:
        :math:`\text{shadow} \leftarrow d\,\text{shadow} + (1 - d)\,p` with
        ``d =`` :meth:`current_decay`, then ``num_updates += 1``.

        Call it after each ``optimizer.step()`` (also in a
        ``paddle.jit.to_static`` train step, where it runs eagerly). The shadows are updated in
        place, without gradient tracking, as
        ``shadow = (1 - d) * (shadow * d / (1 - d) + p)``: three in-place
        element-wise ops per *segment*, a flat buffer of shadows whose
        parameters' values are one flat tensor, the bits of the same three
        ops per parameter. Parameters that tile a range of one buffer (as
        after a step of ``AdamWDL``'s multi-tensor path, which lays them out
        so) are a segment read in place; a large parameter in a buffer of its
        own is one too; the others (as with ``paddle.optimizer.AdamW``) are
        gathered into one new tensor per place and dtype. A float16/bfloat16
        segment is cast to float32 first. Each call compares the parameters'
        and the shadows' data pointers and dtypes with the layout's, and lays
        the shadows out anew (values kept) when one changed.

        Raises:
            RuntimeError: before :meth:`register`, or while the shadows are
                applied (the model holds the averages; :meth:`restore` first).
        """
        self._require_registered("update")
        if self.applied:
            raise RuntimeError("update() called while the shadows are applied: call restore() first")
        decay = self.current_decay()
        with paddle.no_grad():
            segments = self._flat_segments()
            if not fused_update(segments, decay, self._threads.count):
                for segment in segments:
                    segment.update(decay)
        self.num_updates += 1

    def _flat_segments(self) -> list[FlatSegment]:
        """The segments, laid out anew if a parameter's or a shadow's storage or dtype, or a
        shadow tensor, changed since.

        A tensor whose data pointer is unchanged is where it was: an aliased
        segment holds the buffer, so no other tensor can have come to occupy
        that memory. (About 0.5 us per parameter.)
        """
        params = list(self._params.values())
        shadows = list(self.shadow.values())
        laid_out_shadows, laid_out_storage = self._laid_out_for
        if (
            self._segments is None
            or len(shadows) != len(laid_out_shadows)
            or any(map(operator.is_not, shadows, laid_out_shadows))
            or storage(params + shadows) != laid_out_storage
        ):
            self._segments = None  # (frees the previous aliases before the new buffers are made)
            self._segments = flat_segments(params, checked_shadows(self._params, self.shadow), self._threads)
            self._laid_out_for = (shadows, storage(params + shadows))  # (the shadows' new storage)
        return self._segments

    @staticmethod
    def _as_shadow_dtype(value: paddle.Tensor, shadow: paddle.Tensor) -> paddle.Tensor:
        return value if value.dtype == shadow.dtype else paddle.cast(value, shadow.dtype)

    def apply_shadow(self) -> None:
        """Back up the live parameter values into :attr:`backup` and write the
        shadows into the parameters, in place (cast to the parameter's dtype).

        Raises:
            RuntimeError: before :meth:`register`, or when the shadows are
                already applied (a second backup would overwrite the live
                values).
        """
        self._require_registered("apply_shadow")
        if self.applied:
            raise RuntimeError("apply_shadow() called twice without restore(): the shadows are already applied")
        with paddle.no_grad():
            backup = {name: param.detach().clone() for name, param in self._params.items()}
            for name, param in self._params.items():
                paddle.assign(self._as_shadow_dtype(self.shadow[name], param), output=param)
        self.backup = backup

    def restore(self) -> None:
        """Write the values backed up by :meth:`apply_shadow` back into the
        parameters, bit for bit, and empty :attr:`backup`.

        Raises:
            RuntimeError: without a preceding :meth:`apply_shadow`.
        """
        if not self.applied:
            raise RuntimeError("restore() called without apply_shadow(): there is no backup to restore")
        with paddle.no_grad():
            for name, param in self._params.items():
                paddle.assign(self.backup[name], output=param)
        self.backup = {}

    @contextlib.contextmanager
    def average_parameters(self) -> Iterator[ExponentialMovingAverage]:
        """Context manager: :meth:`apply_shadow` on entry, :meth:`restore` on
        exit, also when the body raises.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import ExponentialMovingAverage
            >>> model = paddle.nn.Linear(2, 2)
            >>> ema = ExponentialMovingAverage(model)
            >>> ema.register()
            >>> with ema.average_parameters():
            ...     ema.applied
            True
            >>> ema.applied
            False
        """
        self.apply_shadow()
        try:
            yield self
        finally:
            self.restore()

    def state_dict(self, optimizer_steps: int | None = None) -> dict[str, Any]:
        """What a checkpoint needs to resume the average:
        ``{"decay": float, "warmup": bool, "warmup_style": str,
        "warmup_power": float, "warmup_gamma": float, "num_updates": int,
        "optimizer_steps": int, "shadow": {name: Tensor}}``; ``num_updates``
        is also the warm-up's step, so a resumed average takes the decays of
        an uninterrupted one. ``optimizer_steps`` records how many optimizer
        steps the average has followed, for :meth:`set_state_dict` to compare
        with the weights it is loaded beside: the argument, from a caller
        that does not update on every step (a Trainer skips an AMP overflow
        step), else :attr:`num_updates` (one update per step).
        The shadow tensors are the live ones (not copies), as in
        ``paddle.nn.Layer.state_dict``; ``paddle.save`` writes them.

        Raises:
            RuntimeError: before :meth:`register`.
            TypeError, ValueError: ``optimizer_steps`` is not an int >= 0.

        Examples:
            >>> import paddle
            >>> from paddle_llrd import ExponentialMovingAverage
            >>> ema = ExponentialMovingAverage(paddle.nn.Linear(2, 2), decay=0.9)
            >>> ema.register()
            >>> ema.update()
            >>> state = ema.state_dict()
            >>> state["decay"], state["warmup"], state["num_updates"], state["optimizer_steps"], sorted(state["shadow"])
            (0.9, False, 1, 1, ['bias', 'weight'])
        """
        self._require_registered("state_dict")
        steps = self.num_updates if optimizer_steps is None else _checked_steps(optimizer_steps, "state_dict")
        return {
            "decay": self._decay,
            "warmup": self._warmup,
            "warmup_style": self._warmup_style,
            "warmup_power": self._warmup_power,
            "warmup_gamma": self._warmup_gamma,
            "num_updates": self.num_updates,
            "optimizer_steps": steps,
            "shadow": dict(self.shadow),
        }

    def set_state_dict(self, state_dict: Mapping[str, Any], optimizer_steps: int | None = None) -> None:
        """Load a :meth:`state_dict` (e.g. from ``paddle.load``): the shadows
        are copied into this EMA's shadow tensors, and ``decay``, the warm-up
        settings and ``num_updates`` are taken over (a state_dict without
        ``warmup_style``, ``warmup_power`` or ``warmup_gamma``, as written
        before they existed, has TensorFlow's warm-up). Registers first if
        needed. Every entry is checked and converted before anything changes,
        so a refused ``state_dict`` leaves the EMA as it was.

        ``optimizer_steps``, when given, is the step count of the weights
        (and optimizer) the average is loaded beside: a ``state_dict`` that
        followed another number of steps (its ``"optimizer_steps"``, else
        its ``num_updates``), such as an average saved a few steps before
        the weights, is loaded with a :class:`~paddle_llrd.CheckpointMatchWarning`
        naming both counts.

        Examples:
            >>> import paddle, warnings
            >>> from paddle_llrd import ExponentialMovingAverage
            >>> ema = ExponentialMovingAverage(paddle.nn.Linear(2, 2), decay=0.9)
            >>> ema.register()
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     ema.set_state_dict(ema.state_dict(), optimizer_steps=5)  # saved at step 0
            >>> print(caught[0].message)
            the EMA state followed 0 optimizer steps, the weights it is loaded beside 5: ...

        Raises:
            TypeError: ``state_dict`` or one of its entries has the wrong
                type (a shadow must be a real-valued ``paddle.Tensor`` or
                ``numpy.ndarray``).
            KeyError: an entry is missing, or the shadow names differ from
                the model's trainable parameter names (both lists are given).
            ValueError: a shadow's shape differs from its parameter's, or a
                setting is out of range.
            RuntimeError: the shadows are applied (call :meth:`restore` first).
        """
        if self.applied:
            raise RuntimeError("set_state_dict() called while the shadows are applied: call restore() first")
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"state_dict must be a mapping from ExponentialMovingAverage.state_dict(), got {type(state_dict).__name__}")
        missing = [key for key in _STATE_KEYS if key not in state_dict]
        if missing:
            raise KeyError(f"state_dict lacks {missing}; an ExponentialMovingAverage state_dict has the keys {list(_STATE_KEYS)}")
        decay = checked_ema_decay(state_dict["decay"], "state_dict['decay']")
        warmup = _validated_warmup(state_dict["warmup"])
        style, power, gamma = (state_dict.get(key, default) for key, default in _WARMUP_STATE_DEFAULTS.items())
        owner = "ExponentialMovingAverage.set_state_dict"
        rule = (checked_choice(style, "warmup_style", WARMUP_STYLES),
                checked_positive(power, "warmup_power", owner=owner),
                checked_positive(gamma, "warmup_gamma", owner=owner))
        num_updates = checked_count(
            state_dict["num_updates"],
            "num_updates",
            owner="ExponentialMovingAverage.set_state_dict",
            meaning="how many updates the EMA has taken",
        )
        followed = _checked_steps(state_dict.get("optimizer_steps", num_updates), "set_state_dict")
        expected = None if optimizer_steps is None else _checked_steps(optimizer_steps, "set_state_dict")
        shadows = state_dict["shadow"]
        if not isinstance(shadows, Mapping):
            raise TypeError(f"state_dict['shadow'] must be a mapping name -> tensor, got {type(shadows).__name__}")

        params = self._params or self._trainable_parameters()
        unexpected = sorted(set(shadows) - set(params))
        absent = sorted(set(params) - set(shadows))
        if unexpected or absent:
            raise KeyError(
                "state_dict['shadow'] does not match the model's trainable parameters: "
                f"missing {absent}, unexpected {unexpected}"
            )
        registered = self.shadow if self._params else {}
        staged = {name: _loaded_shadow(name, value, params[name], registered.get(name)) for name, value in shadows.items()}

        if not self._params:
            self.register()
        with paddle.no_grad():
            for name, value in staged.items():
                paddle.assign(value, output=self.shadow[name])
        self._decay, self._warmup, self.num_updates = decay, warmup, num_updates
        self._warmup_style, self._warmup_power, self._warmup_gamma = rule
        if expected is not None:
            _warn_if_other_steps(followed, expected)

    def __repr__(self) -> str:
        warmup = f"{self._warmup}, warmup_style={self._warmup_style!r}" if self._warmup else f"{self._warmup}"
        return (
            f"ExponentialMovingAverage(decay={self._decay}, warmup={warmup}, "
            f"num_updates={self.num_updates}, parameters={len(self._params)})"
        )
