"""The benchmark scripts run (tiny sizes; speed itself is only ever reported
by ``make bench``, never asserted) and report what they promise. ``run_all.py``
(``make bench``) is run by its documented quick run
(tests/user_paths/test_shell_blocks.py), which checks the tables, JSON and figure it writes.
``bench_torch.py`` needs PyTorch, no dependency of the package: what it asks of AdamWDL
(``--arithmetic avx512``) is checked here without it."""
import math
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL
from paddle_llrd.optim import multi_tensor
from paddle_llrd.optim.fused_operator import norms_unavailable_reason, unavailable_reason

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_adamwdl  # noqa: E402
import bench_common  # noqa: E402
import bench_ema  # noqa: E402
import bench_memory  # noqa: E402
import bench_torch  # noqa: E402
import bench_training_loop  # noqa: E402
from operator_off import flat_path  # noqa: E402
from kernel_formulas import generated_step, reference_step  # noqa: E402

TINY = ["--layers", "1", "--hidden", "32", "--steps", "2"]
OPTIMIZERS = ("adamw", "adamwdl_multi_tensor", "adamwdl_per_parameter")


def _positive_finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_adamwdl_benchmark_reports_ratios_and_no_extra_state(capsys):
    results = bench_adamwdl.main(TINY)
    for key in ("adamwdl_ratio", "adamwdl_general_path_ratio", "adamwdl_wd_schedule_ratio"):
        assert results[key] > 0
    # AdamWDL keeps exactly AdamW's accumulators: a property, not a timing
    assert results["adamwdl_state_tensors"] == results["adamw_state_tensors"]
    assert results["adamwdl_extra_state_bytes"] == 0
    assert "paddle.optimizer.AdamW" in capsys.readouterr().out


def test_ema_benchmark_reports_its_ratio_and_ignores_other_flags(capsys):
    results = bench_ema.main(TINY + ["--layerwise-decay", "0.5"])
    assert results["update_vs_adamw_ratio"] > 0 and results["target_ratio"] == bench_ema.TARGET_RATIOS["bert-base"]
    # one pass over float32 shadows and parameters: the shadow read and written, the parameter read
    assert results["pass_bytes"] == 12 * results["parameters"]
    for key, milliseconds in (("update_gbs", "ema_update_ms"),
                              ("multi_tensor_layout_update_gbs", "multi_tensor_layout_ema_update_ms")):
        assert results[key] == pytest.approx(12 * results["parameters"] / (results[milliseconds] / 1e3) / 1e9, rel=1e-2)
    # the bandwidth an update would need to take 0.1x the AdamW step timed beside the laid-out one
    assert results["target_gbs"] == pytest.approx(
        12 * results["parameters"] / (0.1 * results["multi_tensor_layout_adamw_step_ms"] / 1e3) / 1e9, rel=1e-2)
    out = capsys.readouterr().out
    assert "ignoring ['--layerwise-decay', '0.5']" in out and "GB/s beside that AdamW step" in out


def test_benchmarks_refuse_empty_sizes():
    with pytest.raises(SystemExit):
        bench_ema.main(["--layers", "0"])


def test_small_params_regime_reports_ratios_and_no_extra_state(capsys):
    results = bench_adamwdl.main(["--regime", "small-params", "--small-params", "48", "--steps", "1"])
    assert results["regime"] == "small-params" and results["tensors"] == 48
    assert results["target_ratio"] == 1.0 and results["adamwdl_ratio"] > 0
    assert results["adamwdl_extra_state_bytes"] == 0
    assert "small-params: 48 tensors" in capsys.readouterr().out


def test_ema_small_params_regime_has_no_target():
    results = bench_ema.main(["--regime", "small-params", "--small-params", "48", "--steps", "1"])
    assert results["target_ratio"] is None and results["update_vs_adamw_ratio"] > 0
    assert results["target_gbs"] is None and _positive_finite(results["update_gbs"])


