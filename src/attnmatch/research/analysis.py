"""Where in the answer does a model attend? Attention weight by normalised token position.

Reproduces the analysis of Wang et al. (2016), "Inner Attention based Recurrent Neural Networks
for Answer Selection" (IARNN), §5.1, Figures 5-6: outer attention over a bidirectional RNN's
states is biased to the end of the answer, inner attention (IARNN) much less.

For every right text (the answer) of every pair with m >= 1 real tokens and weights
w_0..w_{m-1}, token i sits at the normalised position (i + 0.5) / m in (0, 1) and falls into
bin floor(position * bins). Per bin we average the raw weight and the *relative* weight
w_i / mean_j w_j (1.0 = uniform attention, whatever the text's length). A right text is counted
once per pair, since its attention depends on the left text too.

Example:
    >>> import numpy as np
    >>> r = bin_positions([np.array([0.2, 0.8])], bins=2)
    >>> r["mean_relative_weight"]
    [0.4, 1.6]
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch import configs
from attnmatch.atomic import write_bytes_atomic, write_text_atomic
from attnmatch.data.collate import bucketed_batches, collate
from attnmatch.data.schema import Example
from attnmatch.matcher import Matcher
from attnmatch.models.contract import attention_maps, capabilities, model_config
from attnmatch.strict_json import dumps_json

PLOT_INSTALL_HINT = "install it with `pip install 'attnmatch[plot]'`"


class PositionHistogram:
    """Accumulates attention weights per normalised-position bin, batch by batch.

    Args:
        bins: the number of equal-width bins over (0, 1).
    """

    def __init__(self, bins: int = 10) -> None:
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        self.bins = bins
        self.weight_sum = np.zeros(bins, dtype=np.float64)
        self.relative_sum = np.zeros(bins, dtype=np.float64)
        self.tokens = np.zeros(bins, dtype=np.int64)
        self.relative_tokens = np.zeros(bins, dtype=np.int64)
        self.num_texts = 0
        self.num_zero_texts = 0

    def add(self, weights: np.ndarray, mask: np.ndarray) -> None:
        """Adds a batch of texts.

        Shape:
            weights: (N, T) float, mask: (N, T) bool, True on real tokens (need not be a prefix).
        """
        weights = np.asarray(weights, dtype=np.float64)
        mask = np.asarray(mask, dtype=bool)
        if weights.ndim != 2 or weights.shape != mask.shape:
            raise ValueError(
                f"weights and mask must both be (N, T); got {weights.shape} and {mask.shape}"
            )
        if not np.isfinite(weights[mask]).all():
            raise ValueError("attention weights contain NaN or infinity on real tokens")
        lengths = mask.sum(axis=1)  # (N,)
        keep = lengths > 0
        weights, mask, lengths = weights[keep], mask[keep], lengths[keep]
        if not len(lengths):
            return
        position = np.cumsum(mask, axis=1) - 1  # (N, T) index i among the text's real tokens
        m = np.broadcast_to(lengths[:, None], mask.shape)  # (N, T)
        # floor((i + 0.5) / m * bins) in exact integer arithmetic; always < bins.
        bin_index = ((2 * position + 1) * self.bins) // (2 * m)  # (N, T)
        w = np.where(mask, weights, 0.0)  # (N, T)
        totals = w.sum(axis=1)  # (N,)
        nonzero = totals != 0  # (N,) texts with all-zero weights have no relative weights
        relative = w * (lengths / np.where(nonzero, totals, 1.0))[:, None]  # (N, T) w_i / mean w

        idx = bin_index[mask]
        self.weight_sum += np.bincount(idx, weights=w[mask], minlength=self.bins)
        self.tokens += np.bincount(idx, minlength=self.bins)
        rel_mask = mask & nonzero[:, None]
        rel_idx = bin_index[rel_mask]
        self.relative_sum += np.bincount(rel_idx, weights=relative[rel_mask], minlength=self.bins)
        self.relative_tokens += np.bincount(rel_idx, minlength=self.bins)
        self.num_texts += int(len(lengths))
        self.num_zero_texts += int((~nonzero).sum())

    def result(self) -> dict[str, Any]:
        """Per-bin means (None for a bin without tokens) and counts, JSON-able."""
        mean_weight = _means(self.weight_sum, self.tokens)
        mean_relative = _means(self.relative_sum, self.relative_tokens)
        first, last = mean_relative[0], mean_relative[-1]
        return {
            "bins": self.bins,
            "num_texts": self.num_texts,
            "num_zero_weight_texts": self.num_zero_texts,
            "num_tokens": int(self.tokens.sum()),
            "bin_edges": [i / self.bins for i in range(self.bins + 1)],
            "mean_weight": mean_weight,
            "mean_relative_weight": mean_relative,
            "tokens_per_bin": [int(n) for n in self.tokens],
            "first_last_ratio": last / first if first and last is not None else None,
        }


def _means(sums: np.ndarray, counts: np.ndarray) -> list[float | None]:
    return [float(s / n) if n else None for s, n in zip(sums, counts, strict=True)]


def bin_positions(
    weights: Sequence[np.ndarray] | np.ndarray, bins: int = 10, *, mask: np.ndarray | None = None
) -> dict[str, Any]:
    """Mean raw and relative attention weight per normalised-position bin.

    Token i of a text with m real tokens has position p = (i + 0.5) / m and bin floor(p * bins);
    its relative weight is w_i / mean_j w_j (texts whose weights sum to 0 get none).

    Args:
        weights: one 1-D array per text, or a padded (N, T) array.
        bins: the number of equal-width bins over (0, 1).
        mask: (N, T) bool, True on real tokens, for a padded array (default: every entry is real).

    Returns:
        {"bins", "num_texts", "num_zero_weight_texts", "num_tokens", "bin_edges",
        "mean_weight", "mean_relative_weight", "tokens_per_bin", "first_last_ratio"}; a bin
        without tokens has mean None; "first_last_ratio" is the last bin's mean relative weight
        over the first's (None if either is missing or the first is 0).

    Example:
        >>> bin_positions([np.array([1.0, 1.0, 4.0])], bins=3)["mean_relative_weight"]
        [0.5, 0.5, 2.0]
    """
    hist = PositionHistogram(bins)
    if isinstance(weights, np.ndarray) and weights.ndim == 2:
        hist.add(weights, np.ones(weights.shape, dtype=bool) if mask is None else mask)
        return hist.result()
    if mask is not None:
        raise ValueError("mask is only for a padded (N, T) array of weights")
    texts = [np.asarray(w, dtype=np.float64).reshape(-1) for w in weights]
    width = max((len(t) for t in texts), default=0)
    padded = np.zeros((len(texts), width), dtype=np.float64)  # (N, T)
    real = np.zeros((len(texts), width), dtype=bool)  # (N, T)
    for row, t in enumerate(texts):
        padded[row, : len(t)] = t
        real[row, : len(t)] = True
    hist.add(padded, real)
    return hist.result()


def _load_examples(
    dataset: str, data_dir: str | Path | None, options: dict[str, Any], max_pairs: int | None
) -> tuple[str, str, list[Example]]:
    from attnmatch.data.datasets import load_split, parse_dataset_ref

    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1 or None, got {max_pairs}")
    name, split = parse_dataset_ref(dataset, default_split="test")
    examples = list(load_split(name, split, data_dir=data_dir, **options).examples)
    if max_pairs is not None:
        examples = examples[:max_pairs]  # the first N: deterministic
    if not examples:
        raise ValueError(f"{name}:{split} has no pairs")
    return name, split, examples


@torch.inference_mode()
def _histogram(
    loaded: Matcher,
    examples: list[Example],
    *,
    key: str,
    bins: int,
    batch_size: int,
    device: str,
) -> PositionHistogram:
    model, where = loaded.model, loaded.path
    attention = partial(attention_maps, model)
    if not capabilities(model).explains:
        raise ValueError(
            f"{where}: model {loaded.model_type!r} has no attention() method, "
            f"so it returns no attention {key!r}"
        )
    data = loaded.encode(examples)
    hist = PositionHistogram(bins)
    was_training = model.training
    model.eval()
    try:
        for idx in bucketed_batches(data, batch_size):
            batch = collate(data, idx).to(device)
            out = attention(batch)
            if key not in out:
                raise ValueError(
                    f"{where}: model {loaded.model_type!r} returns no attention {key!r}; "
                    f"it returns {sorted(out)} (pass one of them as the key)"
                )
            weights = out[key]  # (B, R)
            if tuple(weights.shape) != tuple(batch.right_mask.shape):
                raise ValueError(
                    f"{where}: attention {key!r} has shape {tuple(weights.shape)}; expected "
                    f"(B, R) = {tuple(batch.right_mask.shape)}, weights over the right text"
                )
            hist.add(weights.float().cpu().numpy(), batch.right_mask.cpu().numpy())
    finally:
        model.train(was_training)
    return hist


def _model_info(loaded: Matcher) -> dict[str, Any]:
    experiment = loaded.metrics.get("experiment")
    preset = experiment.get("model") if isinstance(experiment, dict) else None
    config = model_config(loaded.model)
    return {
        "model_dir": str(loaded.path),
        "model_type": loaded.model_type,
        "preset": preset,
        "trained_on": loaded.metrics.get("dataset"),
        "config": configs.to_dict(config) if config is not None else {},
    }


def attention_position(
    model_dir: str | Path,
    dataset: str,
    *,
    key: str = "right_attention",
    bins: int = 10,
    max_pairs: int | None = None,
    data_dir: str | Path | None = None,
    batch_size: int = 256,
    options: dict[str, Any] | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """A saved model's mean attention over the right text (answer) by normalised position.

    Args:
        model_dir: a saved model directory whose model has `attention(batch)`.
        dataset: `"name:split"` (the split defaults to test).
        key: the `attention()` output with the (B, R) weights over the right text:
            "right_attention" (IARNN/OARNN) or "right_gate" (aMV-LSTM (A), (Q+A)).
        bins: equal-width position bins over (0, 1).
        max_pairs: only the first N pairs of the split (for speed).
        data_dir: the dataset folder (default: search).
        batch_size: pairs per forward pass.
        options: dataset options, e.g. {"source": "xml"}.
        device: where the model runs.

    Returns:
        the model's info ("model_dir", "model_type", "preset", "trained_on", "config"),
        "dataset", "split", "key", and `bin_positions`'s fields over every pair's right text.

    Raises:
        ValueError: the model has no `attention()` or returns no `key` (the message names the
            model directory, the key and the keys the model returns); bad dataset or options.
    """
    name, split, examples = _load_examples(dataset, data_dir, options or {}, max_pairs)
    loaded = Matcher.load(model_dir, device=device)
    return _result(loaded, name, split, examples, key, bins, batch_size, device)


def _result(
    loaded: Matcher,
    name: str,
    split: str,
    examples: list[Example],
    key: str,
    bins: int,
    batch_size: int,
    device: str,
) -> dict[str, Any]:
    hist = _histogram(loaded, examples, key=key, bins=bins, batch_size=batch_size, device=device)
    return _model_info(loaded) | {"dataset": name, "split": split, "key": key} | hist.result()


def attention_position_many(
    model_dirs: Sequence[str | Path],
    dataset: str,
    *,
    labels: Sequence[str] | None = None,
    key: str = "right_attention",
    bins: int = 10,
    max_pairs: int | None = None,
    data_dir: str | Path | None = None,
    batch_size: int = 256,
    options: dict[str, Any] | None = None,
    device: str = "cpu",
) -> list[dict[str, Any]]:
    """`attention_position` for several models on one split (read once); each result gets a
    "label" (default: its model directory).

    Raises:
        ValueError: no model directories, or `labels` of another length.
    """
    if not model_dirs:
        raise ValueError("no model directories given")
    if labels is not None and len(labels) != len(model_dirs):
        raise ValueError(f"{len(labels)} labels for {len(model_dirs)} model directories")
    names = list(labels) if labels is not None else [str(d) for d in model_dirs]
    name, split, examples = _load_examples(dataset, data_dir, options or {}, max_pairs)
    results = []
    for model_dir, label in zip(model_dirs, names, strict=True):
        loaded = Matcher.load(model_dir, device=device)
        result = _result(loaded, name, split, examples, key, bins, batch_size, device)
        results.append({"label": label} | result)
    return results


def write_results_json(path: str | Path, results: list[dict[str, Any]]) -> None:
    """Writes {"models": results} as strict JSON (a value that is not a finite number is null),
    atomically."""
    write_text_atomic(path, dumps_json({"models": results}, indent=2) + "\n")


def plot_attention_position(
    results: Sequence[dict[str, Any]], labels: Sequence[str], path: str | Path
) -> Path:
    """Plots mean relative weight against position, one line per model, to a PNG (atomically).

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: `labels` and `results` differ in length, or no results.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(f"plotting needs matplotlib: {PLOT_INSTALL_HINT}") from None
    if not results:
        raise ValueError("nothing to plot: no results")
    if len(labels) != len(results):
        raise ValueError(f"{len(labels)} labels for {len(results)} results")
    fig = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(fig)  # the Agg backend, without pyplot's global state
    ax = fig.add_subplot()
    for result, label in zip(results, labels, strict=True):
        edges = result["bin_edges"]
        centres = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
        y = [np.nan if v is None else v for v in result["mean_relative_weight"]]
        ax.plot(centres, y, marker="o", label=label)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="uniform")
    ax.set_xlim(0, 1)
    ax.set_xlabel("normalised position in the answer (right text)")
    ax.set_ylabel("mean relative attention weight")
    first = results[0]
    ax.set_title(f"Attention by position: {first['dataset']}:{first['split']} ({first['key']})")
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    path = Path(path)
    write_bytes_atomic(path, buffer.getvalue())
    return path
