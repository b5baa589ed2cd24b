"""Pairs/s of the MiniLM bi- and cross-encoder: torch, ONNX fp32, ONNX int8 and a
sentence-transformers-style ONNX Runtime run, side by side on 1 and 2 threads, interleaved.

Every configuration scores the same pairs (the first `--pairs` pairs of WikiQA test, texts as
given, tokenization included) with the same all-MiniLM-L6-v2 weights, torch and the exports in
the same batches (`--batch-size` pairs, length-bucketed: equal batching):

- torch: `Matcher.score` on the torch model (the bi-encoder encodes each distinct text once,
  in batches of at most 4,096 padded tokens);
- onnx-fp32 / onnx-int8: `Matcher.score` on the exported directory (`attnmatch.export.export_onnx`,
  `quantize=None` / `"int8"`, the int8 `attnmatch.export.INT8` writes; the bi-encoder encodes
  each distinct text once, the cross-encoder's pairs are packed in numpy before its graph);
- st-style-onnx: what sentence-transformers' ONNX backend runs, done here with ONNX Runtime
  directly because that backend needs `optimum`, which is not installed here: the Hugging Face
  tokenizer, the transformer exported to ONNX (input_ids, attention_mask, token_type_ids ->
  hidden states; optimum's export), batches of 32 sorted by length; the bi-encoder encodes the
  distinct texts once and mean-pools (SentenceTransformer.encode), the cross-encoder feeds the
  tokenizer's packed pairs and reads the head on [CLS] (CrossEncoder.predict). It is labelled
  st-style-onnx, not sentence-transformers, in the output.

Each round times every configuration once, in a fresh random order; the reported figure is the
median pairs/s over `--rounds` rounds, and the ratios are taken against torch on the same thread
count. The machine may be shared: run under `nice`, read the ratios; on one thread the rates
over the process's CPU seconds (`cpu`) are printed too, which other processes' load barely
moves (on 2 threads they add the threads' seconds and are left out).

Run: nice -n 10 python benchmarks/onnx_speed.py --pairs 300 --rounds 5 --threads 1 \\
         --batch-size 32 --output results/onnx_speed_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch.data.datasets import load_split
from attnmatch.encoders import resolve_source
from attnmatch.export import export_onnx
from attnmatch.matcher import Matcher
from attnmatch.tasks import RankingTask

ST_BATCH = 32  # sentence-transformers' default batch size


def wikiqa_pairs(n: int) -> list[tuple[str, str]]:
    examples = load_split("wikiqa", "test").examples[:n]
    return [(e.left, e.right) for e in examples]


def _hf_tokenizer(source: Path) -> Any:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(source / "tokenizer.json"))


class _BertWithHead(torch.nn.Module):
    """The transformer as sentence-transformers' ONNX export holds it, plus the cross-encoder's
    head on [CLS] when given."""

    def __init__(self, bert: torch.nn.Module, head: torch.nn.Module | None) -> None:
        super().__init__()
        self.bert, self.head = bert, head

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]
        return hidden if self.head is None else self.head(hidden[:, 0])


def st_style(matcher: Matcher, kind: str, folder: Path, threads: int) -> Callable[..., Any]:
    """A scorer of pairs as sentence-transformers' ONNX backend runs them (module docstring)."""
    import onnxruntime as ort

    encoder = matcher.model.token_encoder  # a TransformerTokenEncoder
    module = _BertWithHead(encoder.transformer, matcher.model.head if kind == "cross" else None)
    file = folder / f"st-{kind}.onnx"
    if not file.exists():
        x = torch.ones(2, 8, dtype=torch.long)
        axes = {n: {0: "batch", 1: "length"} for n in ("ids", "mask", "types")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module.eval(),
                (x, x, torch.zeros_like(x)),
                str(file),
                dynamo=False,
                opset_version=17,
                input_names=["ids", "mask", "types"],
                output_names=["out"],
                dynamic_axes=axes | {"out": {0: "batch"}},
            )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
    tokenizer = _hf_tokenizer(resolve_source("minilm-l6"))

    def run(batch: dict[str, np.ndarray]) -> np.ndarray:
        feed = {"ids": batch["input_ids"], "mask": batch["attention_mask"]}
        return session.run(None, feed | {"types": batch["token_type_ids"]})[0]

    def score_bi(pairs: list[tuple[str, str]]) -> np.ndarray:
        texts = sorted({t for p in pairs for t in p}, key=len)
        vectors = {}
        for i in range(0, len(texts), ST_BATCH):
            chunk = texts[i : i + ST_BATCH]
            batch = tokenizer(
                chunk,
                padding=True,
                truncation=True,
                max_length=256,
                return_tensors="np",
                return_token_type_ids=True,
            )
            hidden = run(batch)  # (b, T, H)
            mask = batch["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
            vectors.update(zip(chunk, pooled, strict=True))
        u = np.stack([vectors[a] for a, _ in pairs])
        v = np.stack([vectors[b] for _, b in pairs])
        return (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))

    def score_cross(pairs: list[tuple[str, str]]) -> np.ndarray:
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.empty(len(pairs), dtype=np.float32)
        for i in range(0, len(order), ST_BATCH):
            idx = order[i : i + ST_BATCH]
            lefts, rights = [pairs[j][0] for j in idx], [pairs[j][1] for j in idx]
            batch = tokenizer(
                lefts,
                rights,
                padding=True,
                truncation=True,
                max_length=512,
                return_tensors="np",
                return_token_type_ids=True,
            )
            out[idx] = run(batch)[:, 0]
        return out

    return score_bi if kind == "bi" else score_cross


