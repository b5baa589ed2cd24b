"""The memory of a training run: its peak, freed memory given back, and a stated limit.

Where a fine-tuning's memory goes (the MiniLM bi-encoder on the first 880 questions of WikiQA
train, one thread; `benchmarks/finetune_memory.py` and per-step probes of RSS): Python, torch,
the model, its gradients and AdamW's two moments hold about 0.65 GB; one optimiser step's
activations, 16 groups of 6 texts each side padded to its longest text, 1 to 1.8 GB more (the
widest batch, 119 sub-words); dev scoring (128 pairs a batch) and the zero-shot floor's batches
(512 texts) less. What made the peak grow with the run was none of these but the C allocator:
glibc kept the memory each step freed and, its blocks fragmented by the next steps' tensors of
other shapes, took new memory for them, so that the process held 2.5 GB between steps after
the first and its peak rose step after step (3.8 GB after 60 steps, 4.8 GB for the whole run
of 112 steps with a 100-question dev and test), while the tensors alive at once never exceeded
about 2.7 GB.

So, on glibc, `Releaser` gives freed memory back (`malloc_trim`) after a step or an
evaluation that left the process holding more than `TRIM_ABOVE_MB` above where the last
release left it: small models never reach it (no cost), a transformer's steps do. Measured:
0.9 GB held between steps instead of 2.7 and a peak of 3.2 GB instead of 3.7 after 30 steps
(about 15% more CPU time for the steps: the page faults of memory taken again); the whole run
above peaked at 3.2 GB instead of 4.8, with the same dev and test MAP to the last digit, in 8%
more CPU time. It changes no result.

`train.max_memory` (MB) states a limit: when the run's estimated peak, the memory held when
training starts plus the gradients, the optimiser's moments and the activations of the widest
batch of the first epoch (`activation_mb`, an upper estimate), is above it, a fine-tuned
transformer encoder recomputes its layers' activations in the backward pass (gradient
checkpointing: the same weights bit for bit, the dropout masks included; measured about 40%
more CPU time, a peak of 1.3 GB instead of 2.75 over 30 steps with the memory given back).

The process's peak resident memory (`peak_rss_mb`, `getrusage`'s ru_maxrss) is recorded in
metrics.json and printed with the run's result.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

TRIM_ABOVE_MB = 256  # freed memory given back when the process holds this much more
# Bytes an upper estimate counts per token and layer (times the hidden size, the feed-forward
# size) and per attention cell (scores, probabilities, dropout mask and output), in training.
_PER_HIDDEN, _PER_INTERMEDIATE, _PER_CELL = 24, 8, 13


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (ru_maxrss: KB on Linux, bytes on
    macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def rss_mb() -> float | None:
    """The process's resident memory now, in MB (None where /proc is not there)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * resource.getpagesize() / 2**20


@cache
def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, or None (another C library, or no C library found)."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


class Releaser:
    """Gives the memory the process freed back to the system (glibc's `malloc_trim`) when it
    holds more than `TRIM_ABOVE_MB` above where the last release left it (module docstring);
    does nothing elsewhere."""

    def __init__(self) -> None:
        self.trim = _malloc_trim()
        self.level = rss_mb()
        self.releases = 0

    def __call__(self) -> None:
        if self.trim is None or self.level is None:
            return
        now = rss_mb()
        if now is not None and now - self.level > TRIM_ABOVE_MB:
            self.trim(0)
            self.releases += 1
            self.level = rss_mb()


def release() -> None:
    """Gives freed memory back to the system now (glibc; no-op elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def transformer_of(model: nn.Module) -> nn.Module | None:
    """The fine-tuned transformer encoder the model reads its inputs with, if any."""
    from attnmatch.inputs.transformer_layer import fine_tuned_transformer
    from attnmatch.models import input_layer

    try:
        encoder = input_layer(model)
    except (AttributeError, TypeError):
        return None
    return fine_tuned_transformer(encoder)


def activation_mb(encoder: nn.Module, batches: list[tuple[int, int]]) -> float:
    """An upper estimate of the training activations of a transformer encoder for the widest
    of `batches`, each (texts, sub-words of its longest text), in MB."""
    transformer: Any = encoder.transformer  # a Hugging Face model
    config = transformer.config
    hidden, inner = int(config.hidden_size), int(config.intermediate_size)
    heads, layers = int(config.num_attention_heads), int(config.num_hidden_layers)
    per_token = hidden * _PER_HIDDEN + inner * _PER_INTERMEDIATE
    widest = max(
        rows * width * per_token + rows * heads * width * width * _PER_CELL
        for rows, width in batches
    )
    return layers * widest / 2**20


def batch_shapes(data: Any, batches: list[np.ndarray]) -> list[tuple[int, int]]:
    """(texts, longest) of each side of each batch of pair rows of `data` (EncodedPairs),
    each distinct text once."""
    lengths = data.text_lengths
    shapes = []
    for idx in batches:
        for side in (data.left[idx], data.right[idx]):
            distinct = np.unique(side)
            shapes.append((len(distinct), max(int(lengths[distinct].max(initial=0)), 1)))
    return shapes


def plan(model: nn.Module, data: Any, batches: list[np.ndarray], limit: int | None) -> str | None:
    """Under `limit` (train.max_memory, MB), gradient checkpointing for a fine-tuned transformer
    encoder when the run's estimated peak is above it (module docstring). The line to say, or
    None (no limit, no fine-tuned transformer, or the estimate under the limit)."""
    encoder = transformer_of(model)
    if limit is None or encoder is None or not batches:
        return None
    held = rss_mb() or 0.0
    states = sum(p.numel() * p.element_size() for p in model.parameters()) * 3 / 2**20
    needed = activation_mb(encoder, batch_shapes(data, batches))
    estimate = held + states + needed
    if estimate <= limit:
        return (
            f"memory: estimated peak {estimate:,.0f} MB (held {held:,.0f}, gradients and "
            f"optimiser {states:,.0f}, the widest batch's activations {needed:,.0f}), under "
            f"train.max_memory = {limit:,} MB"
        )
    transformer: Any = encoder.transformer  # a Hugging Face model
    transformer.config.use_cache = False  # else a warning that it is turned off
    kwargs = {"use_reentrant": False}  # the RNG state is kept
    if hasattr(transformer, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        transformer.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        transformer.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    line = (
        f"memory: estimated peak {estimate:,.0f} MB (the widest batch's activations "
        f"{needed:,.0f}) is over train.max_memory = {limit:,} MB: the encoder's activations "
        "are recomputed in the backward pass (gradient checkpointing: the same results, "
        "about 40% more CPU time)"
    )
    return line
