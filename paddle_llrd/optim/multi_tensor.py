"""AdamWDL's multi-tensor step: one ``adamw`` kernel call per group of like parameters.

The parameters that share everything the kernel is given become views of
flat buffers (:mod:`~paddle_llrd.optim.buffers`), a :class:`Bank` per set of
buffers and a :class:`KernelGroup` range of it per kernel call; the kernel
is elementwise, so the bits are those of one call per parameter. The
gradients are clipped on the same buffers (:mod:`~paddle_llrd.optim.clipping`).

:class:`FlatState` holds the banks. :meth:`FlatState.refusal` tells
:func:`~paddle_llrd.optim.adamwdl.choose_update_path` whether this
step's :class:`~paddle_llrd.optim.update_batch.UpdateBatch` list can take the
path (the parameters each have a place in a bank, or can be laid out);
:func:`multi_tensor_update` then runs it. Neither sees the optimizer. What
breaks the views, and what the path cannot serve: :ref:`adamwdl-multi-tensor`.
"""
from __future__ import annotations

import weakref
from collections.abc import Sequence
from itertools import chain, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any, NamedTuple

import paddle
from paddle import _C_ops
from paddle.base import core

from .buffers import empty_flat, numel, own_storage, share_flat
from .clipping import clip_gradients
from .kernels import bound_adamw_kernel, decay_factor, decoupled_decay, is_tensor
from .per_parameter import decay_route
from .threads import FlatThreads

if TYPE_CHECKING:
    from .update_batch import AdamSettings, UpdateBatch

__all__ = ["MAX_CONSECUTIVE_REBUILDS", "Bank", "BankKey", "FlatState", "KernelGroup", "KernelKey", "flat_obstacle",
           "multi_tensor_update"]

# Rebuilding the groups in this many consecutive steps means something
# replaces parameters or changes the trained set every step: the flat
# buffers no longer pay, and the optimizer keeps the per-parameter path.
MAX_CONSECUTIVE_REBUILDS = 3


class BankKey(NamedTuple):
    """What the parameters sharing flat buffers (a :class:`Bank`) have in common."""

    param_group: int
    dtype: Any
    grad_dtype: Any
    place: str
    master: bool
    fp32_fallback: bool
    need_clip: bool
    beta1_pow: float
    beta2_pow: float


class KernelKey(NamedTuple):
    """What the parameters of one kernel call share beyond their :class:`BankKey`."""

    decays: bool
    base_scale: float
    update_scale: float


_STOP_GRADIENT = attrgetter("stop_gradient")
_IS_VIEW_OF = paddle.Tensor._is_shared_buffer_with
_GRAD_OF = paddle.Tensor._grad_ivar
_GRAD = attrgetter("grad")
_PARAMS = attrgetter("params")
# The lists of an UpdateBatch a layout serves; the optimizer keeps its batches while they hold,
# so the very lists laid out mean an unchanged layout.
_LAID_FIELD_NAMES = ("params", "lr_factors", "ratios", "decays")
_LAID_FIELDS = attrgetter(*_LAID_FIELD_NAMES)


