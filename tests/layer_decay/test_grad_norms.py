"""paddle_llrd.layer_grad_norms: the global gradient norm and the norm per
layer group, against NumPy norms of the gradients grouped in the test by a
regular expression written out here."""
from __future__ import annotations

import re

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL, LayerMap, build_name_dict, layer_grad_norms, layer_groups
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

N_LAYERS = 3


def expected_group(name: str) -> str:
    """BERT names: encoder.layers.i -> layer_i, embeddings -> embeddings, the rest (pooler, classifier) -> head."""
    found = re.search(r"encoder\.layers\.(\d+)\.", name)
    if found:
        return f"layer_{found.group(1)}"
    return "embeddings" if "embeddings" in name else "head"


def numpy_norms(model, scale: float = 1.0) -> dict:
    squares: dict = {}
    for name, param in model.named_parameters():
        if param.grad is None:
            continue
        grad = param.grad.numpy().astype(np.float64) / scale
        group = expected_group(name)
        squares[group] = squares.get(group, 0.0) + float(np.sum(grad**2))
    norms = {group: np.sqrt(value) for group, value in squares.items()}
    norms["total"] = np.sqrt(sum(squares.values()))
    return norms


def make_model(seed: int = 0):
    paddle.seed(seed)
    return TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=N_LAYERS, hidden_dropout_prob=0.0))


def backward(model, seed: int = 0, scale: float = 1.0):
    paddle.seed(seed + 1)
    ids = paddle.randint(1, 100, [4, 8])
    labels = paddle.randint(0, 2, [4])
    loss = paddle.nn.functional.cross_entropy(model(ids), labels) * scale
    loss.backward()
    return loss


def test_each_groups_norm_and_the_global_norm_are_the_numpy_norms():
    model = make_model()
    backward(model)
    norms = layer_grad_norms(model)
    expected = numpy_norms(model)
    assert list(norms) == ["total", "embeddings", *(f"layer_{i}" for i in range(N_LAYERS)), "head"]
    assert set(norms) == set(expected)
    for name, value in expected.items():
        assert norms[name] == pytest.approx(value, rel=1e-5), name
    # the groups really differ: a mix-up of groups would show
    assert len({round(value, 6) for value in norms.values()}) == len(norms)


@pytest.mark.parametrize("layer_map", ["bert", r"encoder\.layers\.(\d+)\.", "layer_map_object"])
def test_every_form_of_layer_map_gives_the_same_groups(layer_map):
    model = make_model()
    backward(model)
    if layer_map == "layer_map_object":
        layer_map = LayerMap.from_model(model, family="bert")
    expected = numpy_norms(model)
    norms = layer_grad_norms(model, layer_map)
    assert norms == pytest.approx(expected, rel=1e-5)


def test_a_loss_scale_is_divided_out_and_frozen_parameters_are_left_out():
    reference, scaled = make_model(), make_model()
    backward(reference)
    backward(scaled, scale=1024.0)
    assert layer_grad_norms(scaled, loss_scale=1024.0) == pytest.approx(layer_grad_norms(reference), rel=1e-5)

    frozen = make_model()
    for name, param in frozen.named_parameters():
        if "embeddings" in name:
            param.stop_gradient = True
    backward(frozen)
    norms = layer_grad_norms(frozen)
    assert "embeddings" not in norms
    assert norms == pytest.approx(numpy_norms(frozen), rel=1e-5)
    with pytest.raises(ValueError, match="loss_scale"):
        layer_grad_norms(frozen, loss_scale=0.0)


def test_a_hand_written_loop_reads_the_norms_the_step_clips():
    """Between backward and step, over several steps of a clipping optimizer:
    the norms are those of the raw gradients (clipping happens inside step)."""
    model = make_model()
    clip = 0.01
    optimizer = AdamWDL(learning_rate=1e-2, parameters=model.parameters(), layerwise_decay=0.7, n_layers=N_LAYERS,
                        set_param_lr_fun=LayerMap(N_LAYERS, family="bert"), name_dict=build_name_dict(model),
                        grad_clip=paddle.nn.ClipGradByGlobalNorm(clip), weight_decay=0.0)
    for step in range(3):
        backward(model, seed=step)
        norms = layer_grad_norms(model, "bert")
        assert norms == pytest.approx(numpy_norms(model), rel=1e-5)
        assert norms["total"] > clip  # clipping is active, so "before clipping" matters
        optimizer.step()
        optimizer.clear_grad()
    assert {name: len(params) for name, params in layer_groups(model).items()}["head"] == 4


def test_a_frozen_parameter_with_a_stale_gradient_is_left_out_as_the_clip_leaves_it_out():
    """Freeze a parameter after a step: clear_grad skips it, so it keeps its gradient.
    The total is the float64 norm of the trainable gradients and the norm
    ClipGradByGlobalNorm really clips with (read back from an SGD step)."""
    model = make_model()
    clip, lr = 1e-3, 0.1
    # The first step unclipped (a clip scales the gradients in place), the measured one clipped.
    first = paddle.optimizer.SGD(learning_rate=lr, parameters=model.parameters())
    optimizer = paddle.optimizer.SGD(learning_rate=lr, parameters=model.parameters(),
                                     grad_clip=paddle.nn.ClipGradByGlobalNorm(clip))
    backward(model, seed=0)
    first.step()
    frozen = max(model.parameters(), key=lambda param: float(np.sum(param.grad.numpy().astype(np.float64) ** 2)))
    frozen.stop_gradient = True
    first.clear_grad()
    assert frozen.grad is not None and float(np.abs(frozen.grad.numpy()).sum()) > 0  # the stale gradient

    backward(model, seed=1)
    trainable = [param for param in model.parameters() if not param.stop_gradient and param.grad is not None]
    grads = [param.grad.numpy().astype(np.float64) for param in trainable]
    reference = float(np.sqrt(sum(np.sum(grad**2) for grad in grads)))
    stale = float(np.sqrt(reference**2 + np.sum(frozen.grad.numpy().astype(np.float64) ** 2)))
    assert stale > reference * 1.05  # counting the stale gradient would show

    norms = layer_grad_norms(model)
    assert norms["total"] == pytest.approx(reference, rel=1e-5)
    # SGD with the clip: p_new = p - lr * g * clip / norm, so norm = lr * clip * |g| / |p - p_new|.
    before = [param.numpy().astype(np.float64) for param in trainable]
    optimizer.step()
    moved = float(np.sqrt(sum(np.sum((b - param.numpy().astype(np.float64)) ** 2)
                              for b, param in zip(before, trainable))))
    clipped_with = lr * clip * reference / moved
    assert norms["total"] == pytest.approx(clipped_with, rel=1e-3)
