"""Importing an integration in a fresh interpreter with one package made to
look absent: the check both integrations' import-error tests share."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Sequence, Union

_BLOCKED_IMPORT = textwrap.dedent(
    """
    import sys

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name == BLOCKED or name.startswith(BLOCKED + "."):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    import paddle_llrd  # the package itself never needs a Trainer framework
    for module in MODULES:
        try:
            __import__(module)
        except ImportError as error:
            print("MODULE:", module)
            print("MESSAGE:", error)
            print("CAUSE:", type(error.__cause__).__name__)
            break
    else:
        print("IMPORTED")
    """
)


def import_output(modules: Union[str, Sequence[str]], blocked: str) -> str:
    """What importing ``modules`` (one name or several, in order) prints when
    ``blocked`` cannot be imported: ``IMPORTED``, or for the first that fails
    its name (``MODULE:``) and the ImportError's ``MESSAGE:`` and ``CAUSE:``."""
    names = [modules] if isinstance(modules, str) else list(modules)
    result = subprocess.run(
        [sys.executable, "-c", f"BLOCKED = {blocked!r}\nMODULES = {names!r}\n" + _BLOCKED_IMPORT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_says_what_to_install(out: str, blocked: str, package: str, pins: Sequence[str], requirements_file: str) -> None:
    """``out`` (from :func:`import_output`) is the integration's ImportError,
    and it says ``pip install <package>`` with each of ``pins``, names
    ``requirements_file`` and shows the original failure on ``blocked``."""
    assert "IMPORTED" not in out
    assert "MESSAGE:" in out
    assert f"pip install {package}" in out
    for pin in pins:
        assert pin in out
    assert requirements_file in out
    assert blocked in out  # the original failure is shown too
    assert "CAUSE: ModuleNotFoundError" in out
