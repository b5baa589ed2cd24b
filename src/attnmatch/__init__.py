"""attnmatch: attention-based neural text matching.

The public API is small on purpose::

    from attnmatch import Matcher

    matcher = Matcher.load("runs/demo/model")          # or fit(...), Matcher.from_encoder(...)
    matcher.rank("how are glacier caves formed?", ["A glacier cave is ...", "The Alps ..."])

- `Matcher`: load, save, score, rank, classify, explain, evaluate.
- `fit`, `distill`: train a Matcher from pairs in memory or a dataset (`attnmatch.training`).
- `Ranked`: one result of `Matcher.rank` (index, text, score).
- `Task`: what a model's outputs mean (ranking, classification, regression).
- `ExperimentConfig`, `train`: a training run from a config (what `attnmatch train` does).
- `load_split`: a benchmark split as `Example`s with its evaluation protocol.
- `list_models`, `list_presets`, `list_datasets`: what is registered.
- `attnmatch.runtime.load(path)`: an exported directory (`attnmatch export`) without torch, with
  `score`, `rank` and `classify` of `Matcher`'s signatures (`pip install 'attnmatch[serve-onnx]'`).
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

__all__ = [
    "__version__",
    "ExperimentConfig",
    "Matcher",
    "Ranked",
    "Task",
    "distill",
    "fit",
    "list_datasets",
    "list_models",
    "list_presets",
    "load_split",
    "train",
]

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.answering import Ranked
    from attnmatch.data.datasets import list_datasets, load_split
    from attnmatch.matcher import Matcher
    from attnmatch.models import list_models, list_presets
    from attnmatch.tasks import Task
    from attnmatch.training import ExperimentConfig, train
    from attnmatch.training.api import distill, fit

_LAZY = {
    "Matcher": "attnmatch.matcher",
    "Ranked": "attnmatch.answering",
    "Task": "attnmatch.tasks",
    "ExperimentConfig": "attnmatch.training",
    "train": "attnmatch.training",
    "fit": "attnmatch.training",
    "distill": "attnmatch.training",
    "list_models": "attnmatch.models",
    "list_presets": "attnmatch.models",
    "list_datasets": "attnmatch.data.datasets",
    "load_split": "attnmatch.data.datasets",
}


def __getattr__(name: str) -> Any:
    # Lazy so that `import attnmatch` (e.g. for the CLI's --help) stays fast.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'attnmatch' has no attribute {name!r}")
