"""Training and inference throughput per model on CPU (WikiQA batches by default; see --task).

Configuration (the reference setting): hidden size 50 (BiLSTM units per direction; for
HCRN and its baselines also the projection), MV-LSTM k-max 50, groups of 1 positive
+ 4 negatives, 32 groups a batch (160 pairs), each model's default inputs: GloVe 6B 50d (fixed)
word vectors, letter trigrams for DSSM and CDSSM, the frozen MiniLM encoder for the MiniLM
presets (`--inputs` sets the same inputs for every model). For each model it prints:

- training pairs/s: forward + loss + backward + Adam step on real training batches (length
  bucketed, as the trainer does), after a warm-up, best of 3 passes over the timed batches;
- one-epoch wall time: a full pass over the training sampler's epoch, including collation;
- inference pairs/s: `Matcher.predict` over every dev + test pair (8,898) at batch 32 and 512,
  on the model's inference path (whole-input, `attnmatch.models.fast`; shared encodings) and on the
  plain path (`forward` per length-bucketed batch, every pair's own encoding), alternating in
  one process (best of 3), with their ratio and the largest output difference.

With --reference each model is timed again with its reference path, in the same process: the
packed `nn.LSTM` for models on `BiRNN`, the step loop instead of the fused `nn.GRU` kernel for
IARNN's GRU, WORD and GATE (config `fused=False`), and masked amax/amin pooling over full
window maps for MP-CNN (config `fast_pooling=False`).

--shared-encoding times only inference on the CPU in fp32 at hidden size 50 (it refuses the
other modes' --inputs, --hidden-size, --task, --steps, --device, --precision and --reference),
for the MV-LSTM presets (default mvlstm,amvlstm_q; the siamese cbow_mlp, lstm and cnn also share
encodings):
WikiQA test (6,165 pairs) at batch 32 and 512, each distinct text encoded once per batch
(config `share_encodings`, the default) against every pair's own encoding (the plain path), in
the same process, alternating on/off in each repeat (best of --repeats). Three batchings
(--batching): "bucketed" (`Matcher.predict`'s length-sorted batches), "grouped" (the pairs in file
order, a question's candidates together, as a ranking service receives them) and "question" (one
question's candidates a batch, 1-30 pairs, as one /v1/rank request; batch printed as 0). It prints pairs/s for both paths, their
ratio, the mean distinct left texts per batch, the largest output difference between them, and
the plain path's pairs/s on the packed `nn.LSTM` instead of the hand-written one (BiLSTM models).

--task sts2015 times STS batches instead: SemEval train-2012-2014 (dev slice held out), 64 pairs a
batch, KL over the 6 score levels; inference over dev-2012-2014 + test-2015 (4,059 pairs).
--task sick_entailment: SICK entailment, 32 pairs a batch, 3-class cross-entropy; inference over
dev + test (5,427 pairs). MP-CNN keeps its own hidden_size (the output MLP's width, 150), not
--hidden-size.

--device cuda and --precision bf16/fp16 time the same on a GPU (`attnmatch.devices`; training
under autocast, with a GradScaler in fp16); the GPU is synchronised before a timer stops.

Run: python benchmarks/speed.py [--models mvlstm,amvlstm_q] [--threads 2] [--inputs random]
     python benchmarks/speed.py --models mpcnn_attention,mpcnn --task sts2015 --reference
     python benchmarks/speed.py --shared-encoding --threads 1
     python benchmarks/speed.py --models damm,esim:hidden_size=100 --task sick_entailment \
         --hidden-size 0   (0: each model's own hidden_size; name:key=value sets one model's)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time

import numpy as np
import torch

from attnmatch.data.collate import bucketed_batches, collate
from attnmatch.data.encoding import EncodedPairs
from attnmatch.devices import autocast, grad_scaler, module_device
from attnmatch.inputs import inputs_config_to_dict, parse_inputs
from attnmatch.matcher import Matcher
from attnmatch.models import get_preset, list_models, list_presets
from attnmatch.models._registry import get_model_entry
from attnmatch.nn.recurrent import BiRNN
from attnmatch.training import Experiment, ExperimentConfig, build_experiment, loop
from attnmatch.training.loop import batch_loss, make_sampler
from attnmatch.training.optim import make_optimizer

MVLSTM_PRESETS = ["mvlstm", "amvlstm_q"]
# --reference: the config switches of IARNN's step loop and MP-CNN's amax pooling.
REFERENCE_PATHS: dict[str, dict[str, object]] = {
    "iarnn": {"fused": False},
    "mpcnn": {"fast_pooling": False},
}


def train_throughput(
    exp: Experiment, batches, steps: int, warmup: int = 3, repeats: int = 3
) -> tuple[float, float]:
    model, t = exp.model, exp.config.train
    device = exp.matcher.device
    sampler = make_sampler(exp)
    optimizer = make_optimizer(model, t)
    scaler = grad_scaler(device, exp.matcher.precision)
    model.train()

    # The trainer's step (`loop.backward`); a source tree without it steps as the trainer did.
    backward = getattr(loop, "backward", None)

    def step(idx: np.ndarray) -> None:
        optimizer.zero_grad(set_to_none=True)
        if backward is not None:
            backward(exp, exp.train, idx, sampler.group_index(idx), scaler=scaler)
        else:
            batch = collate(exp.train, idx, group_index=sampler.group_index(idx)).to(device)
            loss = batch_loss(exp, batch)
            (loss if scaler is None else scaler.scale(loss)).backward()
        if t.grad_clip > 0:
            if scaler is not None:
                scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for idx in batches[:warmup]:
        step(idx)
    chosen = batches[warmup : warmup + steps]
    seconds = float("inf")
    for _ in range(repeats):  # best of `repeats`: the machines are noisy
        sync()
        start = time.perf_counter()
        for idx in chosen:
            step(idx)
        sync()
        seconds = min(seconds, time.perf_counter() - start)
    pairs = sum(len(b) for b in chosen)
    start = time.perf_counter()
    for idx in batches:
        step(idx)
    sync()
    epoch_s = time.perf_counter() - start
    return pairs / seconds, epoch_s


def concat(a: EncodedPairs, b: EncodedPairs) -> EncodedPairs:
    offset = len(a.texts)
    return EncodedPairs(
        texts=a.texts + b.texts,
        left=np.concatenate([a.left, b.left + offset]),
        right=np.concatenate([a.right, b.right + offset]),
        labels=np.concatenate([a.labels, b.labels]),
        group_ids=np.concatenate([a.group_ids, b.group_ids + len(a.group_names)]),
        group_names=a.group_names + b.group_names,
    )


def with_config(model: torch.nn.Module, **changes: object) -> torch.nn.Module:
    """`model` rebuilt from its config with `changes` (a speed switch, e.g.
    `share_encodings=False`), with the same weights, on the same device, in the same mode."""
    copy = type(model)(dataclasses.replace(model.config, **changes))
    copy.load_state_dict(model.state_dict())
    return copy.to(module_device(model)).train(model.training)


def plain_model(model: torch.nn.Module) -> torch.nn.Module:
    """`model`, or where its config shares encodings a copy that encodes every pair's own."""
    if getattr(model.config, "share_encodings", False):
        return with_config(model, share_encodings=False)
    return model