class KernelGroup:
    """A contiguous range of a :class:`Bank` that one kernel call updates, as views of its buffers.

    ``chunks``: per chunk of the range (:meth:`FlatThreads.bounds`; one on
    a GPU or under the crossover) the views ``(param, grad, moments, master)``
    one kernel call of it updates.
    """

    __slots__ = ("key", "params", "start", "stop", "param", "grad", "moment1", "moment2", "moment2_max", "master",
                 "beta1_pow", "beta2_pow", "lr_index", "chunks")

    def __init__(self, key: KernelKey, params: list[Any], bank: Bank, start: int, stop: int) -> None:
        self.key = key
        self.params = params
        self.start, self.stop = start, stop

        def views(a: int, b: int) -> tuple[Any, ...]:
            flats = (bank.param_flat, bank.grad_flat, bank.moment1, bank.moment2, bank.moment2_max, bank.master_flat)
            return tuple(None if flat is None else flat._slice(a, b) for flat in flats)

        self.param, self.grad, self.moment1, self.moment2, self.moment2_max, self.master = own = views(start, stop)
        self.beta1_pow, self.beta2_pow = bank.beta_pow_pair
        bounds = bank.threads.bounds(start, stop, bank.params[0].place)
        self.chunks = [self._kernel_views(own)] if len(bounds) == 1 else [
            self._kernel_views(views(a, b)) for a, b in bounds
        ]
        self.lr_index = 0

    def _kernel_views(self, chunk: tuple[Any, ...]) -> tuple[Any, ...]:
        """``(param, grad, moments, master)`` of a chunk, as :func:`~paddle_llrd.optim.kernels.adamw_kernel` takes them."""
        param, grad, moment1, moment2, moment2_max, master = chunk
        return param, grad, (moment1, moment2, moment2_max, self.beta1_pow, self.beta2_pow), master


