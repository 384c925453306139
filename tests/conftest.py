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
A package warning that a test module meets on its way is filtered here by
its class (EXPECTED_WARNINGS); every other is asserted where it is met, so
``make test`` ends with no warnings summary of the package's classes.
"""
import pathlib
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent / "tests_shared"))
sys.path.insert(0, str(TESTS / "helpers"))

from seeding import seeded_dygraph  # noqa: E402,F401  (autouse)

#: Warnings of the package that a test module meets on the way to what it tests, by class (never by text):
#: the differential cases draw models whose parameter names have no ``encoder.layers.N`` block and still set a
#: layer decay, which AdamWDL says with a LayerMapWarning (tests/layer_decay/test_layerwise_warning.py asserts it).
#: Every other warning of the package is asserted with pytest.warns where a test meets it.
EXPECTED_WARNINGS = {"optim/test_adamwdl_differential.py": ("LayerMapWarning",)}


def pytest_collection_modifyitems(items):
    for item in items:
        try:
            module = pathlib.Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
        except ValueError:  # a doctest of the package, or a test outside tests/
            continue
        for name in EXPECTED_WARNINGS.get(module, ()):
            item.add_marker(pytest.mark.filterwarnings(f"ignore::paddle_llrd.warning_classes.{name}"))
