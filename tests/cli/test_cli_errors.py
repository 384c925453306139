"""The command line as a user runs it: ``python -m paddle_llrd ...``
in a fresh process. A bad flag is argparse's one-line error (exit status 2)
naming the flag, never a traceback; ``schedules`` with a warmup longer than
training prints its table (numbers against schedule_formulas.py); ``lr-table``
treats ``--decay 0`` alike in both styles (refused: a decay of 0 is a freeze).
``python -m paddle_llrd`` without a command is a usage error (exit status 2).
``--help`` is plain text, and ``lr-table`` prints a line per layer group; a
warning of the package is one line naming its class.
The flag checks that need no fresh process run in-process below."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from paddle_llrd.cli.lr_table import main as lr_table_main
from schedule_table_reference import parse_rows, reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*arguments: str, cwd=ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "paddle_llrd", *arguments], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=180,
    )


def error_line(stderr: str) -> str:
    """The one line of argparse's error (the usage lines above it aside)."""
    errors = [line for line in stderr.splitlines() if " error: " in line]
    assert len(errors) == 1 and stderr.splitlines()[-1] == errors[0], stderr
    assert "Traceback" not in stderr, stderr
    return errors[0]


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (["--decay", "-0.5"], "argument --decay: expected a finite number > 0, got '-0.5'"),
        (["--learning-rate", "-1"], "argument --learning-rate: expected a finite number >= 0, got '-1'"),
        (["--pattern", "("], "argument --pattern: '(' is no regular expression: missing ), unterminated subpattern"),
        (["--model", "nonexistent.mod:build"],
         "--model: cannot import module 'nonexistent.mod': No module named 'nonexistent'"),
        (["--decay", "0"], "argument --decay: expected a finite number > 0, got '0'"),
        (["--decay", "0", "--style", "groups"], "argument --decay: expected a finite number > 0, got '0'"),
    ],
    ids=["negative-decay", "negative-lr", "bad-regex", "missing-module", "zero-decay-params", "zero-decay-groups"],
)
def test_lr_table_bad_flags_are_one_line_usage_errors(arguments, expected):
    done = run_cli("lr-table", "--layers", "1", *arguments)
    assert done.returncode == 2, done.stderr
    line = error_line(done.stderr)
    assert line.startswith("python -m paddle_llrd lr-table: error: "), line
    assert expected in line, line
    assert done.stdout == ""


def test_schedules_with_a_warmup_longer_than_training_prints_the_table():
    lr, warmup, total = 5e-5, 2000, 1000
    done = run_cli("schedules", "--warmup-steps", str(warmup), "--no-plot")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "longer than training" not in done.stderr, done.stderr  # said once, in the note
    assert "Note: --warmup-steps 2000 is longer than --total-steps 1000" in done.stdout
    steps, rows = parse_rows(done.stdout)
    assert steps == [0, 250, 500, 750, 1000, 1100, 2000]  # the end of the warmup included
    for name in ("linear", "cosine", "polynomial", "constant_with_warmup", "cosine_with_restarts"):
        expected = [reference(name, lr, warmup, total, s) for s in steps]
        assert rows[name] == pytest.approx(expected, rel=6e-4, abs=1e-12), name
    for name in ("warmup_stable_decay", "cosine_annealing_with_warmup", "linear_annealing_with_warmup"):
        assert "error:" in rows[name], name  # their decay stage cannot fit: reported, the table goes on


# In-process: argparse exits the same way (SystemExit 2, the error on stderr).
@pytest.mark.parametrize(
    "arguments, expected",
    [
        (["--weight-decay", "-1"], "argument --weight-decay: expected a finite number >= 0"),
        (["--decay", "nan"], "argument --decay: expected a finite number > 0, got 'nan'"),
        (["--decay", "abc"], "argument --decay: expected a number, got 'abc'"),
        (["--layers", "0"], "argument --layers: expected an integer >= 1"),
        (["--n-layers", "0"], "argument --n-layers: expected an integer >= 1"),
        (["--pattern", r"(a)(\d+)"], "argument --pattern: '(a)(\\\\d+)' has 2 groups; it needs exactly one"),
        (["--n-layers", "1", "--layers", "3"], "--family/--n-layers: `n_layers`=1 but the model has a block with index 2"),
        (["--pattern", r"^nothing\.(\d+)\."], "--pattern: layer_map='^nothing\\\\.(\\\\d+)\\\\.': no parameter name"),
        (["--pattern", r"^nothing\.(\d+)\.", "--style", "groups"], "--pattern: layer_map='^nothing"),
        (["--arch", "llama", "--pattern", r"model\.(\w+)\."], "--pattern: layer_map pattern 'model\\\\.(\\\\w+)\\\\.' matches"),
        (["--model", "no_colon_here"], "--model must look like 'package.module:factory'"),
        (["--model", "paddle_llrd.models.tiny_bert:nothing"], "--model: 'paddle_llrd.models.tiny_bert' has no callable"),
        (["--model", "paddle_llrd.models.tiny_bert:TinyBertConfig"], "returned TinyBertConfig, not a paddle.nn.Layer"),
    ],
)
def test_lr_table_flag_errors_name_the_flag(arguments, expected, capsys):
    with pytest.raises(SystemExit) as info:
        lr_table_main(arguments)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert expected in error_line(captured.err)