class Bank:
    """Parameters of one :class:`BankKey` as views of flat buffers (parameters,
    gradients, moments, master weights, beta powers), in :class:`KernelGroup` ranges."""

    def __init__(self, key: BankKey, members: dict[KernelKey, list[tuple[Any, Any]]], threads: FlatThreads) -> None:
        self.key = key
        self.threads = threads
        ordered = [member for kernel_members in members.values() for member in kernel_members]
        self.params = [param for param, _ in ordered]
        states = [state for _, state in ordered]
        self.param_flat = share_flat(self.params)
        # Each gradient copied into its range and replaced by the view at once,
        # which frees it: no second copy of them all (buffers.share_flat).
        # (the layout holds no gradient: a reference would keep it alive)
        self.grad_flat = empty_flat([param._grad_ivar() for param in self.params])
        self.offsets = []
        offset = 0
        with paddle.no_grad():
            for index, param in enumerate(self.params):
                self.offsets.append(offset)
                view = self._grad_view(index)
                _C_ops.assign_out_(param._grad_ivar(), view)
                param._copy_gradient_from(view)
                offset += numel(param)
        moments = list(zip(*(state.moments for state in states)))
        self.moment1 = share_flat(moments[0])
        self.moment2 = share_flat(moments[1])
        self.moment2_max = None if moments[2][0] is None else share_flat(moments[2])
        self.beta1_pows = share_flat(moments[3])
        self.beta2_pows = share_flat(moments[4])
        # The one pair every kernel call of the bank reads: all of its powers
        # are equal (BankKey), the kernel leaves them alone (update() advances
        # them all), and one pair keeps fewer small tensors out of the cache
        # after a backward.
        self.beta_pow_pair = (moments[3][0], moments[4][0])
        self.master_flat = share_flat([state.master_weight for state in states]) if key.master else None
        self.tensors = list(self.params) + [t for state in states for t in state.moments if t is not None]
        self.tensors += [state.master_weight for state in states if state.master_weight is not None]
        self.groups = []
        start = 0
        for kernel_key, kernel_members in members.items():
            stop = start + sum(numel(param) for param, _ in kernel_members)
            group_params = [param for param, _ in kernel_members]
            self.groups.append(KernelGroup(kernel_key, group_params, self, start, stop))
            start = stop
        self.split = any(len(group.chunks) > 1 for group in self.groups)
        self.grad_chunks = [
            self.grad_flat._slice(a, b) for a, b in threads.bounds(0, start, self.params[0].place)
        ]
        self._routes_key: tuple[float, bool] | None = None
        self._routes_cache: list[Any] = []
        self._calls_key: tuple[Any, ...] | None = None
        self._calls_lrs: list[Any] | None = None
        self._calls_cache: list[Any] = []

    def _grad_view(self, index: int) -> Any:
        """A new view of parameter ``index``'s range of the gradient buffer.

        New each time: ``clear_gradient(set_to_zero=False)`` releases the
        storage of the tensor a parameter's gradient shares, views included.
        """
        param, start = self.params[index], self.offsets[index]
        view = self.grad_flat._slice(start, start + numel(param))
        view.get_tensor()._set_dims(list(param.shape))
        return view

    def check(self) -> tuple[bool, list[int]]:
        """``(intact, replaced)``: whether every parameter has a gradient and is a view
        of the bank, and the positions of gradients that are no longer views
        (replaced by a backward after ``clear_gradient``). Whether each still trains
        is the batches' (:meth:`FlatState._intact` compares their parameters first)."""
        # One pass of C calls per list (map over method descriptors, no Python
        # frame per tensor): this runs at every step for every parameter.
        # Nothing is collected into a list either: right after a backward, the
        # first request of 1 KiB or more (a list of 128 items) has glibc sort
        # every chunk the backward freed into its bins. That work is the
        # backward's and goes to whatever asks next (the next forward, in
        # whole rounds, docs/benchmarks.rst); a step that asks for nothing
        # that large is timed on its own work.
        params, param_flat = self.params, self.param_flat
        if not all(map(_IS_VIEW_OF, params, repeat(param_flat))):
            return False, []
        if self._grads_are_views():
            return True, []
        views = self._grad_views()  # something changed: which gradients, one by one
        if any(view is None for view in views):
            return False, []
        return True, [index for index, view in enumerate(views) if not view]

    def _grads_are_views(self) -> bool:
        """Whether every parameter has a gradient that is a view of the bank's buffer."""
        try:
            return all(map(_IS_VIEW_OF, map(_GRAD_OF, self.params), repeat(self.grad_flat)))
        except TypeError:  # a parameter without a gradient (None is no Tensor)
            return False

    def _grad_views(self) -> list[bool | None]:
        """Per parameter: whether its gradient is a view of the bank's buffer (None: no gradient)."""
        grad_flat = self.grad_flat
        return [None if grad is None else grad._is_shared_buffer_with(grad_flat) for grad in map(_GRAD, self.params)]

    def realias_grads(self, replaced: list[int]) -> bool:
        """Copy replaced gradients into their views and hand the views back; False if one cannot be."""
        grads = [self.params[i].grad for i in replaced]
        flat = self.grad_flat
        for index, grad in zip(replaced, grads):
            param = self.params[index]
            if grad.is_selected_rows() or grad.dtype != flat.dtype or list(grad.shape) != list(param.shape):
                return False
        with paddle.no_grad():
            for index, grad in zip(replaced, grads):
                view = self._grad_view(index)
                _C_ops.assign_out_(grad, view)
                if not view._is_shared_buffer_with(flat):
                    return False  # (the layout then starts afresh from the gradients)
                self.params[index]._copy_gradient_from(view)
        return True

    def zero_grads(self, views_checked: bool = False) -> bool:
        """``clear_grad(set_to_zero=True)`` for the whole bank in one op; False (nothing
        done) where a parameter is frozen or a gradient is not a view.

        ``views_checked``: the last step found every gradient a view
        (:meth:`check`) and no backward has run since (the only way a
        gradient comes to be replaced), so they are not looked at again.
        """
        if any(map(_STOP_GRADIENT, self.params)):
            return False
        if not views_checked and not self._grads_are_views():
            return False
        if len(self.grad_chunks) == 1:
            self.grad_flat.zero_()
        else:
            self.threads.run([chunk.zero_ for chunk in self.grad_chunks])
        return True

    def _routes(self, coeff: float, with_ratio: bool) -> list[Any]:
        """The :func:`~paddle_llrd.optim.per_parameter.decay_route` of each kernel group,
        decided again only when the weight decay changes (under a ``WeightDecaySchedule``)."""
        key = (coeff, with_ratio)
        if self._routes_key != key:
            self._routes_cache = [
                decay_route(group.key.decays, coeff, group.key.base_scale, group.key.update_scale,
                            with_ratio=with_ratio)
                for group in self.groups
            ]
            self._routes_key = key
        return self._routes_cache

    def _kernel_calls(self, lrs: list[Any], settings: AdamSettings, routes: list[Any]) -> list[Any]:
        """The bank's kernel calls (:func:`~paddle_llrd.optim.kernels.bound_adamw_kernel`,
        one per chunk), bound again only when what they are given changes:
        the routes (the weight decay), the group's settings or the lr table."""
        key = (self._routes_key, *(value if type(value) in (float, int, bool) else id(value) for value in (
            settings.beta1_value, settings.beta2_value, settings.epsilon, settings.lazy_mode, settings.amsgrad,
        )))  # (a Tensor by identity: the bound call reads its value when it runs)
        if self._calls_key != key or self._calls_lrs is not lrs:
            fp32_fallback = self.key.fp32_fallback
            self._calls_cache = [
                bound_adamw_kernel(
                    param, grad, lrs[group.lr_index], moments, master, settings.beta1_value, settings.beta2_value,
                    settings.epsilon, route.fused_coeff, settings.lazy_mode, settings.amsgrad, fp32_fallback, True,
                )
                for group, route in zip(self.groups, routes)
                for param, grad, moments, master in group.chunks
            ]
            self._calls_key, self._calls_lrs = key, lrs
        return self._calls_cache

    def update(self, lrs: list[Any], global_lr: Any, settings: AdamSettings, with_ratio: bool) -> None:
        """One Adam step of the bank: the per-parameter path's ops on its
        :class:`KernelGroup` ranges (the separate decay op where a group's
        route says so, then the ``adamw`` kernel), then the beta powers
        advance (one ``scale_`` each)."""
        routes = self._routes(settings.coeff, with_ratio)
        for group, route in zip(self.groups, routes):
            if route.separate_decay_scale is not None:  # as the per-parameter path: before the kernel
                scale = route.separate_decay_scale
                lr = global_lr if scale == 1.0 else global_lr * scale  # (ParameterPass.lr's tensor)
                decoupled_decay(None, group.master if self.key.master else group.param,
                                decay_factor(lr, settings.coeff, None))
        # (each call touches only its own chunk's views, and the decays above
        # other ranges than theirs: any thread may run it, in any order)
        calls = self._kernel_calls(lrs, settings, routes)
        if self.split:  # the chunks of large groups on the pool, small groups beside them
            self.threads.run(calls)
        else:
            for call in calls:
                call()
        # What the kernel does to one parameter's powers (use_global_beta_pow=False), for all.
        _C_ops.scale_(self.beta1_pows, float(settings.beta1_value), 0.0, True)
        _C_ops.scale_(self.beta2_pows, float(settings.beta2_value), 0.0, True)


