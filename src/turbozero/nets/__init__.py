"""Networks: the AlphaZero ResNet, the MLPs of every algorithm (`turbozero.nets.mlp`), and the
module -> eval_fn helpers."""

from turbozero.nets.eval_fn import init_params, make_eval_fn, param_count
from turbozero.nets.mlp import PolicyValueMLP
from turbozero.nets.resnet import AZResnet, AZResnetConfig

__all__ = [
    "AZResnet",
    "AZResnetConfig",
    "PolicyValueMLP",
    "init_params",
    "make_eval_fn",
    "param_count",
]
