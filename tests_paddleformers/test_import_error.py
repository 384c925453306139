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
