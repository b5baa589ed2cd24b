"""Does fitting the static vectors to the task's corpus help? (tokenlearn-style, measured on dev)

Static inputs (`inputs.kind = "static"`) are model2vec's: each vocabulary token passed through
the teacher once, with no context. Tokenlearn (Tulkens and van Dongen, the model2vec authors)
goes one step further: it trains the table so that the mean of a text's token vectors predicts
the teacher's embedding of the whole text, on a corpus. This script tries that on the training
texts of the task only (no dev or test text is seen while fitting):

1. the teacher embeds every distinct training text once (mean-pooled, as it scores);
2. the table E (initialised with the static vectors) and a linear map W (static dims -> the
   teacher's dims, initialised by least squares) are trained to maximise
   cos(W mean(E[tokens]), teacher(text)), Adam, a few epochs;
3. the bag-of-vectors cosine (each text the mean of its token vectors, in E's space, no W) is
   measured on dev before fitting and after each epoch, and on test once for the dev-best
   (the unfitted table included among the candidates): WikiQA MAP (questions with a correct
   answer) or STS Benchmark Pearson.

    python benchmarks/static_fit.py --teacher runs/modern/wikiqa-bi-encoder/seed-1/model \
        --dataset wikiqa
    python benchmarks/static_fit.py --teacher minilm-l6 --dataset sts-benchmark
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from attnmatch.atomic import atomic_directory
from attnmatch.data.collate import pad_ids
from attnmatch.data.datasets import load_split
from attnmatch.inputs import TokenEncoderConfig, build_inputs, build_token_encoder, parse_inputs
from attnmatch.matcher import Matcher
from attnmatch.metrics.ranking import ranking_metrics
from attnmatch.metrics.regression import pearson


def means(table: torch.Tensor, ids: list[list[int]]) -> torch.Tensor:
    """(N, E) the mean of each text's rows of `table` (differentiable)."""
    tokens, mask = pad_ids(ids)  # (N, T)
    vectors = table[tokens] * mask.unsqueeze(-1)  # (N, T, E)
    return vectors.sum(1) / mask.sum(1, keepdim=True).clamp_min(1)  # (N, E)


def metric(table: torch.Tensor, encode, examples, kind: str) -> float:
    """The bag-of-vectors cosine's MAP (ranking) or Pearson (similarity) on `examples`."""
    texts = list(dict.fromkeys([e.left for e in examples] + [e.right for e in examples]))
    index = {t: i for i, t in enumerate(texts)}
    with torch.no_grad():
        vectors = torch.cat(
            [means(table, encode(texts[i : i + 512])) for i in range(0, len(texts), 512)]
        )
    vectors = F.normalize(vectors, dim=-1).numpy()
    a = vectors[[index[e.left] for e in examples]]
    b = vectors[[index[e.right] for e in examples]]
    scores = (a * b).sum(1)
    labels = [e.label for e in examples]
    if kind == "map":
        summary, _ = ranking_metrics(
            scores,
            labels,
            [e.group for e in examples],
            metrics=("map",),
            keep=lambda ls: max(ls) > 0,
        )
        return float(summary["map"])
    return float(pearson(scores, labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", required=True, help="a bi-encoder model folder or minilm-l6")
    parser.add_argument("--dataset", default="wikiqa", choices=["wikiqa", "sts-benchmark"])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--save", type=Path, default=None, help="write the dev-best table here (a model2vec folder)"
    )
    args = parser.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(1)
    kind = "map" if args.dataset == "wikiqa" else "pearson"
    source = args.teacher if Path(args.teacher).is_dir() else "minilm-l6"
    inputs = build_inputs(parse_inputs({"kind": "static", "source": source}))
    train = load_split(args.dataset, "train").examples
    texts = list(dict.fromkeys([e.left for e in train] + [e.right for e in train]))
    inputs.fit(texts)
    encoder = build_token_encoder(TokenEncoderConfig(**inputs.encoder_config()))
    inputs.init_encoder(encoder)
    table = encoder.embedding.weight.detach().clone()
    dev, test = (load_split(args.dataset, s).examples for s in ("dev", "test"))
    best = (metric(table, inputs.encode, dev, kind), 0, table.clone())
    print(f"before fitting: dev {kind} {best[0]:.3f}", flush=True)

    start = time.perf_counter()
    teacher = (
        Matcher.load(args.teacher)
        if Path(args.teacher).is_dir()
        else Matcher.from_encoder("minilm-l6")
    )
    targets = torch.as_tensor(np.asarray(teacher.embed(texts), dtype=np.float32))  # (N, D)
    print(
        f"teacher: embedded {len(texts):,} training texts in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    ids = inputs.encode(texts)
    with torch.no_grad():
        x = torch.cat([means(table, ids[i : i + 512]) for i in range(0, len(ids), 512)])
        w0 = torch.linalg.lstsq(x, targets).solution  # (E, D)
    table = torch.nn.Parameter(table)
    w = torch.nn.Parameter(w0)
    optimizer = torch.optim.Adam([table, w], lr=args.lr)
    order = np.arange(len(texts))
    rng = np.random.default_rng(1)
    for epoch in range(1, args.epochs + 1):
        rng.shuffle(order)
        total = 0.0
        for i in range(0, len(order), args.batch_size):
            batch = order[i : i + args.batch_size]
            pred = means(table, [ids[j] for j in batch]) @ w  # (b, D)
            loss = (1 - F.cosine_similarity(pred, targets[batch], dim=-1)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(batch)
        score = metric(table.detach(), inputs.encode, dev, kind)
        print(f"epoch {epoch}: loss {total / len(order):.4f}; dev {kind} {score:.3f}", flush=True)
        if score > best[0]:
            best = (score, epoch, table.detach().clone())
    chosen = "no fitting" if best[1] == 0 else f"epoch {best[1]}"
    before = metric(encoder.embedding.weight.detach(), inputs.encode, test, kind)
    after = metric(best[2], inputs.encode, test, kind)
    print(
        f"dev-best: {chosen} (dev {best[0]:.3f}); test {kind} {after:.3f} (unfitted {before:.3f})"
    )
    if args.save is not None:
        save_static(best[2], inputs.directory, args.save)
        print(f"saved to {args.save} (use it as --inputs static:{args.save})")


def save_static(table: torch.Tensor, source: Path, target: Path) -> None:
    """`table` as a model2vec folder at `target` (atomically): the source folder's tokenizer
    and config, the new `embeddings`."""
    with atomic_directory(target) as tmp:
        for name in ("tokenizer.json", "config.json"):
            shutil.copy(source / name, tmp / name)
        save_file({"embeddings": table.contiguous()}, str(tmp / "model.safetensors"))


if __name__ == "__main__":
    main()
