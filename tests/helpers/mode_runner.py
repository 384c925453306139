"""Train one small BERT-shaped model for a few steps in one Paddle execution mode.

``tests/test_execution_modes.py`` runs this script once per mode, each in a
fresh Python process (the legacy static program needs
``FLAGS_enable_pir_api=0`` before ``paddle`` is imported, and static mode is
process-global state), and compares the saved results::

    python tests/helpers/mode_runner.py --mode dygraph --optimizer adamwdl --out run.npz

Modes:

* ``dygraph``: an eager loop ``loss.backward(); opt.step(); opt.clear_grad()``.
* ``to_static``: that whole train step under ``paddle.jit.to_static``
  (Paddle 3's default SOT translator: on Paddle 3.3.1 the forward becomes one
  static subgraph, ``loss.backward()`` breaks the graph, and SOT goes on
  translating the frames called after it, the optimizer's included, one by
  one; they run without static subgraphs). SOT remembers per code object
  how translating it went, and after two failures stops translating it for
  the rest of the process, so a failing run can make later runs in the same
  process pass: run one ``--decay-paths``/``--scenarios`` pair per process
  to see each run as a user would. ``to_static_ast`` is the same with ``full_graph=True``, kept as a
  reproducer: Paddle 3.3.1 cannot translate a whole train step that way, for
  any optimizer (``AttributeError: 'paddle.base.libpaddle.pir.Value' object
  has no attribute 'backward'``; with ``FLAGS_enable_pir_api=0`` the process
  dies with a segmentation fault).
* ``static``: ``opt.minimize(loss)`` in ``paddle.static.program_guard`` with
  Paddle 3's default PIR program, run by ``paddle.static.Executor``.
* ``static_legacy``: the same with the legacy ``ProgramDesc``; Paddle reads
  ``FLAGS_enable_pir_api`` once, at import, so the caller sets
  ``FLAGS_enable_pir_api=0`` in the environment (the script refuses the mode
  otherwise).

Every mode runs three scenarios: ``float`` (a constant Python float lr),
``scheduler`` (an ``LRScheduler`` stepped between train steps) and
``overflow`` (the scheduler, plus an AMP overflow flag ``found_inf`` handed
to the optimizer with ``opt._set_auxiliary_var('found_inf', ...)`` as
``paddle.amp.GradScaler`` does: a bool tensor in dygraph, a bool feed variable
of the program in static mode; it is ``False`` on every step except one extra
step, before step ``OVERFLOW_BEFORE_STEP``, where it is ``True`` and must
change nothing). For AdamWDL each scenario runs on both of its decay paths
(``fused``: the decay folded into the ``adamw`` kernel; ``general``: a
separate decay op, see :func:`make_optimizer`).

Each run (key ``<path>-<scenario>``, e.g. ``general-overflow``) saves the
structured-name weights before and after training (``<key>/init/<name>``,
``<key>/final/<name>``) and the learning rate of every step
(``<key>/lrs``); dygraph also saves every gradient it applied
(``<key>/grad/<step>/<name>``) so that a float64 NumPy reference can replay
the updates; the overflow scenario saves the weights and the optimizer state
around the overflow step (``<key>/before_overflow/*``, ``after_overflow/*``,
``state_before_overflow/*``, ``state_after_overflow/*``). A run that raises
stores its traceback under ``<key>/error`` instead, so one broken run does
not hide the others.

The model is built only from operators that exist in every mode on Paddle
3.3.1's CPU build: the legacy static program there has no ``tanh``,
``sigmoid``, ``gelu``, ``matmul`` or ``sum`` for Python callers (they raise
``TypeError: ... must be Value, but got Variable``), so there is no attention,
only ``Linear``/``Embedding``/``LayerNorm``/``relu``/``cross_entropy``.

Example:
    >>> import paddle
    >>> model = build_model()
    >>> sorted(n for n, _ in model.named_parameters())[:3]
    ['classifier.bias', 'classifier.weight', 'embeddings.layer_norm.bias']
    >>> layer_index_of("encoder.layers.1.linear2.weight"), layer_index_of("pooler.dense.bias")
    (1, None)
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Dict, List, Optional, Sequence

import numpy as np
import paddle
from paddle import nn

VOCAB_SIZE = 16
HIDDEN_SIZE = 8
INTERMEDIATE_SIZE = 12
NUM_LAYERS = 2
NUM_LABELS = 3
SEQ_LEN = 4
BATCH_SIZE = 8
NUM_STEPS = 4

BASE_LR = 0.05
WEIGHT_DECAY = 0.2
LAYERWISE_DECAY = 0.8
BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-8

# ParamAttr learning rates other than 1 give those parameters their own lr
# variable in static programs, so a `_lr_to_coeff` cache keyed on the wrong
# thing (the global lr, a single slot) would decay them with a wrong factor.
PARAM_LR_SCALES = {"classifier.weight": 0.5, "pooler.dense.weight": 2.0}

# The static modes feed found_inf=True before this step (0-based count of
# normal steps already taken); that extra run must change nothing.
OVERFLOW_BEFORE_STEP = 2

MODES = ("dygraph", "to_static", "to_static_ast", "static", "static_legacy")
OPTIMIZERS = ("adamw", "adamwdl")
SCENARIOS = ("float", "scheduler", "overflow")
DECAY_PATHS = ("fused", "general")


def scheduled_lr(step: int) -> float:
    """The learning rate of train step ``step`` (0-based) in the scheduler scenario."""
    return BASE_LR * (1.0 - 0.2 * step)


def is_decayed(structured_name: str) -> bool:
    """Whether weight decay applies: BERT's convention, no decay for biases and norms."""
    return not (structured_name.endswith(".bias") or "norm" in structured_name)


