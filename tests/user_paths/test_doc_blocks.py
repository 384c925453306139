"""Every Python block of README.md, README_cn.md and docs/*.rst runs as a
user's script, one process each, and gives the numbers its page states.

A block is found by its ``user-path`` marker (harness.py). A block that is a
fragment gets what the page leaves to the reader (``model``, ``loader``,
``loss_fn``: ``user_model.BertNamedLinear`` and its batches) before it, at
module level, and the test's read-back after it. Training blocks are checked
against the float64 reference (float64_reference.py) with the page's
hyperparameters written out here; schedule blocks against the formulas of
tests/helpers/schedule_formulas.py; the quick starts against the end state they
promise. The execution-mode blocks are in test_modes.py.
"""
from __future__ import annotations

import ast
import math

import numpy as np
import pytest

import float64_reference as reference
import harness
import schedule_formulas as formulas
from reference_adamw import layer_ratio
from user_model import make_batches

# Blocks that need another virtualenv run there, by the test named here.
RUN_ELSEWHERE = {"paddleformers-trainer": "tests_paddleformers/test_doc_configs.py"}

STEPS = 5
USER_MODEL = """
import paddle
from record import save
from user_model import BertNamedLinear, loss_fn, make_batches, weights

model = BertNamedLinear(n_layers={n_layers}, init_scale={init_scale})
loader = [{{"input_ids": paddle.to_tensor(x), "labels": paddle.to_tensor(y)}} for x, y in make_batches({steps})]
"""


def user_model(n_layers: int = 12, init_scale: float = 0.5) -> str:
    return USER_MODEL.format(n_layers=n_layers, init_scale=init_scale, steps=STEPS)


QUICKSTART_READ_BACK = """
from record import save
save(last_epoch=scheduler.last_epoch, lr=optimizer.get_lr(), ema_updates=ema.num_updates,
     ratios={row.name: row.ratio for row in optimizer.param_lr_table()})
"""

# The documented blocks that build ``opt`` over the user model leave the loop to the reader.
TRAIN_OPT_OVER_LOADER = """
for batch in loader:
    loss = loss_fn(model(batch["input_ids"]), batch["labels"])
    loss.backward()
    opt.step()
    opt.clear_grad()
"""

SCHEDULE_READ_BACK = """
from record import save
lrs = []
for _ in range(1100):
    lrs.append(scheduler())
    scheduler.step()
save(lrs=lrs)
"""

LLAMA_LAYERS = 3
# get_scheduler("inverse_sqrt") for 10,000 steps, then a 40,000-step cosine, and past its end.
SEQUENTIAL_STEPS = 50_100
# Better, better, then flat: the lr halves after each three calls without improvement.
PLATEAU_METRICS = [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.4, 0.4]

# Updates of ~1e-7 (lr 2e-5, warmup from 0) are resolved on float32 weights of ~1e-3.
SMALL_INIT = 1e-3