def build(kind: str, folder: Path, batch_size: int) -> tuple[Matcher, Path, Path]:
    """The torch matcher of `kind` and its fp32 and int8 exports (written once into `folder`)."""
    if kind == "bi":
        matcher = Matcher.from_encoder("minilm-l6")
    else:  # weights of all-MiniLM-L6-v2 and a fresh head: the cost is the trained one's
        matcher = Matcher.untrained("cross_encoder", inputs="minilm-l6", task=RankingTask())
    matcher.batch_size = batch_size
    fp32, int8 = folder / f"{kind}-fp32", folder / f"{kind}-int8"
    if not fp32.exists():
        export_onnx(matcher, fp32)
    if not int8.exists():
        export_onnx(matcher, int8, quantize="int8")
    return matcher, fp32, int8


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="bi,cross")
    ap.add_argument("--batch-size", type=int, default=32, help="Pairs a batch (torch and ONNX).")
    ap.add_argument("--work-dir", type=Path, default=None, help="Keep the exports here.")
    ap.add_argument("--output", type=Path, default=None)
    args = ap.parse_args()
    pairs = wikiqa_pairs(args.pairs)
    folder = args.work_dir or Path(tempfile.mkdtemp(prefix="onnx-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    built = {kind: build(kind, folder, args.batch_size) for kind in args.models.split(",")}
    scorers: dict[tuple[str, int, str], Callable[..., Any]] = {}
    outputs: dict[tuple[str, str], np.ndarray] = {}
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)  # the exported matchers' sessions take torch's count
        for kind, (matcher, fp32, int8) in built.items():
            scorers[kind, threads, "torch"] = matcher.score
            scorers[kind, threads, "onnx-fp32"] = Matcher.load(
                fp32, batch_size=args.batch_size
            ).score
            scorers[kind, threads, "onnx-int8"] = Matcher.load(
                int8, batch_size=args.batch_size
            ).score
            scorers[kind, threads, "st-style-onnx"] = st_style(matcher, kind, folder, threads)
    times: dict[tuple[str, int, str], list[float]] = {key: [] for key in scorers}
    cpu_times: dict[tuple[str, int, str], list[float]] = {key: [] for key in scorers}
    rng = random.Random(0)
    for key, score in scorers.items():  # warm-up, and the outputs for the agreement check
        torch.set_num_threads(key[1])
        outputs[key[0], key[2]] = np.asarray(score(pairs[:64])).reshape(-1)
    for r in range(args.rounds):
        keys = list(scorers)
        rng.shuffle(keys)
        for key in keys:
            torch.set_num_threads(key[1])
            start, cpu = time.perf_counter(), time.process_time()
            scorers[key](pairs)
            times[key].append(len(pairs) / (time.perf_counter() - start))
            cpu_times[key].append(len(pairs) / (time.process_time() - cpu))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    rows = []
    for (kind, threads, config), rates in times.items():
        base = statistics.median(times[kind, threads, "torch"])
        rate = statistics.median(rates)
        agree = float(np.abs(outputs[kind, config] - outputs[kind, "torch"]).max())
        rows.append(
            {
                "model": kind,
                "threads": threads,
                "config": config,
                "pairs_per_s": round(rate, 1),
                "vs_torch": round(rate / base, 2),
                "max_abs_diff_vs_torch_64_pairs": agree,
                "rates": [round(x, 1) for x in rates],
            }
        )
        if threads == 1:
            cpu, cpu_base = (statistics.median(cpu_times[kind, 1, c]) for c in (config, "torch"))
            rows[-1] |= {"pairs_per_cpu_s": round(cpu, 1), "cpu_vs_torch": round(cpu / cpu_base, 2)}
    for row in rows:
        st = statistics.median(times[row["model"], row["threads"], "st-style-onnx"])
        row["vs_st_style"] = round(row["pairs_per_s"] / st, 2)
    print(
        f"{'model':6} {'thr':>3} {'config':14} {'pairs/s':>9} {'x torch':>8} {'x st':>6} "
        f"{'cpu p/s':>8} {'cpu x torch':>11}"
    )
    for row in rows:
        print(
            f"{row['model']:6} {row['threads']:>3} {row['config']:14} {row['pairs_per_s']:>9} "
            f"{row['vs_torch']:>8} {row['vs_st_style']:>6} {row.get('pairs_per_cpu_s', '-'):>8} "
            f"{row.get('cpu_vs_torch', '-'):>11}"
        )
    if args.output is not None:
        meta = {
            "pairs": len(pairs),
            "rounds": args.rounds,
            "batch_size": args.batch_size,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "machine": platform.processor() or platform.machine(),
            "torch": torch.__version__,
            "note": "shared machine: compare the ratios; st-style-onnx is ONNX Runtime run as "
            "sentence-transformers' ONNX backend runs it, not sentence-transformers itself "
            "(its backend needs optimum, not installed)",
        }
        args.output.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
