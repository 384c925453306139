"""Without a working PaddleNLP, importing the integration says what to install
(each case a fresh interpreter with the named package blocked,
tests_shared/import_error.py)."""
from __future__ import annotations

import pytest
from import_error import assert_says_what_to_install, import_output

MODULE = "paddle_llrd.integrations.paddlenlp"


@pytest.mark.parametrize(
    "blocked",
    [
        "paddlenlp",  # not installed
        "huggingface_hub",  # installed, but a dependency is missing or of the wrong version
    ],
)
def test_import_without_a_working_paddlenlp_says_what_to_install(blocked):
    assert_says_what_to_install(
        import_output(MODULE, blocked),
        blocked,
        package="paddlenlp==2.8.1",
        pins=("huggingface_hub<0.26", "aistudio-sdk==0.1.7", "datasets<3", "pyarrow<17"),
        requirements_file="requirements-paddlenlp.txt",
    )


def test_import_with_paddlenlp_works_in_this_environment():
    assert "IMPORTED" in import_output(MODULE, "no-such-package")