SCRIPTS = [
    harness.from_doc("readme-quickstart", "readme-quickstart", epilogue=QUICKSTART_READ_BACK),
    harness.from_doc("quickstart", "quickstart", epilogue=QUICKSTART_READ_BACK),
    harness.from_doc("adamwdl-loop", "adamwdl-loop", prelude=user_model(init_scale=SMALL_INIT),
                     epilogue="save(weights=weights(model))"),
    harness.from_doc(
        "adamwdl-set-param-lr-fun", "adamwdl-set-param-lr-fun",
        prelude="""
            import paddle
            from paddle_llrd import AdamWDL
            from record import save
            from user_model import loss_fn, make_batches

            linear = paddle.nn.Linear(4, 3)
            init = {n: p.numpy().copy() for n, p in linear.named_parameters()}
        """,
        epilogue=f"""
            for x, y in make_batches({STEPS}):
                loss = loss_fn(linear(paddle.to_tensor(x)), paddle.to_tensor(y))
                loss.backward()
                opt.step()
                opt.clear_grad()
            save(init=init, weights={{n: p.numpy() for n, p in linear.named_parameters()}})
        """,
    ),
    harness.from_doc(
        "adamwdl-param-lr-table", "adamwdl-param-lr-table",
        prelude=user_model(n_layers=2) + """
from paddle_llrd import AdamWDL
opt = AdamWDL(learning_rate=0.1, parameters=model.parameters(), weight_decay=0.01,
              layerwise_decay=0.5, n_layers=2,
              name_dict={p.name: n for n, p in model.named_parameters()},
              apply_decay_param_fun=lambda name: not name.endswith(".b_0"))
""",
    ),
    harness.from_doc(
        "ema-average-parameters", "ema-average-parameters",
        prelude=f"""
            import paddle
            from paddle_llrd import ExponentialMovingAverage
            from record import save
            from user_model import BertNamedLinear, loss_fn, make_batches, weights

            model = BertNamedLinear(n_layers=2)
            optimizer = paddle.optimizer.AdamW(learning_rate=0.1, parameters=model.parameters())
            ema = ExponentialMovingAverage(model, decay=0.5)
            ema.register()
            history = [weights(model)]
            for x, y in make_batches({STEPS}):
                loss_fn(model(paddle.to_tensor(x)), paddle.to_tensor(y)).backward()
                optimizer.step()
                optimizer.clear_grad()
                ema.update()
                history.append(weights(model))
            seen = {{}}

            def evaluate(model):
                seen.update(weights(model))
        """,
        epilogue="""
            save(seen=seen, after=weights(model),
                 **{f"history{i}": snapshot for i, snapshot in enumerate(history)})
        """,
    ),
    harness.from_doc(
        "ema-loop-and-checkpoint", "ema-loop-and-checkpoint",
        epilogue="""
            import numpy as np
            from record import save
            reloaded = state["ema"]
            save(num_updates=ema.num_updates, saved_updates=int(reloaded["num_updates"]),
                 shadow={n: t.numpy() for n, t in ema.state_dict()["shadow"].items()},
                 saved_shadow={n: np.asarray(t) for n, t in reloaded["shadow"].items()},
                 live={n: p.numpy() for n, p in model.named_parameters()})
        """,
    ),
    harness.from_doc(  # the page's imports block, then this one (it continues it), in one script
        "migration-adamwdl", "migration-adamwdl",
        prelude="""
            import paddle
            from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
            from record import save

            model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=3))
            total_steps = 100
        """,
        epilogue=f"""
            for step in range({STEPS}):
                loss = paddle.nn.functional.cross_entropy(
                    model(paddle.randint(1, 128, [4, 8])), paddle.randint(0, 2, [4]))
                loss.backward()
                optimizer.step()
                optimizer.clear_grad()
                scheduler.step()
            table = optimizer.param_lr_table()
            save(lr=optimizer.get_lr(), ratios={{row.name: row.ratio for row in table}},
                 decayed={{row.name: row.decayed for row in table}})
        """,
    ),
    harness.from_doc("layer-map-adamwdl", "layer-map-adamwdl", prelude=user_model(),
                     epilogue=TRAIN_OPT_OVER_LOADER + """
save(n_layers=layer_map.n_layers, weights=weights(model))
"""),
    harness.from_doc("param-groups-adamw", "param-groups-adamw", prelude=user_model(),
                     epilogue=TRAIN_OPT_OVER_LOADER + "save(weights=weights(model))\n"),
    harness.UserScript("param-groups-static", code=f"""
import numpy as np
import paddle
from paddle_llrd import layer_decay_param_groups
from record import save
from user_model import N_FEATURES, N_OUTPUTS, BertNamedLinear, loss_fn, make_batches

paddle.enable_static()
main_program, startup_program = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main_program, startup_program):
    model = BertNamedLinear(n_layers=12)
    x = paddle.static.data("x", [-1, N_FEATURES], "float32")
    y = paddle.static.data("y", [-1, N_OUTPUTS], "float32")
    loss = loss_fn(model(x), y)
{harness.indented_block("param-groups-static", 4)}
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup_program)
for batch_x, batch_y in make_batches({STEPS}):
    exe.run(main_program, feed={{"x": batch_x, "y": batch_y}}, fetch_list=[loss])
scope = paddle.static.global_scope()
save(weights={{n: np.array(scope.find_var(p.name).get_tensor()) for n, p in model.named_parameters()}})
"""),
    harness.from_doc("schedule-cosine-loop", "schedule-cosine-loop", epilogue="""
from record import save
save(last_epoch=scheduler.last_epoch, lr=scheduler(), lr_seen=optimizer.get_lr())
"""),
    harness.from_doc("get-scheduler-cosine", "get-scheduler-cosine", epilogue=SCHEDULE_READ_BACK),
    harness.from_doc(
        "get-scheduler-hugging-face", "get-scheduler-hugging-face",
        prelude="""
            import paddle
            applied = []  # the lr each optimizer.step() trains with, read as it starts
            paddle_step = paddle.optimizer.AdamW.step

            def recording_step(self):
                applied.append(self.get_lr())
                return paddle_step(self)

            paddle.optimizer.AdamW.step = recording_step
        """,
        epilogue="""
            from record import save
            save(applied=applied, last_epoch=lr_scheduler.last_epoch, lr=optimizer.get_lr())
        """,
    ),
    harness.from_doc("get-scheduler-cosine-min-lr", "get-scheduler-cosine-min-lr",
                     prelude="from paddle_llrd import get_scheduler", epilogue=SCHEDULE_READ_BACK),
    harness.from_doc("get-scheduler-wsd", "get-scheduler-wsd",
                     prelude="from paddle_llrd import get_scheduler", epilogue=SCHEDULE_READ_BACK),
    harness.from_doc("get-scheduler-wsd-hugging-face", "get-scheduler-wsd-hugging-face",
                     prelude="from paddle_llrd import get_scheduler", epilogue=SCHEDULE_READ_BACK),
    harness.from_doc("register-scheduler", "register-scheduler", epilogue=SCHEDULE_READ_BACK),
    harness.from_doc("wd-schedule-loop", "wd-schedule-loop", prelude=user_model(init_scale=0.01),
                     epilogue="save(weights=weights(model))"),
    harness.from_doc(
        "wd-schedule-groups", "wd-schedule-groups",
        prelude=user_model(n_layers=2) + """
from paddle_llrd import AdamWDL, WeightDecaySchedule
no_decay_params = [p for n, p in model.named_parameters() if n.endswith(".bias")]
other_params = [p for n, p in model.named_parameters() if n.endswith(".weight")]
""",
        epilogue=TRAIN_OPT_OVER_LOADER + "save(weights=weights(model))\n",
    ),
    harness.from_doc(
        "adamwdl-make-layerwise-fn", "adamwdl-make-layerwise-fn",
        prelude=f"""
            import warnings
            import paddle
            import paddle_llrd
            from paddle_llrd import AdamWDL
            from record import save
            from user_model import LlamaNamedLinear, loss_fn, make_batches, weights

            model = LlamaNamedLinear(n_layers={LLAMA_LAYERS})
            # the fix must silence the constructor's "no encoder.layers.N" warning
            warnings.simplefilter("error", UserWarning)
        """,
        epilogue=f"""
            for x, y in make_batches({STEPS}):
                loss_fn(model(paddle.to_tensor(x)), paddle.to_tensor(y)).backward()
                opt.step()
                opt.clear_grad()
            save(n_layers=fn.n_layers, weights=weights(model))
        """,
    ),
    harness.from_doc("adamw-lr-ratio", "adamw-lr-ratio", epilogue=f"""
import numpy as np
from record import save

rng = np.random.RandomState(0)
batches = [(rng.standard_normal((16, 8)).astype("float32"), rng.standard_normal((16, 2)).astype("float32"))
           for _ in range({STEPS})]
init = {{n: p.numpy().copy() for n, p in model.named_parameters()}}
for x, y in batches:
    loss = ((model(paddle.to_tensor(x)) - paddle.to_tensor(y)) ** 2).mean()
    loss.backward()
    opt.step()
    opt.clear_grad()
save(init=init, weights={{n: p.numpy() for n, p in model.named_parameters()}},
     x=np.stack([x for x, _ in batches]), y=np.stack([y for _, y in batches]))
"""),
    harness.from_doc(
        "layer-grad-norms", "layer-grad-norms",
        prelude=f"""
            import paddle
            from record import save
            from user_model import LlamaNamedLinear, loss_fn, make_batches

            model = LlamaNamedLinear(n_layers={LLAMA_LAYERS})
            optimizer = paddle.optimizer.AdamW(learning_rate=1e-3, parameters=model.parameters())
            x, y = make_batches(1)[0]
            loss = loss_fn(model(paddle.to_tensor(x)), paddle.to_tensor(y))
        """,
        epilogue="save(norms=norms, groups=list(norms))",
    ),
    harness.from_doc("get-scheduler-lr-warmup-init", "get-scheduler-lr-warmup-init",
                     prelude="from paddle_llrd import get_scheduler", epilogue=SCHEDULE_READ_BACK),
    harness.from_doc("sequential-schedule", "sequential-schedule", epilogue=f"""
from record import save
lrs = []
for _ in range({SEQUENTIAL_STEPS}):
    lrs.append(scheduler())
    scheduler.step()
save(lrs=lrs)
"""),
    harness.from_doc(
        "reduce-lr-on-plateau", "reduce-lr-on-plateau",
        prelude=f"""
            import paddle
            from paddle_llrd import AdamWDL, get_scheduler
            from record import save
            from user_model import BertNamedLinear, loss_fn, make_batches, weights

            model = BertNamedLinear(n_layers=12)
            name_dict = {{p.name: n for n, p in model.named_parameters()}}
            epochs = {len(PLATEAU_METRICS)}
            batches = iter(make_batches(epochs))
            lrs_seen = []

            def train_one_epoch(model, optimizer):
                x, y = next(batches)  # one step an epoch, to keep the run short
                lrs_seen.append(optimizer.get_lr())
                loss_fn(model(paddle.to_tensor(x)), paddle.to_tensor(y)).backward()
                optimizer.step()
                optimizer.clear_grad()

            metrics = iter({PLATEAU_METRICS!r})  # an eval loss that stops improving

            def evaluate(model):
                return next(metrics)
        """,
        epilogue="save(lrs_seen=lrs_seen, last_lr=scheduler.last_lr, weights=weights(model))",
    ),
]
harness.register(*SCRIPTS)
TESTED_HERE = {script.name for script in SCRIPTS} | {"mode-dygraph", "mode-to-static", "mode-static"}


