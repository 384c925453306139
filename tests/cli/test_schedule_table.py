"""``python -m paddle_llrd schedules``: the table's numbers against the formulas
(written out in schedule_formulas.py), the plot files, and the no-matplotlib path."""
from __future__ import annotations

import itertools
import math
import os
import re
import sys

import pytest
import paddle
from paddle.optimizer.lr import LambdaDecay, LRScheduler

from schedule_formulas import restore_registry  # noqa: F401 (the fixture)
from schedule_table_reference import parse_rows, reference

from paddle_llrd import LinearDecayWithWarmup, register_scheduler
from paddle_llrd.cli import schedules as schedule_cli
from paddle_llrd.cli import schedule_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DOCS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs")
sys.path.insert(0, DOCS)
import _figures as doc_figures  # noqa: E402 (docs/_figures.py, what docs/conf.py draws with)


pytestmark = pytest.mark.usefixtures("restore_registry")


def test_characteristic_steps():
    assert schedule_table.characteristic_steps(100, 1000) == [
        ("start", 0), ("warmup/2", 50), ("warmup end", 100), ("25%", 250),
        ("50%", 500), ("75%", 750), ("100%", 1000), ("past end", 1100),
    ]
    # Without warmup the first three coincide; a step is listed once.
    assert schedule_table.characteristic_steps(0, 40) == [
        ("start", 0), ("25%", 10), ("50%", 20), ("75%", 30), ("100%", 40), ("past end", 44),
    ]
    # Long warmup: columns stay in step order.
    assert schedule_table.characteristic_steps(7, 8) == [
        ("start", 0), ("25%", 2), ("warmup/2", 3), ("50%", 4), ("75%", 6), ("warmup end", 7), ("100%", 8),
        ("past end", 9),
    ]


ALL_NAMES = {
    "linear", "cosine", "constant", "constant_with_warmup", "polynomial", "cosine_with_restarts", "inverse_sqrt",
    "cosine_with_min_lr", "warmup_stable_decay", "cosine_annealing_with_warmup", "linear_annealing_with_warmup",
    "sequential", "reduce_lr_on_plateau",
}


@pytest.mark.parametrize(
    "flags,lr,warmup,total,options",
    [
        ([], 5e-5, 100, 1000, {}),
        (["--learning-rate", "0.002", "--warmup-steps", "0", "--total-steps", "40"], 2e-3, 0, 40, {}),
        (
            ["--learning-rate", "1e-3", "--warmup-steps", "30", "--total-steps", "200",
             "--num-cycles", "1.5", "--lr-end", "1e-5", "--power", "2", "--min-lr", "1e-4"],
            1e-3, 30, 200, {"num_cycles": 1.5, "lr_end": 1e-5, "power": 2.0, "min_lr": 1e-4},
        ),
        (
            ["--learning-rate", "1e-3", "--warmup-steps", "10", "--total-steps", "120",
             "--min-lr-rate", "0.3", "--decay-style", "1-sqrt"],
            1e-3, 10, 120, {"min_lr_rate": 0.3, "decay_style": "1-sqrt"},
        ),
        (
            ["--learning-rate", "1e-3", "--warmup-steps", "40", "--total-steps", "300", "--lr-warmup-init", "2e-4"],
            1e-3, 40, 300, {"lr_warmup_init": 2e-4},
        ),
    ],
)
def test_table_rows_follow_the_formulas(capsys, flags, lr, warmup, total, options):
    assert schedule_cli.main(flags + ["--no-plot"]) == 0
    out = capsys.readouterr().out
    steps, rows = parse_rows(out)
    assert steps == [step for _, step in schedule_table.characteristic_steps(warmup, total)]
    assert set(rows) == ALL_NAMES
    for name, values in rows.items():
        expected = [reference(name, lr, warmup, total, s, **options) for s in steps]
        assert values == pytest.approx(expected, rel=6e-4, abs=1e-12), name  # 4 significant digits printed
    assert "Plot" not in out


