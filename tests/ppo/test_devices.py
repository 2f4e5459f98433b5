"""Gradient averaging over a named axis: `update` under `shard_map` on 2 forced CPU devices."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P
    from turbozero.io import enable_compilation_cache
    from turbozero.ppo import PPOConfig, make_ppo

    enable_compilation_cache()

    cfg = PPOConfig(num_envs=2, rollout_length=8, num_updates=2, num_updates_per_eval=2,
                    epochs=1, num_minibatches=2, actor_hidden=(8,), critic_hidden=(8,),
                    normalize_observations=True, obs_norm_warmup_steps=1)
    ppo = make_ppo(cfg, axis_name="device")
    mesh = Mesh(np.array(jax.devices()[:2]), ("device",))
    add = lambda tree: jax.tree.map(lambda x: x[None], tree)
    drop = lambda tree: jax.tree.map(lambda x: x[0], tree)
    init = jax.jit(jax.shard_map(lambda k: add(ppo.init(k)), mesh=mesh, in_specs=P(),
                                 out_specs=P("device")))
    update = jax.jit(jax.shard_map(lambda s: add(ppo.update(drop(s))), mesh=mesh,
                                   in_specs=P("device"), out_specs=P("device")))
    state = init(jax.random.PRNGKey(0))
    state, metrics = update(state)
    for leaf in jax.tree.leaves(state.params) + jax.tree.leaves(state.obs_stats):
        np.testing.assert_allclose(leaf[0], leaf[1], rtol=1e-5, atol=1e-6)
    obs = np.asarray(state.env_state.observation)
    assert not np.allclose(obs[0], obs[1]), "devices must run different environments"
    np.testing.assert_allclose(metrics["actor_loss"][0], metrics["actor_loss"][1], rtol=1e-5)
    print("OK")
    """
)


def test_sharded_update_keeps_parameters_identical_across_devices():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")