def test_every_python_block_is_a_user_path():
    """A new Python block in README or docs/ needs a marker and a test here (or
    in test_modes.py, or in the virtualenv its Trainer needs)."""
    blocks = harness.doc_blocks()
    unmarked = [block.sources[0] for block in blocks if block.marker is None]
    assert not unmarked, f"Python blocks without a `user-path:` marker: {unmarked}"
    markers = {block.marker for block in blocks}
    run = TESTED_HERE | set(RUN_ELSEWHERE)
    run |= {block.marker for marker in run & markers for block in harness.doc_chain(marker)}  # run in its chain
    untested = markers - run
    assert not untested, f"markers no user-path test runs: {sorted(untested)}"
    for marker, test_file in RUN_ELSEWHERE.items():
        assert (harness.ROOT / test_file).exists(), (marker, test_file)
    for marker in markers:
        harness.doc_block(marker)  # a marker on two pages marks one program


def test_a_block_that_continues_another_follows_it_on_its_page_and_says_so():
    """docs/design_rules.rst "Tests run the code as users run it": a block that needs an earlier block's
    names is marked ``(continues EARLIER)``, comes after EARLIER on the same page, and the text just
    before it tells the reader it continues; the tests run the page's blocks in order in one process."""
    blocks = harness.doc_blocks()
    continuing = [block for block in blocks if block.continues is not None]
    assert continuing, "no block continues another"
    for block in continuing:
        source, line = block.sources[0].rsplit(":", 1)
        earlier = [other for other in blocks if other.marker == block.continues
                   and other.sources[0].rsplit(":", 1)[0] == source]
        assert earlier and int(earlier[0].sources[0].rsplit(":", 1)[1]) < int(line), block.sources
        text = (harness.ROOT / source).read_text(encoding="utf-8").splitlines()[: int(line) - 1]
        before = " ".join(text[-8:]).lower()
        assert "continu" in before, f"{block.sources[0]}: the text before the block does not say it continues"


