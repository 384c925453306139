"""Each execution mode of docs/execution_modes.rst, as a user's script.

The page's dygraph, ``to_static`` and static-program blocks run at module
level (``to_static`` also inside a function, the optimizer then a closure
variable), one process each, on ``user_model.BertNamedLinear`` (12 layers
named as BERT's), with the page's optimizer settings (``weight_decay=0.01``,
``layerwise_decay=0.8``, ``n_layers=12``, decay only where
``apply_decay_param_fun`` says) and a ``LinearDecayWithWarmup`` schedule.
Every one is checked against the same float64 reference: the hand-derived
gradients and PaddleNLP's layer ratios ``0.8 ** (12 - i)`` for
``encoder.layers.i``, ``0.8 ** 13`` for the embeddings, 1 for the rest.
The legacy static program (``FLAGS_enable_pir_api=0``) is the PIR script
unchanged, as the page says. The page's static block itself (the built-in
TinyBERT) runs as well.
"""
from __future__ import annotations

import textwrap

import pytest

import float64_reference as reference
import harness
from reference_adamw import layer_ratio

STEPS = 6
PEAK_LR = 0.05
WARMUP = 0.2
N_LAYERS = 12
DECAY, WEIGHT_DECAY = 0.8, 0.01


def expected_lrs():
    """``LinearDecayWithWarmup(PEAK_LR, STEPS, warmup=0.2)``: ``floor(0.2 * 6) = 1``
    warm-up step ``lr * s / 1``, then ``lr * (6 - s) / (6 - 1)``."""
    warmup = int(WARMUP * STEPS)
    return [PEAK_LR * (s / warmup if s < warmup else (STEPS - s) / (STEPS - warmup)) for s in range(STEPS)]


def reference_weights(ratio=lambda name: layer_ratio(name, DECAY, N_LAYERS)):
    return reference.train(
        reference_batches(), expected_lrs(), n_layers=N_LAYERS, ratio=ratio,
        weight_decay=lambda step, name: WEIGHT_DECAY if name.endswith(".weight") else 0.0,
    )


def reference_batches():
    from user_model import make_batches

    return make_batches(STEPS)


SETUP = f"""
import paddle
from paddle_llrd import AdamWDL, LinearDecayWithWarmup
from record import save
from user_model import BertNamedLinear, loss_fn, make_batches, weights

model = BertNamedLinear(n_layers=12)
scheduler = LinearDecayWithWarmup({PEAK_LR}, total_steps={STEPS}, warmup={WARMUP})
decay_names = {{p.name for n, p in model.named_parameters() if n.endswith(".weight")}}
"""

DYGRAPH = harness.from_doc(
    "mode-dygraph", "mode-dygraph",
    prelude=SETUP + f"""
loader = [{{"x": paddle.to_tensor(x), "y": paddle.to_tensor(y)}} for x, y in make_batches({STEPS})]
""",
    epilogue="save(weights=weights(model))",
)

OPTIMIZER = """
name_dict = {p.name: n for n, p in model.named_parameters()}
opt = AdamWDL(learning_rate=scheduler, parameters=model.parameters(),
              weight_decay=0.01, layerwise_decay=0.8, n_layers=12,
              name_dict=name_dict,
              apply_decay_param_fun=lambda name: name in decay_names)
"""
TRAIN_LOOP = f"""
for x, y in make_batches({STEPS}):
    train_step(paddle.to_tensor(x), paddle.to_tensor(y))
    scheduler.step()
"""
TO_STATIC_GLOBAL = harness.from_doc(
    "mode-to-static-global", "mode-to-static",
    prelude=SETUP + OPTIMIZER,
    epilogue=TRAIN_LOOP + "save(weights=weights(model))",
)


def _inside_main(code: str) -> str:
    """The same program as the body of ``main()``: every global becomes a local
    (the optimizer a closure variable of the decorated step)."""
    imports = [line for line in code.splitlines() if line.startswith(("import ", "from "))]
    body = [line for line in code.splitlines() if not line.startswith(("import ", "from "))]
    return "\n".join(imports) + "\n\n\ndef main():\n" + textwrap.indent("\n".join(body), "    ") + \
        "\n    return model\n\n\nsave(weights=weights(main()))\n"


TO_STATIC_CLOSURE = harness.UserScript(
    "mode-to-static-closure",
    code=_inside_main(textwrap.dedent(SETUP + OPTIMIZER) + "\n" + harness.doc_block("mode-to-static").code
                      + TRAIN_LOOP),
)

