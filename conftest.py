"""Root conftest: keeps optional-dependency modules out of doctest collection
when their dependency is missing, and the CLI entry point out entirely."""
import importlib.util

collect_ignore = ["setup.py", "paddle_llrd/__main__.py", "examples", "benchmarks", "docs", "scripts"]
if importlib.util.find_spec("paddlenlp") is None:
    collect_ignore.append("paddle_llrd/integrations/paddlenlp.py")
