"""The trainer: one short, explicit loop.

epochs -> batches -> loss -> step; evaluate on dev after every epoch; keep the best model by the
dev protocol's primary metric; stop early after `patience` epochs without improvement; write an
atomic checkpoint every epoch. Every epoch re-seeds torch and the sampler from (seed, epoch), so
`resume=True` after a crash gives the same result as an uninterrupted run. The test split is
evaluated once, with the dev-selected model, at the end.
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from attnmatch import __version__
from attnmatch.atomic import write_text_atomic
from attnmatch.configs import ConfigError
from attnmatch.configs import merge as configs_merge
from attnmatch.data.collate import collate
from attnmatch.data.datasets import load_split
from attnmatch.data.encoding import EncodedPairs, encode_examples
from attnmatch.data.protocol import (
    ClassificationProtocol,
    Protocol,
    RankingProtocol,
    RegressionProtocol,
)
from attnmatch.data.sampling import PairBatchSampler, RankingGroupSampler
from attnmatch.data.schema import PairBatch
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import Vocab
from attnmatch.evaluation import Report, evaluate
from attnmatch.losses import (
    auxiliary_loss,
    check_loss,
    compute_loss,
    default_loss,
    regression_num_outputs,
)
from attnmatch.model_dir import load_model, save_model, write_metrics
from attnmatch.models import build_model, resolve_model_config
from attnmatch.models._registry import get_model_entry
from attnmatch.models.build import (
    encoder_settings,
    encoding_options,
    model_type_of,
    reads_word_vectors,
    token_encoder_of,
    transformer_encoder_of,
)
from attnmatch.training.checkpoint import load_checkpoint, save_checkpoint
from attnmatch.training.config import ExperimentConfig, TrainConfig


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class Prepared:
    """Data, vocabulary and a freshly initialised model for an experiment."""

    exp: ExperimentConfig
    task: str
    loss: str
    tokenizer: Tokenizer | SubwordTokenizer
    vocab: Vocab | None  # None with a transformer encoder (its tokenizer has its own ids)
    train: EncodedPairs
    dev: EncodedPairs
    dev_protocol: Protocol
    test: EncodedPairs | None
    test_protocol: Protocol | None
    model_type: str
    model: torch.nn.Module
    embedding_stats: dict[str, Any] = field(default_factory=dict)

    @property
    def label_space(self) -> dict[str, Any]:
        """What the model's outputs mean, saved with the model directory."""
        return label_space(self.dev_protocol)


def label_space(protocol: Protocol) -> dict[str, Any]:
    """The class names of a classification protocol, or the score range of a regression one."""
    if isinstance(protocol, ClassificationProtocol):
        return {"class_names": list(protocol.class_names)}
    if isinstance(protocol, RegressionProtocol):
        return {"min_score": protocol.min_score, "max_score": protocol.max_score}
    return {}


def resolve_task(model_type: str, task: str, loss: str) -> str:
    """The loss to train `task` with ("auto" resolved), after checking model and loss support it.

    Raises:
        ValueError: the model's head does not support the task, or the loss cannot train it.
    """
    tasks = get_model_entry(model_type).tasks
    if task not in tasks:
        raise ValueError(
            f"model {model_type!r} does not support the {task} task (it supports "
            f"{', '.join(tasks)}); choose another model or dataset"
        )
    resolved = default_loss(task) if loss == "auto" else loss
    check_loss(resolved, task)
    return resolved


