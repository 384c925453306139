"""What ``AdamWDL.last_update_path`` says after a step on the flat layout, on this machine:
``("fused", None)`` where the fused CPU operator is built and loads, else Paddle's kernels
over the same layout, with the operator's reason (a machine without a compiler)."""
from __future__ import annotations

from paddle_llrd.optim.fused_operator import unavailable_reason


def cpu_flat_path() -> tuple[str, str | None]:
    """The path of a CPU step the flat layout serves, in this process."""
    reason = unavailable_reason()
    return ("fused", None) if reason is None else ("multi_tensor", reason)
