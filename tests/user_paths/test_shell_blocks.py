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
import re
import shutil
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
    """The quick run prints a time ratio per optimizer and regime and writes its results file."""
    result = user_path("shell-benchmarks-commands-1").check()
    ratios = [float(value) for value in re.findall(r"(\d+\.\d{3})x", result.stdout)]
    assert ratios and all(0 < ratio < 100 for ratio in ratios), result.stdout[-2000:]
    assert "benchmarks.json" in result.stdout and (_BENCH_COPY.parent / "docs" / "_static" / "benchmarks.json").is_file()


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
