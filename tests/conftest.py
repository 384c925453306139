"""Shared test fixtures: every test starts from a fixed seed in dygraph mode
(tests_shared/seeding.py, the fixture of every test folder).

The tests live in folders that mirror the package (optim/, schedules/,
layer_decay/, integrations/, cli/, demo/); those that cross it (the package
and its install, the READMEs, docs and benchmarks, execution modes, several
processes, the GPU, an example) stay here, and user_paths/ runs the docs' and
examples' code as a user does. What several test modules share (the float64
references, the formulas, the scripts run in their own processes) lives in
helpers/, which is put on ``sys.path`` here so that a test imports it by name
(``from reference_adamw import ReferenceAdamW``). No test module imports
another. The test folders have no ``__init__.py``: pytest imports each test
module by its file name, so a test file's name is used once under tests/.
"""
import pathlib
import sys

TESTS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent / "tests_shared"))
sys.path.insert(0, str(TESTS / "helpers"))

from seeding import seeded_dygraph  # noqa: E402,F401  (autouse)