def prepare(exp: ExperimentConfig) -> Prepared:
    """Loads the splits, builds the vocabulary and the model with its pretrained vectors (or its
    pretrained transformer encoder and that encoder's tokenizer)."""
    from attnmatch.embeddings import build_embedding_matrix, load_named_vectors

    d = exp.data
    encoder = encoder_settings(exp.model, exp.model_overrides)
    transformer = encoder.get("kind") == "transformer"
    if not reads_word_vectors(model_type_of(exp.model)):
        if transformer:
            raise ConfigError(
                f"model {exp.model!r} reads letter trigrams, not tokens: it cannot take a "
                "transformer encoder"
            )
        if exp.embeddings.source != "random":
            raise ConfigError(
                f"model {exp.model!r} reads no word vectors (letter-trigram input), so "
                f"embeddings.source = {exp.embeddings.source!r} cannot apply: set "
                'embeddings.source = "random" (--embeddings random)'
            )
    encoder_dir: Path | None = None
    overrides = dict(exp.model_overrides)
    if transformer:
        from attnmatch.encoders import read_config, resolve_source

        if not encoder.get("source"):
            raise ConfigError(
                "model_overrides.encoder.source is missing: a transformer encoder needs a source "
                '("minilm-l6" or a model directory)'
            )
        encoder_dir = resolve_source(str(encoder["source"]))
        hf_config = read_config(encoder_dir)
        overrides = configs_merge(overrides, {"encoder": {"transformer_config": hf_config}})
    train_split = load_split(d.dataset, d.train_split, data_dir=d.data_dir, **d.options)
    dev_split = load_split(d.dataset, d.dev_split, data_dir=d.data_dir, **d.options)
    test_split = (
        load_split(d.dataset, d.test_split, data_dir=d.data_dir, **d.options)
        if d.test_split
        else None
    )
    if dev_split.protocol is None:
        raise ValueError(f"dataset {d.dataset!r} split {d.dev_split!r} has no evaluation protocol")
    seed_everything(exp.train.seed)
    stats: dict[str, Any] = {"source": exp.embeddings.source}
    matrix = None
    tokenizer: Tokenizer | SubwordTokenizer
    vocab: Vocab | None
    if transformer:
        tokenizer, vocab = Tokenizer(), None  # replaced by the encoder's tokenizer below
        vocab_size, dim = int(hf_config["vocab_size"]), int(hf_config["hidden_size"])
    else:
        tokenizer = Tokenizer(lowercase=d.lowercase, max_length=d.max_length)
        vocab = Vocab.build(
            (tokenizer.tokenize(t) for ex in train_split.examples for t in (ex.left, ex.right)),
            min_freq=d.min_freq,
        )
        if exp.embeddings.source != "random":
            if d.vocab_from_eval_splits:
                vectors = load_named_vectors(exp.embeddings.source)
                known = vectors.index()
                eval_examples = dev_split.examples + (test_split.examples if test_split else [])
                vocab = vocab.extend(
                    tok
                    for ex in eval_examples
                    for text in (ex.left, ex.right)
                    for tok in tokenizer.tokenize(text)
                    if tok in known
                )
            matrix, align = build_embedding_matrix(
                exp.embeddings.source,
                vocab,
                oov=exp.embeddings.oov,
                normalize=exp.embeddings.normalize,
                seed=exp.train.seed,
            )
            stats.update(vars(align))
            dim = int(matrix.shape[1])
        else:
            dim = exp.embeddings.dim
        vocab_size = len(vocab)
    task = dev_split.protocol.task
    if train_split.task != task:
        raise ValueError(
            f"{d.dataset}: split {d.train_split!r} is a {train_split.task} split but "
            f"{d.dev_split!r} is evaluated as {task}"
        )
    loss = resolve_task(model_type_of(exp.model), task, exp.train.loss)
    protocol = dev_split.protocol
    num_outputs = 1
    if isinstance(protocol, ClassificationProtocol):
        num_outputs = protocol.num_classes
    elif isinstance(protocol, RegressionProtocol):
        num_outputs = regression_num_outputs(loss, protocol.num_levels)
    elif loss == "cross_entropy":  # pointwise ranking: a match / no-match head
        num_outputs = 2
    model_type, config = resolve_model_config(
        exp.model,
        vocab_size=vocab_size,
        embedding_dim=dim,
        num_outputs=num_outputs,
        overrides=overrides,
    )
    model = build_model(model_type, config)
    if matrix is not None:
        token_encoder_of(model).load_pretrained(matrix)
    contextual = transformer_encoder_of(model)
    if contextual is not None and encoder_dir is not None:
        from attnmatch.encoders import read_tokenizer, source_fingerprint

        info = contextual.load_pretrained_transformer(encoder_dir)
        tokenizer = SubwordTokenizer(
            read_tokenizer(encoder_dir), max_length=contextual.config.max_length
        )
        stats = {
            "source": str(encoder["source"]),
            "kind": "transformer",
            "directory": str(encoder_dir),
            "weights_sha256": source_fingerprint(encoder_dir),
            "ignored_weights": info["ignored"],
            "trainable": contextual.config.trainable,
            "layer": contextual.config.layer,
        }
        contextual.enable_cache()  # frozen: each distinct text is encoded once (no-op if tuned)
    inputs = encoding_options(model)  # e.g. letter-trigram ids (DSSM)
    return Prepared(
        exp=exp,
        task=task,
        loss=loss,
        tokenizer=tokenizer,
        vocab=vocab,
        train=encode_examples(train_split.examples, tokenizer, vocab, **inputs),
        dev=encode_examples(dev_split.examples, tokenizer, vocab, **inputs),
        dev_protocol=dev_split.protocol,
        test=encode_examples(test_split.examples, tokenizer, vocab, **inputs)
        if test_split
        else None,
        test_protocol=test_split.protocol if test_split else None,
        model_type=model_type,
        model=model,
        embedding_stats=stats,
    )


