"""Whatever a user or a framework changes between steps, AdamWDL's default step gives the
per-parameter path's bits and, without layer ratios, ``paddle.optimizer.AdamW``'s: weights,
moments, beta powers and ``p.grad``, after every step.

A stateful randomized test: hypothesis interleaves training steps (with gradient
accumulation, two ``step()`` calls on one backward, gradients carried past a step or
cleared in either way) with changes drawn from a menu: the optimizer's ``_grad_clip``
assigned, cleared or swapped for another class (as fleet's wrappers assign it), a group's
``grad_clip``, ``need_clip``, a ``regularizer``, ``apply_decay_param_fun`` given, replaced
or taken away, the weight decay (the optimizer's or a group's, a float or a Tensor), ``set_value``, freezing and unfreezing, a branch used or not, weights read
transposed (``x @ W.T``, which leaves ``W`` a strided gradient), ``set_lr``,
``layerwise_decay`` and ``set_param_lr_fun`` assigned, a second optimizer over some of the
parameters; on 1 and 2 threads, with and without parameter groups and layer ratios. It
runs ``PADDLE_LLRD_STATEFUL_EXAMPLES`` examples (50 in ``make test``; set it higher for a
soak), in this process (the fused operator where it is built) and, a fifth of them each,
in processes with the operator off (Paddle's kernels on the same layout) and with the work
cut into the smallest chunks the threads share (``PADDLE_LLRD_MIN_CHUNK_NUMEL=16``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from changing_worlds import HEAD, KINDS_WITH_RATIOS, KINDS_WITHOUT_RATIOS, World, differences

EXAMPLES = int(os.environ.get("PADDLE_LLRD_STATEFUL_EXAMPLES", "50"))
PARAMETERS = ("embeddings.weight", "encoder.layers.0.linear.weight", "encoder.layers.0.linear.bias",
              "encoder.layers.1.norm.weight", "encoder.layers.1.linear.weight", "branch.weight", "head.weight",
              "head.bias", "scale")
CLIPS = st.sampled_from([None, "global_norm", "norm", "value"])
# How the step after a change trains: backwards before it (2: gradient accumulation), steps on
# them (2: two step() calls on one backward), and how the gradients are cleared after.
TRAINING = st.tuples(st.integers(1, 2), st.integers(1, 2), st.sampled_from(["zero", "release", "keep"]))


class ChangesBetweenSteps(RuleBasedStateMachine):
    """Every world takes the same changes and steps; after each step they are equal bit for bit."""

    @initialize(ratios=st.booleans(), grouped=st.booleans(), threads=st.sampled_from([1, 2]), clip_kind=CLIPS,
                transposed=st.booleans())
    def build(self, ratios: bool, grouped: bool, threads: int, clip_kind: str | None, transposed: bool) -> None:
        kinds = KINDS_WITH_RATIOS if ratios else KINDS_WITHOUT_RATIOS
        self.worlds = [World(kind, ratios=ratios, grouped=grouped, threads=threads, clip_kind=clip_kind)
                       for kind in kinds]
        for world in self.worlds:  # (from the first step on, as a model that always reads them so)
            world.apply("weights_read_transposed", transposed)
        self.seed = 0
        self.pending_backward = False
        self.ratios = ratios

    def _all(self, change: str, *args) -> None:
        """``change`` in every world, then a training step (the last argument: :data:`TRAINING`)."""
        for world in self.worlds:
            world.apply(change, *args[:-1])
        self.train(*args[-1])

    # ----------------------------------------------------------- training
    @rule(backwards=st.integers(1, 2), steps=st.integers(1, 2), clear=st.sampled_from(["zero", "release", "keep"]))
    def train(self, backwards: int, steps: int, clear: str) -> None:
        for _ in range(backwards):
            self.seed += 1
            for world in self.worlds:
                world.backward(self.seed)
        for _ in range(steps):
            for world in self.worlds:
                world.step()
            found = differences(self.worlds)
            assert not found, "\n".join(found[:20])
        for world in self.worlds:
            world.clear(clear)

    # ------------------------------------------------------------ changes
    @rule(kind=CLIPS, training=TRAINING)
    def optimizer_clip(self, kind, training) -> None:
        self._all("optimizer_clip", kind, training)

    @rule(group=st.integers(0, 1), kind=CLIPS, training=TRAINING)
    def group_clip(self, group, kind, training) -> None:
        self._all("group_clip", group, kind, training)

    # Paddle leaves out of the clip a parameter whose need_clip `is False`: `off` 0 (as from a mask
    # of ints) is clipped, `on` None too
    @rule(left_out=st.frozensets(st.sampled_from(PARAMETERS)), off=st.sampled_from([False, 0]),
          on=st.sampled_from([True, None]), training=TRAINING)
    def need_clip(self, left_out, off, on, training) -> None:
        self._all("need_clip", left_out, off, on, training)

    @rule(name=st.sampled_from(PARAMETERS), coeff=st.sampled_from([None, 0.5, 5.0]), training=TRAINING)
    def regularizer(self, name, coeff, training) -> None:
        self._all("regularizer", name, coeff, training)

    @rule(decayed=st.none() | st.frozensets(st.sampled_from(PARAMETERS)), training=TRAINING)
    def decay_rule(self, decayed, training) -> None:
        self._all("decay_rule", decayed, training)

    @rule(group=st.integers(0, 1), value=st.sampled_from([0.0, 0.05, None]), training=TRAINING)
    def weight_decay(self, group, value, training) -> None:
        self._all("weight_decay", group, value, training)

    @rule(name=st.sampled_from(PARAMETERS), seed=st.integers(0, 1000), training=TRAINING)
    def set_value(self, name, seed, training) -> None:
        self._all("set_value", name, seed, training)

    @rule(name=st.sampled_from(PARAMETERS), frozen=st.booleans(), training=TRAINING)
    def freeze(self, name, frozen, training) -> None:
        self._all("freeze", name, frozen, training)

    @rule(used=st.booleans(), training=TRAINING)
    def branch(self, used, training) -> None:
        self._all("branch", used, training)

    @rule(used=st.booleans(), training=TRAINING)
    def weights_read_transposed(self, used, training) -> None:
        self._all("weights_read_transposed", used, training)

    @rule(lr=st.sampled_from([0.0, 0.003, 0.01, 0.2]), training=TRAINING)
    def set_lr(self, lr, training) -> None:
        self._all("set_lr", lr, training)

    @precondition(lambda self: self.ratios)
    @rule(decay=st.sampled_from([0.5, 0.9, 1.0]), training=TRAINING)
    def layerwise_decay(self, decay, training) -> None:
        self._all("layerwise_decay", decay, training)

    @precondition(lambda self: self.ratios)
    @rule(ratios=st.none() | st.dictionaries(st.sampled_from(PARAMETERS), st.sampled_from([0.0, 0.25, 2.0])),
          training=TRAINING)
    def ratio_function(self, ratios, training) -> None:
        self._all("ratio_function", ratios, training)

    @precondition(lambda self: self.worlds[0].second is None)
    @rule(training=TRAINING)
    def second_optimizer(self, training) -> None:
        self._all("second_optimizer", training)

    @invariant()
    def same_parameters_train(self) -> None:
        trained = [{name for name, p in world.by_name.items() if not p.stop_gradient} for world in self.worlds]
        assert all(names == trained[0] for names in trained)


ChangesBetweenSteps.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=14, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_changes_between_steps_keep_the_default_step_bit_identical = ChangesBetweenSteps.TestCase


# Other processes: the operator off (Paddle's kernels on the same layout), and the work cut into
# the smallest pieces the threads share (each bank's kernel calls split into chunks, and
# clear_grad's gradients cleared on the threads), with the operator on and off.
OTHER_PROCESSES = {
    "operator_off": {"PADDLE_LLRD_FUSED": "0"},
    "smallest_thread_chunks": {"PADDLE_LLRD_MIN_CHUNK_NUMEL": "16"},
    "operator_off_smallest_thread_chunks": {"PADDLE_LLRD_FUSED": "0", "PADDLE_LLRD_MIN_CHUNK_NUMEL": "16"},
}


@pytest.mark.parametrize("variables", OTHER_PROCESSES.values(), ids=OTHER_PROCESSES.keys())
def test_the_same_holds_with_the_operator_off_and_with_the_smallest_thread_chunks(variables: dict[str, str]) -> None:
    """The same test (a fifth of its examples) in a process with other settings of the step."""
    environment = dict(os.environ, **variables, PADDLE_LLRD_STATEFUL_EXAMPLES=str(max(1, EXAMPLES // 5)))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::UserWarning",
         f"{__file__}::test_changes_between_steps_keep_the_default_step_bit_identical"],
        cwd=Path(__file__).resolve().parents[2], env=environment, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