STATIC_PROGRAM = f"""
import numpy as np
import paddle
from paddle_llrd import AdamWDL, LinearDecayWithWarmup
from record import save
from user_model import N_FEATURES, N_OUTPUTS, BertNamedLinear, loss_fn, make_batches

steps = {STEPS}
batches = [{{"x": x, "y": y}} for x, y in make_batches(steps)]

paddle.enable_static()
main_program, startup_program = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main_program, startup_program):
    model = BertNamedLinear(n_layers=12)
    x = paddle.static.data("x", [-1, N_FEATURES], "float32")
    y = paddle.static.data("y", [-1, N_OUTPUTS], "float32")
    loss = loss_fn(model(x), y)
    scheduler = LinearDecayWithWarmup({PEAK_LR}, total_steps=steps, warmup={WARMUP})
    name_dict = {{p.name: n for n, p in model.named_parameters()}}
    decay_names = {{p.name for n, p in model.named_parameters() if n.endswith(".weight")}}
    AdamWDL(learning_rate=scheduler, parameters=model.parameters(),
            weight_decay=0.01, layerwise_decay=0.8, n_layers=12, name_dict=name_dict,
            apply_decay_param_fun=lambda name: name in decay_names).minimize(loss)
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup_program)
for batch in batches:
    exe.run(main_program, feed=batch, fetch_list=[loss])
    scheduler.step()

scope = paddle.static.global_scope()
save(pir=paddle.framework.use_pir_api(),
     weights={{n: np.array(scope.find_var(p.name).get_tensor()) for n, p in model.named_parameters()}})
"""
STATIC_PIR = harness.UserScript("mode-static-pir", code=STATIC_PROGRAM)
STATIC_LEGACY = harness.UserScript("mode-static-legacy", code=STATIC_PROGRAM, env={"FLAGS_enable_pir_api": "0"})

# The page's own static block, on the built-in TinyBERT (PIR only: the legacy
# program has no attention operators on Paddle's CPU build, as the page says).
STATIC_DOC_BLOCK = harness.from_doc(
    "mode-static-doc-block", "mode-static",
    prelude="""
import numpy as np
import paddle
from paddle_llrd import AdamWDL, LinearDecayWithWarmup
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
from record import save

config = TinyBertConfig(vocab_size=32, num_hidden_layers=2, hidden_size=16, num_attention_heads=2,
                        intermediate_size=32)
seq_len, steps = 8, 5
rng = np.random.RandomState(0)
batches = [{"input_ids": rng.randint(0, 32, (4, seq_len)).astype("int64"),
            "labels": rng.randint(0, 2, (4,)).astype("int64")} for _ in range(steps)]
""",
    epilogue="""
ops = [op.name() for op in main_program.global_block().ops]
save(last_epoch=scheduler.last_epoch, lr=scheduler(), n_params=len(name_dict),
     n_adamw=sum(name.endswith("adamw_") or name.endswith("adamw") for name in ops))
""",
)

harness.register(DYGRAPH, TO_STATIC_GLOBAL, TO_STATIC_CLOSURE, STATIC_PIR, STATIC_LEGACY, STATIC_DOC_BLOCK)


@pytest.mark.parametrize("name", [
    pytest.param("mode-dygraph", marks=pytest.mark.user_path("mode-dygraph")),
    pytest.param("mode-to-static-global", marks=pytest.mark.user_path("mode-to-static-global")),
    pytest.param("mode-to-static-closure", marks=pytest.mark.user_path("mode-to-static-closure")),
    pytest.param("mode-static-pir", marks=pytest.mark.user_path("mode-static-pir")),
    pytest.param("mode-static-legacy", marks=pytest.mark.user_path("mode-static-legacy")),
])
def test_mode_trains_as_the_float64_reference(user_path, name):
    result = user_path(name).check()
    if name.startswith("mode-static"):
        assert bool(result.saved["pir"]) == (name == "mode-static-pir"), "the program is not of the IR named"
    reference.assert_trained_like(result.group("weights"), reference_weights(), name, N_LAYERS)


def test_reference_tells_the_layer_ratios_apart():
    """Without the layer ratios (plain AdamW) the embeddings and the lowest
    layers would be off by far more than the tolerance."""
    with_ratios, without = reference_weights(), reference_weights(ratio=lambda name: 1.0)
    for name in ("embeddings.weight", "encoder.layers.0.weight", "encoder.layers.10.bias"):
        reference.assert_differs(without, with_ratios, name, N_LAYERS)


@pytest.mark.user_path("mode-static-doc-block")
def test_static_doc_block_runs_on_tiny_bert(user_path):
    saved = user_path("mode-static-doc-block").check().saved
    assert int(saved["last_epoch"]) == 5
    assert float(saved["lr"]) == pytest.approx(1e-2 * (5 - 5) / (5 - 0), abs=1e-12)  # warmup floor(0.5) = 0
    # minimize put one Adam update per parameter into the program
    assert int(saved["n_adamw"]) == int(saved["n_params"]) > 0