def learning_rate(t: TrainConfig, step: int) -> float:
    """The staircase-decayed learning rate of optimiser step `step` (0-based)."""
    return t.lr * t.lr_decay ** (step // t.lr_decay_steps)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float, t: TrainConfig) -> None:
    """Sets every group's rate: `lr` (the decayed train.lr), scaled by encoder_lr / lr for the
    fine-tuned transformer's group."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


_FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def fused_adam_supported(params: list[torch.nn.Parameter]) -> bool:
    """Whether PyTorch's fused Adam/AdamW kernel takes these parameters (real floating point,
    on CPU or CUDA). It computes the same update as the default per-tensor loop in one pass per
    tensor: ~8x faster per step on a 27M-parameter table on CPU (CDSSM's trigram layer)."""
    return bool(params) and all(
        p.dtype in _FUSED_DTYPES and p.device.type in ("cpu", "cuda") for p in params
    )


def make_optimizer(model: torch.nn.Module, exp: ExperimentConfig) -> torch.optim.Optimizer:
    """The optimiser of `exp.train`; Adam and AdamW use the fused kernel where it applies."""
    t = exp.train
    params = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": params}]
    contextual = transformer_encoder_of(model)
    if t.encoder_lr is not None and contextual is not None and contextual.config.trainable:
        inside = {id(q) for q in contextual.parameters()}
        groups = [
            {"params": [q for q in params if id(q) not in inside]},
            {"params": [q for q in params if id(q) in inside], "lr_scale": t.encoder_lr / t.lr},
        ]
        groups = [g for g in groups if g["params"]]
        for g in groups:
            g["lr"] = t.lr * g.get("lr_scale", 1.0)
    fused = True if fused_adam_supported(params) else None
    if t.optimizer == "adam":
        return torch.optim.Adam(groups, lr=t.lr, weight_decay=t.weight_decay, fused=fused)
    if t.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=t.lr, weight_decay=t.weight_decay, fused=fused)
    if t.optimizer == "adadelta":
        return torch.optim.Adadelta(groups, lr=t.lr, weight_decay=t.weight_decay)
    return torch.optim.SGD(groups, lr=t.lr, weight_decay=t.weight_decay)


def make_sampler(p: Prepared) -> RankingGroupSampler | PairBatchSampler:
    t = p.exp.train
    if isinstance(p.dev_protocol, RankingProtocol) and p.loss in ("rank_hinge", "listwise"):
        return RankingGroupSampler(
            p.train,
            num_negatives=t.num_negatives,
            groups_per_batch=t.batch_size,
            seed=t.seed,
            bucket_pool=t.bucket_pool,
        )
    return PairBatchSampler(
        p.train, batch_size=t.batch_size, seed=t.seed, bucket_pool=t.bucket_pool
    )


