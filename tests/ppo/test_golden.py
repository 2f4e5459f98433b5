"""Today's PPO learner reproduces its stored golden outputs (`golden.py`): CartPole and Pendulum,
both losses, observation normalisation on and off, seeds, a hyperparameter grid and a named
device axis. Integers (keys, counts, steps, actions) must be equal; floats equal to 1e-6
(bit-identical on the machine that wrote them; other CPUs may round transcendental functions
differently in the last place)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ppo.golden import CASES, PATH, run_case


@pytest.fixture(scope="module")
def golden():
    with np.load(PATH) as data:
        return dict(data)


@pytest.mark.optimized
@pytest.mark.parametrize("case", list(CASES))
def test_the_learner_reproduces_its_golden_outputs(golden, case):
    out = run_case(case)
    stored = {k.removeprefix(f"{case}/"): v for k, v in golden.items() if k.startswith(f"{case}/")}
    assert sorted(out) == sorted(stored)
    for name, want in stored.items():
        got = out[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_the_golden_cases_exercise_what_they_claim(golden):
    episodes = golden["cartpole_norm_devices_inside/metrics0/episodes"]
    assert episodes.sum() > 0  # episodes end, so restart states are drawn inside the rollout
    assert not np.allclose(episodes[0], np.round(episodes[0]))  # a mean over the two members
    kernel = ".params.actor['params']['Dense_0']['kernel']"
    members = golden[f"cartpole_norm_devices_inside/final/{kernel}"]
    np.testing.assert_array_equal(members[0], members[1])  # averaged gradients: one agent
    assert (golden["pendulum_kl_norm_grid/metrics0/kl"] > 0).all()  # the KL-penalty loss ran
    assert golden["pendulum_kl_norm_grid/final/.obs_stats.count"].min() > 0
    assert (golden["cartpole_clip_seeds/metrics0/episodes"] > 0).all()