class _LrTable:
    """The kernel lrs of one parameter group: ``global lr * update scale`` for each
    distinct scale, computed by one in-place multiply into a buffer whose
    ``[1]`` slices the kernels read (bit-identical to ``global_lr * scale``)."""

    def __init__(self, scales: list[float], global_lr: Any) -> None:
        self.scales = paddle.to_tensor(scales, dtype=global_lr.dtype, place=global_lr.place)
        self.values = _C_ops.assign(self.scales)
        self.slices = [self.values._slice(i, i + 1) for i in range(len(scales))]

    def refresh(self, global_lr: Any) -> list[Any]:
        _C_ops.assign_out_(self.scales, self.values)
        _C_ops.multiply_(self.values, global_lr)
        return self.slices


def flat_obstacle(param: Any, state: Any) -> str | None:
    """Why ``param`` (with its :class:`~paddle_llrd.optim.param_state.ParamState`) cannot
    share a kernel call, or None: its gradient must be dense and like it, its lr factor
    a number, and it needs no regularizer, no distributed tensor, and a kernel for its dtype."""
    grad = param._grad_ivar()
    reason = None
    if grad.is_selected_rows():
        reason = "a sparse gradient"
    elif not param._is_initialized() or numel(param) == 0:
        reason = "no elements"
    elif getattr(param, "regularizer", None) is not None:
        reason = "a regularizer of its own"
    elif param.is_dist():
        reason = "a distributed tensor"
    elif grad.dtype != param.dtype or list(grad.shape) != list(param.shape):
        reason = "a gradient of another dtype or shape"
    else:
        attr = getattr(param, "optimize_attr", None)
        if attr is None or "learning_rate" not in attr or is_tensor(attr["learning_rate"]):
            reason = "no number as its lr factor"
        elif (state.master_weight is None and param.place.is_cpu_place()
              and param.dtype not in (paddle.float32, paddle.float64)):
            reason = "no half-precision kernel on CPU"  # (the per-parameter path raises as AdamW does)
    return None if reason is None else f"parameter {param.name!r} cannot share a kernel call ({reason})"


