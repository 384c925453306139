"""Root conftest: keeps optional-dependency modules out of doctest collection
when their dependency is missing, and the CLI entry point out entirely."""
import importlib.util

collect_ignore = ["setup.py", "paddle_llrd/__main__.py", "examples", "benchmarks", "docs", "scripts"]
# Each Trainer integration's doctests need its Trainer package, which lives in
# that integration's own virtualenv (scripts/integration_tests.sh).
for trainer_package in ("paddlenlp", "paddleformers"):
    if importlib.util.find_spec(trainer_package) is None:
        collect_ignore.append(f"paddle_llrd/integrations/{trainer_package}.py")
if importlib.util.find_spec("paddleformers") is None:
    collect_ignore.append("paddle_llrd/cli/train_config.py")  # the train command's config and arguments
    collect_ignore.append("paddle_llrd/cli/train_checks.py")  # the train command's config checks
    collect_ignore.append("paddle_llrd/cli/train_workflows.py")  # its PaddleFormers workflows
    collect_ignore.append("paddle_llrd/cli/tiny_llama.py")  # the model to try it with
