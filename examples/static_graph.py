"""Static-graph training with AdamWDL: a PIR program, ``minimize`` and an ``Executor``.

Run::

    python examples/static_graph.py               # 40 steps
    python examples/static_graph.py --steps 4     # a quick check

This is Paddle 3's default PIR program. The legacy program
(``FLAGS_enable_pir_api=0``) cannot build this model on Paddle 3.3.1: there,
``paddle.matmul``, ``tanh`` and ``gelu`` raise ``TypeError: ... must be Value,
but got Variable`` for Python callers, so the attention layers fail;
``tests/helpers/mode_runner.py`` trains an attention-free model in that mode (see
docs/execution_modes.rst).

What differs from dygraph:

1. Build the model *inside* ``paddle.static.program_guard``; then build
   ``name_dict`` from that model's ``named_parameters()``. In a program,
   ``param.name`` is the variable name (``linear_3.w_0``), which is what
   ``name_dict`` maps to the structured name (``bert.encoder.layers.1...``)
   that layer-wise decay reads.
2. ``AdamWDL(...).minimize(loss)`` appends the backward pass, the decoupled
   weight decay (as ops: ``p * (1 - lr_p * coeff)``) and the Adam update to the
   program once; ``exe.run`` then performs one train step.
3. An ``LRScheduler`` passed as ``learning_rate`` is read by the ``Executor``
   before every run; call ``scheduler.step()`` after each ``exe.run``.
"""
from __future__ import annotations

import argparse
from typing import List, Optional, Sequence, Tuple

import numpy as np
import paddle

from paddle_llrd import AdamWDL, LinearDecayWithWarmup, no_decay_parameter_names
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification


def synthetic_batch(rng: np.random.RandomState, config: TinyBertConfig, batch_size: int, seq_len: int):
    """A learnable task: the label is the parity of the first token."""
    input_ids = rng.randint(0, config.vocab_size, (batch_size, seq_len)).astype("int64")
    return {"input_ids": input_ids, "labels": (input_ids[:, 0] % 2).astype("int64")}


def train(
    steps: int = 40,
    batch_size: int = 16,
    seq_len: int = 8,
    seed: int = 0,
) -> List[Tuple[float, float]]:
    """Train a tiny BERT in a static program; returns ``(lr, loss)`` per step."""
    paddle.enable_static()
    paddle.seed(seed)
    config = TinyBertConfig(
        vocab_size=16, num_hidden_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32
    )
    main_program, startup_program = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main_program, startup_program):
        model = TinyBertForSequenceClassification(config)
        input_ids = paddle.static.data("input_ids", [-1, seq_len], "int64")
        labels = paddle.static.data("labels", [-1], "int64")
        loss = paddle.nn.functional.cross_entropy(model(input_ids), labels)

        scheduler = LinearDecayWithWarmup(learning_rate=1e-2, total_steps=steps, warmup=0.1)
        name_dict = {param.name: name for name, param in model.named_parameters()}
        no_decay = no_decay_parameter_names(model)  # biases and norms, as PaddleNLP's Trainer
        optimizer = AdamWDL(
            learning_rate=scheduler,
            parameters=model.parameters(),
            weight_decay=0.01,
            apply_decay_param_fun=lambda param_name: param_name not in no_decay,
            layerwise_decay=0.8,
            n_layers=config.num_hidden_layers,
            name_dict=name_dict,
        )
        optimizer.minimize(loss)

    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup_program)
    rng = np.random.RandomState(seed)
    history = []
    for _ in range(steps):
        lr = scheduler()
        (loss_value,) = exe.run(
            main_program, feed=synthetic_batch(rng, config, batch_size, seq_len), fetch_list=[loss]
        )
        history.append((float(lr), float(loss_value)))
        scheduler.step()
    paddle.disable_static()
    return history


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    history = train(steps=args.steps, batch_size=args.batch_size)
    ir = "PIR" if paddle.framework.use_pir_api() else "legacy"
    for step, (lr, loss) in enumerate(history):
        print(f"step {step:3d}  lr {lr:.6f}  loss {loss:.4f}")
    print(f"{ir} program, {args.steps} steps: loss {history[0][1]:.4f} -> {history[-1][1]:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
