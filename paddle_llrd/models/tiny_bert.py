"""A small BERT-shaped Transformer, built in so that tests, examples, the demo
and the benchmarks need no downloads.

Parameter names follow PaddleNLP's ``BertForSequenceClassification``
(``bert.embeddings.*``, ``bert.encoder.layers.N.*``, ``bert.pooler.*``,
``classifier.*``), which is what :func:`paddle_llrd.layerwise_lr_decay` parses.

Example:
    >>> import paddle
    >>> from paddle_llrd.models.tiny_bert import (
    ...     TinyBertConfig, TinyBertForSequenceClassification)
    >>> model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=2))
    >>> logits = model(paddle.randint(0, 100, [4, 16]))
    >>> list(logits.shape)
    [4, 2]
    >>> [n for n, _ in model.named_parameters()][:2]
    ['bert.embeddings.word_embeddings.weight', 'bert.embeddings.position_embeddings.weight']
"""
from __future__ import annotations

import dataclasses

import paddle
from paddle import nn


@dataclasses.dataclass
class TinyBertConfig:
    """Shape of the model; the defaults train in seconds on a CPU.

    ``hidden_act`` is the feed-forward activation and ``pooler_act`` the
    pooler's (``"tanh"`` as in BERT; ``"relu"`` where an execution mode lacks
    ``tanh``, e.g. Paddle 3.3.1's legacy static program on CPU).
    """

    vocab_size: int = 128
    hidden_size: int = 32
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 64
    max_position_embeddings: int = 64
    type_vocab_size: int = 2
    hidden_dropout_prob: float = 0.0
    hidden_act: str = "gelu"
    pooler_act: str = "tanh"
    num_labels: int = 2

    @classmethod
    def bert_base(cls, num_hidden_layers: int = 12, hidden_size: int = 768) -> "TinyBertConfig":
        """The BERT-base shape (~110M parameters) used by the benchmarks.

        Fewer layers or a smaller ``hidden_size`` keep BERT-base's proportions:
        one attention head per 64 hidden units (at least one, dividing the
        width) and a feed-forward width of ``4 * hidden_size``.

        >>> config = TinyBertConfig.bert_base(num_hidden_layers=2, hidden_size=96)
        >>> config.num_attention_heads
        1
        """
        heads = max(1, hidden_size // 64)
        while hidden_size % heads:
            heads -= 1
        return cls(
            vocab_size=30522,
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=heads,
            intermediate_size=4 * hidden_size,
            max_position_embeddings=512,
        )


_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU, "identity": nn.Identity}


class TinyBertEmbeddings(nn.Layer):
    def __init__(self, config: TinyBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids=None):
        seq_len = input_ids.shape[1]
        position_ids = paddle.arange(seq_len, dtype="int64").unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = paddle.zeros_like(input_ids)
        embeddings = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(position_ids)
            + self.token_type_embeddings(token_type_ids)
        )
        return self.dropout(self.layer_norm(embeddings))


class TinyBertPooler(nn.Layer):
    def __init__(self, config: TinyBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = _ACTIVATIONS[config.pooler_act]()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class TinyBertModel(nn.Layer):
    def __init__(self, config: TinyBertConfig):
        super().__init__()
        self.config = config
        self.embeddings = TinyBertEmbeddings(config)
        layer = nn.TransformerEncoderLayer(
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
            dropout=config.hidden_dropout_prob,
            activation=config.hidden_act,
            attn_dropout=config.hidden_dropout_prob,
            act_dropout=0.0,
        )
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers)
        self.pooler = TinyBertPooler(config)

    def forward(self, input_ids, token_type_ids=None):
        sequence_output = self.encoder(self.embeddings(input_ids, token_type_ids))
        return sequence_output, self.pooler(sequence_output)


class TinyBertForSequenceClassification(nn.Layer):
    """``bert`` (embeddings, encoder, pooler) plus a linear ``classifier``."""

    def __init__(self, config: TinyBertConfig | None = None):
        super().__init__()
        config = config or TinyBertConfig()
        self.config = config
        self.bert = TinyBertModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids, token_type_ids=None):
        _, pooled = self.bert(input_ids, token_type_ids)
        return self.classifier(self.dropout(pooled))