def test_classes_flag_adds_the_scheduler_classes(capsys):
    assert schedule_cli.main(["--classes", "--no-plot", "--learning-rate", "0.5", "--warmup-steps", "16",
                                "--total-steps", "64"]) == 0
    steps, rows = parse_rows(capsys.readouterr().out)
    for cls in ["LinearDecayWithWarmup", "ConstScheduleWithWarmup", "CosineDecayWithWarmup", "PolyDecayWithWarmup",
                "CosineAnnealingWithWarmupDecay", "LinearAnnealingWithWarmupDecay", "InverseSquareRootSchedule"]:
        assert any(label.startswith(cls) for label in rows), cls
    isr = [0.5 * s / 16 if s < 16 else 0.5 * math.sqrt(16) / math.sqrt(s) for s in steps]
    assert rows["InverseSquareRootSchedule"] == pytest.approx(isr, rel=6e-4)


def test_registered_schedules_are_listed_and_failures_reported(capsys):
    def get_halving_schedule(learning_rate, num_training_steps, last_epoch=-1):
        return LambdaDecay(learning_rate, lambda s: 0.5 ** (4 * s // num_training_steps), last_epoch)

    def get_needy_schedule(learning_rate, num_warmup_steps, gamma):
        raise AssertionError("never called: gamma is missing")

    register_scheduler("halving", get_halving_schedule)
    register_scheduler("needy", get_needy_schedule)
    assert schedule_cli.main(["--no-plot", "--learning-rate", "1.0", "--total-steps", "100",
                                "--warmup-steps", "10"]) == 0
    steps, rows = parse_rows(capsys.readouterr().out)
    assert rows["halving"] == pytest.approx([0.5 ** (4 * s // 100) for s in steps])
    assert "`gamma`" in rows["needy"]


def test_main_writes_a_png(tmp_path, capsys):
    path = tmp_path / "plots" / "schedules.png"
    assert schedule_cli.main(["--output", str(path), "--total-steps", "200", "--warmup-steps", "20"]) == 0
    out = capsys.readouterr().out
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert f"Plot written to {path}" in out
    assert "linear" in out


def test_the_plot_goes_to_a_folder_of_its_own_not_the_demos(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert schedule_cli.main(["--total-steps", "200", "--warmup-steps", "20"]) == 0
    assert "Plot written to schedules_output/schedules.png" in capsys.readouterr().out
    assert (tmp_path / "schedules_output" / "schedules.png").read_bytes()[:8] == PNG_MAGIC
    assert not (tmp_path / "demo_output").exists()


def _same_line_share(first, second):
    """The share of steps at which two plotted curves are within 1 % of the panel's top of each other."""
    top = max(abs(value) for line in (first, second) for value in line.get_ydata())
    return sum(abs(a - b) <= 0.01 * top for a, b in zip(first.get_ydata(), second.get_ydata())) / len(first.get_ydata())


@pytest.mark.parametrize("own_schedules", [0, 6])
@pytest.mark.parametrize("classes", [False, True])
def test_no_two_curves_of_the_plot_look_alike(classes, own_schedules):
    """The figure ``schedules`` writes: in each panel no two curves share colour and line style, and while
    there are at most 16, no two share a colour; curves that are the same line over most of the run
    (linear and linear_annealing_with_warmup) differ in line style, the one drawn first and so under the
    other wider, so that both show."""
    to_hex = pytest.importorskip("matplotlib.colors").to_hex
    for k in range(own_schedules):  # more curves than colours
        register_scheduler(f"halving_{k}", lambda learning_rate, num_training_steps, last_epoch=-1, k=k: LambdaDecay(
            learning_rate, lambda s: 0.5 ** ((k + 2) * s // num_training_steps), last_epoch))
    figure = schedule_cli.schedules_figure(include_classes=classes)
    panels = [[line for line in axes.get_lines() if not line.get_label().startswith("_")] for axes in figure.axes]
    panels = [lines for lines in panels if lines]  # the legends' rows are axes without lines
    assert [len(lines) for lines in panels] == [len(ALL_NAMES) + own_schedules] + ([9] if classes else [])
    same_lines = set()
    for lines in panels:
        looks = [(to_hex(line.get_color()), line.get_linestyle()) for line in lines]
        assert len(set(looks)) == len(looks), looks
        if len(lines) <= 16:
            assert len({colour for colour, _ in looks}) == len(lines), looks
        for first, second in itertools.combinations(lines, 2):
            if _same_line_share(first, second) >= 0.75:
                pair = (first.get_label(), second.get_label())
                assert first.get_linestyle() != second.get_linestyle(), pair
                assert first.get_linewidth() > second.get_linewidth(), pair
                same_lines.add(pair)
    assert ("linear", "linear_annealing_with_warmup") in same_lines, same_lines


def test_plot_schedules_and_doc_figures(tmp_path):
    single = schedule_cli.plot_schedules(str(tmp_path / "all.png"), 1e-3, 10, 100, include_classes=False)
    assert open(single, "rb").read(8) == PNG_MAGIC

    written = doc_figures.write_doc_figures(str(tmp_path / "gen"), 1e-3, 10, 100)
    assert written[0] == str(tmp_path / "gen" / "schedules.png")
    stems = {os.path.basename(path)[: -len(".png")] for path in written}
    assert {f"registry_{name}" for name in ALL_NAMES} | {"registry_warmup_stable_decay_styles"} <= stems
    for path in written:
        with open(path, "rb") as handle:
            assert handle.read(8) == PNG_MAGIC
    # Every image the schedules page shows is one the docs build writes.
    with open(os.path.join(DOCS, "schedules.rst"), encoding="utf-8") as page:
        referenced = set(re.findall(r"_generated/([\w.-]+\.png)", page.read()))
    assert referenced and referenced <= {os.path.basename(path) for path in written}


def test_wsd_style_schedules_follow_megatron_formulas():
    schedules = schedule_table.wsd_style_schedules(1.0, 10, 100)
    assert [stem for _, stem, _ in schedules] == [
        "registry_warmup_stable_decay_linear", "registry_warmup_stable_decay_cosine",
        "registry_warmup_stable_decay_exponential", "registry_warmup_stable_decay_1-sqrt",
    ]
    shapes = [lambda r: 1 - r, lambda r: 0.5 * (1 + math.cos(math.pi * r)), lambda r: 2 * 0.5**r - 1,
              lambda r: 1 - math.sqrt(r)]
    for (_, _, factory), shape in zip(schedules, shapes):
        curve = schedule_table.lr_curve(factory, 110)
        # The last 30 steps decay to a tenth of the peak.
        expected = [s / 10 if s < 10 else 1.0 if s < 70 else 0.1 if s >= 100 else 0.1 + 0.9 * shape((s - 70) / 30)
                    for s in range(111)]
        assert curve == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_options_reach_only_the_schedules_that_take_them():
    def strict(learning_rate, num_warmup_steps, last_epoch=-1):
        return LambdaDecay(learning_rate, lambda s: 1.0, last_epoch)

    register_scheduler("strict", strict)
    schedules = schedule_table.registry_schedules(1e-3, 10, 100, 2.0, 1e-5, 2.0, 1e-4, decay_style="linear")
    for label, _, factory in schedules:
        assert isinstance(factory(), LRScheduler), label
    # Both floors given: cosine_with_min_lr refuses them, which the table reports.
    schedules = dict((label, factory) for label, _, factory in
                     schedule_table.registry_schedules(1e-3, 10, 100, min_lr=1e-4, min_lr_rate=0.1))
    with pytest.raises(ValueError, match="`min_lr_rate`"):
        schedules["cosine_with_min_lr"]()


def test_without_matplotlib_the_table_still_prints_and_says_how_to_plot(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=re.escape("pip install paddle_llrd[plot]")):
        schedule_cli.plot_schedules(str(tmp_path / "x.png"))
    path = tmp_path / "y.png"
    assert schedule_cli.main(["--output", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pip install paddle_llrd[plot]" in out
    assert "constant_with_warmup" in out
    assert not path.exists()


@pytest.mark.parametrize(
    "flags",
    [["--total-steps", "0"], ["--warmup-steps", "-1"], ["--learning-rate", "-1e-3"], ["--learning-rate", "nan"],
     ["--power", "abc"], ["--total-steps", "1.5"], ["--decay-style", "step"], ["--min-lr-rate", "-0.1"]],
)
def test_bad_flags_exit_with_usage_error(flags, capsys):
    with pytest.raises(SystemExit) as info:
        schedule_cli.main(flags)
    assert info.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_lr_curve_steps_the_scheduler_like_training():
    curve = schedule_table.lr_curve(lambda: LinearDecayWithWarmup(1.0, 10, 4), 12)
    expected = [s / 4 if s < 4 else max(0.0, (10 - s) / 6) for s in range(13)]
    assert curve == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_reached_through_the_package_cli(capsys):
    from paddle_llrd.__main__ import main as cli

    assert cli(["schedules", "--no-plot", "--total-steps", "20", "--warmup-steps", "4"]) == 0
    _, rows = parse_rows(capsys.readouterr().out)
    assert rows["constant_with_warmup"] == pytest.approx([0.0, 2.5e-5, 5e-5, 5e-5, 5e-5, 5e-5, 5e-5, 5e-5])


def parse_rst_table(text):
    """``{column header: [value per row]}`` and the steps of the rows, from a generated list-table."""
    rows = [row for row in text.split("   * - ")[1:]]
    cells = [[cell.strip() for cell in row.split("\n     - ")] for row in rows]
    headers = [header.strip("`") for header in cells[0][1:]]
    steps = [int(row[0].split()[0]) for row in cells[1:]]
    columns = {header: [float(row[i + 1]) for row in cells[1:]] for i, header in enumerate(headers)}
    return steps, columns


def test_doc_tables_follow_the_formulas(tmp_path):
    lr, warmup, total = 1e-3, 10, 100
    written = doc_figures.write_doc_tables(str(tmp_path / "gen"), lr, warmup, total)
    assert [os.path.basename(path) for path in written] == ["table_sequential_plateau.txt", "table_lr_warmup_init.txt"]
    with open(written[0], encoding="utf-8") as handle:
        steps, columns = parse_rst_table(handle.read())
    assert steps == [step for _, step in schedule_table.characteristic_steps(warmup, total)]
    assert set(columns) == {"sequential", "reduce_lr_on_plateau"}
    for name, values in columns.items():
        assert values == pytest.approx([reference(name, lr, warmup, total, s) for s in steps], rel=6e-4, abs=1e-12)
    with open(written[1], encoding="utf-8") as handle:
        steps, columns = parse_rst_table(handle.read())
    init = 0.1 * lr
    expected = {
        "cosine (warmup from 0)": lambda s: reference("cosine", lr, warmup, total, s),
        f"cosine, from {init:g}": lambda s: reference("cosine", lr, warmup, total, s, lr_warmup_init=init),
        f"linear, from {init:g}": lambda s: reference("linear", lr, warmup, total, s, lr_warmup_init=init),
        f"warmup_stable_decay, from {init:g}": lambda s: reference("warmup_stable_decay", lr, warmup, total, s,
                                                                     lr_warmup_init=init),
    }
    assert set(columns) == set(expected)
    for header, values in columns.items():
        assert values == pytest.approx([expected[header](s) for s in steps], rel=6e-4, abs=1e-12), header
    # Every table the schedules page includes is one the docs build writes.
    with open(os.path.join(DOCS, "schedules.rst"), encoding="utf-8") as page:
        included = set(re.findall(r"include:: _generated/([\w.-]+\.txt)", page.read()))
    assert included == {os.path.basename(path) for path in written}


def test_plateau_metric_and_showcase_options_as_documented():
    fall = round(0.4 * 1000)
    assert [schedule_table.plateau_metric(s, 1000) for s in (0, fall // 2, fall, 900)] == [2.0, 1.5, 1.0, 1.0]
    assert schedule_table.showcase_options("sequential", 1e-3, 100, 1000)["stages"] == [
        {"name": "inverse_sqrt", "num_steps": 500}, {"name": "cosine", "learning_rate": 5e-4}]
    with pytest.raises(TypeError, match="`metric`"):
        schedule_table.lr_curve(lambda: paddle.optimizer.lr.ReduceOnPlateau(0.1), 3)
