"""How much of a teacher each input kind carries, before any training: every text the mean of
its token vectors, a pair scored by the cosine of the two means.

WikiQA test MAP (the official protocol: questions with a correct answer) and STS Benchmark test
Pearson, for each inputs spec given (the project's short names or `[inputs]` JSON objects). The
transformer itself ("minilm-l6": its last layer, mean-pooled, the zero-shot bi-encoder) is the
ceiling; static kinds read one vector per token with no context.

    python benchmarks/bag_of_vectors.py glove-6b-50d wordpiece static minilm-l6
    python benchmarks/bag_of_vectors.py '{"kind": "static", "source": "runs/teacher/model/encoder"}'
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from attnmatch.data.collate import pad_ids
from attnmatch.data.datasets import load_split
from attnmatch.inputs import TokenEncoderConfig, build_inputs, build_token_encoder, parse_inputs
from attnmatch.metrics.ranking import ranking_metrics
from attnmatch.metrics.regression import pearson


def mean_vectors(spec: str, texts: list[str]) -> np.ndarray:
    """(N, E) the masked mean of each text's token vectors under the inputs `spec`."""
    config = parse_inputs(json.loads(spec) if spec.startswith("{") else spec)
    inputs = build_inputs(config)
    inputs.fit(texts)
    encoder = build_token_encoder(TokenEncoderConfig(**inputs.encoder_config())).eval()
    inputs.init_encoder(encoder)
    ids = inputs.encode(texts)
    out = np.zeros((len(texts), encoder.config.output_dim), dtype=np.float32)
    order = np.argsort([len(x) for x in ids], kind="stable")
    with torch.inference_mode():
        for start in range(0, len(order), 128):
            idx = order[start : start + 128]
            tokens, mask = pad_ids([ids[i] for i in idx])  # (b, T)
            states = encoder(tokens, mask)  # (b, T, E)
            summed = (states * mask.unsqueeze(-1)).sum(1)  # (b, E)
            out[idx] = (summed / mask.sum(1, keepdim=True).clamp_min(1)).numpy()
    return out


def cosines(spec: str, lefts: list[str], rights: list[str]) -> np.ndarray:
    distinct = list(dict.fromkeys(lefts + rights))
    vectors = mean_vectors(spec, distinct)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)
    index = {t: i for i, t in enumerate(distinct)}
    a = vectors[[index[t] for t in lefts]]
    b = vectors[[index[t] for t in rights]]
    return (a * b).sum(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="inputs specs: short names or JSON objects")
    args = parser.parse_args()
    torch.set_num_threads(1)
    wikiqa = load_split("wikiqa", "test").examples
    sts = load_split("sts-benchmark", "test").examples
    print("| inputs | WikiQA test MAP | STS-B test Pearson | seconds |")
    print("|---|---|---|---|")
    for spec in args.inputs:
        start = time.perf_counter()
        scores = cosines(spec, [e.left for e in wikiqa], [e.right for e in wikiqa])
        summary, _ = ranking_metrics(
            scores,
            [e.label for e in wikiqa],
            [e.group for e in wikiqa],
            metrics=("map",),
            keep=lambda labels: max(labels) > 0,
        )
        r = pearson(
            cosines(spec, [e.left for e in sts], [e.right for e in sts]), [e.label for e in sts]
        )
        print(f"| {spec} | {summary['map']:.3f} | {r:.3f} | {time.perf_counter() - start:.0f} |")


if __name__ == "__main__":
    main()