def test_training_loop_benchmark_runs_the_multi_tensor_path(capsys):
    results = bench_training_loop.main(
        ["--regime", "small-params", "--small-params", "48", "--blocks", "4", "--steps", "1", "--num-threads", "3"]
    )
    assert results["tensors"] == 49  # 4 blocks x 12 Linear(16, 16) (weights, biases) + the embedding table
    assert results["multi_tensor_steps"] == results["steps"] + 1  # every step, the untimed first one too
    assert results["loop_multi_tensor_ratio"] > 0 and results["loop_per_parameter_ratio"] > 0
    # rounds alternate: as timed, then with glibc's deferred work of the backward's frees paid first
    assert results["steps"] == 2 * 3 and results["settled_loop_multi_tensor_ratio"] > 0
    assert results["settled_meets_target"] == (results["settled_loop_multi_tensor_ratio"] <= 0.14)
    assert results["target_ratio"] == 0.14  # (unclipped small tensors)
    # 28 bytes per float32 parameter: 4 blocks x 12 Linear(16, 16) + the 64 x 16 table
    assert results["parameters"] == 48 // 2 * (16 * 16 + 16) + 64 * 16 and results["num_threads"] == 3
    assert results["memory_floor_ms"] == pytest.approx(1e3 * 28 * results["parameters"] / (results["machine_gbs"] * 1e9))
    # a fourth copy, in the same rotation, only reads, hands and clears its gradients: with the operator
    # alone, the step's floor
    for key in ("gradients_alone_ms", "gradients_alone_ratio", "settled_gradients_alone_ratio"):
        assert _positive_finite(results[key]), key
    if results["multi_tensor_kernels_ms"] is None:  # (the operator not built here)
        assert results["kernel_gbs"] is None and results["step_floor_ratio"] is None
    else:
        seconds = results["multi_tensor_kernels_ms"] / 1e3
        assert results["kernel_gbs"] == pytest.approx(28 * results["parameters"] / seconds / 1e9)
        assert results["step_floor_ratio"] == pytest.approx(
            results["gradients_alone_ratio"] + results["multi_tensor_kernels_ms"] / results["adamw_ms"])
    # no clip unless asked (and no clip's norms measured); the paths each AdamWDL took, where it reports them
    assert results["clip"] is False and results["grad_clip"] == dict.fromkeys(OPTIMIZERS)
    assert results["norms_ms"] is None and results["paddle_norms_ms"] is None
    paths = results["update_paths"]
    if paths["adamwdl_multi_tensor"] is not None:
        assert paths["adamwdl_multi_tensor"][flat_path()[0]] == results["steps"] + 1
        assert paths["adamwdl_per_parameter"]["per_parameter"] == results["steps"] + 1
    out = capsys.readouterr().out
    assert "AdamWDL, default" in out and "time ratio to AdamW (lower is faster)" in out and "on 3 thread(s)" in out
    assert "6 interleaved rounds" in out and "paid before the timer" in out and "no gradient clipping" in out
    assert "the gradients alone" in out
    assert ("the step floor" in out) == (results["step_floor_ratio"] is not None)


def test_training_loop_benchmark_clips_every_optimizer_as_the_trainers_do(capsys):
    # 96 tensors: the gradients' global norm (0.01 per element) is above 1.0, so the clip scales them
    results = bench_training_loop.main(
        ["--regime", "small-params", "--small-params", "96", "--blocks", "4", "--steps", "1", "--clip"]
    )
    assert results["clip"] is True and results["max_grad_norm"] == 1.0
    # read back from each optimizer, AdamW (the reference) included
    assert results["grad_clip"] == dict.fromkeys(OPTIMIZERS, "ClipGradByGlobalNorm")
    assert results["gradient_global_norm"] == pytest.approx(0.01 * math.sqrt(results["parameters"]))
    assert results["clip_scales_gradients"] is True
    for key in ("loop_multi_tensor_ratio", "loop_per_parameter_ratio", "settled_loop_multi_tensor_ratio"):
        assert _positive_finite(results[key]), key
    paths = results["update_paths"]
    for name, summary in paths.items():
        if summary is not None:  # every step, the untimed first one too, took one of the paths
            taken = summary["fused"] + summary["multi_tensor"] + summary["per_parameter"]
            assert taken == summary["steps"] == results["steps"] + 1, name
            # (each step off the fused operator says why)
            assert summary["multi_tensor"] + summary["per_parameter"] == sum(summary["reasons"].values()), name
    # the floor runs the multi-tensor layout's kernels: none to run where no step took that path
    if not results["multi_tensor_steps"]:
        assert results["multi_tensor_kernels_ms"] is None and results["kernel_calls_alone_ratio"] is None
    out = capsys.readouterr().out
    assert "grad_clip=ClipGradByGlobalNorm(1.0) for all" in out and "scaled down by the clip" in out
    if norms_unavailable_reason() is not None:  # (the operator not built here: no norms of its own to time)
        assert results["norms_ms"] is None and "the clip's squared norms alone" not in out
        return
    # the clip's squared norms alone, against Paddle's kernels for them: 4 bytes read per parameter
    assert _positive_finite(results["norms_ms"]) and _positive_finite(results["paddle_norms_ms"])
    assert results["norms_gbs"] == pytest.approx(4 * results["parameters"] / (results["norms_ms"] / 1e3) / 1e9)
    assert "the clip's squared norms alone" in out