def forward_per_batch(
    matcher: Matcher, data: EncodedPairs, model: torch.nn.Module | None = None
) -> np.ndarray:
    """`Matcher.predict` on its plain path: `forward` of `model` (default: the matcher's) per
    length-bucketed batch, on the matcher's device and precision, whether or not the model has a
    whole-input path."""
    model = (model or matcher.model).eval()
    outputs = np.empty((len(data), model.config.num_outputs), dtype=np.float32)
    with torch.inference_mode(), autocast(matcher.device, matcher.precision):
        for idx in bucketed_batches(data, matcher.batch_size):
            outputs[idx] = model(collate(data, idx).to(matcher.device)).float().cpu().numpy()
    return outputs


def inference_rows(
    matcher: Matcher, data: EncodedPairs, repeats: int = 3, batch_sizes: tuple[int, ...] = (32, 512)
) -> dict[str, float]:
    """`Matcher.predict` pairs/s at each batch size on the model's inference path (its
    whole-input path in `attnmatch.models.fast` and shared encodings, where it has them) and on
    the plain path (`forward` per bucketed batch, every pair's own encoding), alternating in each
    repeat (best of `repeats`), with the largest difference between their outputs."""
    plain = plain_model(matcher.model)

    def run(fast: bool) -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        out = matcher.predict(data) if fast else forward_per_batch(matcher, data, plain)
        return time.perf_counter() - start, out

    row: dict[str, float] = {}
    for batch_size in batch_sizes:
        matcher.batch_size = batch_size
        best = {True: float("inf"), False: float("inf")}
        outputs = {fast: run(fast)[1] for fast in (True, False)}  # warm-up
        for _ in range(repeats):
            for fast in (True, False):
                seconds, outputs[fast] = run(fast)
                best[fast] = min(best[fast], seconds)
        row[f"infer_{batch_size}"] = len(data) / best[True]
        row[f"plain_{batch_size}"] = len(data) / best[False]
        diff = float(np.abs(outputs[True] - outputs[False]).max())
        row["max_abs_diff"] = max(row.get("max_abs_diff", 0.0), diff)
    return row


