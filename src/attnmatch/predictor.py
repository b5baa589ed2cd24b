"""`Matcher`: score pairs and rank candidates with a saved model, from Python.

Example:
    >>> from attnmatch import Matcher
    >>> m = Matcher("runs/demo/model")                                    # doctest: +SKIP
    >>> m.rank("how are glacier caves formed?", ["A glacier cave is ...", "..."], top_k=1)  # doctest: +SKIP
    [Ranked(index=0, text='A glacier cave is ...', score=1.23)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnmatch.data.collate import collate
from attnmatch.data.encoding import encode_examples
from attnmatch.data.schema import Example
from attnmatch.evaluation import predict
from attnmatch.losses import ranking_scores, regression_predictions
from attnmatch.model_dir import LoadedModel, load_model
from attnmatch.models.build import encoding_options


@dataclass(frozen=True)
class Ranked:
    index: int
    text: str
    score: float


class Matcher:
    """A loaded model directory, ready to score text pairs.

    Args:
        model_dir: a folder written by `save_model` / `attnmatch train`.
        batch_size: pairs per inference batch.
        threads: torch CPU threads (None: torch's default).
    """

    def __init__(
        self,
        model_dir: str | Path | LoadedModel,
        *,
        batch_size: int = 512,
        threads: int | None = None,
    ):
        self.loaded = model_dir if isinstance(model_dir, LoadedModel) else load_model(model_dir)
        self.batch_size = batch_size
        if threads:
            torch.set_num_threads(threads)
        torch.set_flush_denormal(True)  # subnormal floats are ~10x slower on x86 CPUs

    @property
    def task(self) -> str:
        return self.loaded.task

    def outputs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The model's raw outputs (scores or logits) for (left, right) pairs: (N, num_outputs)."""
        for i, pair in enumerate(pairs):
            if len(pair) != 2 or not all(isinstance(t, str) for t in pair):
                raise ValueError(f"pair {i} is not a (str, str) tuple: {pair!r}")
        if len(pairs) == 0:
            return np.zeros((0, 1), dtype=np.float32)
        examples = [Example(left=a, right=b, label=0, group="q") for a, b in pairs]
        loaded = self.loaded
        data = encode_examples(
            examples, loaded.tokenizer, loaded.vocab, **encoding_options(loaded.model)
        )
        return predict(self.loaded.model, data, batch_size=self.batch_size)

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One score per (left, right) pair, higher = better match.

        Ranking models: their relevance score. Classification models: log P(last class) (e.g.
        "duplicate", "paraphrase"). Regression models: the predicted similarity, on the
        training data's scale (e.g. 0-5 for STS).

        Returns:
            (N,) float32.
        """
        out = torch.from_numpy(self.outputs(pairs))
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float32)
        if self.task == "regression":
            min_score = float(self.loaded.label_space.get("min_score", 0))
            return regression_predictions(out, min_score).numpy()
        return ranking_scores(out).numpy()

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The predicted class name of each pair (classification models only)."""
        if self.task != "classification":
            raise ValueError(f"classify needs a classification model; this one is {self.task}")
        out = self.outputs(pairs)
        names = self.loaded.label_space.get("class_names") or [str(i) for i in range(out.shape[1])]
        return [names[int(i)] for i in out.argmax(axis=1)] if len(pairs) else []

    def explain(self, left: str, right: str) -> dict[str, object]:
        """The model's attention maps for one pair, with the tokens they refer to.

        Returns:
            {"left_tokens", "right_tokens", and every tensor of the model's `attention(batch)`
            as a numpy array without the batch dimension} (e.g. aMV-LSTM: "left_gate" (L,),
            "interaction" (C, L, R)).

        Raises:
            NotImplementedError: the model has no `attention` method.
        """
        model = self.loaded.model
        attention = getattr(model, "attention", None)
        if attention is None:
            raise NotImplementedError(f"{type(model).__name__} exposes no attention maps")
        tok, vocab = self.loaded.tokenizer, self.loaded.vocab
        example = Example(left=left, right=right, label=0)
        data = encode_examples([example], tok, vocab, **encoding_options(model))
        with torch.inference_mode():
            maps = attention(collate(data, np.array([0])))
        out: dict[str, object] = {
            "left_tokens": tok.tokenize(left),
            "right_tokens": tok.tokenize(right),
        }
        out.update({k: v[0].float().numpy() for k, v in maps.items()})
        return out

    def rank(self, query: str, candidates: Sequence[str], top_k: int | None = None) -> list[Ranked]:
        """Candidates sorted by score, best first (ties keep the input order).

        Raises:
            ValueError: the query is empty or there are no candidates.
        """
        if not query.strip():
            raise ValueError("the query is empty")
        if not candidates:
            raise ValueError("no candidates to rank")
        scores = self.score([(query, c) for c in candidates])
        order = np.argsort(-scores, kind="stable")
        if top_k is not None:
            order = order[:top_k]
        return [Ranked(int(i), candidates[i], float(scores[i])) for i in order]