class _UpdatePath(NamedTuple):
    path: str
    reason: Optional[str]


class _Reports:
    """An optimizer whose steps report the paths given, in turn."""

    def __init__(self, *paths):
        self.paths = list(paths)
        self.last_update_path = None

    def step(self):
        self.last_update_path = self.paths.pop(0)


def test_path_tally_counts_each_step_path_and_names_them_as_the_docs_do():
    optimizer, tally = _Reports(
        _UpdatePath("fused", None), _UpdatePath("per_parameter", "gradient clipping"),
        _UpdatePath("per_parameter", "gradient clipping"), _UpdatePath("multi_tensor", "PADDLE_LLRD_FUSED=0"),
    ), bench_common.PathTally()
    for _ in range(4):
        optimizer.step()
        tally.record(optimizer)
    summary = tally.summary()
    assert summary == {"steps": 4, "fused": 1, "multi_tensor": 1, "per_parameter": 2,
                       "reasons": {"gradient clipping": 2, "PADDLE_LLRD_FUSED=0": 1}}
    assert bench_common.describe_paths(summary) == (
        "fused operator in 1 of 4 steps, multi-tensor path (Paddle's kernels) in 1 of 4 steps, "
        "per-parameter path in 2 of 4 steps (gradient clipping; PADDLE_LLRD_FUSED=0)"
    )
    # an optimizer without the property: not reported, not guessed
    unreported = bench_common.PathTally()
    unreported.record(object())
    assert unreported.summary() is None and "not reported" in bench_common.describe_paths(None)


def test_memory_benchmark_reports_each_peak_and_their_ratio_per_configuration(capsys):
    results = bench_memory.main(["--layers", "1", "--hidden", "32", "--memory-steps", "2", "--steps", "7"])
    assert results["steps"] == 2 and results["parameters"] > 0
    for config, clip in (("clipped", "ClipGradByGlobalNorm"), ("bare", None)):
        row = results[config]
        assert row["clip"] is (clip is not None) and _positive_finite(row["peak_ratio"])
        for name in ("adamw", "adamwdl"):
            run = row[name]
            assert run["optimizer"] == name and run["grad_clip"] == clip and run["steps"] == 2
            assert _positive_finite(run["peak_rss_mib"]) and run["peak_above_model_mib"] >= 0
            assert run["peak_rss_mib"] >= run["rss_model_mib"] >= run["rss_after_import_mib"] > 0
        assert row["peak_ratio"] == pytest.approx(row["adamwdl"]["peak_rss_mib"] / row["adamw"]["peak_rss_mib"])
        paths = row["adamwdl"]["update_paths"]
        assert paths is None or paths["steps"] == 2
    out = capsys.readouterr().out
    assert "ignoring ['--steps', '7']" in out  # run_all's --steps is for the timed benchmarks
    assert "grad_clip=ClipGradByGlobalNorm(1.0)" in out and "no gradient clipping" in out and "MiB" in out


def test_memory_benchmark_refuses_no_steps():
    with pytest.raises(SystemExit):
        bench_memory.main(["--memory-steps", "0"])


def test_settle_freed_memory_stops_at_the_first_fast_allocation(monkeypatch):
    import bench_common

    # a clock whose every reading is 1 s after the last: no allocation is fast, all are made
    readings = iter(range(10**6))
    monkeypatch.setattr(bench_common.time, "perf_counter", lambda: float(next(readings)))
    assert bench_common.settle_freed_memory() == bench_common.SETTLE_LIMIT
    # a clock that stands still: the first allocation is fast
    monkeypatch.setattr(bench_common.time, "perf_counter", lambda: 0.0)
    assert bench_common.settle_freed_memory() == 1


