"""Without a working PaddleNLP, importing the integration says what to install.

Each case runs a fresh interpreter of this virtualenv with an import blocker
first on ``sys.meta_path``, so that the named package looks absent."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCKED_IMPORT = textwrap.dedent(
    """
    import sys

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name == BLOCKED or name.startswith(BLOCKED + "."):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    import paddle_llrd  # the package itself never needs paddlenlp
    try:
        import paddle_llrd.integrations.paddlenlp
    except ImportError as error:
        print("MESSAGE:", error)
        print("CAUSE:", type(error.__cause__).__name__)
    else:
        print("IMPORTED")
    """
)


@pytest.mark.parametrize(
    "blocked",
    [
        "paddlenlp",  # not installed
        "huggingface_hub",  # installed, but a dependency is missing or of the wrong version
    ],
)
def test_import_without_a_working_paddlenlp_says_what_to_install(blocked):
    result = subprocess.run(
        [sys.executable, "-c", f"BLOCKED = {blocked!r}\n" + BLOCKED_IMPORT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "IMPORTED" not in out
    assert "MESSAGE:" in out
    assert "pip install paddlenlp==2.8.1" in out
    for pin in ("huggingface_hub<0.26", "aistudio-sdk==0.1.7", "datasets<3", "pyarrow<17"):
        assert pin in out
    assert "requirements-paddlenlp.txt" in out
    assert blocked in out  # the original failure is shown too
    assert "CAUSE: ModuleNotFoundError" in out


def test_import_with_paddlenlp_works_in_this_environment():
    result = subprocess.run(
        [sys.executable, "-c", "BLOCKED = 'no-such-package'\n" + BLOCKED_IMPORT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "IMPORTED" in result.stdout
