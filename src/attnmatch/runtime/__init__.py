"""Serving, ranking and scoring an exported model without torch.

An exported directory (`attnmatch export MODEL --format onnx`: `attnmatch.export`) holds ONNX
graphs, config.json, the inputs' tokenizer.json or vocab.json and metrics.json. `load(path)`
runs it on ONNX Runtime with numpy and `tokenizers` alone: an install of `attnmatch[serve-onnx]`
(no torch) answers `attnmatch serve`, `rank` and `score` with it, and gives the same numbers as
`Matcher.load` of the same directory on a torch install.

Example:
    >>> from attnmatch import runtime
    >>> m = runtime.load("exported")                                # doctest: +SKIP
    >>> m.rank("how are glacier caves formed?", ["A glacier cave is ...", "The Alps"])  # doctest: +SKIP
    [Ranked(index=0, text='A glacier cave is ...', score=0.61), Ranked(index=1, ...)]
"""

from attnmatch.answering import Ranked
from attnmatch.runtime.exported import (
    ExportedMatcher,
    check_cpu_fp32,
    check_exported_backend,
    load,
)
from attnmatch.runtime.graphs import is_exported

__all__ = [
    "ExportedMatcher",
    "Ranked",
    "check_cpu_fp32",
    "check_exported_backend",
    "is_exported",
    "load",
]