def batch_loss(p: Prepared, batch: PairBatch) -> torch.Tensor:
    """The training loss of one batch: the task loss plus the model's auxiliary terms (e.g.
    IARNN's Occam regulariser)."""
    t = p.exp.train
    min_score = p.dev_protocol.min_score if isinstance(p.dev_protocol, RegressionProtocol) else 0
    loss = compute_loss(p.loss, p.model(batch), batch, margin=t.margin, min_score=min_score)
    aux = auxiliary_loss(p.model)
    return loss if aux is None else loss + aux


@dataclass
class TrainResult:
    output_dir: Path
    model_dir: Path
    best_epoch: int
    dev: dict[str, float]
    test: dict[str, float] | None
    history: list[dict[str, Any]]
    wall_time_s: float
    train_pairs_per_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_dir": str(self.output_dir),
            "model_dir": str(self.model_dir),
            "best_epoch": self.best_epoch,
            "dev": self.dev,
            "test": self.test,
            "wall_time_s": self.wall_time_s,
            "train_pairs_per_s": self.train_pairs_per_s,
        }


def environment() -> dict[str, Any]:
    """Versions, machine and git commit recorded with every result."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
        # Only changes to code and table definitions make a result's commit "dirty".
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
        if commit and dirty:
            commit += "-dirty"
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "commit": commit or "unknown",
        "attnmatch": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "threads": torch.get_num_threads(),
    }


def _progress(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
        transient=True,
    )


def train(
    exp: ExperimentConfig,
    output_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
    prepared: Prepared | None = None,
) -> TrainResult:
    """Trains `exp` into `output_dir`.

    Writes `output_dir/model/` (the dev-selected model directory, with metrics.json),
    `checkpoint/` (the last epoch, for `resume`), `log.jsonl` (one line per epoch) and
    `result.json`.

    Raises:
        FileExistsError: output_dir holds a previous run and `resume` is False.
    """
    console = console or Console(stderr=True)
    out = Path(output_dir)
    ckpt_dir = out / "checkpoint"
    if out.exists() and any(out.iterdir()) and not resume:
        raise FileExistsError(
            f"{out} is not empty: pass resume=True (--resume) or choose another folder"
        )
    if exp.train.threads:
        torch.set_num_threads(exp.train.threads)
    # Near-zero activations (e.g. softmax-gated inputs) become subnormal floats, which are
    # an order of magnitude slower on x86 CPUs; flushing them to zero changes results negligibly.
    torch.set_flush_denormal(True)
    start_time = time.perf_counter()
    if resume and prepared is None:
        done = _finished_result(out, exp)
        if done is not None:
            console.print(f"{out}: finished earlier, reusing result.json")
            return done
    p = prepared or prepare(exp)
    model, t = p.model, exp.train
    if t.epochs > 0 and not any(q.requires_grad for q in model.parameters()):
        raise ConfigError(
            f"model {exp.model!r} has no trainable parameters (a frozen encoder and no layers "
            "of its own): set train.epochs = 0 to evaluate it as it is"
        )
    optimizer = make_optimizer(model, exp) if t.epochs > 0 else None
    sampler = make_sampler(p)
    model_meta: dict[str, Any] = {
        "model_type": p.model_type,
        "task": p.task,
        "label_space": p.label_space,
        "vocab": p.vocab,
        "tokenizer": p.tokenizer,
    }

    state: dict[str, Any] = {
        "epoch": 0,
        "step": 0,
        "best_score": None,
        "best_epoch": 0,
        "bad_epochs": 0,
        "history": [],
        "experiment": exp.to_dict(),
    }
    if resume and ckpt_dir.exists():
        optim_state, saved = load_checkpoint(ckpt_dir, model)
        _check_resumable(saved["experiment"], exp.to_dict())
        if optimizer is not None:
            optimizer.load_state_dict(optim_state)
        state.update({k: v for k, v in saved.items() if k != "experiment"})
        console.print(f"resuming {out} after epoch {state['epoch']}")

    primary = p.dev_protocol.primary
    wall_base = float(state.get("wall_time_s", 0.0))  # time spent in earlier sessions
    if t.epochs == 0 and not (out / "model").is_dir():  # zero-shot: the model as it is
        report = evaluate(model, p.dev, p.dev_protocol, batch_size=t.eval_batch_size)
        state.update(best_score=report.metrics[primary], best_epoch=0)
        save_model(out / "model", model, **model_meta, metrics={"dev": report.metrics})
    with _progress(console, progress) as bar:
        for epoch in range(state["epoch"] + 1, t.epochs + 1):
            if t.patience and state["bad_epochs"] >= t.patience:
                break
            torch.manual_seed(t.seed * 1_000_003 + epoch)
            batches = sampler.epoch(epoch)
            task_id = bar.add_task(f"epoch {epoch}/{t.epochs}", total=len(batches), info="")
            model.train()
            epoch_start, losses, n_pairs = time.perf_counter(), [], 0
            for idx in batches:
                loss = batch_loss(p, collate(p.train, idx, group_index=sampler.group_index(idx)))
                assert optimizer is not None  # epochs > 0
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if t.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
                set_learning_rate(optimizer, learning_rate(t, state["step"]), t)
                optimizer.step()
                state["step"] += 1
                losses.append(loss.item())
                n_pairs += len(idx)
                bar.update(task_id, advance=1, info=f"loss {np.mean(losses[-50:]):.4f}")
            seconds = time.perf_counter() - epoch_start
            bar.remove_task(task_id)
            report = evaluate(model, p.dev, p.dev_protocol, batch_size=t.eval_batch_size)
            score = report.metrics[primary]
            improved = state["best_score"] is None or score > state["best_score"]
            if improved:
                state.update(best_score=score, best_epoch=epoch, bad_epochs=0)
                save_model(out / "model", model, **model_meta, metrics={"dev": report.metrics})
            else:
                state["bad_epochs"] += 1
            state["epoch"] = epoch
            state["history"].append(
                {
                    "epoch": epoch,
                    "step": state["step"],
                    "train_loss": float(np.mean(losses)) if losses else None,
                    "dev": report.metrics,
                    "epoch_time_s": round(seconds, 3),
                    "train_pairs": n_pairs,
                    "train_pairs_per_s": round(n_pairs / max(seconds, 1e-9), 1),
                }
            )
            state["wall_time_s"] = round(wall_base + time.perf_counter() - start_time, 2)
            assert optimizer is not None
            save_checkpoint(ckpt_dir, model=model, optimizer=optimizer, state=state, **model_meta)
            write_text_atomic(
                out / "log.jsonl", "".join(json.dumps(h) + "\n" for h in state["history"])
            )
            console.print(
                f"epoch {epoch:3d}  loss {state['history'][-1]['train_loss']:.4f}  "
                f"dev {primary} {score:.4f}{'  *' if improved else ''}  ({seconds:.1f}s, "
                f"{n_pairs / max(seconds, 1e-9):,.0f} pairs/s)"
            )

    best = load_model(out / "model")
    contextual = transformer_encoder_of(best.model)
    if contextual is not None:
        contextual.enable_cache()  # frozen: shares the training run's cache (a no-op if tuned)
    dev_report = evaluate(best.model, p.dev, p.dev_protocol, batch_size=t.eval_batch_size)
    test_report: Report | None = None
    if p.test is not None and p.test_protocol is not None:
        test_report = evaluate(best.model, p.test, p.test_protocol, batch_size=t.eval_batch_size)
    # Over every epoch of the run, including those of earlier sessions when resumed.
    wall = wall_base + time.perf_counter() - start_time
    train_time = sum(h["epoch_time_s"] for h in state["history"])
    train_pairs = sum(
        h.get("train_pairs", h["train_pairs_per_s"] * h["epoch_time_s"]) for h in state["history"]
    )
    result = TrainResult(
        output_dir=out,
        model_dir=out / "model",
        best_epoch=state["best_epoch"],
        dev=dev_report.metrics,
        test=test_report.metrics if test_report else None,
        history=state["history"],
        wall_time_s=round(wall, 2),
        train_pairs_per_s=round(train_pairs / train_time, 1) if train_time else 0.0,
    )
    metrics = {
        "dataset": exp.data.dataset,
        "protocols": {
            "dev": dev_report.protocol,
            "test": test_report.protocol if test_report else None,
        },
        "best_epoch": result.best_epoch,
        "dev": result.dev,
        "test": result.test,
        "experiment": exp.to_dict(),
        "embeddings": p.embedding_stats,
        "environment": environment(),
        "wall_time_s": result.wall_time_s,
    }
    write_metrics(out / "model", metrics)
    write_text_atomic(
        out / "result.json", json.dumps(result.to_dict() | {"metrics": metrics}, indent=2) + "\n"
    )
    return result


def _finished_result(out: Path, exp: ExperimentConfig) -> TrainResult | None:
    """The TrainResult of a run that finished under the same experiment (same epochs too), read
    from its result.json; None when there is none or anything differs."""
    try:
        data = json.loads((out / "result.json").read_text(encoding="utf-8"))
        saved = data["metrics"]["experiment"]
        _check_resumable(saved, exp.to_dict())
        if saved.get("train", {}).get("epochs") != exp.train.epochs:
            return None
        history = (
            [
                json.loads(line)
                for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()
                if line.strip()
            ]
            if (out / "log.jsonl").is_file()
            else []
        )
        return TrainResult(
            output_dir=out,
            model_dir=Path(data["model_dir"]),
            best_epoch=int(data["best_epoch"]),
            dev=data["dev"],
            test=data["test"],
            history=history,
            wall_time_s=float(data["wall_time_s"]),
            train_pairs_per_s=float(data["train_pairs_per_s"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _check_resumable(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse to resume under a different experiment, except for train.epochs. A key the saved
    config lacks (a field added to the config since that run) counts as its default, which keeps
    the earlier behaviour."""
    a, b = _flatten(saved), _flatten(current)
    defaults = _flatten(ExperimentConfig().to_dict())
    changed = sorted(
        k for k in set(a) | set(b) if a.get(k, defaults.get(k)) != b.get(k) and k != "train.epochs"
    )
    if changed:
        raise ValueError(
            f"cannot resume: the experiment config changed ({', '.join(changed)}); "
            "only train.epochs may change"
        )


