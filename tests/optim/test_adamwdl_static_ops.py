"""AdamWDL's static (PIR) program holds the ops of ``paddle.optimizer.AdamW``'s and no more
than its layer ratios and (general path) its decay need.

The program of a ``minimize`` is counted by op type, less the ops of the
forward and backward pass (identical for both optimizers):

* without layer ratios, AdamWDL's optimizer ops are AdamW's exactly;
* with layer ratios (fast path), AdamWDL adds the ops of one scaled lr
  (``global_lr * ratio``) per distinct ratio other than 1, and nothing per
  parameter;
* on the general path it adds one ``multiply_`` per decayed parameter and the
  ops of one factor ``1 - lr * coeff`` per distinct decay lr.

The ops of one scaled lr and of one factor are measured by building those
expressions alone, not taken from AdamWDL's program.
"""
from __future__ import annotations

import collections
from collections.abc import Callable, Iterator

import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
from decay_routes import separate_decay
from reference_adamw import layer_ratio

N_LAYERS, LAYERWISE_DECAY, WEIGHT_DECAY = 2, 0.8, 0.1


@pytest.fixture
def pir_static() -> Iterator[None]:
    paddle.enable_static()
    try:
        with paddle.pir_utils.IrGuard():
            yield
    finally:
        paddle.disable_static()


def _op_counts(program: paddle.static.Program) -> collections.Counter:
    return collections.Counter(op.name() for op in program.global_block().ops)


def _model() -> TinyBertForSequenceClassification:
    return TinyBertForSequenceClassification(
        TinyBertConfig(num_hidden_layers=N_LAYERS, hidden_size=8, num_attention_heads=2, intermediate_size=16, vocab_size=24)
    )


def _optimizer_ops(make_optimizer: Callable[[dict[str, str]], paddle.optimizer.Optimizer]) -> tuple[collections.Counter, dict[str, str]]:
    """The ops ``minimize`` adds to a tiny BERT's program, and the model's name_dict."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        model = _model()
        ids = paddle.static.data("ids", [4, 6], "int64")
        labels = paddle.static.data("labels", [4], "int64")
        loss = nn.functional.cross_entropy(model(ids), labels)
        # the backward pass is the same for both optimizers; count it as "before"
        before = _op_counts(main)
        name_dict = {p.name: n for n, p in model.named_parameters()}
        make_optimizer(name_dict).minimize(loss)
        return _op_counts(main) - before, name_dict


def _expression_ops(build: Callable[[paddle.Tensor], object]) -> collections.Counter:
    """The ops of ``build(global_lr)`` alone in a fresh program, the lr a persistable float32 [1]."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        global_lr = paddle.pir.core.create_persistable_value("float32", [1], "expression_lr", initializer=nn.initializer.Constant(0.01))
        before = _op_counts(main)
        build(global_lr)
        return _op_counts(main) - before


def _decays(name_dict: dict[str, str]) -> Callable[[str], bool]:
    return lambda param_name: not name_dict[param_name].endswith("bias")


def _adamw(name_dict):
    return paddle.optimizer.AdamW(0.01, weight_decay=WEIGHT_DECAY, apply_decay_param_fun=_decays(name_dict))


def _adamwdl(layerwise_decay: float, general: bool = False):
    def make(name_dict):
        optimizer = AdamWDL(
            0.01, weight_decay=WEIGHT_DECAY, apply_decay_param_fun=_decays(name_dict),
            layerwise_decay=layerwise_decay, n_layers=N_LAYERS, name_dict=name_dict,
        )
        separate_decay(optimizer, general)
        return optimizer
    return make


def test_without_layer_ratios_the_program_is_adamws(pir_static):
    adamw, _ = _optimizer_ops(_adamw)
    adamwdl, _ = _optimizer_ops(_adamwdl(1.0))
    assert adamw["pd_op.adamw_"] > 0
    assert adamwdl == adamw


def test_fast_path_adds_one_scaled_lr_per_distinct_ratio(pir_static):
    adamw, name_dict = _optimizer_ops(_adamw)
    adamwdl, _ = _optimizer_ops(_adamwdl(LAYERWISE_DECAY))
    ratios = {layer_ratio(name, LAYERWISE_DECAY, N_LAYERS) for name in name_dict.values()} - {1.0}
    assert len(ratios) == N_LAYERS + 1  # embeddings and each encoder layer
    one_scaled_lr = _expression_ops(lambda lr: lr * 0.5)
    expected = adamw.copy()
    for _ in ratios:
        expected.update(one_scaled_lr)
    assert adamwdl == expected


def test_general_path_adds_a_multiply_per_decayed_parameter_and_one_factor(pir_static):
    fast, name_dict = _optimizer_ops(_adamwdl(LAYERWISE_DECAY))
    general, _ = _optimizer_ops(_adamwdl(LAYERWISE_DECAY, general=True))
    decayed = sum(_decays(name_dict)(param_name) for param_name in name_dict)
    # every parameter's ParamAttr lr is 1, so the decay uses one lr: the global one
    one_factor = _expression_ops(lambda lr: 1.0 - lr * WEIGHT_DECAY)
    expected = fast + collections.Counter({"pd_op.multiply_": decayed}) + one_factor
    assert general == expected
