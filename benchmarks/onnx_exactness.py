"""ONNX against torch on whole test splits: fp32's largest output difference, and the metric
before and after int8 (MAP for ranking, Pearson for regression, accuracy for classification).

Models: MiniLM zero-shot (all-MiniLM-L6-v2, the cosine; on STS-B and the own-data similarity
pairs the uncalibrated line onto 0-5, whose Pearson is the cosine's; on the own-data paraphrase
pairs a threshold fitted on their train split, `Matcher.from_encoder`), and the MiniLM
cross-encoder with all-MiniLM-L6-v2's weights and an untrained head (`--cross`, on WikiQA:
for the fp32 difference only; its metric means nothing untrained).

Each split's examples are scored once per backend; the metric is the split's protocol
(`Matcher.evaluate`). fp32 must equal torch within 1e-5 (`attnmatch.export.EXACT_ATOL`).

Run: nice -n 10 python benchmarks/onnx_exactness.py [--cross] --output results/onnx_exactness.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmatch.data.datasets import load_split
from attnmatch.evaluation import report_from_outputs
from attnmatch.export import EXACT_ATOL, export_onnx
from attnmatch.matcher import Matcher
from attnmatch.tasks import RankingTask, Task

SPLITS = {
    "wikiqa:test": Task(kind="ranking"),
    "sts-benchmark:test": Task(kind="regression", min_score=0, max_score=5),
    "pairs:examples/own_data/faq:test": Task(kind="ranking"),
    "pairs:examples/own_data/paraphrase:test": Task(kind="classification", class_names=("0", "1")),
    "pairs:examples/own_data/similarity:test": Task(kind="regression", min_score=0, max_score=5),
}
PRIMARY = {"ranking": "map", "regression": "pearson", "classification": "accuracy"}


def zero_shot(ref: str, task: Task) -> Matcher:
    calibration = None
    if task.kind == "classification":
        folder = ref.split(":")[1]
        calibration = load_split("pairs", "train", data_dir=folder, task="classification").examples
    return Matcher.from_encoder("minilm-l6", task=task, calibration=calibration)


def compare(matcher: Matcher, ref: str, folder: Path, name: str) -> dict[str, Any]:
    # One export per model and head: the zero-shot matchers of one task are the same model.
    fp32_dir, int8_dir = folder / f"{name}-fp32", folder / f"{name}-int8"
    if not fp32_dir.exists():
        export_onnx(matcher, fp32_dir)
        export_onnx(matcher, int8_dir, quantize="int8")
    fp32, int8 = Matcher.load(fp32_dir), Matcher.load(int8_dir)
    kind, split, *rest = ref.split(":")
    options: dict[str, Any] = {"task": matcher.task.kind} if kind == "pairs" else {}
    name_split = rest[-1] if rest else split
    loaded = load_split(kind, name_split, data_dir=split if rest else None, **options)
    examples = loaded.examples
    protocol = matcher.task.protocol_for(loaded.protocol, examples, ref)
    data = matcher.encode(examples)
    outputs = {m: x.predict(data) for m, x in (("torch", matcher), ("fp32", fp32), ("int8", int8))}
    row: dict[str, Any] = {
        "split": ref,
        "model": name,
        "pairs": len(examples),
        "fp32_max_abs_diff": float(np.abs(outputs["fp32"] - outputs["torch"]).max()),
        "int8_max_abs_diff": float(np.abs(outputs["int8"] - outputs["torch"]).max()),
    }
    row["fp32_exact"] = row["fp32_max_abs_diff"] <= EXACT_ATOL
    metric = PRIMARY[matcher.task.kind]
    for label, key in (("torch", "torch"), ("onnx_fp32", "fp32"), ("onnx_int8", "int8")):
        report = report_from_outputs(outputs[key], data, protocol, task=matcher.task)
        row[f"{metric}_{label}"] = report.metrics[metric]
    row["int8_change"] = row[f"{metric}_onnx_int8"] - row[f"{metric}_torch"]
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--cross", action="store_true", help="Also the cross-encoder's fp32 difference."
    )
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--output", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for ref in args.splits.split(","):
            task = SPLITS[ref]
            key = f"zero-shot-{task.kind}" if task.kind != "classification" else f"zero-shot-{ref}"
            rows.append(
                compare(zero_shot(ref, task), ref, folder, key.replace(":", "_").replace("/", "_"))
            )
        if args.cross:
            cross = Matcher.untrained("cross_encoder", inputs="minilm-l6", task=RankingTask())
            for ref in ("wikiqa:test",):
                rows.append(compare(cross, ref, folder, "cross"))
    if args.output is not None:
        args.output.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