def _user_path_test(*names):
    return pytest.mark.user_path(*names)


@pytest.mark.parametrize("name", [
    pytest.param("readme-quickstart", marks=_user_path_test("readme-quickstart")),
    pytest.param("quickstart", marks=_user_path_test("quickstart")),
])
def test_quickstart_ends_where_it_says(user_path, name):
    """100 steps of ``get_scheduler("linear", 1e-3, 10, 100)``: the lr is
    ``1e-3 * (100 - 100) / 90 = 0``; one EMA update per step; layer ``i`` of
    4 learns at ``0.8 ** (4 - i)``, the embeddings at ``0.8 ** 5``."""
    saved = user_path(name).check()
    assert int(saved.saved["last_epoch"]) == 100
    assert float(saved.saved["lr"]) == 0.0
    assert int(saved.saved["ema_updates"]) == 100
    ratios = saved.group("ratios")
    for structured_name, ratio in ratios.items():
        if ".encoder.layers." in structured_name:
            layer = int(structured_name.split(".encoder.layers.")[1].split(".")[0])
            assert float(ratio) == pytest.approx(0.8 ** (4 - layer)), structured_name
        elif "embeddings" in structured_name:
            assert float(ratio) == pytest.approx(0.8 ** 5), structured_name
    assert any(".encoder.layers.0." in name for name in ratios)
    # what the block prints, so the reader sees it worked: the step and update counts, each layer id's ratio
    steps, by_layer = harness.lines_matching(saved.stdout, r"^(\d+) steps, EMA of (\d+) updates$"), \
        harness.lines_matching(saved.stdout, r"^lr ratio by layer id: (\{.*\})$")
    assert steps == [("100", "100")], saved.stdout
    printed = ast.literal_eval(by_layer[0][0])
    assert printed == {k: round(0.8 ** (5 - k), 3) for k in range(6)}, printed


@_user_path_test("migration-adamwdl")
def test_migrated_script_keeps_paddlenlps_numbers(user_path):
    """PaddleNLP's ratios (``0.8 ** (3 - i)`` for ``encoder.layers.i``,
    ``0.8 ** 4`` for the embeddings, 1 elsewhere), decay for every name
    without ``bias`` or ``norm``, and ``LinearDecayWithWarmup(5e-5, 100, 0.1)``
    at step 5: ``5e-5 * 5 / 10``."""
    result = user_path("migration-adamwdl").check()
    assert float(result.saved["lr"]) == pytest.approx(5e-5 * STEPS / 10, rel=1e-12)
    ratios, decayed = result.group("ratios"), result.group("decayed")
    assert any(".encoder.layers.2." in name for name in ratios)
    for name, ratio in ratios.items():
        if ".encoder.layers." in name:
            expected = 0.8 ** (3 - int(name.split(".encoder.layers.")[1].split(".")[0]))
        else:
            expected = 0.8 ** 4 if "embeddings" in name else 1.0
        assert float(ratio) == pytest.approx(expected), name
        assert bool(decayed[name]) == _no_bias_or_norm(name), name


def _no_bias_or_norm(name: str) -> bool:
    return not ("bias" in name or "norm" in name)


@_user_path_test("adamwdl-loop")
def test_adamwdl_loop_matches_float64(user_path):
    """adamwdl.rst's loop: ``LinearDecayWithWarmup(2e-5, 1000, warmup=0.1)``,
    decay 0.01 except biases and norms, global-norm clip 1.0, ratios 0.8 over 12 layers."""
    result = user_path("adamwdl-loop").check()
    lrs = [formulas.linear(2e-5, 100, 1000, s) for s in range(STEPS)]
    expected = reference.train(
        make_batches(STEPS), lrs, n_layers=12, ratio=lambda name: layer_ratio(name, 0.8, 12),
        weight_decay=lambda step, name: 0.01 if _no_bias_or_norm(name) else 0.0, clip_norm=1.0,
        init_scale=SMALL_INIT,
    )
    reference.assert_trained_like(result.group("weights"), expected, "adamwdl-loop", 12, init_scale=SMALL_INIT)


@_user_path_test("adamwdl-set-param-lr-fun")
def test_set_param_lr_fun_returning_none(user_path):
    """``simple_lr_setting``: weights at ``1e-4 * 0.8 ** 0.5``, the bias at 1e-4;
    AdamWDL's default decay 0.01 on every parameter."""
    result = user_path("adamwdl-set-param-lr-fun").check()
    init = {name: value.astype(np.float64) for name, value in result.group("init").items()}
    states = {name: reference.AdamWState.zeros_like(value) for name, value in init.items()}
    params = dict(init)
    for x, y in make_batches(STEPS):
        prediction = x.astype(np.float64) @ params["weight"] + params["bias"]
        d_prediction = 2.0 * (prediction - y) / prediction.size
        grads = {"weight": x.T @ d_prediction, "bias": d_prediction.sum(axis=0)}
        for name in params:
            ratio = 0.8 ** 0.5 if name == "weight" else 1.0
            params[name], states[name] = reference.adamw_update(
                params[name], grads[name], states[name], lr=1e-4 * ratio, decay_lr=1e-4, coeff=0.01)
    for name, value in result.group("weights").items():
        change, expected_change = value - init[name], params[name] - init[name]
        np.testing.assert_allclose(change, expected_change, rtol=0, atol=1e-3 * np.abs(expected_change).max(),
                                   err_msg=name)


