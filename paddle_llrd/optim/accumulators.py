"""How AdamWDL creates a parameter's Adam accumulators where Paddle 3.3.1's ``AdamW`` gets them wrong.

``paddle.optimizer.AdamW._add_moments_pows`` creates a parameter's moments and
beta powers when its first update needs them. :class:`AdamAccumulators`, a
mixin that :class:`~paddle_llrd.AdamWDL` puts before ``AdamW`` in its bases,
changes two things:

* Tensor betas: Paddle starts the beta powers :math:`\\beta_1^t,\\beta_2^t` at
  0.9 and 0.999 whatever a Tensor beta holds, so the bias correction is that
  of other betas. Here they start at the Tensor's value: read when they are
  created in dygraph; in a program they start at
  :data:`~paddle_llrd.optim.updates.UNSET_BETA_POW` and the first update sets
  them (:func:`~paddle_llrd.optim.updates.start_beta_pows`).
* A parameter that was frozen when a checkpoint was saved, and is trained
  after resuming from it, has no moments in the loaded state: Paddle asserts;
  here they start at zero, as in an uninterrupted run.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .updates import initial_beta_pow
from .ratios import is_tensor


class AdamAccumulators:
    """Accumulator creation of a ``paddle.optimizer.AdamW`` subclass (a mixin before it)."""

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


def _has_saved_state(holder: Mapping[str, Any], param_name: str) -> bool:
    """Whether a loaded optimizer state holds accumulators of ``param_name``
    (Paddle names them ``<param name>_<accumulator>_<n>``)."""
    prefix = param_name + "_"
    return any(key.startswith(prefix) for key in holder)