def test_no_command_prints_the_commands_and_is_a_usage_error():
    """``python -m paddle_llrd`` alone is a usage error (exit status 2, the commands on stderr), not a success."""
    done = run_cli()
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert "usage: python -m paddle_llrd COMMAND [flags]" in lines
    for command in ("demo", "schedules", "lr-table", "train"):
        assert any(line.split()[:1] == [command] for line in lines), done.stderr
    assert lines[-1] == "python -m paddle_llrd: error: a COMMAND is required"


def test_an_unknown_command_suggests_the_closest_and_help_is_not_an_error():
    done = run_cli("trian", "config.yaml")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "python -m paddle_llrd: error: unknown command 'trian'. Did you mean 'train'?"
    shown = run_cli("--help")
    assert shown.returncode == 0 and shown.stdout.startswith("usage: python -m paddle_llrd COMMAND [flags]")


@pytest.mark.parametrize("command", ["demo", "schedules", "lr-table"])
def test_help_is_plain_text(command):
    """What a terminal shows: no reStructuredText markup (double backticks, roles) from the docstrings."""
    shown = run_cli(command, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith(f"usage: python -m paddle_llrd {command}"), shown.stderr
    assert not re.search(r"``|:(class|func|meth|data|doc|ref|mod):`", shown.stdout), shown.stdout


def test_a_package_warning_is_one_line_naming_its_class_not_a_source_line():
    """``--decay 1.5`` trains lower layers faster than the head: the command says so in one line, as
    ``train``'s console does, attributed to no file (it read ``<frozen runpy>:88: ...``), and prints the
    table with the embeddings at ``1.5 ** 3``."""
    done = run_cli("lr-table", "--layers", "2", "--decay", "1.5")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning (DecayAboveOneWarning): "), done.stderr
    assert "`layerwise_decay`=1.5 is greater than 1" in lines[0]
    embeddings = [line.split() for line in done.stdout.splitlines() if line.startswith("embeddings ")]
    assert float(embeddings[0][1]) == 1.5**3


def test_lr_table_prints_a_line_per_layer_group_by_default():
    """A 12-block BERT: a line for the embeddings, each block and the head between the header and the
    totals, not one per parameter."""
    shown = run_cli("lr-table", "--layers", "12")
    assert shown.returncode == 0, shown.stderr
    groups = [line.split()[0] for line in shown.stdout.splitlines()[1:-1]]
    assert groups == ["embeddings", *[f"layer_{i}" for i in range(12)], "head"], shown.stdout


def test_lr_table_a_small_positive_decay_is_taken_by_both_styles(capsys):
    for style in ("params", "groups"):
        assert lr_table_main(["--layers", "1", "--decay", "1e-3", "--learning-rate", "1", "--style", style]) == 0
        assert "decay=0.001" in capsys.readouterr().out.splitlines()[-1]


@pytest.mark.skipif(importlib.util.find_spec("paddleformers") is not None, reason="PaddleFormers is installed here")
def test_train_without_paddleformers_is_one_line_naming_what_to_install():
    done = run_cli("train", "config.yaml")
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout)
    line = error_line(done.stderr)
    assert line.startswith("python -m paddle_llrd train: error: "), line
    # the environment's set-up command and its pins' file, not pins to install into this environment
    assert "`make train-env`" in line and "requirements-paddleformers.txt" in line, line
    assert "pip install paddleformers==" not in line, line


@pytest.mark.skipif(importlib.util.find_spec("paddleformers") is not None,
                    reason="PaddleFormers is here: tests_paddleformers/test_import_error.py blocks it instead")
@pytest.mark.parametrize("command, arguments", [("train", ["config.yaml"]), ("tiny-llama", ["tiny-llama"])])
def test_the_paddleformers_commands_say_in_one_line_how_to_set_their_environment_up(command, arguments, tmp_path):
    """docs/paddleformers_cli.rst "Set-up": in this environment, which has no PaddleFormers, the command
    says in one line (exit status 2, no import notice before it) to run ``make train-env`` and which
    interpreter to run it with; ``--help`` needs no PaddleFormers and shows the command's flags."""
    done = run_cli(command, *arguments, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"python -m paddle_llrd {command}: error: this command needs PaddleFormers 1.2.0"), line
    assert "`make train-env`" in line and f"`.venv-paddleformers/bin/python -m paddle_llrd {command} ...`" in line
    assert list(tmp_path.iterdir()) == []  # nothing written
    helped = run_cli(command, "--help")
    assert helped.returncode == 0 and helped.stderr == "", helped.stderr
    assert helped.stdout.startswith(f"usage: python -m paddle_llrd {command}"), helped.stdout