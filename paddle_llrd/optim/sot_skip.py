"""Let ``paddle.jit.to_static`` run AdamWDL's Python eagerly, as it runs Paddle's own optimizers.

Paddle 3's default translator (SOT) translates the bytecode of every frame
whose file is not on its skip list, also frames called from code that runs
eagerly. The optimizer step after ``loss.backward()`` (a graph break) runs
eagerly for ``paddle.optimizer.AdamW`` because Paddle's files are on that
list. AdamWDL's overrides, which Paddle's eager step calls back into
(``step``, ``_apply_optimize``, the pass and update methods), and the
modules they call per step are not; Paddle 3.3.1 translates them into broken
bytecode (``UnboundLocalError: ... '___graph_fn_saved_orig_1'`` where a
``super()`` call breaks the graph; calling ``AdamW.step(self)`` instead only
moves the failure to ``_apply_optimize``). So those files join the list.
Best effort: the list is internal to Paddle, so its absence only costs this
workaround.
"""
from __future__ import annotations

import os
import re

# Every module of this package that an optimizer step runs.
STEP_MODULES = (
    "optim/adamwdl.py",
    "optim/optimization_pass.py",
    "optim/accumulators.py",
    "optim/updates.py",
    "optim/multi_tensor.py",
    "optim/ratios.py",
    "argument_checks.py",
    "optim/plan.py",
    "optim/scheduled_weight_decay.py",
    "layer_decay/layerwise.py",
    "layer_decay/layer_maps.py",
    "schedules/weight_decay.py",
)


def run_eagerly_under_sot(modules: tuple[str, ...] = STEP_MODULES) -> bool:
    """Put ``modules`` (paths relative to the package) on SOT's skip list; True if it worked.

    Examples:
        >>> from paddle_llrd.optim.sot_skip import run_eagerly_under_sot
        >>> run_eagerly_under_sot()
        True
    """
    try:
        from paddle.jit.sot.opcode_translator import skip_files
    except ImportError:  # pragma: no cover - a Paddle without SOT
        return False
    try:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
        skip_files.skip_file_names.update(os.path.join(here, module) for module in modules)
        skip_files.skip_file_name_re = re.compile(
            f"^({'|'.join(map(re.escape, skip_files.skip_file_names))})"
        )
        skip_files.setup_skip_files()
    except (AttributeError, TypeError):  # pragma: no cover - a changed SOT internals layout
        return False
    return True
