"""Many devices: games, trees and memory split along the `data` axis of a `jax.sharding.Mesh`.

One code path for one CPU, several devices and several hosts: the state is laid out with
`NamedSharding`s and the same jitted functions run as one SPMD program; XLA inserts the
collectives (the training batch is drawn from the whole memory, so gradients are averaged over
every device's positions). With `jax.distributed.initialize`, `jax.devices()` spans all hosts and
each host holds its share of the games.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.distributed import maybe_initialize_distributed

__all__ = ["AXIS", "Sharder", "maybe_initialize_distributed"]

AXIS = "data"


class Sharder:
    """Lays a `TrainState` out over the devices (a no-op on one device)."""

    def __init__(self, config: AlphaZeroConfig, devices: list[Any] | None = None):
        devices = list(devices if devices is not None else jax.devices())
        if config.devices:
            if config.devices > len(devices):
                raise ValueError(f"devices={config.devices} but only {len(devices)} are visible")
            devices = devices[: config.devices]
        processes = jax.process_count()
        if processes > 1 and {d.process_index for d in devices} != set(range(processes)):
            raise ValueError(
                f"devices={config.devices} leaves out some of the {processes} joined processes "
                f"(each needs at least one of the first devices); use devices=0 (all) or a "
                f"count that covers every host"
            )
        n = len(devices)
        alone = n == 1 and processes == 1
        #: whether each epoch self-plays beside its gradient steps (`overlap`; None: when alone)
        self.overlap = alone if config.overlap is None else config.overlap
        if config.overlap and not alone:
            raise ValueError(
                f"overlap=true runs self-play and the gradient steps side by side on one device, "
                f"but this run spans {n} devices in {processes} process(es): set devices=1 or "
                f"overlap=false, or overlap=none (beside each other on one device, in turn on "
                f"several; a run resumed on more devices than it started on: make one visible, "
                f"e.g. CUDA_VISIBLE_DEVICES=0)"
            )
        for name in ("num_games", "train_batch_size"):
            value = getattr(config, name)
            if value % n:
                raise ValueError(f"{name}={value} must be divisible by the number of devices ({n})")
        self.num_devices = n
        self.num_games = config.num_games
        self.mesh = Mesh(np.array(devices), (AXIS,))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.split = NamedSharding(self.mesh, PartitionSpec(AXIS))

    def shardings(self, state_shape: Any) -> Any:
        """A sharding per leaf: leaves of self-play state with a leading game axis are split."""

        def spec(path, leaf):
            in_selfplay = any(getattr(k, "name", None) == "selfplay" for k in path)
            if in_selfplay and leaf.ndim >= 1 and leaf.shape[0] == self.num_games:
                return self.split
            return self.replicated

        return jax.tree_util.tree_map_with_path(spec, state_shape)

    def jit_init(self, init):
        def wrapped(key):
            return init(key)

        shape = jax.eval_shape(init, jax.random.PRNGKey(0))
        return jax.jit(wrapped, out_shardings=self.shardings(shape))

    def jit_step(self, fn, state_shape, *, compiler_options: dict[str, Any] | None = None):
        """Jit `fn(state, n) -> (state, metrics)` keeping the state's layout (`compiler_options`:
        passed to `jax.jit`, e.g. `turbozero.search.compiler_options()` for self-play)."""
        shardings = self.shardings(state_shape)
        return jax.jit(
            fn,
            static_argnums=1,
            donate_argnums=0,
            out_shardings=(shardings, self.replicated),
            compiler_options=compiler_options,
        )

    def replicate(self, tree):
        """Host arrays (the same on every process) as arrays replicated over the mesh."""
        return jax.tree_util.tree_map(
            lambda x: jax.device_put(np.asarray(x), self.replicated), tree
        )
