"""Modern baselines on pretrained sentence encoders: the bi-encoder and the cross-encoder.

Bi-encoder (Reimers & Gurevych, Sentence-BERT, EMNLP 2019): each text is encoded alone, its
token vectors are mean-pooled over the real tokens (special tokens included, as
sentence-transformers does) and the pair is scored by the cosine of the two vectors,
`scale * cos + shift`. Used zero-shot (a frozen encoder, no training: all-MiniLM-L6-v2 was
trained for exactly this score) or fine-tuned (ranking: rank hinge or listwise softmax over a
question's candidates; regression: squared error of the scaled cosine, SBERT's cosine loss).
With `num_outputs > 1` the head is SBERT's classifier over [u; v; |u - v|] instead, or, with
`cosine_logits`, the two logits [0, scale * cos + shift]: a classifier with no weights that
predicts the last class when cos > -shift / scale (zero-shot classification with a threshold
fitted on labelled pairs, `attnmatch.zero_shot`; `Matcher.from_encoder(task=..., calibration=...)`).

Cross-encoder (Nogueira & Cho 2019; sentence-transformers' CrossEncoder): both texts in one
sequence, `[CLS] left [SEP] right [SEP]` with token types 0 / 1, and a linear head on the
`[CLS]` state or on the mean of the token states (scores, class logits or score-level logits),
or the bi-encoder's head on the mean of each text's states from the joint pass (`pooling =
"segments"`, the MiniLM preset's: it starts where the bi-encoder starts, and training adds what
the texts' attention to each other gives). Late interaction (PreTTR, MacAvaney et al., SIGIR
2020; `separate_layers`) keeps the lowest layers on each text alone; `cross_bias` (the
project's own variant) lets training open the attention between the texts head by head,
starting near the bi-encoder.

Decisions: the joint sequence is packed from the two single-text id sequences the data pipeline
gives (the right text's first token, its `[CLS]`, is dropped), so both baselines share our data,
batching and model directory; the cross-encoder head reads the `[CLS]` hidden state directly
(no BERT pooler: all-MiniLM-L6-v2 ships none trained for it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import nn

from attnmatch import configs
from attnmatch.data.schema import PairBatch
from attnmatch.inputs import TokenEncoderConfig, build_token_encoder
from attnmatch.inputs.transformer import position_limit
from attnmatch.inputs.transformer_layer import TransformerTokenEncoder
from attnmatch.models._registry import register_model, register_preset
from attnmatch.nn.masking import masked_mean
from attnmatch.tasks import ClassificationTask, RankingTask, RegressionTask, Task, for_task


@dataclass(frozen=True, kw_only=True)
class BiEncoderConfig:
    """Args:
    encoder: the token encoder (usually a transformer; a static one gives averaged word vectors).
    num_outputs: 1 scores a pair by its scaled cosine; > 1 uses a linear classifier over
        [u; v; |u - v|] (SBERT's classification objective).
    scale, shift: the score is `scale * cos + shift` (e.g. scale 20 for a listwise softmax,
        as sentence-transformers' MultipleNegativesRankingLoss; 5 for STS's 0-5 range with MSE;
        a least-squares line fitted zero-shot, whose slope may be negative).
    cosine_logits: with num_outputs = 2, the logits are [0, scale * cos + shift] instead of
        the classifier's: no weights, the last class when cos > -shift / scale. Trained
        without a scale or shift given (the MiniLM preset's 2 classes), both are first fitted
        zero-shot on the training pairs (`training.experiment`), then the encoder is trained.
    """

    encoder: TokenEncoderConfig
    num_outputs: int = 1
    scale: float = 1.0
    shift: float = 0.0
    cosine_logits: bool = False

    def __post_init__(self) -> None:
        configs.check_positive(self, "num_outputs")
        if not (math.isfinite(self.scale) and math.isfinite(self.shift)) or self.scale == 0:
            raise ValueError(
                f"scale must be finite and != 0, shift finite: {self.scale}, {self.shift}"
            )
        if self.cosine_logits and self.num_outputs != 2:
            raise ValueError(f"cosine_logits needs num_outputs = 2, got {self.num_outputs}")


@register_model(
    "bi_encoder",
    config=BiEncoderConfig,
    paper="Reimers and Gurevych, EMNLP 2019",
    inputs=(
        "word_vectors",
        "transformer",
    ),  # one id per token (the batch's texts are deduplicated by ids)
    default_inputs={"kind": "transformer", "source": "minilm-l6"},
)
class BiEncoder(nn.Module):
    """Mean-pooled sentence vectors compared by cosine (module docstring).

    Shape:
        batch.left_ids (B, L), batch.right_ids (B, R) -> (B, num_outputs)
    """

    def __init__(self, config: BiEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        dim = config.encoder.output_dim
        classify = not config.cosine_logits and config.num_outputs > 1
        self.classifier = nn.Linear(3 * dim, config.num_outputs) if classify else None

    def embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sentence vectors: (B, T), (B, T) -> (B, E). A text repeated in the batch (a question
        beside each of its candidates) is encoded once."""
        width = ids.shape[1]
        keys = torch.cat([ids * mask, mask.long()], dim=1)  # (B, 2T)
        unique, inverse = torch.unique(keys, dim=0, return_inverse=True)  # (U, 2T), (B,)
        if unique.shape[0] < ids.shape[0]:
            ids, mask = unique[:, :width], unique[:, width:].bool()  # (U, T)
        else:
            inverse = None
        vectors = masked_mean(self.token_encoder(ids, mask), mask.unsqueeze(-1), dim=1)  # (U, E)
        return vectors if inverse is None else vectors[inverse]  # (B, E)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        u = self.embed(batch.left_ids, batch.left_mask)  # (B, E)
        v = self.embed(batch.right_ids, batch.right_mask)  # (B, E)
        return self.compare(u, v)

    def compare(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The head on sentence vectors already computed (`embed`): a candidate set encoded once
        is compared with many queries (`Matcher.rank`).

        Shape:
            (B, E), (B, E) -> (B, num_outputs)
        """
        if self.classifier is not None:
            return self.classifier(torch.cat([u, v, (u - v).abs()], dim=-1))  # (B, C)
        cos = F.cosine_similarity(u, v, dim=-1, eps=1e-8)  # (B,)
        z = self.config.scale * cos + self.config.shift  # (B,)
        if self.config.cosine_logits:
            return torch.stack([torch.zeros_like(z), z], dim=-1)  # (B, 2)
        return z.unsqueeze(-1)  # (B, 1)


@dataclass(frozen=True, kw_only=True)
class CrossEncoderConfig:
    """Args:
    encoder: a transformer token encoder (the joint sequence needs token types).
    num_outputs: 1 (a score), the number of classes, or of score levels.
    dropout: on the pair vector before the head (BERT's classifier dropout).
    pooling: the pair vector the head reads: "cls", the `[CLS]` state (BERT's, and
        sentence-transformers' CrossEncoder's); "mean", the mean of the real tokens' states
        (the vector a checkpoint trained as a bi-encoder, such as all-MiniLM-L6-v2, learned
        to produce; its `[CLS]` state was never trained alone: docs/training.md);
        "segments", the bi-encoder's head on the mean of each text's states read from the
        joint pass: `scale * cos(u, v) + shift` (num_outputs 1) or a linear classifier over
        [u; v; |u - v|]. A bi-encoder checkpoint then starts near the bi-encoder it was
        (frozen all-MiniLM-L6-v2, WikiQA dev MAP: .697 from the joint pass, .697 from two
        separate passes; STS Benchmark dev Pearson: .737 against .870) and fine-tuning adds
        what the texts' attention to each other gives.
    scale, shift: the "segments" cosine head's line (as `BiEncoderConfig`'s).
    separate_layers: 0, every layer reads the joint sequence; k > 0, late interaction
        (PreTTR, MacAvaney et al., SIGIR 2020): the lowest k layers read each text alone, as
        the bi-encoder does, and only the layers above read the two side by side (the heads
        read the left text's `[CLS]`, all tokens, or each text's tokens, as above). With every
        layer separate, "segments" is the bi-encoder itself.
    cross_bias: None, or late interaction whose layers above `separate_layers` start near
        separate: a learned bias per layer and attention head on the attention logits between
        the two texts, starting at this value (e.g. -4: each token gives the other text a
        small share of its attention); weight decay pulls it back to this value. Training opens
        the texts to each other as far as the loss asks (the project's own variant).
    """

    encoder: TokenEncoderConfig
    num_outputs: int = 1
    dropout: float = 0.1
    pooling: Literal["cls", "mean", "segments"] = "cls"
    scale: float = 1.0
    shift: float = 0.0
    separate_layers: int = 0
    cross_bias: float | None = None

    def __post_init__(self) -> None:
        configs.check_positive(self, "num_outputs")
        configs.check_dropout(self.dropout)
        if self.pooling not in ("cls", "mean", "segments"):
            raise ValueError(f"pooling must be 'cls', 'mean' or 'segments', got {self.pooling!r}")
        if not (math.isfinite(self.scale) and math.isfinite(self.shift)) or self.scale == 0:
            raise ValueError(
                f"scale must be finite and != 0, shift finite: {self.scale}, {self.shift}"
            )
        if self.separate_layers < 0:
            raise ValueError(f"separate_layers must be >= 0, got {self.separate_layers}")
        if self.cross_bias is not None and not math.isfinite(self.cross_bias):
            raise ValueError(f"cross_bias must be finite or unset, got {self.cross_bias}")


def pack_pairs(
    left_ids: torch.Tensor,
    left_mask: torch.Tensor,
    right_ids: torch.Tensor,
    right_mask: torch.Tensor,
    max_length: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Joins each pair into one sequence: the left text, then the right text without its first
    token (`[CLS] a [SEP]` + `[CLS] b [SEP]` -> `[CLS] a [SEP] b [SEP]`), cut to `max_length`.

    Shape:
        (B, L), (B, L), (B, R), (B, R) -> ids (B, W), mask (B, W), token types (B, W)
    """
    tl, tr = left_ids.shape[1], right_ids.shape[1]
    n_left = left_mask.sum(dim=1)  # (B,)
    n_right = (right_mask.sum(dim=1) - 1).clamp(min=0)  # (B,)
    total = (n_left + n_right).clamp(max=max_length)  # (B,)
    width = max(int(total.max().item()) if total.numel() else 1, 1)
    pos = torch.arange(width, device=left_ids.device).unsqueeze(0)  # (1, W)
    from_left = pos < n_left.unsqueeze(1)  # (B, W)
    lidx = pos.clamp(max=tl - 1).expand(left_ids.shape[0], -1)  # (B, W)
    ridx = (pos - n_left.unsqueeze(1) + 1).clamp(0, tr - 1)  # (B, W)
    ids = torch.where(from_left, left_ids.gather(1, lidx), right_ids.gather(1, ridx))  # (B, W)
    mask = pos < total.unsqueeze(1)  # (B, W)
    types = (~from_left & mask).long()  # (B, W)
    return ids * mask, mask, types


@register_model(
    "cross_encoder",
    config=CrossEncoderConfig,
    paper="cross-encoder over a pretrained transformer",
    inputs=("transformer",),  # the joint sequence needs token types and special tokens
    default_inputs={"kind": "transformer", "source": "minilm-l6", "trainable": True},
)
class CrossEncoder(nn.Module):
    """Joint encoding of the pair, linear head on `[CLS]` (module docstring).

    Shape:
        batch.left_ids (B, L), batch.right_ids (B, R) -> (B, num_outputs)
    """

    def __init__(self, config: CrossEncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.token_encoder = build_token_encoder(config.encoder)
        layers = int(getattr(self.token_encoder, "num_layers", 0))
        if config.separate_layers > layers:
            raise ValueError(
                f"separate_layers = {config.separate_layers}, but the encoder has {layers} layers"
            )
        heads = int(config.encoder.transformer_config.get("num_attention_heads", 1))
        joint = (layers - config.separate_layers, heads)
        # The bias's offset from config.cross_bias (so weight decay pulls it back there).
        self.cross_offset = (
            nn.Parameter(torch.zeros(joint)) if config.cross_bias is not None else None
        )
        self.late = config.separate_layers > 0 or config.cross_bias is not None
        positions = position_limit(config.encoder.transformer_config) or 512
        self.max_length = min(positions, 2 * config.encoder.max_length)  # the joint sequence
        self.dropout = nn.Dropout(config.dropout)
        dim = config.encoder.output_dim
        segments = config.pooling == "segments"
        cosine = segments and config.num_outputs == 1
        self.head = None if cosine else nn.Linear((3 if segments else 1) * dim, config.num_outputs)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        if self.late:
            return self._late(batch)
        ids, mask, types = pack_pairs(
            batch.left_ids, batch.left_mask, batch.right_ids, batch.right_mask, self.max_length
        )  # (B, W) each
        hidden = self.token_encoder(ids, mask, token_type_ids=types)  # (B, W, H)
        return self.outputs(hidden, mask, types)

    def _late(self, batch: PairBatch) -> torch.Tensor:
        """Late interaction (`separate_layers`, `cross_bias`): (B, L), (B, R) ->
        (B, num_outputs)."""
        left, right = (batch.left_ids, batch.left_mask), (batch.right_ids, batch.right_mask)
        bias = None
        if self.cross_offset is not None:
            assert self.config.cross_bias is not None
            bias = self.config.cross_bias + self.cross_offset  # (layers above, heads)
        hidden = cast(TransformerTokenEncoder, self.token_encoder).encode_late(
            left, right, self.config.separate_layers, bias
        )  # (B, L + R, H)
        mask = torch.cat([batch.left_mask, batch.right_mask], dim=1)  # (B, L + R)
        types = torch.cat(
            [torch.zeros_like(batch.left_ids), torch.ones_like(batch.right_ids)], dim=1
        )  # (B, L + R)
        return self.outputs(hidden, mask, types)

    def outputs(
        self, hidden: torch.Tensor, mask: torch.Tensor, types: torch.Tensor
    ) -> torch.Tensor:
        """The head on the joint sequence's states (`pooling`); the exported graph reads it too.

        Shape:
            hidden (B, W, H), mask (B, W), types (B, W) -> (B, num_outputs)
        """
        if self.config.pooling == "segments":
            return self._segments(hidden, mask & (types == 0), mask & (types == 1))
        if self.config.pooling == "mean":
            pair = masked_mean(hidden, mask.unsqueeze(-1), dim=1)  # (B, H)
        else:
            pair = hidden[:, 0]  # (B, H)
        assert self.head is not None
        return self.head(self.dropout(pair))  # (B, num_outputs)

    def _segments(
        self, hidden: torch.Tensor, left: torch.Tensor, right: torch.Tensor
    ) -> torch.Tensor:
        """The bi-encoder's head on each text's mean state: (B, W, H), (B, W), (B, W) ->
        (B, num_outputs)."""
        u = masked_mean(hidden, left.unsqueeze(-1), dim=1)  # (B, H)
        v = masked_mean(hidden, right.unsqueeze(-1), dim=1)  # (B, H)
        if self.head is not None:
            return self.head(self.dropout(torch.cat([u, v, (u - v).abs()], dim=-1)))  # (B, C)
        cos = F.cosine_similarity(u, v, dim=-1, eps=1e-8)  # (B,)
        return (self.config.scale * cos + self.config.shift).unsqueeze(-1)  # (B, 1)


_MINILM = {"kind": "transformer", "source": "minilm-l6"}
register_preset(
    "minilm_zero_shot",
    model="bi_encoder",
    overrides={},
    inputs={**_MINILM, "trainable": False},
    description="all-MiniLM-L6-v2 zero-shot: cosine of mean-pooled embeddings, no training",
)


Settings = dict[str, Any]
# What each task adds to the shared recipe, keyed by task class (`attnmatch.tasks.for_task`):
# fine-tuning `[train]` settings (ranking: the listwise softmax, sentence-transformers'
# MultipleNegativesRankingLoss; classes: at least 2 epochs, so dev chooses among more than one),
# and the (`[train]` settings, model overrides) that train a bi-encoder's cosine as its output:
# 20 x cosine for the listwise softmax (sentence-transformers' scale), the cosine mapped onto
# the score range by squared error for scores.
_FINE_TUNING: dict[type[Task], Settings] = {
    RankingTask: {"loss": "listwise"},
    ClassificationTask: {"min_epochs": 2},
    RegressionTask: {},
}
_COSINE_HEAD: dict[type[Task], Callable[[Any], tuple[Settings, Settings]]] = {
    RankingTask: lambda task: ({}, {"scale": 20.0}),
    ClassificationTask: lambda task: ({}, {}),
    RegressionTask: lambda task: (
        {"loss": "mse"},
        {"scale": float(task.max_score - task.min_score), "shift": float(task.min_score)},
    ),
}
# The cross-encoder's attention between the texts: the plain joint pass, unless a task measured
# better. Scores: learned attention (`CrossEncoderConfig.cross_bias`) starting near separate
# (-4), its biases at lr 0.02: STS Benchmark dev Pearson .897 over 3 seeds, the plain joint pass
# .841 (two texts alike attend to each other and their states grow alike whatever the score).
_CROSS_ATTENTION: dict[type[Task], tuple[Settings, Settings]] = {
    RankingTask: ({}, {}),
    ClassificationTask: ({}, {}),
    RegressionTask: ({"lr": 0.02}, {"cross_bias": -4.0}),
}


def fine_tuning_recipe(task: Task) -> dict[str, Any]:
    """How the MiniLM presets fine-tune (chosen on dev: docs/training.md, "Fine-tuning a
    pretrained encoder"): AdamW with weight decay 0.01, the encoder at 2e-5 and the layers
    on top at 1e-3, 10% linear warm-up then linear decay, gradient clipping at 1, 16 groups
    or pairs a batch, a budget of at least 100 steps and 1 epoch, patience 3; then the
    task's own settings (`_FINE_TUNING`)."""
    train: dict[str, Any] = {
        "optimizer": "adamw",
        "lr": 1e-3,
        "encoder_lr": 2e-5,
        "weight_decay": 0.01,
        "warmup": 0.1,
        "lr_schedule": "linear",
        "grad_clip": 1.0,
        "batch_size": 16,
        "eval_batch_size": 128,
        "min_steps": 100,
        "min_epochs": 1,
        "patience": 3,
    }
    return {"train": train | for_task(_FINE_TUNING, task)}


# The bi-encoder's own head for classes: 2 classes read the logits [0, k (cos - t)] of the
# cosine, k and t fitted zero-shot on the training pairs before training (`cosine_logits`
# without scale or shift: `training.experiment`), so the run starts where zero-shot MiniLM
# with its fitted threshold is, where SBERT's classifier over [u; v; |u - v|] starts from a
# random head (docs/training.md, "Classes"); 3+ classes keep SBERT's classifier.
_BI_ENCODER_HEAD: dict[type[Task], Callable[[Any], Settings]] = {
    RankingTask: lambda task: {},
    ClassificationTask: lambda task: {"cosine_logits": True} if task.num_classes == 2 else {},
    RegressionTask: lambda task: {},
}


def bi_encoder_recipe(task: Task) -> dict[str, Any]:
    """`fine_tuning_recipe` with the bi-encoder's cosine head (`_COSINE_HEAD`,
    `_BI_ENCODER_HEAD`)."""
    recipe = fine_tuning_recipe(task)
    train, overrides = for_task(_COSINE_HEAD, task)(task)
    overrides = overrides | for_task(_BI_ENCODER_HEAD, task)(task)
    recipe["train"].update(train)
    if overrides:
        recipe["model_overrides"] = overrides
    return recipe


register_preset(
    "minilm_bi_encoder",
    model="bi_encoder",
    overrides={},
    inputs={**_MINILM, "trainable": True},
    description="all-MiniLM-L6-v2 bi-encoder, fine-tuned with its recipe (AdamW, warm-up, "
    "encoder lr 2e-5)",
    recipe=bi_encoder_recipe,
)


def cross_encoder_recipe(task: Task) -> dict[str, Any]:
    """`fine_tuning_recipe` with the bi-encoder's head on each text's mean state from the joint
    pass (`pooling="segments"`, `bi_encoder_recipe`'s scale and loss; SBERT's classifier for
    classes): all-MiniLM-L6-v2 was trained as a bi-encoder, and this head starts as it does,
    where one on `[CLS]` (a state never trained to stand for a text) or a new linear head
    starts from chance. On dev, at every budget measured, it beat the mean-pooled linear head:
    WikiQA MAP .817 against .740 after one epoch, STS Benchmark Pearson .841 against .833 after
    two (docs/training.md). The task chooses the attention between the texts
    (`_CROSS_ATTENTION`): the plain joint pass for ranking and classes (WikiQA dev MAP .823
    over 3 seeds, against .793 with learned attention between the texts), learned attention
    between the texts for scores (STS Benchmark dev Pearson .897 against .841)."""
    recipe = fine_tuning_recipe(task)
    train, overrides = for_task(_COSINE_HEAD, task)(task)
    attention_train, attention = for_task(_CROSS_ATTENTION, task)
    recipe["train"].update(train | attention_train)
    recipe["model_overrides"] = {"pooling": "segments", **overrides, **attention}
    return recipe


register_preset(
    "minilm_cross_encoder",
    model="cross_encoder",
    overrides={},
    inputs={**_MINILM, "trainable": True},
    description="all-MiniLM-L6-v2 cross-encoder (joint input; the bi-encoder's head on each "
    "text's mean state), fine-tuned with its recipe",
    recipe=cross_encoder_recipe,
)