def layer_index_of(structured_name: str) -> Optional[int]:
    """The encoder layer a parameter belongs to, or None outside the encoder."""
    marker = "encoder.layers."
    if marker not in structured_name:
        return None
    return int(structured_name.split(marker, 1)[1].split(".", 1)[0])


# --------------------------------------------------------------------------- model

class Embeddings(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB_SIZE, HIDDEN_SIZE)
        self.position_embeddings = nn.Embedding(SEQ_LEN, HIDDEN_SIZE)
        self.layer_norm = nn.LayerNorm(HIDDEN_SIZE)

    def forward(self, input_ids, position_ids):
        return self.layer_norm(self.word_embeddings(input_ids) + self.position_embeddings(position_ids))


class FeedForwardLayer(nn.Layer):
    """A Transformer layer without attention: ``norm(h + linear2(relu(linear1(h))))``."""

    def __init__(self) -> None:
        super().__init__()
        self.linear1 = nn.Linear(HIDDEN_SIZE, INTERMEDIATE_SIZE)
        self.linear2 = nn.Linear(INTERMEDIATE_SIZE, HIDDEN_SIZE)
        self.norm = nn.LayerNorm(HIDDEN_SIZE)

    def forward(self, hidden):
        return self.norm(hidden + self.linear2(nn.functional.relu(self.linear1(hidden))))