def test_training_loop_benchmark_refuses_zero_threads():
    with pytest.raises(SystemExit):
        bench_training_loop.main(["--regime", "small-params", "--num-threads", "0"])


def test_the_machine_description_names_the_arithmetic_paddles_adamw_runs_here():
    """``make bench``'s JSON says whether the CPU has AVX-512F because that decides the arithmetic
    of Paddle's CPU AdamW (and so what the fused operator computes): one step of AdamW has the bits
    of phi's generated kernel where it says so, of the reference loop elsewhere."""
    import run_all

    rng = np.random.default_rng(5)
    n, lr, coeff = 700, 0.003, 0.2
    start = rng.standard_normal(n).astype("float32")
    grad = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 1, n)).astype("float32")
    param = paddle.create_parameter([n], "float32", default_initializer=paddle.nn.initializer.Assign(start))
    optimizer = paddle.optimizer.AdamW(learning_rate=lr, parameters=[param], weight_decay=coeff)
    (param * paddle.to_tensor(grad)).sum().backward()  # the gradient is ``grad`` exactly
    optimizer.step()
    zero, b1p, b2p = np.float32(0), np.float32(0.9), np.float32(0.999)
    formulas = {
        arithmetic: np.array([step(p, g, zero, zero, lr, 0.9, 0.999, 1e-8, coeff, b1p, b2p)[0]
                              for p, g in zip(start, grad)], dtype=np.float32).view(np.int32)
        for arithmetic, step in ((True, generated_step), (False, reference_step))
    }
    assert not np.array_equal(formulas[True], formulas[False])  # the step tells the two apart
    described = run_all.cpu_description()
    assert described["cpu"]
    assert np.array_equal(param.numpy().view(np.int32), formulas[described["avx512f"]])


def test_run_all_refuses_a_regime_or_clip_flag():
    import run_all

    assert run_all.main(["--regime", "small-params"]) == 2
    assert run_all.main(["--clip"]) == 2  # it runs both configurations


def test_torch_comparison_runs_adamwdl_in_the_avx512_kernels_arithmetic_when_asked(monkeypatch):
    """``bench_torch.py --arithmetic avx512``: AdamWDL's default step computes as phi's
    generated AVX-512 kernel does (its formula written out), whatever this CPU has."""
    assert unavailable_reason() is None, "the fused operator is built by make install"
    monkeypatch.setattr(multi_tensor, "fused_adamw", multi_tensor.fused_adamw)  # (undone after the test)
    bench_torch.use_arithmetic("avx512")
    lr, beta1, beta2, eps, coeff = 0.003, 0.9, 0.999, 1e-8, 0.2
    paddle.seed(0)
    linear = paddle.nn.Linear(5, 3)
    params = linear.parameters()
    optimizer = AdamWDL(learning_rate=lr, parameters=params, weight_decay=coeff, set_param_lr_fun=None)
    expected = [[(value, np.float32(0), np.float32(0)) for value in p.numpy().ravel()] for p in params]
    b1p, b2p = np.float32(beta1), np.float32(beta2)
    rng = np.random.default_rng(3)
    for _ in range(3):
        grads = [(rng.standard_normal(p.shape) * 10.0 ** rng.uniform(-3, 1)).astype("float32") for p in params]
        paddle.add_n([(p * paddle.to_tensor(g)).sum() for p, g in zip(params, grads)]).backward()
        optimizer.step()
        optimizer.clear_grad()
        expected = [[generated_step(p, g, m1, m2, lr, beta1, beta2, eps, coeff, b1p, b2p)
                     for (p, m1, m2), g in zip(elements, grad.ravel())] for elements, grad in zip(expected, grads)]
        b1p, b2p = np.float32(np.float32(beta1) * b1p), np.float32(np.float32(beta2) * b2p)
    assert optimizer.last_update_path.path == "fused"
    for param, elements in zip(params, expected):
        assert np.array_equal(param.numpy().ravel().view(np.int32),
                              np.array([e[0] for e in elements], dtype=np.float32).view(np.int32))
