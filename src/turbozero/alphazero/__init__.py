"""AlphaZero: self-play, losses, the trainer and its config (composes search, memory, nets)."""

from turbozero.alphazero.augment import horizontal_flip, square_symmetries
from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig
from turbozero.alphazero.learner import AlphaZeroSystem, Systems, TrainState, make_alphazero
from turbozero.alphazero.losses import az_loss
from turbozero.alphazero.reanalyse import Reanalyse, make_reanalyse
from turbozero.alphazero.selfplay import SelfPlay, SelfPlayState, make_selfplay
from turbozero.alphazero.train import train, train_alphazero

__all__ = [
    "AlphaZeroConfig",
    "AlphaZeroSystem",
    "NetworkConfig",
    "Reanalyse",
    "SearchConfig",
    "SelfPlay",
    "SelfPlayState",
    "Systems",
    "TrainState",
    "az_loss",
    "horizontal_flip",
    "make_alphazero",
    "make_reanalyse",
    "make_selfplay",
    "square_symmetries",
    "train",
    "train_alphazero",
]
