"""The AlphaZero residual network (flax linen), for board observations `[B, H, W, C]`."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax.numpy as jnp

from turbozero.games.lines import line_features
from turbozero.struct import ADDED_LATER
from turbozero.types import Array
from turbozero.validate import check_count


@dataclasses.dataclass(frozen=True)
class AZResnetConfig:
    """Sizes of the AlphaZero ResNet.

    Attributes:
        policy_head_out_size: number of actions `A`.
        num_blocks: residual blocks, >= 0.
        num_channels: channels of every convolution, >= 1.
        norm: "batch" (statistics kept in `params["batch_stats"]`) or "layer" (each sample
            over its height, width and channels, with a scale and bias per channel).
        value_bins: 0 for a scalar value head, else the number of value-bin logits.
        bounded_value: the scalar value passes through tanh (two-player outcomes in [-1, 1]);
            False for one-player returns, which the trainer scales by `value_scale` but does not
            bound (as `PolicyValueMLP`).
        model_type: accepted for compatibility with the tutorial; must be "resnet".
        policy_channels: channels of the policy head's 1x1 convolution, >= 1.
        value_channels: channels of the value head's 1x1 convolution, >= 1: the value head
            reads the torso through `H * W * value_channels` numbers.
        line_length: 0, or the `k` of a game won by k marks in a row: the network also reads
            `turbozero.games.lines.line_features` of its board (7 more input planes).
        global_pool: every residual block adds to each cell a bias per channel computed from
            the whole board (the mean and the maximum over the board of the block's first
            convolution, through a dense layer; KataGo's global pooling), so that a cell's
            features can depend on the board as a whole at every depth, not only where the
            convolutions' reach covers it.

    AlphaGo Zero's heads have 2 policy and 1 value channels (the defaults); AlphaZero.jl's
    Connect Four network has 4 policy and 32 value channels.
    """

    policy_head_out_size: int
    num_blocks: int = 2
    num_channels: int = 16
    norm: str = "batch"
    value_bins: int = 0
    bounded_value: bool = True
    model_type: str = "resnet"
    policy_channels: int = dataclasses.field(default=2, metadata=ADDED_LATER)
    value_channels: int = dataclasses.field(default=1, metadata=ADDED_LATER)
    line_length: int = dataclasses.field(default=0, metadata=ADDED_LATER)
    global_pool: bool = dataclasses.field(default=False, metadata=ADDED_LATER)

    def __post_init__(self) -> None:
        check_count("policy_head_out_size", self.policy_head_out_size, low=1)
        check_count("num_blocks", self.num_blocks, low=0)
        check_count("num_channels", self.num_channels, low=1)
        check_count("policy_channels", self.policy_channels, low=1)
        check_count("value_channels", self.value_channels, low=1)
        if check_count("line_length", self.line_length, low=0) == 1:
            raise ValueError(f"line_length must be 0 or >= 2, got {self.line_length}")
        if self.norm not in ("batch", "layer"):
            raise ValueError(f"norm must be 'batch' or 'layer', got {self.norm!r}")
        if check_count("value_bins", self.value_bins, low=0) == 1:
            raise ValueError(f"value_bins must be 0 or >= 2, got {self.value_bins}")
        if self.model_type != "resnet":
            raise ValueError(f"model_type must be 'resnet', got {self.model_type!r}")


class _Norm(nn.Module):
    kind: str

    @nn.compact
    def __call__(self, x: Array, train: bool) -> Array:
        if self.kind == "batch":
            return nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        # each sample over its whole feature map (height, width, channels), as layer norm is
        # defined; over the channels alone the heads' 1- and 2-channel maps normalised to 0
        # and +-1, and the value no longer depended on the board
        return nn.LayerNorm(reduction_axes=(-3, -2, -1), feature_axes=-1)(x)


class _Block(nn.Module):
    channels: int
    norm: str
    global_pool: bool = False

    @nn.compact
    def __call__(self, x: Array, train: bool) -> Array:
        y = nn.Conv(self.channels, (3, 3), use_bias=False)(x)
        y = nn.relu(_Norm(self.norm)(y, train))
        if self.global_pool:  # [B, H, W, C] -> [B, 2C] -> a bias per channel [B, 1, 1, C]
            pooled = jnp.concatenate([y.mean(axis=(1, 2)), y.max(axis=(1, 2))], axis=-1)
            y = y + nn.Dense(self.channels)(pooled)[:, None, None, :]
        y = nn.Conv(self.channels, (3, 3), use_bias=False)(y)
        y = _Norm(self.norm)(y, train)
        return nn.relu(x + y)


class AZResnet(nn.Module):
    """Torso of residual blocks, a policy head (logits `[B, A]`) and a value head.

    The value head returns `[B]` in [-1, 1] (tanh; unbounded without `bounded_value`), or
    `[B, K]` bin logits when `config.value_bins > 0`. Vector observations `[B, D]` are treated
    as `[B, 1, 1, D]`.
    """

    config: AZResnetConfig

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> tuple[Array, Array]:
        cfg = self.config
        x = x.astype(jnp.float32)
        if x.ndim == 2:
            x = x[:, None, None, :]
        elif x.ndim == 3:
            x = x[..., None]
        board = x
        if cfg.line_length:
            x = jnp.concatenate([x, line_features(board, cfg.line_length)], axis=-1)
        x = nn.Conv(cfg.num_channels, (3, 3), use_bias=False)(x)
        x = nn.relu(_Norm(cfg.norm)(x, train))
        for _ in range(cfg.num_blocks):
            x = _Block(cfg.num_channels, cfg.norm, cfg.global_pool)(x, train)
        p = nn.Conv(cfg.policy_channels, (1, 1), use_bias=False)(x)
        p = nn.relu(_Norm(cfg.norm)(p, train)).reshape(x.shape[0], -1)
        logits = nn.Dense(cfg.policy_head_out_size)(p)
        v = nn.Conv(cfg.value_channels, (1, 1), use_bias=False)(x)
        v = nn.relu(_Norm(cfg.norm)(v, train)).reshape(x.shape[0], -1)
        v = nn.relu(nn.Dense(cfg.num_channels)(v))
        if cfg.value_bins:
            return logits, nn.Dense(cfg.value_bins)(v)
        value = nn.Dense(1)(v)[:, 0]
        return logits, jnp.tanh(value) if cfg.bounded_value else value
