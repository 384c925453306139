"""Every YAML, JSON and shell block of README.md, README_cn.md and docs/*.rst
carries a ``user-path`` marker and is run, as for Python blocks
(test_doc_blocks.py): each command of a shell block in its own process and
its own empty working directory, as written but for ``python`` being this
interpreter and the user's own names (``mypkg.models:build``) replaced by
the test's; ``make TARGET`` is checked with ``make -n`` (the commands the
target runs, printed: the demo, the suite and the benchmarks are long, and
each is tested by its own tests). The PaddleFormers configs and commands run
in their virtualenv (tests_paddleformers/test_doc_configs.py, whose
``MARKERS`` this test reads). A block marked ``(not run: REASON)`` must say
one of ``harness.NOT_RUN_REASONS`` and be what the reason says (only
package installs; a GPU check), and counts as no coverage.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import harness

LANGUAGES = harness.CONFIG_LANGUAGES + harness.SHELL_LANGUAGES
PADDLEFORMERS_TESTS = harness.ROOT / "tests_paddleformers" / "test_doc_configs.py"
# The benchmarks write their results into the clone's docs/_static (the published figures), so the quick
# run runs a copy of benchmarks/, whose results land in the copy's docs/_static.
_BENCH_COPY = Path(tempfile.mkdtemp(prefix="user-path-bench-")) / "benchmarks"
shutil.copytree(harness.ROOT / "benchmarks", _BENCH_COPY, ignore=shutil.ignore_patterns("__pycache__"))
# A user's own model factory, which the page leaves to the reader; the benchmarks' copy.
SUBSTITUTIONS = {"mypkg.models:build": "user_model:BertNamedLinear",
                 str(harness.ROOT / "benchmarks" / "run_all.py"): str(_BENCH_COPY / "run_all.py")}
MAKE_TARGETS = {"demo": "-m paddle_llrd demo", "test": "-m pytest -q", "bench": "benchmarks/run_all.py"}
RUN_HERE = ["make-demo-test", "readme-lr-table", "quickstart-commands", "schedules-commands", "benchmarks-commands",
            "readme-data-parallel", "data-parallel-commands", "fused-operator-commands"]


def _scripts():
    scripts = {}
    for marker in RUN_HERE:
        for index, words in enumerate(harness.doc_block(marker, LANGUAGES).commands()):
            scripts[f"shell-{marker}-{index}"] = harness.UserScript(
                f"shell-{marker}-{index}", argv=harness.shell_command(words, SUBSTITUTIONS), timeout_s=600)
    return scripts


SCRIPTS = _scripts()
harness.register(*SCRIPTS.values())


def _paddleformers_markers() -> set:
    tree = ast.parse(PADDLEFORMERS_TESTS.read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(target, "id", None) == "MARKERS" for target in node.targets)]
    return set(ast.literal_eval(value))


def test_every_config_and_shell_block_is_marked_and_run():
    blocks = harness.doc_blocks(LANGUAGES)
    unmarked = [block.sources[0] for block in blocks if block.marker is None]
    assert not unmarked, f"YAML/JSON/shell blocks without a `user-path:` marker: {unmarked}"
    for block in blocks:
        if block.not_run is not None:
            check = harness.NOT_RUN_REASONS.get(block.not_run)
            assert check is not None, (block.sources, block.not_run, sorted(harness.NOT_RUN_REASONS))
            assert check(block), f"{block.sources}: the block is not what `not run: {block.not_run}` says"
    run = {block.marker for block in blocks if block.not_run is None}
    untested = run - set(RUN_HERE) - _paddleformers_markers()
    assert not untested, f"markers no test runs: {sorted(untested)}"
    for marker in {block.marker for block in blocks}:
        found = harness.doc_block(marker, LANGUAGES)  # a marker on several pages marks one block
        assert (found.not_run is None) == (marker in run), marker


def test_a_not_run_reason_is_checked():
    """The reasons' checks tell a block that installs from one that runs something else."""
    install = harness.DocBlock("x", "pip install .[cpu]\n", ["x"], "bash")
    train = harness.DocBlock("x", "pip install .\npython -m paddle_llrd train sft.yaml\n", ["x"], "bash")
    offline = harness.NOT_RUN_REASONS["installs from a package index, and the test machine is offline"]
    gpu = harness.NOT_RUN_REASONS["needs a CUDA GPU"]
    assert offline(install) and not offline(train) and not gpu(install) and not gpu(train)