@_user_path_test("adamwdl-param-lr-table")
def test_param_lr_table_prints_the_documented_fields(user_path):
    """One printed row per parameter: layer id 0 for the embeddings, ``i + 1``
    for ``encoder.layers.i``, 3 for the rest; ratio ``0.5 ** (3 - layer_id)``;
    lr ``0.1 * ratio``; decayed unless a bias; weight decay 0.01 or 0.0."""
    stdout = user_path("adamwdl-param-lr-table").check().stdout
    rows = harness.lines_matching(stdout, r"^(\S+)\s+(\d+)\s+([\d.]+) ([\d.e+-]+) (True|False)\s+([\d.]+)$")
    names = [row[0] for row in rows]
    assert names == reference.parameter_names(2), stdout
    for name, layer_id, ratio, lr, decayed, weight_decay in rows:
        expected_id = 0 if name.startswith("embeddings") else (
            int(name.split(".")[2]) + 1 if name.startswith("encoder.layers.") else 3)
        assert int(layer_id) == expected_id, name
        assert float(ratio) == pytest.approx(0.5 ** (3 - expected_id), abs=5e-5), name
        assert float(lr) == pytest.approx(0.1 * 0.5 ** (3 - expected_id), rel=1e-3), name
        assert decayed == str(name.endswith(".weight")), name
        assert float(weight_decay) == (0.01 if name.endswith(".weight") else 0.0), name


@_user_path_test("ema-average-parameters")
def test_average_parameters_evaluates_the_average_then_restores(user_path):
    """The float64 average with ``decay=0.5`` (no warm-up: the default) of the
    weights after each step is what ``evaluate`` sees; the live weights are
    back after the block."""
    result = user_path("ema-average-parameters").check()
    history = [result.group(f"history{i}") for i in range(STEPS + 1)]
    average = {name: value.astype(np.float64) for name, value in history[0].items()}
    for snapshot in history[1:]:
        d = 0.5
        average = {name: d * average[name] + (1 - d) * snapshot[name] for name in average}
    for name, value in result.group("seen").items():
        np.testing.assert_allclose(value, average[name], rtol=1e-5, atol=1e-6, err_msg=name)
    for name, value in result.group("after").items():
        np.testing.assert_array_equal(value, history[-1][name], err_msg=name)
    assert any(not np.allclose(average[name], history[-1][name], atol=1e-4) for name in average)


@_user_path_test("ema-loop-and-checkpoint")
def test_ema_checkpoint_round_trip(user_path):
    result = user_path("ema-loop-and-checkpoint").check()
    assert int(result.saved["num_updates"]) == int(result.saved["saved_updates"]) == 100
    shadow, saved_shadow, live = result.group("shadow"), result.group("saved_shadow"), result.group("live")
    assert sorted(shadow) == sorted(saved_shadow) and shadow
    for name in shadow:
        np.testing.assert_array_equal(shadow[name], saved_shadow[name], err_msg=name)
    # the averaged weights are not the live ones after 100 AdamW steps at decay 0.99
    assert any(not np.allclose(shadow[name], live[name], atol=1e-6) for name in shadow if name in live)


def _layer_id(name: str, n_layers: int = 12) -> int:
    if name.startswith("embeddings"):
        return 0
    if name.startswith("encoder.layers."):
        return int(name.split(".")[2]) + 1
    return n_layers + 1


@_user_path_test("layer-map-adamwdl")
def test_layer_map_with_adamwdl(user_path):
    """``r = 0.85 ** (n_layers + 1 - k)`` with ``n_layers`` = 12 counted from
    the names, lr 1e-4, AdamWDL's default decay 0.01 on every parameter."""
    result = user_path("layer-map-adamwdl").check()
    assert int(result.saved["n_layers"]) == 12
    expected = reference.train(
        make_batches(STEPS), [1e-4] * STEPS, n_layers=12, ratio=lambda name: 0.85 ** (13 - _layer_id(name)),
        weight_decay=lambda step, name: 0.01,
    )
    reference.assert_trained_like(result.group("weights"), expected, "layer-map-adamwdl", 12)


def _param_groups_reference(weight_decay_rule):
    return reference.train(
        make_batches(STEPS), [1e-3] * STEPS, n_layers=12, lr_scale=lambda name: 0.75 ** (13 - _layer_id(name)),
        weight_decay=weight_decay_rule,
    )


@_user_path_test("param-groups-adamw")
def test_param_groups_with_paddle_adamw(user_path):
    """Group lr ``1e-3 * 0.75 ** (13 - k)``; decay 0.05 for the 2-D weights,
    none for biases (at most one dimension). In ``paddle.optimizer.AdamW`` a
    group's lr scales the decay too (``1 - lr_group * 0.05``)."""
    result = user_path("param-groups-adamw").check()
    expected = _param_groups_reference(lambda step, name: 0.05 if name.endswith(".weight") else 0.0)
    reference.assert_trained_like(result.group("weights"), expected, "param-groups-adamw", 12)


@_user_path_test("param-groups-static")
def test_param_groups_recipe_in_a_static_program(user_path):
    """layer_maps.rst's static recipe inside ``program_guard`` (PIR): the same
    numbers as the groups in dygraph."""
    result = user_path("param-groups-static").check()
    expected = _param_groups_reference(lambda step, name: 0.05 if name.endswith(".weight") else 0.0)
    reference.assert_trained_like(result.group("weights"), expected, "param-groups-static", 12)


