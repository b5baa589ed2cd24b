"""MiniLM bi-encoder pair scoring: attnmatch's ONNX int8 export against sentence-transformers'
own ONNX backend (fp32 and each of its dynamic int8 configurations for x86: avx2, avx512,
avx512_vnni; the fastest is its best for this CPU), same model files, same pairs, one machine.

sentence-transformers' ONNX backend needs `optimum`, whose releases pin an older transformers
than attnmatch's dev environment, so it runs in a second virtual environment (`--st-python`,
e.g. `python -m venv st && st/bin/pip install torch "optimum[onnxruntime]" sentence-transformers`).
Both sides score the distinct texts once and compare them by cosine (what a user of either
library would do), with the same ONNX Runtime thread count, in interleaved rounds; the median of
the rounds is kept and the ratios are printed.

    python benchmarks/onnx_vs_sentence_transformers.py --st-python st/bin/python \
        --pairs 300 --rounds 3 --threads 1 --output results/onnx_vs_st_cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Runs inside the sentence-transformers environment: reads {"folder", "threads", "texts"}
# from stdin once, then answers each "go" line with the seconds of one scoring of the texts.
WORKER = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
from sentence_transformers import SentenceTransformer, __version__
from sentence_transformers.backend import export_dynamic_quantized_onnx_model
job = json.loads(sys.stdin.readline())
options = ort.SessionOptions()
options.intra_op_num_threads = job["threads"]
options.inter_op_num_threads = 1
fp32 = SentenceTransformer(job["folder"], backend="onnx", device="cpu",
                           model_kwargs={"session_options": options})
models = {"fp32": fp32}
for config in ("avx2", "avx512", "avx512_vnni"):
    export_dynamic_quantized_onnx_model(fp32, config, job["folder"])
    weights = "quint8" if config == "avx2" else "qint8"
    models[config] = SentenceTransformer(job["folder"], backend="onnx", device="cpu",
        model_kwargs={"file_name": f"onnx/model_{weights}_{config}.onnx",
                      "session_options": options})
left, right = job["left"], job["right"]
texts = sorted(set(left) | set(right))
def score(model):
    v = model.encode(texts, batch_size=32, normalize_embeddings=True)
    at = {t: i for i, t in enumerate(texts)}
    return (v[[at[t] for t in left]] * v[[at[t] for t in right]]).sum(1)
print(json.dumps({"version": __version__}), flush=True)
for line in sys.stdin:
    name = line.strip()
    start = time.perf_counter()
    scores = score(models[name])
    print(json.dumps({"seconds": time.perf_counter() - start,
                      "scores": [float(s) for s in scores]}), flush=True)
"""


def main() -> None:
    import numpy as np
    import torch

    from attnmatch.data.datasets import load_split
    from attnmatch.encoders import resolve_source
    from attnmatch.export import export_onnx
    from attnmatch.matcher import Matcher

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--st-python", required=True, help="python of the sentence-transformers venv")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work-dir", type=Path, default=Path("runs/onnx_vs_st"))
    ap.add_argument("--output", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # the exported model's sessions take torch's count
    examples = load_split("wikiqa", "test").examples[: args.pairs]
    left, right = [e.left for e in examples], [e.right for e in examples]
    work = args.work_dir
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(resolve_source("minilm-l6"), work / "st")  # the same model files for both
    export_onnx(Matcher.from_encoder("minilm-l6"), work / "ours-int8", quantize="int8")
    ours = Matcher.load(work / "ours-int8")
    st = subprocess.Popen(
        [args.st_python, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert st.stdin is not None and st.stdout is not None
    job = {"folder": str(work / "st"), "threads": args.threads, "left": left, "right": right}
    st.stdin.write(json.dumps(job) + "\n")
    st.stdin.flush()
    version = json.loads(st.stdout.readline())["version"]
    st_models = ("fp32", "avx2", "avx512", "avx512_vnni")
    times: dict[str, list[float]] = {"attnmatch onnx int8": []}
    times |= {f"st onnx {name}": [] for name in st_models}
    scores: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        start = time.perf_counter()
        scores["attnmatch onnx int8"] = ours.score(list(zip(left, right, strict=True))).tolist()
        times["attnmatch onnx int8"].append(time.perf_counter() - start)
        for name in st_models:
            st.stdin.write(name + "\n")
            st.stdin.flush()
            answer = json.loads(st.stdout.readline())
            times[f"st onnx {name}"].append(answer["seconds"])
            scores[f"st onnx {name}"] = answer["scores"]
    st.stdin.close()
    st.wait()
    rate = {k: args.pairs / statistics.median(v) for k, v in times.items()}
    ref = np.asarray(scores["st onnx fp32"])
    best = max((f"st onnx {n}" for n in st_models[1:]), key=lambda k: rate[k])
    result = {
        "machine": f"{platform.machine()}, {args.threads} thread(s); sentence-transformers {version}",
        "pairs": args.pairs,
        "rounds": args.rounds,
        "pairs_per_s": {k: round(v, 1) for k, v in rate.items()},
        "attnmatch int8 / st fp32": round(rate["attnmatch onnx int8"] / rate["st onnx fp32"], 2),
        "st best int8": best,
        "attnmatch int8 / st best int8": round(rate["attnmatch onnx int8"] / rate[best], 2),
        "max |score - st fp32|": {
            k: float(np.abs(np.asarray(v) - ref).max()) for k, v in scores.items()
        },
    }
    print(json.dumps(result, indent=2))
    if args.output is not None:
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
