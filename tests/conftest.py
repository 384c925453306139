"""Shared test fixtures: every test starts from a fixed seed in dygraph mode
(tests_shared/seeding.py, the fixture of every test folder)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests_shared"))

from seeding import seeded_dygraph  # noqa: E402,F401  (autouse)
