"""Without a working PaddleFormers, importing the integration says what to
install (each case a fresh interpreter with the named package blocked,
tests_shared/import_error.py); the shared implementation imports no framework."""
from __future__ import annotations

import pytest
from import_error import assert_says_what_to_install, import_output

MODULE = "paddle_llrd.integrations.paddleformers"


@pytest.mark.parametrize(
    "blocked",
    [
        "paddleformers",  # not installed
        "pyarrow",  # installed, but a dependency is missing or of the wrong version
    ],
)
def test_import_without_a_working_paddleformers_says_what_to_install(blocked):
    assert_says_what_to_install(
        import_output(MODULE, blocked),
        blocked,
        package="paddleformers==1.2.0",
        pins=("numpy<=1.26.4", "pyarrow<26"),
        requirements_file="requirements-paddleformers.txt",
    )


def test_import_with_paddleformers_works_in_this_environment():
    assert "IMPORTED" in import_output(MODULE, "no-such-package")


SHARED_MODULES = [f"paddle_llrd.integrations.{name}" for name in (
    "averaging", "builders", "layer_logging", "plateau_callback", "requirements", "run_state", "trainer",
    "training_arguments",
    "visualdl")]


@pytest.mark.parametrize("framework", ["paddleformers", "paddlenlp"])
def test_the_shared_implementation_imports_no_framework(framework):
    # one fresh interpreter per framework: a module that imports it fails there, and is named
    assert import_output(SHARED_MODULES, framework).strip() == "IMPORTED"


COMMAND_WITHOUT = """
import sys

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == BLOCKED or name.startswith(BLOCKED + "."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)

sys.meta_path.insert(0, Blocker())
from paddle_llrd.cli import main
raise SystemExit(main(ARGUMENTS))
"""


def run_without(blocked: str, arguments: list, cwd):
    import subprocess
    import sys

    code = f"BLOCKED = {blocked!r}\nARGUMENTS = {arguments!r}\n" + COMMAND_WITHOUT
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("command, arguments, blocked", [
    ("train", ["config.yaml"], "paddleformers"),  # not installed
    ("train", ["config.yaml"], "pyarrow"),  # installed, but a dependency of its Trainer is missing or of the wrong version
    ("tiny-llama", ["tiny-llama"], "paddleformers"),  # (it needs no pyarrow)
])
def test_a_command_without_paddleformers_names_the_set_up_command_and_the_interpreter(command, arguments, blocked,
                                                                                      tmp_path):
    """docs/paddleformers_cli.rst "Set-up": one line (exit status 2) naming ``make train-env`` and the
    interpreter to run the command with, not pins to install into this environment; nothing written."""
    done = run_without(blocked, [command, *arguments], tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"python -m paddle_llrd {command}: error: this command needs PaddleFormers 1.2.0"), line
    assert "`make train-env`" in line and f"`.venv-paddleformers/bin/python -m paddle_llrd {command} ...`" in line
    assert blocked in line and "pip install paddleformers" not in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["train", "tiny-llama"])
def test_help_needs_no_paddleformers(command, tmp_path):
    """``--help`` shows the command's flags (exit status 0) where PaddleFormers does not import."""
    done = run_without("paddleformers", [command, "--help"], tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"usage: python -m paddle_llrd {command}"), done.stdout