def _keys(group_index: int, param: Any, state: Any, lr_factor: float, ratio: float,
          decays: bool) -> tuple[BankKey, KernelKey]:
    """The param's bank and kernel keys."""
    beta1_pow, beta2_pow = state.moments[3], state.moments[4]
    bank = BankKey(
        group_index, param.dtype, param._grad_ivar().dtype, str(param.place), state.master_weight is not None,
        state.fp32_fallback, getattr(param, "need_clip", True) is not False,
        float(beta1_pow.item()), float(beta2_pow.item()),
    )
    return bank, KernelKey(decays, float(lr_factor), float(lr_factor) * ratio)


class FlatState:
    """The multi-tensor path's state in one optimizer: its banks, and why it may be off.

    ``fused_steps`` counts the steps it took; ``rebuilds`` how often the
    banks were laid out; ``disabled`` says why the optimizer keeps the
    per-parameter path for good (None while it does not).
    """

    def __init__(self, num_threads: int | None = None) -> None:
        # How many threads share a CPU bank's kernel calls (threads.py).
        self.threads = FlatThreads(num_threads, owner="AdamWDL: `num_threads`")
        self.banks: list[Bank] = []
        self.fused_steps = 0
        self.rebuilds = 0
        self.disabled: str | None = None
        self._consecutive_rebuilds = 0
        self._needs_layout = True
        self._laid_out: tuple[list[int], list[Any], list[Any], list[Any]] | None = None
        self._laid_lists: list[list[Any]] = []  # the batches' lists the banks were laid out from
        self._banks_of: dict[int, list[Bank]] = {}
        self._lr_tables: dict[int, _LrTable] = {}
        self._clip_inputs: dict[int, tuple[list[Any], list[bool], list[Any]]] = {}
        self._banked: set[int] = set()
        self._outside: tuple[int, list[Any]] | None = None  # (listed count, listed parameters in no bank)
        # The last step found the gradients views, and no backward has run since.
        self._views_checked = False

    @property
    def kernel_groups(self) -> int:
        """The number of kernel calls a step makes."""
        return sum(len(bank.groups) for bank in self.banks)

    def invalidate(self) -> None:
        """Drop the banks (the tensors stay views of their buffers until the next layout)."""
        self.banks = []
        self._laid_out, self._laid_lists = None, []
        self._banks_of, self._lr_tables, self._clip_inputs = {}, {}, {}
        self._banked, self._outside = set(), None
        self._views_checked = False
        self._needs_layout = True

    # --------------------------------------------------------------- refusal
    def refusal(self, batches: Sequence[UpdateBatch], *, views_held: bool = False) -> str | None:
        """Why ``batches`` cannot take the multi-tensor step, or None; notes whether
        :func:`multi_tensor_update` must lay the banks out first. ``views_held``: the
        banks were found this step to hold these very batches (:meth:`holds`)."""
        if self.disabled is not None:
            return self.disabled
        self._needs_layout = not self.banks or not (views_held or self._intact(batches))
        if not self._needs_layout:
            self._consecutive_rebuilds = 0
            return None
        for batch in batches:
            for param, state in zip(batch.params, batch.states):
                reason = flat_obstacle(param, state)
                if reason is not None:
                    return reason
        if self.banks or self.rebuilds:
            self._consecutive_rebuilds += 1
        if self._consecutive_rebuilds >= MAX_CONSECUTIVE_REBUILDS:
            self.disabled = f"the trained parameters changed in {MAX_CONSECUTIVE_REBUILDS} consecutive steps"
            return self.disabled
        return None

    def holds(self, batches: Sequence[UpdateBatch]) -> bool:
        """Whether the banks were laid out for these very lists (the optimizer keeps its
        batches while they hold) and every parameter and gradient is still a view of
        them (replaced gradients realiased on the way): every parameter has its gradient."""
        return self.disabled is None and bool(self.banks) and self._same_lists(batches) and self._views_intact()

    def _intact(self, batches: Sequence[UpdateBatch]) -> bool:
        """Whether the banks still serve ``batches``: the same parameters, lr factors,
        ratios and decay answers as at the layout, every one still a view (replaced
        gradients realiased on the way)."""
        if not self._same_lists(batches):  # compared by one C-level pass each
            ids, lr_factors, ratios, decays = self._laid_out
            if list(map(id, chain.from_iterable(map(_PARAMS, batches)))) != ids:
                return False
            try:
                if ([b.lr_factors for b in batches] != lr_factors or [b.ratios for b in batches] != ratios
                        or [b.decays for b in batches] != decays):
                    return False
            except (TypeError, ValueError, RuntimeError):  # a Tensor set as a lr factor since
                return False
        return self._views_intact()

    def _same_lists(self, batches: Sequence[UpdateBatch]) -> bool:
        """Whether ``batches`` hold the very lists laid out (no per-parameter list built)."""
        laid_lists = self._laid_lists
        return len(laid_lists) == len(_LAID_FIELD_NAMES) * len(batches) and all(
            map(is_, chain.from_iterable(map(_LAID_FIELDS, batches)), laid_lists))

    def _views_intact(self) -> bool:
        """Whether every bank's parameters and gradients are still views of it (replaced gradients realiased)."""
        for bank in self.banks:
            intact, replaced = bank.check()
            if not intact or (replaced and not bank.realias_grads(replaced)):
                return False
        return True

    def _layout(self, batches: Sequence[UpdateBatch], global_lr: Any) -> None:
        """Put the parameters of ``batches`` into banks (:meth:`refusal` found no obstacle)."""
        members: dict[BankKey, dict[KernelKey, list[tuple[Any, Any]]]] = {}
        for index, batch in enumerate(batches):
            for member in zip(batch.params, batch.states, batch.lr_factors, batch.ratios, batch.decays):
                bank_key, kernel_key = _keys(index, *member)
                members.setdefault(bank_key, {}).setdefault(kernel_key, []).append(member[:2])
        previous = {id(t): t for bank in self.banks for t in bank.tensors}
        self.banks = [Bank(key, by_kernel, self.threads) for key, by_kernel in members.items()]
        now = {id(t) for bank in self.banks for t in bank.tensors}
        for tensor_id, tensor in previous.items():
            if tensor_id not in now:
                own_storage(tensor)
        self._laid_lists = list(chain.from_iterable(map(_LAID_FIELDS, batches)))
        self._laid_out = (
            list(map(id, chain.from_iterable(map(_PARAMS, batches)))),
            [list(b.lr_factors) for b in batches], [list(b.ratios) for b in batches], [list(b.decays) for b in batches],
        )
        self._banks_of, self._lr_tables, self._clip_inputs = {}, {}, {}
        for index, batch in enumerate(batches):
            banks = [bank for bank in self.banks if bank.key.param_group == index]
            if not banks:
                continue
            self._banks_of[index] = banks
            groups = [group for bank in banks for group in bank.groups]
            scales = sorted({group.key.update_scale for group in groups})
            for group in groups:
                group.lr_index = scales.index(group.key.update_scale)
            self._lr_tables[index] = _LrTable(scales, global_lr)
            # what clipping is given: the group's gradients in the optimizer's
            # order (Paddle sums the norms in it) and the chunks it scales
            need_clip = [getattr(param, "need_clip", True) is not False for param in batch.params]
            flats = [chunk for bank in banks if bank.key.need_clip for chunk in bank.grad_chunks]
            self._clip_inputs[index] = (list(batch.params), need_clip, flats)
        self._banked = {id(param) for bank in self.banks for param in bank.params}
        self._outside = None
        self._needs_layout = False
        self.rebuilds += 1

    # ------------------------------------------------------------------ step
    def run_kernels(self, batches: Sequence[UpdateBatch], global_lr: Any, *, with_ratio: bool) -> None:
        """The update of a step on the banks as they are (no check, no layout): clipping,
        the kernel calls, lr and beta-power ops, one parameter group after the other.
        It advances the optimizer state as a step does; a benchmark's floor."""
        for index, banks in self._banks_of.items():
            batch = batches[index]
            if batch.grad_clip is not None:  # each group clipped by its own norm, as Paddle clips groups
                params, need_clip, flats = self._clip_inputs[index]
                split = any(bank.split for bank in banks)
                clip_gradients(batch.grad_clip, list(map(_GRAD_OF, params)), need_clip, flat_grads=flats,
                               run=self.threads.run if split else None)
            lrs = self._lr_tables[index].refresh(global_lr)
            for bank in banks:
                bank.update(lrs, global_lr, batch.settings, with_ratio)

    # ------------------------------------------------------------ clear_grad
    def clear_grad(self, listed: list[tuple[dict[str, Any] | None, list[Any]]], set_to_zero: bool) -> bool:
        """``clear_grad(set_to_zero=True)`` of the parameters ``listed``: one zeroing op per
        intact bank and Paddle's per-parameter clearing for every other parameter. False
        (the caller clears as Paddle does) with ``set_to_zero=False`` or no banks."""
        if not set_to_zero or not self.banks or self.disabled is not None:
            return False
        count = sum(len(params) for _, params in listed)
        if self._outside is None or self._outside[0] != count:
            self._outside = (count, [p for _, params in listed for p in params if id(p) not in self._banked])
        rest = list(self._outside[1])
        for bank in self.banks:
            if not bank.zero_grads(self._views_checked):
                rest.extend(bank.params)
        for param in rest:
            if not param.stop_gradient:
                param.clear_gradient(True)
        return True


def multi_tensor_update(flat: FlatState, batches: Sequence[UpdateBatch], global_lr: Any, *,
                        with_ratio: bool) -> None:
    """One step on the multi-tensor path (after :meth:`FlatState.refusal` said None):
    the banks laid out where they must be, then :meth:`FlatState.run_kernels`.

    ``global_lr``: the step's global lr tensor; ``with_ratio``: the decay's lr
    rule (:func:`~paddle_llrd.optim.per_parameter.decay_scale`).
    """
    if flat._needs_layout:
        flat._layout(batches, global_lr)
    flat.run_kernels(batches, global_lr, with_ratio=with_ratio)
    flat.fused_steps += 1
    if not flat._views_checked:
        flat._views_checked = True
        _on_next_backward(weakref.ref(flat))


def _on_next_backward(flat: weakref.ref[FlatState]) -> None:
    """Have the next backward (Paddle runs a final hook once, then drops it)
    mark ``flat``'s gradients as to be checked again: that backward may
    replace a gradient (one cleared with ``clear_gradient``) by a new tensor."""

    def backward_ran() -> None:
        alive = flat()
        if alive is not None:
            alive._views_checked = False

    core.eager._add_backward_final_hook(backward_ran)
