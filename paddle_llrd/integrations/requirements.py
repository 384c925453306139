"""What an integration module says when its framework does not import."""
from __future__ import annotations

__all__ = ["framework_import_error"]


def framework_import_error(module: str, framework: str, install: str, cause: ImportError) -> ImportError:
    """The :class:`ImportError` the integration module ``module`` raises when
    its framework (``framework``, e.g. ``"PaddleFormers 1.2.0"``) does not
    import: what to install (``install``, or the repository's
    ``requirements-<integration>.txt``) and the original failure.

    Examples:
        >>> print(framework_import_error("paddle_llrd.integrations.x", "X 1.0", "pip install x==1.0",
        ...                              ModuleNotFoundError("No module named 'x'")))
        paddle_llrd.integrations.x needs X 1.0 and versions of its dependencies that import beside Paddle 3; install them with: pip install x==1.0 (or `pip install -r requirements-x.txt` from the paddle_llrd repository). The import failed with: No module named 'x'
    """
    integration = module.rsplit(".", 1)[-1]
    return ImportError(
        f"{module} needs {framework} and versions of its dependencies that import beside Paddle 3; "
        f"install them with: {install} (or `pip install -r requirements-{integration}.txt` from the "
        f"paddle_llrd repository). The import failed with: {cause}"
    )