class Encoder(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.LayerList([FeedForwardLayer() for _ in range(NUM_LAYERS)])

    def forward(self, hidden):
        for layer in self.layers:
            hidden = layer(hidden)
        return hidden


class Pooler(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(
            HIDDEN_SIZE,
            HIDDEN_SIZE,
            weight_attr=paddle.ParamAttr(learning_rate=PARAM_LR_SCALES["pooler.dense.weight"]),
        )

    def forward(self, hidden):
        return nn.functional.relu(self.dense(hidden[:, 0]))


class TinyClassifier(nn.Layer):
    """BERT-shaped parameter names (``embeddings.*``, ``encoder.layers.N.*``,
    ``pooler.*``, ``classifier.*``) so that layer-wise decay has work to do."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = Embeddings()
        self.encoder = Encoder()
        self.pooler = Pooler()
        self.classifier = nn.Linear(
            HIDDEN_SIZE,
            NUM_LABELS,
            weight_attr=paddle.ParamAttr(learning_rate=PARAM_LR_SCALES["classifier.weight"]),
        )

    def forward(self, input_ids, position_ids):
        return self.classifier(self.pooler(self.encoder(self.embeddings(input_ids, position_ids))))


def build_model() -> TinyClassifier:
    return TinyClassifier()


def loss_fn(model: nn.Layer, input_ids, position_ids, labels):
    """Mean cross entropy over the batch it is given (so two half batches
    averaged give the full-batch gradient)."""
    return nn.functional.cross_entropy(model(input_ids, position_ids), labels)


def initial_weights(model: nn.Layer, seed: int = 0) -> Dict[str, np.ndarray]:
    """Fixed float32 weights by structured name, the same in every mode and process."""
    rng = np.random.RandomState(seed)
    weights = {}
    for name, param in sorted(model.named_parameters()):
        shape = tuple(param.shape)
        if "norm" in name and name.endswith(".weight"):
            values = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            values = 0.4 * rng.standard_normal(shape)
        weights[name] = values.astype("float32")
    return weights


def make_batch(seed: int = 1, batch_size: int = BATCH_SIZE) -> Dict[str, np.ndarray]:
    rng = np.random.RandomState(seed)
    return {
        "input_ids": rng.randint(0, VOCAB_SIZE, (batch_size, SEQ_LEN)).astype("int64"),
        "position_ids": np.tile(np.arange(SEQ_LEN, dtype="int64"), (batch_size, 1)),
        "labels": rng.randint(0, NUM_LABELS, (batch_size,)).astype("int64"),
    }


def batches(num_steps: int = NUM_STEPS, batch_size: int = BATCH_SIZE) -> List[Dict[str, np.ndarray]]:
    """One distinct batch per step (seeds 1..num_steps)."""
    return [make_batch(seed=1 + step, batch_size=batch_size) for step in range(num_steps)]


# --------------------------------------------------------------------------- optimizers
def make_learning_rate(scenario: str):
    if scenario == "float":
        return BASE_LR
    return paddle.optimizer.lr.LambdaDecay(BASE_LR, lambda step: scheduled_lr(step) / BASE_LR)


def make_optimizer(
    kind: str, model: nn.Layer, learning_rate, parameters=None, decay_path: str = "fused", **options
):
    """The optimizer under test; ``adamw`` is ``paddle.optimizer.AdamW`` with
    the same decay mask and no layer decay (the stand-in the harness was
    first built with).

    ``decay_path``: AdamWDL folds the decay into the fused ``adamw`` kernel
    (``"fused"``, its default) or, where the kernel cannot express it, appends
    a separate decay op built from the ``_lr_to_coeff`` cache and the
    ``found_inf`` flag (``"general"``, forced here with its
    ``separate_decay`` helper so that every mode exercises both).
    ``options`` go to the constructor (e.g. ``multi_precision=True``).
    """
    if decay_path not in DECAY_PATHS:
        raise ValueError(f"decay_path must be one of {DECAY_PATHS}, got {decay_path!r}")
    # p.name is the variable name (e.g. "linear_3.w_0"), which differs between
    # modes; the structured name is stable, so map through it.
    name_dict = {param.name: name for name, param in model.named_parameters()}

    def apply_decay_param_fun(param_name: str) -> bool:
        return is_decayed(name_dict[param_name])

    if parameters is None:
        parameters = model.parameters()
    common = dict(
        learning_rate=learning_rate,
        beta1=BETA1,
        beta2=BETA2,
        epsilon=EPSILON,
        parameters=parameters,
        weight_decay=WEIGHT_DECAY,
        apply_decay_param_fun=apply_decay_param_fun,
        **options,
    )
    if kind == "adamw":
        return paddle.optimizer.AdamW(**common)
    if kind == "adamwdl":
        from decay_routes import separate_decay
        from paddle_llrd import AdamWDL

        if AdamWDL is None:
            raise RuntimeError("paddle_llrd.AdamWDL is still a stub")
        opt = AdamWDL(
            **common,
            layerwise_decay=LAYERWISE_DECAY,
            n_layers=NUM_LAYERS,
            name_dict=name_dict,
        )
        separate_decay(opt, decay_path == "general")
        return opt
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {kind!r}")


# --------------------------------------------------------------------------- modes
def _to_tensors(batch):
    return {key: paddle.to_tensor(value) for key, value in batch.items()}


def _set_dygraph_weights(model, weights):
    for name, param in model.named_parameters():
        param.set_value(weights[name])


def _dygraph_weights(model):
    return {name: param.numpy().copy() for name, param in model.named_parameters()}


def _dygraph_accumulators(opt):
    """Every optimizer state tensor (moments, beta powers) by its variable name."""
    values = {}
    for per_param in opt._accumulators.values():
        for tensor in per_param.values():
            values[tensor.name] = tensor.numpy().copy()
    return values


def _record_overflow_snapshot(result, key, when, weights, state):
    for name, value in weights.items():
        result[f"{key}/{when}_overflow/{name}"] = value
    for var_name, value in state.items():
        result[f"{key}/state_{when}_overflow/{var_name}"] = value


def run_key(decay_path: str, scenario: str) -> str:
    """The prefix of one run's entries in the saved results."""
    return f"{decay_path}-{scenario}"


def run_dygraph(
    optimizer_kind: str, scenario: str, translate: Optional[str], result: dict, decay_path: str = "fused"
) -> None:
    key = run_key(decay_path, scenario)
    paddle.disable_static()
    model = build_model()
    init = initial_weights(model)
    _set_dygraph_weights(model, init)
    learning_rate = make_learning_rate(scenario)
    opt = make_optimizer(optimizer_kind, model, learning_rate, decay_path=decay_path)
    grads_to_record = {} if translate is None else None

    def train_step(input_ids, position_ids, labels):
        loss = loss_fn(model, input_ids, position_ids, labels)
        loss.backward()
        if grads_to_record is not None:
            for name, param in model.named_parameters():
                grads_to_record[name] = param.grad.numpy().copy()
        opt.step()
        opt.clear_grad()
        return loss

    if translate == "sot":
        train_step = paddle.jit.to_static(train_step)
    elif translate == "ast":
        train_step = paddle.jit.to_static(train_step, full_graph=True)

    def set_found_inf(value: bool) -> None:
        # What paddle.amp.GradScaler does before opt.step(); Paddle replaces
        # the tensor by a Python bool once read, so it is set before every step.
        if scenario == "overflow":
            opt._set_auxiliary_var("found_inf", paddle.to_tensor([value]))

    lrs = []
    for step, batch in enumerate(batches()):
        if scenario == "overflow" and step == OVERFLOW_BEFORE_STEP:
            before = (_dygraph_weights(model), _dygraph_accumulators(opt))
            set_found_inf(True)
            train_step(**_to_tensors(batch))
            _record_overflow_snapshot(result, key, "before", *before)
            _record_overflow_snapshot(result, key, "after", _dygraph_weights(model), _dygraph_accumulators(opt))
        set_found_inf(False)
        lrs.append(opt.get_lr())
        train_step(**_to_tensors(batch))
        if grads_to_record is not None:
            for name, grad in grads_to_record.items():
                result[f"{key}/grad/{step}/{name}"] = grad
        if scenario != "float":
            learning_rate.step()
    result[f"{key}/lrs"] = np.asarray(lrs)
    for name, value in init.items():
        result[f"{key}/init/{name}"] = value
    for name, value in _dygraph_weights(model).items():
        result[f"{key}/final/{name}"] = value


def current_place():
    """The place dygraph would use (``paddle.get_device()``), so every mode runs on the same device."""
    device = paddle.device.get_device()
    if device.startswith("gpu"):
        return paddle.CUDAPlace(int(device.split(":")[1]))
    return paddle.CPUPlace()


def _static_weights(model, scope):
    return {
        name: np.array(scope.find_var(param.name).get_tensor()).copy()
        for name, param in model.named_parameters()
    }


def _static_accumulators(opt, scope):
    """Every optimizer state variable (moments, beta powers) by its variable name."""
    values = {}
    for per_param in opt._accumulators.values():
        for var in per_param.values():
            values[var.name] = np.array(scope.find_var(var.name).get_tensor()).copy()
    return values


def run_static(optimizer_kind: str, scenario: str, result: dict, decay_path: str = "fused") -> None:
    key = run_key(decay_path, scenario)
    paddle.enable_static()
    main_program, startup_program = paddle.static.Program(), paddle.static.Program()
    with paddle.utils.unique_name.guard(), paddle.static.program_guard(main_program, startup_program):
        model = build_model()
        input_ids = paddle.static.data("input_ids", [-1, SEQ_LEN], "int64")
        position_ids = paddle.static.data("position_ids", [-1, SEQ_LEN], "int64")
        labels = paddle.static.data("labels", [-1], "int64")
        loss = loss_fn(model, input_ids, position_ids, labels)
        learning_rate = make_learning_rate("float" if scenario == "float" else "scheduler")
        opt = make_optimizer(optimizer_kind, model, learning_rate, decay_path=decay_path)
        if scenario == "overflow":
            found_inf = paddle.static.data("found_inf", [1], "bool")
            opt._set_auxiliary_var("found_inf", found_inf)
        opt.minimize(loss)
    if hasattr(opt, "_lr_to_coeff"):
        result[f"{key}/lr_to_coeff_after_minimize"] = np.asarray(len(opt._lr_to_coeff))

    place = current_place()
    scope = paddle.static.Scope()
    exe = paddle.static.Executor(place)
    with paddle.static.scope_guard(scope):
        exe.run(startup_program)
        init = initial_weights(model)
        for name, param in model.named_parameters():
            scope.find_var(param.name).get_tensor().set(init[name], place)

        lrs = []
        for step, batch in enumerate(batches()):
            if scenario == "overflow" and step == OVERFLOW_BEFORE_STEP:
                before = (_static_weights(model, scope), _static_accumulators(opt, scope))
                exe.run(main_program, feed={**batch, "found_inf": np.array([True])}, fetch_list=[loss])
                _record_overflow_snapshot(result, key, "before", *before)
                _record_overflow_snapshot(
                    result, key, "after", _static_weights(model, scope), _static_accumulators(opt, scope)
                )
            feed = dict(batch)
            if scenario == "overflow":
                feed["found_inf"] = np.array([False])
            lrs.append(opt.get_lr())
            exe.run(main_program, feed=feed, fetch_list=[loss])
            if scenario != "float":
                learning_rate.step()
        result[f"{key}/lrs"] = np.asarray(lrs)
        for name, value in init.items():
            result[f"{key}/init/{name}"] = value
        for name, value in _static_weights(model, scope).items():
            result[f"{key}/final/{name}"] = value
    paddle.disable_static()


def run_mode(
    mode: str, optimizer_kind: str, scenarios: Sequence[str], decay_paths: Sequence[str] = DECAY_PATHS
) -> Dict[str, np.ndarray]:
    result: Dict[str, np.ndarray] = {}
    if mode.startswith("static"):
        pir = bool(paddle.framework.use_pir_api())
        if pir != (mode == "static"):
            raise RuntimeError(
                f"mode {mode!r} needs FLAGS_enable_pir_api={int(mode == 'static')} in the "
                f"environment before paddle is imported; paddle's PIR API is {'on' if pir else 'off'}"
            )
        result["pir"] = np.asarray(pir)
    runs = [(path, scenario) for path in decay_paths for scenario in scenarios]
    for decay_path, scenario in runs:
        try:
            if mode == "dygraph":
                run_dygraph(optimizer_kind, scenario, None, result, decay_path)
            elif mode == "to_static":
                run_dygraph(optimizer_kind, scenario, "sot", result, decay_path)
            elif mode == "to_static_ast":
                run_dygraph(optimizer_kind, scenario, "ast", result, decay_path)
            else:
                run_static(optimizer_kind, scenario, result, decay_path)
        except Exception:  # recorded for the test to report; the next run still happens
            paddle.disable_static()
            result[f"{run_key(decay_path, scenario)}/error"] = np.asarray(traceback.format_exc())
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adamwdl")
    parser.add_argument("--scenarios", default=None, help="comma-separated subset of " + ",".join(SCENARIOS))
    parser.add_argument(
        "--decay-paths", default=None, help="comma-separated subset of " + ",".join(DECAY_PATHS) + " (adamwdl only)"
    )
    parser.add_argument("--out", required=True, help="the .npz file to write")
    args = parser.parse_args(argv)
    scenarios = SCENARIOS if args.scenarios is None else tuple(args.scenarios.split(","))
    if args.decay_paths is not None:
        decay_paths = tuple(args.decay_paths.split(","))
    else:
        decay_paths = DECAY_PATHS if args.optimizer == "adamwdl" else ("fused",)
    result = run_mode(args.mode, args.optimizer, scenarios, decay_paths)
    np.savez(args.out, **result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
