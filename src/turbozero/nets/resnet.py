"""The AlphaZero residual network (flax linen), for board observations `[B, H, W, C]`."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax.numpy as jnp

from turbozero.nets.lines import line_features
from turbozero.types import Array
from turbozero.validate import check_count


@dataclasses.dataclass(frozen=True)
class AZResnetConfig:
    """Sizes of the AlphaZero ResNet.

    Attributes:
        policy_head_out_size: number of actions `A`.
        num_blocks: residual blocks, >= 0.
        num_channels: channels of every convolution, >= 1.
        norm: must be "batch" (statistics kept in `params["batch_stats"]`): kept so that runs
            recorded with it resume (layer norm was tried and not kept).
        value_bins: 0 for a scalar value head, else the number of value-bin logits.
        bounded_value: the scalar value passes through tanh (two-player outcomes in [-1, 1]);
            False for one-player returns, which the trainer scales by `value_scale` but does not
            bound (as `PolicyValueMLP`).
        model_type: accepted for compatibility with the tutorial; must be "resnet".
        line_length: 0, or the `k` of a game won by k marks in a row: the network also reads
            `turbozero.nets.lines.line_features` of its board (7 more input planes).

    The heads' 1x1 convolutions have AlphaGo Zero's 2 policy and 1 value channels.
    """

    policy_head_out_size: int
    num_blocks: int = 2
    num_channels: int = 16
    norm: str = "batch"
    value_bins: int = 0
    bounded_value: bool = True
    model_type: str = "resnet"
    line_length: int = 0

    def __post_init__(self) -> None:
        check_count("policy_head_out_size", self.policy_head_out_size, low=1)
        check_count("num_blocks", self.num_blocks, low=0)
        check_count("num_channels", self.num_channels, low=1)
        if check_count("line_length", self.line_length, low=0) == 1:
            raise ValueError(f"line_length must be 0 or >= 2, got {self.line_length}")
        if self.norm != "batch":
            raise ValueError(f"norm must be 'batch', got {self.norm!r}")
        if check_count("value_bins", self.value_bins, low=0) == 1:
            raise ValueError(f"value_bins must be 0 or >= 2, got {self.value_bins}")
        if self.model_type != "resnet":
            raise ValueError(f"model_type must be 'resnet', got {self.model_type!r}")


class _Norm(nn.Module):
    """Batch norm, in a module of its own: its name is part of the checkpoints' parameter paths
    (`_Norm_0/BatchNorm_0`)."""

    @nn.compact
    def __call__(self, x: Array, train: bool) -> Array:
        return nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)


class _Block(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x: Array, train: bool) -> Array:
        y = nn.Conv(self.channels, (3, 3), use_bias=False)(x)
        y = nn.relu(_Norm()(y, train))
        y = nn.Conv(self.channels, (3, 3), use_bias=False)(y)
        y = _Norm()(y, train)
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
        x = nn.relu(_Norm()(x, train))
        for _ in range(cfg.num_blocks):
            x = _Block(cfg.num_channels)(x, train)
        p = nn.Conv(2, (1, 1), use_bias=False)(x)
        p = nn.relu(_Norm()(p, train)).reshape(x.shape[0], -1)
        logits = nn.Dense(cfg.policy_head_out_size)(p)
        v = nn.Conv(1, (1, 1), use_bias=False)(x)
        v = nn.relu(_Norm()(v, train)).reshape(x.shape[0], -1)
        v = nn.relu(nn.Dense(cfg.num_channels)(v))
        if cfg.value_bins:
            return logits, nn.Dense(cfg.value_bins)(v)
        value = nn.Dense(1)(v)[:, 0]
        return logits, jnp.tanh(value) if cfg.bounded_value else value