@_user_path_test("schedule-cosine-loop")
def test_cosine_loop_ends_at_zero(user_path):
    """``CosineDecayWithWarmup(5e-5, 1000, warmup=0.1)`` after 1000 steps: the
    half cosine has reached 0, and the optimizer read the scheduler."""
    saved = user_path("schedule-cosine-loop").check().saved
    assert int(saved["last_epoch"]) == 1000
    expected = formulas.cosine(5e-5, 100, 1000, 1000)
    assert float(saved["lr"]) == pytest.approx(expected, abs=1e-15)
    assert float(saved["lr_seen"]) == pytest.approx(expected, abs=1e-15)


@_user_path_test("get-scheduler-hugging-face")
def test_hugging_faces_loop_trains_at_hugging_faces_lr_at_every_step(user_path):
    """Hugging Face's call with 2 hard-restart cycles over 1000 steps, 100 of warmup, from the optimizer's
    5e-5: each of the 1000 updates at Hugging Face's lr for its step, and the printed lr (that of the next
    step) too."""
    result = user_path("get-scheduler-hugging-face").check()

    def hugging_face(s):
        return formulas.hard_restarts(5e-5, 100, 1000, 2, s)

    applied = result.saved["applied"]
    np.testing.assert_allclose(applied, [hugging_face(s) for s in range(1000)], rtol=1e-9, atol=1e-15)
    assert int(result.saved["last_epoch"]) == 1000
    assert float(result.saved["lr"]) == hugging_face(1000) == 0.0
    printed = harness.lines_matching(result.stdout, r"^step (\d+): lr (\S+)$")
    assert [int(step) for step, _ in printed] == [0, 250, 500, 750]
    for step, lr in printed:
        assert float(lr) == pytest.approx(hugging_face(int(step) + 1), rel=1e-5), step


SCHEDULE_FORMULAS = {
    "get-scheduler-cosine": lambda s: formulas.cosine(5e-5, 100, 1000, s, cycles=0.5),
    "get-scheduler-cosine-min-lr": lambda s: formulas.cosine(5e-5, 100, 1000, s, cycles=0.5, min_lr=5e-6),
    "get-scheduler-wsd": lambda s: formulas.wsd(5e-5, 100, 1000, 300, "1-sqrt", 0.1, s),
    "get-scheduler-wsd-hugging-face": lambda s: formulas.hugging_face_wsd(
        5e-5, s, warmup=100, stable=600, decay=300, warmup_type="cosine", decay_type="1-sqrt", min_ratio=0.1),
    "register-scheduler": lambda s: 1e-3 * 0.7 ** (s // 100),
}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=_user_path_test(name)) for name in SCHEDULE_FORMULAS
])
def test_schedule_block_follows_its_formula(user_path, name):
    """1100 steps against the page's formula (past the end of training every
    schedule holds the value of its last step)."""
    lrs = user_path(name).check().saved["lrs"]
    expected = [SCHEDULE_FORMULAS[name](s) for s in range(len(lrs))]
    np.testing.assert_allclose(lrs, expected, rtol=1e-9, atol=1e-15)


def _cosine_wd(step: int, start: float, end: float, total: int) -> float:
    if step >= total:
        return end
    return start + (end - start) * 0.5 * (math.cos(math.pi * (1 - step / total)) + 1)


@_user_path_test("wd-schedule-loop")
def test_weight_decay_schedule_loop(user_path):
    """``LinearDecayWithWarmup(3e-4, 10_000, 0.01)`` and the cosine ramp
    ``0.01 -> 0.1`` over 10,000 steps on every parameter (no
    ``apply_decay_param_fun``), ratios 0.8 over 12 layers."""
    result = user_path("wd-schedule-loop").check()
    expected = reference.train(
        make_batches(STEPS), [formulas.linear(3e-4, 100, 10_000, s) for s in range(STEPS)], n_layers=12,
        ratio=lambda name: layer_ratio(name, 0.8, 12),
        weight_decay=lambda step, name: _cosine_wd(step, 0.01, 0.1, 10_000), init_scale=0.01,
    )
    reference.assert_trained_like(result.group("weights"), expected, "wd-schedule-loop", 12, init_scale=0.01)


@_user_path_test("wd-schedule-groups")
def test_weight_decay_schedule_with_a_fixed_group(user_path):
    """Default lr 0.001; biases fixed at decay 0, weights on the linear ramp
    ``0 -> 0.1`` over 5,000 steps (``WeightDecaySchedule``'s default style)."""
    result = user_path("wd-schedule-groups").check()
    expected = reference.train(
        make_batches(STEPS), [1e-3] * STEPS, n_layers=2,
        weight_decay=lambda step, name: 0.1 * step / 5000 if name.endswith(".weight") else 0.0,
    )
    reference.assert_trained_like(result.group("weights"), expected, "wd-schedule-groups", 2)


def test_references_tell_a_wrong_implementation_apart():
    """The float64 references above would fail an implementation that drops
    the layer ratios (the AdamWDL blocks) or the groups' lr scale (the
    parameter-group blocks): the difference is ten times the tolerance."""
    batches = make_batches(STEPS)
    lrs = [formulas.linear(2e-5, 100, 1000, s) for s in range(STEPS)]
    loop = dict(n_layers=12, weight_decay=lambda step, name: 0.01 if _no_bias_or_norm(name) else 0.0,
                clip_norm=1.0, init_scale=SMALL_INIT)
    with_ratios = reference.train(batches, lrs, ratio=lambda name: layer_ratio(name, 0.8, 12), **loop)
    without = reference.train(batches, lrs, **loop)
    for name in ("embeddings.weight", "encoder.layers.0.bias"):
        reference.assert_differs(without, with_ratios, name, 12, init_scale=SMALL_INIT)
    groups = _param_groups_reference(lambda step, name: 0.05 if name.endswith(".weight") else 0.0)
    unscaled = reference.train(batches, [1e-3] * STEPS, n_layers=12,
                               weight_decay=lambda step, name: 0.05 if name.endswith(".weight") else 0.0)
    reference.assert_differs(unscaled, groups, "encoder.layers.3.weight", 12)


