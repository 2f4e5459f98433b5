"""The name `turbozero.alphazero.learner` had before 0.1.0 (kept for one release): the three
algorithms now call the module that builds their compiled steps `learner`."""

from turbozero.alphazero.learner import (  # noqa: F401
    AlphaZeroSystem,
    TrainState,
    make_alphazero,
    make_selector,
)