def _numbers(text: str) -> list:
    return [float(word) for word in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])", text)]


def _has(values: list, expected: float) -> bool:
    return any(abs(value - expected) <= 1e-3 * abs(expected) for value in values)


@pytest.mark.user_path(*[name for name in SCRIPTS if name.startswith("shell-make-demo-test")],
                       *[name for name in SCRIPTS if name == "shell-benchmarks-commands-0"])
def test_make_targets_run_the_documented_command(user_path):
    for name in [name for name in SCRIPTS if name.startswith("shell-make-demo-test")] + ["shell-benchmarks-commands-0"]:
        result = user_path(name).check()
        target = SCRIPTS[name].argv[-1]
        assert MAKE_TARGETS[target] in result.stdout, (name, result.stdout)


LR_TABLES = ["shell-readme-lr-table-0", "shell-quickstart-commands-0"]


@pytest.mark.user_path(*LR_TABLES, "shell-readme-lr-table-1", "shell-readme-lr-table-2")
def test_lr_table_commands_print_the_layer_ratios(user_path):
    """``--layers 12 --decay 0.8 --learning-rate 5e-5``: embeddings 5e-5 * 0.8**13, block i
    5e-5 * 0.8**(12 - i) (the top block 4e-5), the head 5e-5."""
    for name in LR_TABLES:
        values = _numbers(user_path(name).check().stdout)
        for expected in [5e-5 * 0.8 ** 13, 5e-5 * 0.8 ** 12, 4e-5, 5e-5, 0.8 ** 13]:
            assert _has(values, expected), (name, expected)
    assert "lm_head" in user_path("shell-readme-lr-table-1").check().stdout  # --arch llama
    # the user's model (here user_model.BertNamedLinear, 12 blocks, default decay): its blocks' names
    assert "encoder.layers.11" in user_path("shell-readme-lr-table-2").check().stdout


SCHEDULES = [name for name in SCRIPTS if name.startswith("shell-schedules-commands")] + ["shell-quickstart-commands-1"]


@pytest.mark.user_path(*SCHEDULES)
def test_schedules_commands_print_the_peak_lr(user_path):
    """Peak 5e-5 after the 100 warmup steps: linear's lr at step 50 is half of it."""
    for name in SCHEDULES:
        values = _numbers(user_path(name).check().stdout)
        assert _has(values, 5e-5) and _has(values, 2.5e-5), name