def _llama_ratio(name: str, decay: float, n_layers: int) -> float:
    """adamwdl.rst's table on LLaMA names: ``d ** (L - i)`` in ``model.layers.i``,
    ``d ** (L + 1)`` for ``embed_tokens``, 1 for ``lm_head``."""
    if name.startswith("model.layers."):
        return decay ** (n_layers - int(name.split(".")[2]))
    return decay ** (n_layers + 1) if "embed_tokens" in name else 1.0


@_user_path_test("adamwdl-make-layerwise-fn")
def test_make_layerwise_fn_decays_llama_names(user_path):
    """The fix for LLaMA names: ``n_layers`` counted from ``model.layers.N``,
    ratios ``0.8 ** (L - i)`` (embeddings ``0.8 ** (L + 1)``, head 1) at lr
    1e-4, AdamWDL's default decay 0.01 on every parameter; no ``UserWarning``
    (the script turns them into errors). The default rule (every ratio 1 on
    these names) would fail the same check."""
    result = user_path("adamwdl-make-layerwise-fn").check()
    assert int(result.saved["n_layers"]) == LLAMA_LAYERS
    names = reference.llama_parameter_names(LLAMA_LAYERS)
    common = dict(n_layers=LLAMA_LAYERS, weight_decay=lambda step, name: 0.01, names=names)
    expected = reference.train(make_batches(STEPS), [1e-4] * STEPS,
                               ratio=lambda name: _llama_ratio(name, 0.8, LLAMA_LAYERS), **common)
    reference.assert_trained_like(result.group("weights"), expected, "adamwdl-make-layerwise-fn",
                                  LLAMA_LAYERS, names=names)
    undecayed = reference.train(make_batches(STEPS), [1e-4] * STEPS, **common)
    reference.assert_differs(undecayed, expected, "model.embed_tokens.weight", LLAMA_LAYERS, names=names)


def _two_linear_gradients(params, x, y):
    """MSE of ``Linear(8, 8)`` then ``Linear(8, 2)``, by hand."""
    hidden = x @ params["0.weight"] + params["0.bias"]
    out = hidden @ params["1.weight"] + params["1.bias"]
    d_out = 2.0 * (out - y) / out.size
    d_hidden = d_out @ params["1.weight"].T
    return {"0.weight": x.T @ d_hidden, "0.bias": d_hidden.sum(axis=0),
            "1.weight": hidden.T @ d_out, "1.bias": d_out.sum(axis=0)}


def _train_two_linear(result, ratio, decay_with_ratio):
    params = {name: value.astype(np.float64) for name, value in result.group("init").items()}
    states = {name: reference.AdamWState.zeros_like(value) for name, value in params.items()}
    for x, y in zip(result.saved["x"].astype(np.float64), result.saved["y"].astype(np.float64)):
        grads = _two_linear_gradients(params, x, y)
        for name in params:
            lr_p = 1e-3 * ratio(name)
            params[name], states[name] = reference.adamw_update(
                params[name], grads[name], states[name], lr=lr_p,
                decay_lr=lr_p if decay_with_ratio else 1e-3, coeff=0.01)
    return params


@_user_path_test("adamw-lr-ratio")
def test_adamw_lr_ratio_follows_paddles_adamw_step(user_path):
    """Paddle's ``adamw_step`` with ``lr_ratio``: ``lr_p = 1e-3 * 0.8 ** (1 - depth)``
    (0.8 for the first ``Linear``, 1 for the second) for the Adam step and the
    decay ``p * (1 - lr_p * 0.01)``, every parameter decayed, gradients of the
    two-layer MSE worked out by hand in float64. Neither the run without the
    ratio nor AdamWDL's decay (at ``1e-3``, not ``lr_p``) would pass."""
    result = user_path("adamw-lr-ratio").check()
    ratio = lambda name: 0.8 ** (1 - int(name.split(".")[0]))  # noqa: E731
    expected = _train_two_linear(result, ratio, decay_with_ratio=True)
    init = result.group("init")
    # float32 rounding of 5 steps, and tight enough to tell the decay at lr_p
    # from AdamWDL's decay at lr (5 steps of 1e-3 * 0.2 * 0.01 * |p|: ~20 times this)
    tolerance = {name: 2e-5 * np.abs(expected[name] - init[name]).max()
                 + 4 * np.finfo(np.float32).eps * np.abs(init[name]).max() for name in init}
    for name, value in result.group("weights").items():
        np.testing.assert_allclose(value, expected[name], rtol=0, atol=tolerance[name], err_msg=name)
    for wrong in (_train_two_linear(result, lambda name: 1.0, decay_with_ratio=True),
                  _train_two_linear(result, ratio, decay_with_ratio=False)):
        assert np.abs(wrong["0.weight"] - expected["0.weight"]).max() > 5 * tolerance["0.weight"]