def train_seeds(
    exp: ExperimentConfig,
    output_dir: str | Path,
    seeds: Sequence[int],
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> dict[str, Any]:
    """Trains one run per seed into output_dir/seed-<s>/ and summarises mean ± std.

    Returns (and writes to output_dir/summary.json) {"seeds", "runs", "dev"/"test": {metric:
    {"mean", "std", "runs"}}}. std is the sample standard deviation (0 for one run).
    """
    console = console or Console(stderr=True)
    out = Path(output_dir)
    results = []
    for seed in seeds:
        console.rule(f"seed {seed}")
        run_exp = exp.with_overrides({"train": {"seed": seed}})
        results.append(
            train(run_exp, out / f"seed-{seed}", resume=resume, progress=progress, console=console)
        )
    summary = {
        "seeds": list(seeds),
        "runs": [r.to_dict() for r in results],
        "dev": summarize([r.dev for r in results]),
        "test": summarize([r.test for r in results if r.test is not None])
        if results[0].test
        else None,
    }
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def summarize(runs: Sequence[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """{metric: {"mean", "std", "runs"}} over runs (sample std; 0.0 for a single run)."""
    out: dict[str, dict[str, Any]] = {}
    for name in runs[0]:
        values = [float(r[name]) for r in runs]
        out[name] = {
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "runs": values,
        }
    return out