@pytest.mark.user_path("shell-benchmarks-commands-1")
def test_quick_benchmark_run(user_path):
    """The quick run (``make bench``'s run_all.py) prints the clipped configuration's table first, then
    the bare one's, the memory's and the detail, a time ratio per optimizer and regime in each, and
    writes the same in its results file, with the figure."""
    result = user_path("shell-benchmarks-commands-1").check()
    out = result.stdout
    ratios = [float(value) for value in re.findall(r"(\d+\.\d{3})x", out)]
    assert ratios and all(0 < ratio < 100 for ratio in ratios), out[-2000:]
    static = _BENCH_COPY.parent / "docs" / "_static"
    assert "benchmarks.json" in out and (static / "benchmarks.png").stat().st_size > 0
    run_all, bench_common = _benchmark_modules()
    results = json.loads((static / "benchmarks.json").read_text())
    # the configuration users run first, then the bare one, the memory, the detail
    assert list(results) == ["machine", "clipped", "bare", "memory", "detail"]
    assert results["machine"]["cores_available"] >= 1
    for regime in ("bert-base", "small-params"):
        loop = results["clipped"]["results"][regime]["training_loop"]
        assert loop["clip"] is True and set(loop["grad_clip"].values()) == {"ClipGradByGlobalNorm"}
        bare = results["bare"]["results"][regime]
        assert set(bare) == {"training_loop", "adamwdl", "ema"}
        assert set(bare["training_loop"]["grad_clip"].values()) == {None}
        assert results["detail"]["bandwidth"]["bare"][regime]["num_threads"] >= 1
        assert results["detail"]["ema_bandwidth"][regime]["update_gbs"] == bare["ema"]["update_gbs"] > 0
    assert results["bare"]["results"]["small-params"]["adamwdl"]["tensors"] == 192  # --small-params 192
    clipped_rows, bare_rows = results["clipped"]["table"], results["bare"]["table"]
    assert list(clipped_rows) == [run_all.LABELS["loop_multi_tensor_ratio"], run_all.LABELS["loop_per_parameter_ratio"]]
    for table in (clipped_rows, bare_rows):
        assert all(0 < value < 100 for row in table.values() for value in row.values())
        assert not any("settled" in label or "floor" in label for label in table)
    detail = results["detail"]["table"]
    assert f"{bench_common.CLIP_DESCRIPTION}: multi-tensor path, frees settled" in detail
    assert "no clipping: memory floor (28 B/parameter at measured GB/s)" in detail
    for config in ("ClipGradByGlobalNorm(1.0)", "no clipping"):
        assert 0 < results["memory"]["table"][config]["ratio"] < 100
    titles = [run_all.CLIPPED_TITLE, run_all.BARE_TITLE, run_all.MEMORY_TITLE, run_all.DETAIL_TITLE]
    positions = [out.index(title) for title in titles]
    assert positions == sorted(positions)  # printed in that order too
    clipped, bare, memory, detail = (out[a:b] for a, b in zip(positions, positions[1:] + [len(out)]))
    for table, label in ((clipped, "multi-tensor path (default)"), (bare, "AdamWDL step, per-parameter path"),
                         (bare, "EMA update")):
        row = next(line for line in table.splitlines() if label in line)
        assert row.count("x") >= 2  # a ratio for each regime
    assert "update paths, bert-base: default AdamWDL" in clipped and "settled" not in clipped + bare
    assert "AdamW" in memory and "MiB" in memory
    line = next(line for line in detail.splitlines() if line.strip().startswith("no clipping, bert-base: multi-tensor"))
    assert "GB/s" in line and "NumPy copy" in line
    line = next(line for line in detail.splitlines() if line.strip().startswith("EMA update, bert-base:"))
    assert "GB/s laid out" in line and "its target would need" in line


def _benchmark_modules():
    """run_all and bench_common of the copy the quick run ran (their labels and titles)."""
    sys.path.insert(0, str(_BENCH_COPY))
    try:
        import bench_common
        import run_all
    finally:
        sys.path.remove(str(_BENCH_COPY))
    return run_all, bench_common


@pytest.mark.user_path("shell-benchmarks-commands-2", "shell-benchmarks-commands-3")
def test_single_benchmark_commands(user_path):
    """The clipped training loop prints its ratios and the clip each optimizer held; the memory
    benchmark, the ratio of the peaks in each configuration."""
    loop = user_path("shell-benchmarks-commands-2").check().stdout
    assert "grad_clip=ClipGradByGlobalNorm(1.0) for all" in loop and re.search(r"\d+\.\d{3}x", loop), loop[-2000:]
    memory = user_path("shell-benchmarks-commands-3").check().stdout
    assert len(re.findall(r"MiB +\d+\.\d{3}x", memory)) == 2, memory[-2000:]


DATA_PARALLEL = [name for name in SCRIPTS if "data-parallel" in name]


@pytest.mark.user_path(*DATA_PARALLEL)
def test_data_parallel_commands_end_with_the_same_weights(user_path):
    """Every documented way to start examples/data_parallel.py ends each rank with the weight checksum
    of the one process on the whole batch (the last command)."""
    checksums = {}
    for name in DATA_PARALLEL:
        result = user_path(name).check()
        found = re.findall(r"rank (\d+)/(\d+) final weight checksum ([0-9.]+)", result.stdout + result.stderr)
        checksums[name] = {float(value) for _, _, value in found}
    single = checksums["shell-data-parallel-commands-3"]
    assert len(single) == 1
    for name, values in checksums.items():
        assert values and all(abs(v - next(iter(single))) <= 1e-5 * abs(v) for v in values), (name, values)


@pytest.mark.user_path("shell-fused-operator-commands-0")
def test_the_operator_command_says_in_one_line_that_it_is_ready(user_path):
    """``python -m paddle_llrd.optim.fused_operator`` builds the operator (or finds it built) and
    loads it, its check against Paddle's kernels passed: one line."""
    result = user_path("shell-fused-operator-commands-0").check()
    lines = [line for line in result.stdout.splitlines() if line.startswith("paddle_llrd:")]
    assert len(lines) == 1 and "fused AdamW operator ready" in lines[0], result.stdout