@_user_path_test("layer-grad-norms")
def test_layer_grad_norms_are_the_norms_of_the_gradients(user_path):
    """The L2 norm of each group's float64 gradients at the initial weights
    (``embeddings`` = ``embed_tokens``, ``layer_i`` = ``model.layers.i``,
    ``head`` = ``lm_head``) and of all of them (``total``), in layer-id order."""
    result = user_path("layer-grad-norms").check()
    names = reference.llama_parameter_names(LLAMA_LAYERS)
    x, y = make_batches(1)[0]
    grads = reference.gradients(reference.initial_weights(LLAMA_LAYERS, names=names), x, y)

    def group(name):
        if name.startswith("model.layers."):
            return f"layer_{name.split('.')[2]}"
        return "embeddings" if "embed_tokens" in name else "head"

    squares = {}
    for name, grad in grads.items():
        squares[group(name)] = squares.get(group(name), 0.0) + float(np.sum(grad ** 2))
    expected = {"total": math.sqrt(sum(squares.values())), **{k: math.sqrt(v) for k, v in squares.items()}}
    assert list(result.saved["groups"]) == ["total", "embeddings"] + [
        f"layer_{i}" for i in range(LLAMA_LAYERS)] + ["head"]
    norms = result.group("norms")
    for name, value in expected.items():
        assert float(norms[name]) == pytest.approx(value, rel=1e-5), name


def _warmup_from(init: float, peak: float, warmup: int, s: int, after) -> float:
    """schedules.rst's ``init + (peak - init) * s / W`` for ``s < W``, else ``after(s)``."""
    return init + (peak - init) * s / warmup if s < warmup else after(s)


SCHEDULE_FORMULAS["get-scheduler-lr-warmup-init"] = lambda s: _warmup_from(
    5e-6, 5e-5, 100, s, lambda s: formulas.cosine(5e-5, 100, 1000, s))


@_user_path_test("get-scheduler-lr-warmup-init")
def test_lr_warmup_init_starts_the_warmup_above_zero(user_path):
    """``5e-6 + (5e-5 - 5e-6) * s / 100`` for ``s < 100``, then the cosine it
    has without ``lr_warmup_init`` (1100 steps, holding 0 past 1000)."""
    lrs = user_path("get-scheduler-lr-warmup-init").check().saved["lrs"]
    assert lrs[0] == pytest.approx(5e-6, rel=1e-12)
    expected = [SCHEDULE_FORMULAS["get-scheduler-lr-warmup-init"](s) for s in range(len(lrs))]
    np.testing.assert_allclose(lrs, expected, rtol=1e-9, atol=1e-15)


@_user_path_test("sequential-schedule")
def test_sequential_schedule_counts_each_stage_from_its_milestone(user_path):
    """``lr(s) = lr_0(s)`` for ``s < 10000`` (``inverse_sqrt``: warmup to 5e-5
    over 1000 steps, then ``5e-5 * sqrt(1000 / s)``) and ``lr_1(s - 10000)``
    after it (the 40,000-step cosine from 2e-5, its step 0 at the milestone,
    holding 0 past its end)."""
    lrs = user_path("sequential-schedule").check().saved["lrs"]
    assert len(lrs) == SEQUENTIAL_STEPS

    def lr(s):
        if s < 10_000:
            return formulas.inverse_sqrt(5e-5, 1000, s)
        return formulas.cosine(2e-5, 0, 40_000, s - 10_000)

    np.testing.assert_allclose(lrs, [lr(s) for s in range(SEQUENTIAL_STEPS)], rtol=1e-9, atol=1e-15)
    assert lrs[10_000] == pytest.approx(2e-5, rel=1e-12)  # the cosine's own step 0, not its step 10000


@_user_path_test("reduce-lr-on-plateau")
def test_reduce_lr_on_plateau_with_adamwdl(user_path):
    """The lr of each epoch is ``paddle.optimizer.lr.ReduceOnPlateau(1e-3,
    factor=0.5, patience=2)``'s, fed the same metrics; the weights are the
    float64 AdamWDL run with those lrs times the ratios ``0.8 ** (12 - i)``
    (embeddings ``0.8 ** 13``), decay 0.01 on every parameter; the runs at a
    constant 1e-3 or without the ratios differ by ten times the tolerance."""
    import paddle

    result = user_path("reduce-lr-on-plateau").check()
    plateau = paddle.optimizer.lr.ReduceOnPlateau(1e-3, factor=0.5, patience=2)
    expected_lrs = []
    for metric in PLATEAU_METRICS:
        expected_lrs.append(plateau.last_lr)
        plateau.step(metric)
    np.testing.assert_allclose(result.saved["lrs_seen"], expected_lrs, rtol=1e-12)
    assert float(result.saved["last_lr"]) == pytest.approx(plateau.last_lr, rel=1e-12)
    assert min(expected_lrs) == 2.5e-4  # the metrics reach the plateau twice
    batches, common = make_batches(len(PLATEAU_METRICS)), dict(n_layers=12, weight_decay=lambda step, name: 0.01)
    expected = reference.train(batches, expected_lrs, ratio=lambda name: layer_ratio(name, 0.8, 12), **common)
    reference.assert_trained_like(result.group("weights"), expected, "reduce-lr-on-plateau", 12)
    # a run that never lowers the lr, or one without the ratios, would fail the check
    never_lowered = reference.train(batches, [1e-3] * len(PLATEAU_METRICS),
                                    ratio=lambda name: layer_ratio(name, 0.8, 12), **common)
    reference.assert_differs(never_lowered, expected, "classifier.weight", 12)
    reference.assert_differs(reference.train(batches, expected_lrs, **common), expected, "encoder.layers.0.weight", 12)