def shared_encoding_rows(
    model: torch.nn.Module, data: EncodedPairs, batch_size: int, order: str, repeats: int
) -> dict[str, float]:
    """Inference pairs/s with and without shared encodings on the same batches, alternating."""
    if order == "bucketed":
        batches = bucketed_batches(data, batch_size)
    elif order == "question":  # one question's candidates a batch, as one /v1/rank request
        batches = data.groups()
    else:  # file order: each question's candidates together
        idx = np.arange(len(data))
        batches = [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
    distinct = [len(np.unique(data.left[b])) for b in batches]
    models = {True: model.eval(), False: plain_model(model).eval()}  # sharing encodings or not
    rnns = {share: [m for m in models[share].modules() if isinstance(m, BiRNN)] for share in models}
    # Variants: shared encodings (hand-written LSTM), the plain path, the plain path on nn.LSTM.
    variants = {"shared": (True, True), "plain": (False, True)}
    if rnns[False]:
        variants["plain_nn_lstm"] = (False, False)

    def run(variant: str) -> tuple[float, np.ndarray]:
        share, fast = variants[variant]
        for rnn in rnns[share]:
            rnn.fast_cpu_lstm = fast
        out = np.empty(len(data), dtype=np.float32)
        start = time.perf_counter()
        with torch.inference_mode():  # as Matcher.predict: collate + forward per batch
            for b in batches:
                out[b] = models[share](collate(data, b))[:, -1].numpy()
        return time.perf_counter() - start, out

    for variant in variants:
        run(variant)  # warm-up
    best = dict.fromkeys(variants, float("inf"))
    outputs: dict[str, np.ndarray] = {}
    for _ in range(repeats):  # alternating, so load changes hit every variant alike
        for variant in variants:
            seconds, outputs[variant] = run(variant)
            best[variant] = min(best[variant], seconds)
    for rnn in rnns[False]:
        rnn.fast_cpu_lstm = True
    row = {f"{v}_pairs_per_s": len(data) / best[v] for v in variants}
    return row | {
        "ratio": best["plain"] / best["shared"],
        "distinct_left": float(np.mean(distinct)),
        "pairs_per_batch": len(data) / len(batches),
        "max_abs_diff": float(np.abs(outputs["shared"] - outputs["plain"]).max()),
    }


def shared_encoding_report(
    names: list[str], repeats: int, as_json: bool, orders: list[str]
) -> None:
    load = os.getloadavg()
    print(
        f"shared encodings, WikiQA test, {torch.get_num_threads()} threads, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (before), best of {repeats}"
    )
    print(
        f"{'model':12s} {'batching':9s} {'batch':>5s} {'pairs/b':>7s} {'lefts/b':>7s} "
        f"{'plain p/s':>10s} {'shared p/s':>10s} {'ratio':>6s} {'max |diff|':>10s} "
        f"{'nn.LSTM p/s':>11s}"
    )
    for name in names:
        config = ExperimentConfig.from_dict(
            {
                "model": name,
                "model_overrides": {"hidden_size": 50}
                | ({"k": 50} if _model_type(name) == "mvlstm" else {}),
                "data": {"dataset": "wikiqa"},
            }
        )
        torch.manual_seed(0)
        exp = build_experiment(config)
        if not hasattr(exp.model.config, "share_encodings"):
            raise SystemExit(f"--shared-encoding: {name} does not share encodings")
        assert exp.test is not None
        settings = [(o, b) for o in ("bucketed", "grouped") for b in (32, 512)]
        for order, batch_size in [*settings, ("question", 0)]:  # 0: a question's candidates
            if order not in orders:
                continue
            row = shared_encoding_rows(exp.model, exp.test.data, batch_size, order, repeats)
            print(
                f"{name:12s} {order:9s} {batch_size:5d} {row['pairs_per_batch']:7.1f} "
                f"{row['distinct_left']:7.1f} {row['plain_pairs_per_s']:10,.0f} "
                f"{row['shared_pairs_per_s']:10,.0f} {row['ratio']:6.2f} "
                f"{row['max_abs_diff']:10.1e} "
                f"{row.get('plain_nn_lstm_pairs_per_s', float('nan')):11,.0f}",
                flush=True,
            )
            if as_json:
                print(
                    json.dumps(
                        {"model": name, "batching": order, "batch": batch_size}
                        | {k: round(v, 8) for k, v in row.items()}
                    )
                )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def _model_type(name: str) -> str:
    return get_preset(name).model if name in list_presets() else name


def _parse_model(spec: str) -> tuple[str, dict[str, object]]:
    """ "esim:hidden_size=100:dropout=0.5" -> ("esim", {"hidden_size": 100, "dropout": 0.5})."""
    name, *items = spec.split(":")
    overrides: dict[str, object] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"--models: expected key=value after {name}:, got {item!r}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return name, overrides


def _parse_inputs(spec: str) -> dict[str, object]:
    """--inputs: a short name ("glove-6b-50d", "random", "trigrams", "minilm-l6", a vectors file)
    or an [inputs] table as JSON ('{"kind": "word_vectors", "vectors": "random", "dim": 100}')."""
    if spec.lstrip().startswith("{"):
        return dict(json.loads(spec))
    return inputs_config_to_dict(parse_inputs(spec))


TASKS = {
    "wikiqa": {
        "data": {"dataset": "wikiqa"},
        "train": {"num_negatives": 4, "batch_size": 32},
    },
    "sts2015": {
        "data": {
            "dataset": "semeval-sts",
            "train_split": "train-2012-2014",
            "dev_split": "dev-2012-2014",
            "test_split": "test-2015",
            "options": {"holdout": True},
        },
        "train": {"loss": "kl", "batch_size": 64},
    },
    "sick_entailment": {
        "data": {"dataset": "sick-entailment"},
        "train": {"loss": "cross_entropy", "batch_size": 32},
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    every = list_presets() + [m for m in list_models() if m not in list_presets()]
    ap.add_argument(
        "--models",
        default=None,
        help="presets or model types, each optionally with settings of its own: "
        "damm,esim:hidden_size=100:dropout=0.5",
    )
    ap.add_argument(
        "--inputs",
        default=None,
        help="the same inputs for every model: glove-6b-50d, random, trigrams, minilm-l6, or an "
        "[inputs] table as JSON (default: each model's own inputs)",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    ap.add_argument(
        "--hidden-size",
        type=int,
        default=50,
        help="hidden_size (not MP-CNN's or DAMM's); 0 keeps each model's own default",
    )
    ap.add_argument("--task", choices=sorted(TASKS), default="wikiqa", help="which batches")
    ap.add_argument("--steps", type=int, default=20, help="timed training batches")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per model")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    ap.add_argument(
        "--reference",
        action="store_true",
        help="also time each model with its reference path (packed nn.LSTM; IARNN: the step loop)",
    )
    ap.add_argument(
        "--shared-encoding",
        action="store_true",
        help="time only inference with and without shared encodings (MV-LSTM, siamese)",
    )
    ap.add_argument("--repeats", type=int, default=5, help="repeats for --shared-encoding")
    ap.add_argument(
        "--batching",
        default="bucketed,grouped,question",
        help="--shared-encoding batchings: bucketed, grouped, question (one question a batch)",
    )
    args = ap.parse_args()
    if args.shared_encoding:
        # That mode times the CPU inference of WikiQA test at hidden size 50 and nothing else.
        ignored = {
            "--inputs": args.inputs is not None,
            "--hidden-size": args.hidden_size != 50,
            "--task": args.task != "wikiqa",
            "--steps": args.steps != 20,
            "--device": args.device != "cpu",
            "--precision": args.precision != "fp32",
            "--reference": args.reference,
        }
        given = [flag for flag, set_ in ignored.items() if set_]
        if given:
            ap.error(
                f"--shared-encoding times CPU fp32 inference on WikiQA test at hidden size 50; "
                f"it does not take {', '.join(given)}"
            )
    models_given = args.models is not None
    if not models_given:
        args.models = ",".join(every)
    inputs = {"inputs": _parse_inputs(args.inputs)} if args.inputs else {}
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as the trainer does
    where = platform.processor() or platform.machine()
    if args.device != "cpu":
        from attnmatch.devices import resolve_device

        device = resolve_device(args.device, "--device")
        if device.type == "cuda":
            where = torch.cuda.get_device_name(device)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {where}, "
        f"{args.device} {args.precision}"
    )
    if args.shared_encoding:
        names = [n for n in args.models.split(",") if n] if models_given else MVLSTM_PRESETS
        shared_encoding_report(names, args.repeats, args.json, args.batching.split(","))
        return
    load = os.getloadavg()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f} (before); inference: Matcher.predict over dev + test, its "
        "path vs the plain path (forward per batch), alternating, best of 3"
    )
    print(
        f"{'model':24s} {'train pairs/s':>14s} {'epoch s':>8s} {'infer@32':>9s} {'plain@32':>9s} "
        f"{'ratio':>6s} {'infer@512':>10s} {'plain@512':>10s} {'ratio':>6s} {'max |diff|':>10s}"
    )
    variants = [(spec, True) for spec in args.models.split(",") if spec]
    if args.reference:
        variants = [(name, fast) for name, _ in variants for fast in (True, False)]
    for spec, fast in variants:
        name, own = _parse_model(spec)
        mtype = _model_type(name)
        # --hidden-size applies to models with that field (MP-CNN's is its output MLP: kept);
        # k is MV-LSTM's k-max pooling size.
        fields = {f.name for f in dataclasses.fields(get_model_entry(mtype).config_cls)}
        # DAMM's is its model size, split over its heads (50 does not split over 4): kept too.
        sized = args.hidden_size and mtype not in ("mpcnn", "damm") and "hidden_size" in fields
        overrides: dict[str, object] = {"hidden_size": args.hidden_size} if sized else {}
        if mtype == "mvlstm":
            overrides["k"] = 50
        if not fast:
            overrides.update(REFERENCE_PATHS.get(mtype, {}))
        overrides.update(own)
        config = ExperimentConfig.from_dict(
            {
                "model": name,
                "model_overrides": overrides,
                **inputs,  # none: the model's own (GloVe, trigrams for DSSM/CDSSM, MiniLM)
                **TASKS[args.task],
            }
        )
        torch.manual_seed(0)
        exp = build_experiment(config)
        exp.matcher.to(args.device, precision=args.precision)
        for module in exp.model.modules():
            if isinstance(module, BiRNN):
                module.fast_cpu_lstm = fast
        ref = {"iarnn": "step loop", "mpcnn": "amax pooling"}.get(mtype, "nn.LSTM ref")
        label = spec if fast else f"{spec} ({ref})"
        batches = make_sampler(exp).epoch(1)
        train_pps, epoch_s = train_throughput(exp, batches, args.steps)
        assert exp.dev is not None
        eval_data = concat(exp.dev.data, exp.test.data) if exp.test is not None else exp.dev.data
        inf = inference_rows(exp.matcher, eval_data)
        print(
            f"{label:24s} {train_pps:14,.0f} {epoch_s:8.2f} {inf['infer_32']:9,.0f} "
            f"{inf['plain_32']:9,.0f} {inf['infer_32'] / inf['plain_32']:6.2f} "
            f"{inf['infer_512']:10,.0f} {inf['plain_512']:10,.0f} "
            f"{inf['infer_512'] / inf['plain_512']:6.2f} {inf['max_abs_diff']:10.1e}",
            flush=True,
        )
        if args.json:
            print(
                json.dumps(
                    {
                        "model": label,
                        "train_pairs_per_s": round(train_pps, 1),
                        "epoch_s": round(epoch_s, 2),
                        "infer_pairs_per_s": round(inf["infer_512"], 1),
                        **{k: round(v, 8) for k, v in inf.items()},
                        "epoch_pairs": int(sum(len(b) for b in batches)),
                        "eval_pairs": len(eval_data),
                    }
                )
            )


if __name__ == "__main__":
    main()
