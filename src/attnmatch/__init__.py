"""attnmatch: attention-based neural text matching.

The public API is small on purpose::

    from attnmatch import Matcher, load_model, list_models, list_datasets
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

__all__ = [
    "__version__",
    "Matcher",
    "load_model",
    "save_model",
    "list_models",
    "list_presets",
    "list_datasets",
]

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.data.datasets import list_datasets
    from attnmatch.model_dir import load_model, save_model
    from attnmatch.models import list_models, list_presets
    from attnmatch.predictor import Matcher


def __getattr__(name: str) -> Any:
    # Lazy so that `import attnmatch` (e.g. for the CLI's --help) stays fast.
    if name == "Matcher":
        from attnmatch.predictor import Matcher

        return Matcher
    if name in ("load_model", "save_model"):
        from attnmatch import model_dir

        return getattr(model_dir, name)
    if name in ("list_models", "list_presets"):
        from attnmatch import models

        return getattr(models, name)
    if name == "list_datasets":
        from attnmatch.data.datasets import list_datasets

        return list_datasets
    raise AttributeError(f"module 'attnmatch' has no attribute {name!r}")
