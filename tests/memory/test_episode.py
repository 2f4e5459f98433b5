"""Rules of the episode buffer, checked by hand and against a plain-Python model of it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turbozero.memory import EpisodeBufferState, EpisodeSample, make_episode_buffer

EXAMPLE = {"uid": jnp.int32(0), "obs": jnp.zeros(2, jnp.float32)}


def experience(uids):
    uids = jnp.asarray(uids, jnp.int32)
    obs = jnp.stack([uids, 2 * uids], axis=-1).astype(jnp.float32)
    return {"uid": uids, "obs": obs}


def play_one_game(buffer, state, players, rewards, *, truncated_at_end=False, bootstrap=None):
    """Single-game episode: adds position t with uid t, then ends the step with rewards[t]."""
    for t, (player, reward) in enumerate(zip(players, rewards, strict=True)):
        state = buffer.add(state, experience([t]), jnp.array([player]))
        last = t == len(players) - 1
        state = buffer.end_step(
            state,
            jnp.array([reward], jnp.float32),
            jnp.array([last and not truncated_at_end]),
            jnp.array([last and truncated_at_end]),
            None if bootstrap is None else jnp.array([bootstrap], jnp.float32),
        )
    return state


def outcomes_by_uid(state: EpisodeBufferState) -> dict[int, float]:
    uid = np.asarray(state.experience["uid"]).ravel()
    assigned = np.asarray(state.assigned).ravel()
    outcome = np.asarray(state.outcome).ravel()
    return {int(u): float(o) for u, o, a in zip(uid, outcome, assigned, strict=True) if a}


# ----------------------------------------------------------------------------- hand-worked rules


def test_two_player_outcome_is_final_reward_of_mover_even_when_movers_do_not_alternate():
    buffer = make_episode_buffer(num_games=1, capacity=8, sample_size=1, num_players=2)
    state = buffer.init(EXAMPLE)
    players = [0, 0, 1, 0, 1, 1]
    rewards = [[0, 0]] * 5 + [[-1, 1]]  # player 1 wins on the last step
    state = play_one_game(buffer, state, players, rewards)
    expected = {t: (1.0 if p == 1 else -1.0) for t, p in enumerate(players)}
    assert outcomes_by_uid(state) == expected


def test_two_player_draw_gives_zero_to_every_position():
    buffer = make_episode_buffer(num_games=1, capacity=8, sample_size=1, num_players=2)
    state = play_one_game(buffer, buffer.init(EXAMPLE), [0, 1, 0], [[0, 0], [0, 0], [0, 0]])
    assert outcomes_by_uid(state) == {0: 0.0, 1: 0.0, 2: 0.0}


def test_one_player_outcome_is_discounted_return_from_the_position():
    buffer = make_episode_buffer(
        num_games=1, capacity=8, sample_size=1, num_players=1, discount=0.5
    )
    state = play_one_game(buffer, buffer.init(EXAMPLE), [0, 0, 0], [[1], [2], [4]])
    # t=0: 1 + 0.5*2 + 0.25*4 = 3;  t=1: 2 + 0.5*4 = 4;  t=2: 4.
    assert outcomes_by_uid(state) == {0: 3.0, 1: 4.0, 2: 4.0}


def test_bootstrap_truncation_adds_discounted_value_of_the_state_reached():
    buffer = make_episode_buffer(
        num_games=1,
        capacity=8,
        sample_size=1,
        num_players=1,
        discount=0.5,
        truncation="bootstrap",
    )
    state = buffer.init(EXAMPLE)
    state = buffer.add(state, experience([0]), jnp.array([0]))
    state = buffer.end_step(
        state, jnp.array([[1.0]]), jnp.array([False]), jnp.array([False]), jnp.zeros((1, 1))
    )
    assert outcomes_by_uid(state) == {}  # not finished yet
    state = buffer.add(state, experience([1]), jnp.array([0]))
    state = buffer.end_step(
        state, jnp.array([[1.0]]), jnp.array([False]), jnp.array([True]), jnp.array([[8.0]])
    )
    # T = 2 steps taken. t=0: 1 + 0.5*1 + 0.25*8 = 3.5;  t=1: 1 + 0.5*8 = 5.
    assert outcomes_by_uid(state) == {0: 3.5, 1: 5.0}
    assert int(state.episodes_finished) == 1


def test_bootstrap_value_is_taken_for_the_player_to_move_at_each_position():
    buffer = make_episode_buffer(
        num_games=1, capacity=4, sample_size=1, num_players=2, truncation="bootstrap"
    )
    state = play_one_game(
        buffer,
        buffer.init(EXAMPLE),
        [0, 1],
        [[0, 0], [0, 0]],
        truncated_at_end=True,
        bootstrap=[0.25, -0.25],
    )
    assert outcomes_by_uid(state) == {0: 0.25, 1: -0.25}


def test_drop_truncation_never_makes_the_truncated_episode_sampleable():
    buffer = make_episode_buffer(num_games=1, capacity=8, sample_size=4, num_players=2)
    state = play_one_game(
        buffer, buffer.init(EXAMPLE), [0, 1, 0], [[0, 0], [0, 0], [1, -1]], truncated_at_end=True
    )
    assert outcomes_by_uid(state) == {}
    assert int(state.episodes_dropped) == 1
    assert int(state.episodes_finished) == 0
    sample = buffer.sample(state, jax.random.PRNGKey(0))
    assert not sample.valid.any()


def test_terminated_and_truncated_together_counts_as_terminated():
    buffer = make_episode_buffer(num_games=1, capacity=4, sample_size=1, num_players=1)
    state = buffer.init(EXAMPLE)
    state = buffer.add(state, experience([0]), jnp.array([0]))
    state = buffer.end_step(state, jnp.array([[2.0]]), jnp.array([True]), jnp.array([True]))
    assert outcomes_by_uid(state) == {0: 2.0}
    assert int(state.episodes_dropped) == 0


def test_augmented_copies_of_a_position_share_its_outcome():
    buffer = make_episode_buffer(num_games=2, capacity=6, sample_size=1, num_players=2)
    state = buffer.init(EXAMPLE)
    uid = 0
    for step, player in enumerate([0, 1]):
        for _ in range(2):  # two symmetric copies per position
            state = buffer.add(state, experience([uid, uid + 1]), jnp.array([player, player]))
            uid += 2
        last = step == 1
        state = buffer.end_step(
            state,
            jnp.array([[1.0, -1.0], [0.0, 0.0]]) * last,
            jnp.array([last, last]),
            jnp.array([False, False]),
        )
    # game 0 (even uids): player 0 won; game 1 (odd uids): draw.
    assert outcomes_by_uid(state) == {0: 1, 2: 1, 4: -1, 6: -1, 1: 0, 3: 0, 5: 0, 7: 0}
    assert int(state.positions_added) == 8


def test_episode_longer_than_capacity_keeps_the_outcomes_of_its_latest_positions():
    buffer = make_episode_buffer(num_games=1, capacity=3, sample_size=3, num_players=1)
    rewards = [[float(t)] for t in range(7)]
    state = play_one_game(buffer, buffer.init(EXAMPLE), [0] * 7, rewards)
    # Positions 4, 5, 6 survive; their undiscounted return is the sum of rewards from t on.
    assert outcomes_by_uid(state) == {4: 15.0, 5: 11.0, 6: 6.0}


def test_slot_overwritten_by_a_running_episode_is_not_sampleable():
    buffer = make_episode_buffer(num_games=1, capacity=2, sample_size=1, num_players=2)
    state = play_one_game(buffer, buffer.init(EXAMPLE), [0, 1], [[0, 0], [1, -1]])
    assert outcomes_by_uid(state) == {0: 1.0, 1: -1.0}
    state = buffer.add(state, experience([7]), jnp.array([0]))
    state = buffer.end_step(
        state, jnp.zeros((1, 2)), jnp.array([False]), jnp.array([False])
    )  # the next episode runs and has overwritten the slot of uid 0
    assert outcomes_by_uid(state) == {1: -1.0}
    for seed in range(5):
        sample = buffer.sample(state, jax.random.PRNGKey(seed))
        assert sample.experience["uid"].tolist() == [1]
        assert sample.outcome.tolist() == [-1.0]


# ----------------------------------------------------------------------------- sampling


def filled_buffer(sample_size):
    """Two games, capacity 3; game 0 finished 3 positions (uids 0, 2, 4), game 1 is running."""
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=sample_size, num_players=1)
    state = buffer.init(EXAMPLE)
    for t in range(3):
        state = buffer.add(state, experience([2 * t, 2 * t + 1]), jnp.array([0, 0]))
        state = buffer.end_step(
            state, jnp.ones((2, 1)), jnp.array([t == 2, False]), jnp.array([False, False])
        )
    return buffer, state


def test_sample_draws_without_replacement_when_enough_positions_are_available():
    buffer, state = filled_buffer(sample_size=3)
    for seed in range(5):
        sample = buffer.sample(state, jax.random.PRNGKey(seed))
        assert sorted(sample.experience["uid"].tolist()) == [0, 2, 4]
        assert bool(sample.complete) and int(sample.num_available) == 3
        assert sample.valid.all()
        assert sample.outcome.tolist() == [3.0 - t / 2 for t in sample.experience["uid"].tolist()]
        np.testing.assert_array_equal(
            sample.experience["obs"], np.stack([sample.experience["uid"]] * 2, -1) * [1, 2]
        )


def test_sample_draws_with_replacement_among_available_when_too_few():
    buffer, state = filled_buffer(sample_size=5)
    sample = buffer.sample(state, jax.random.PRNGKey(0))
    assert not bool(sample.complete) and int(sample.num_available) == 3
    assert sample.valid.all()
    assert set(sample.experience["uid"].tolist()) <= {0, 2, 4}


def test_sample_of_buffer_without_finished_episodes_is_all_invalid():
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=4, num_players=2)
    state = buffer.init(EXAMPLE)
    sample = buffer.sample(state, jax.random.PRNGKey(0))
    assert isinstance(sample, EpisodeSample)
    assert not sample.valid.any() and not bool(sample.complete)
    assert int(sample.num_available) == 0
    state = buffer.add(state, experience([5, 6]), jnp.array([0, 1]))
    sample = buffer.sample(state, jax.random.PRNGKey(0))
    assert not sample.valid.any()
    assert sample.outcome.tolist() == [0.0] * 4
    assert sample.experience["uid"].tolist() == [0] * 4


def test_sample_is_roughly_uniform_over_available_positions():
    buffer, state = filled_buffer(sample_size=1)
    draws = jax.vmap(lambda k: buffer.sample(state, k).experience["uid"][0])(
        jax.random.split(jax.random.PRNGKey(1), 600)
    )
    counts = np.bincount(np.asarray(draws), minlength=6)
    assert counts[[1, 3, 5]].sum() == 0
    assert (counts[[0, 2, 4]] > 150).all()


# ----------------------------------------------------------------------------- validation & misc


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"num_games": 0}, "num_games"),
        ({"capacity": 0}, "capacity"),
        ({"sample_size": 0}, "sample_size"),
        ({"sample_size": 7}, "sample_size"),  # more than num_games * capacity = 6
        ({"num_players": 3}, "num_players"),
        ({"discount": 0.0}, "discount"),
        ({"discount": 1.5}, "discount"),
        ({"truncation": "ignore"}, "truncation"),
    ],
)
def test_factory_rejects_out_of_range_arguments_naming_them(kwargs, argument):
    arguments = {"num_games": 2, "capacity": 3, "sample_size": 2, "num_players": 2, **kwargs}
    with pytest.raises(ValueError, match=argument):
        make_episode_buffer(**arguments)


@pytest.mark.parametrize(
    ("bad_experience", "match"),
    [
        ({"uid": jnp.zeros(3, jnp.int32), "obs": jnp.zeros((3, 2))}, "shape"),  # 3 games, not 2
        ({"uid": jnp.zeros(2, jnp.int32), "obs": jnp.zeros((2, 3))}, "shape"),
        ({"uid": jnp.zeros(2, jnp.int32)}, "structure"),
        ({"uid": jnp.zeros(2, jnp.float32), "obs": jnp.zeros((2, 2))}, "dtype"),
    ],
)
def test_add_rejects_experience_not_matching_the_example(bad_experience, match):
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=2, num_players=2)
    state = buffer.init(EXAMPLE)
    with pytest.raises(ValueError, match=match):
        buffer.add(state, bad_experience, jnp.zeros(2, jnp.int32))
    with pytest.raises(ValueError, match="player"):
        buffer.add(state, experience([0, 1]), jnp.zeros(3, jnp.int32))


def test_factory_takes_numpy_integers_and_refuses_bools():
    buffer = make_episode_buffer(
        num_games=np.int64(2), capacity=np.int32(3), sample_size=np.int64(2), num_players=2
    )
    assert buffer.num_games == 2 and buffer.num_players == 2
    with pytest.raises(ValueError, match="num_games must be an int >= 1, got True"):
        make_episode_buffer(num_games=True, capacity=3, sample_size=1, num_players=2)
    with pytest.raises(ValueError, match="num_players must be 1 or 2, got True"):
        make_episode_buffer(num_games=2, capacity=3, sample_size=1, num_players=True)


def test_add_rejects_players_that_are_not_integer_ids():
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=2, num_players=2)
    with pytest.raises(ValueError, match="player must hold integer player ids, got dtype float"):
        buffer.add(buffer.init(EXAMPLE), experience([0, 1]), jnp.array([0.7, 1.9]))


def test_add_rejects_players_out_of_range_outside_traced_code():
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=2, num_players=2)
    state = buffer.init(EXAMPLE)
    with pytest.raises(ValueError, match=r"player values must lie in \[0, 2\).*\[0, 2\]"):
        buffer.add(state, experience([0, 1]), jnp.array([0, 2], jnp.int32))
    assert int(buffer.add(state, experience([0, 1]), jnp.array([1, 0])).player[1, 0]) == 0


def test_end_step_rejects_wrong_shapes_and_missing_bootstrap_values():
    buffer = make_episode_buffer(
        num_games=2, capacity=3, sample_size=2, num_players=2, truncation="bootstrap"
    )
    state = buffer.init(EXAMPLE)
    no = jnp.zeros(2, jnp.bool_)
    with pytest.raises(ValueError, match="rewards"):
        buffer.end_step(state, jnp.zeros((2, 1)), no, no, jnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="bootstrap_values"):
        buffer.end_step(state, jnp.zeros((2, 2)), no, no)


def test_nbytes_is_the_size_of_the_initial_state():
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=2, num_players=2)
    state = buffer.init(EXAMPLE)
    expected = sum(x.nbytes for x in jax.tree.leaves(state))
    assert buffer.nbytes(EXAMPLE) == expected
    assert expected >= 2 * 3 * (4 + 8)  # uid and obs storage alone


def test_stats_report_the_counters():
    buffer, state = filled_buffer(sample_size=1)
    stats = buffer.stats(state)
    assert {k: int(v) for k, v in stats.items()} == {
        "positions_added": 6,
        "positions_held": 6,
        "positions_sampleable": 3,
        "episodes_finished": 1,
        "episodes_dropped": 0,
    }


def test_jitted_add_end_step_and_sample_do_not_compile_again():
    buffer = make_episode_buffer(num_games=2, capacity=3, sample_size=2, num_players=2)
    traces = {"add": 0, "end_step": 0, "sample": 0}

    def counted(name):
        def wrapper(*args):
            traces[name] += 1
            return getattr(buffer, name)(*args)

        return jax.jit(wrapper)

    add, end_step, sample = counted("add"), counted("end_step"), counted("sample")
    state = buffer.init(EXAMPLE)
    for step in range(3):
        state = add(state, experience([step, step]), jnp.array([0, 1]))
        state = end_step(state, jnp.zeros((2, 2)), jnp.array([step == 1] * 2), jnp.zeros(2, bool))
        sample(state, jax.random.PRNGKey(step))
    assert traces == {"add": 1, "end_step": 1, "sample": 1}


def test_buffer_runs_inside_scan():
    buffer = make_episode_buffer(num_games=2, capacity=4, sample_size=2, num_players=2)

    def step(state, t):
        state = buffer.add(state, experience(jnp.stack([t, t + 100])), jnp.stack([t % 2, 0]))
        done = jnp.stack([t == 2, t == 3])
        state = buffer.end_step(state, jnp.ones((2, 2)) * done[:, None], done, jnp.zeros(2, bool))
        return state, None

    state, _ = jax.lax.scan(step, buffer.init(EXAMPLE), jnp.arange(4))
    assert outcomes_by_uid(state) == {0: 1, 1: 1, 2: 1, 100: 1, 101: 1, 102: 1, 103: 1}


# ----------------------------------------------------------------------------- property check

B, C, S, P = 2, 5, 4, 2
CONFIGS = {"drop": ("drop", 0.9), "bootstrap": ("bootstrap", 0.8), "undiscounted": ("drop", 1.0)}


@functools.cache
def compiled(config):
    truncation, discount = CONFIGS[config]
    buffer = make_episode_buffer(
        num_games=B,
        capacity=C,
        sample_size=S,
        num_players=P,
        discount=discount,
        truncation=truncation,
    )
    return buffer, jax.jit(buffer.add), jax.jit(buffer.end_step), jax.jit(buffer.sample)


@dataclass
class Slot:
    uid: int
    episode: int
    t: int
    player: int
    status: str = "running"  # running | final | dropped
    outcome: float = 0.0


@dataclass
class ModelGame:
    slots: list = field(default_factory=lambda: [None] * C)
    episode: int = 0
    rewards: list = field(default_factory=list)  # rewards [P] of each step of the episode


class Model:
    """The buffer in plain Python: explicit lists, outcomes computed from reward histories."""

    def __init__(self, truncation, discount):
        self.truncation, self.discount = truncation, discount
        self.games = [ModelGame() for _ in range(B)]
        self.position = 0
        self.added = self.finished = self.dropped = 0

    def add(self, uids, players):
        for game, uid, player in zip(self.games, uids, players, strict=True):
            game.slots[self.position] = Slot(uid, game.episode, len(game.rewards), player)
        self.position = (self.position + 1) % C
        self.added += B

    def end_step(self, rewards, terminated, truncated, values):
        for b, game in enumerate(self.games):
            game.rewards.append(rewards[b])
            if not (terminated[b] or truncated[b]):
                continue
            closes = terminated[b] or self.truncation == "bootstrap"
            for slot in game.slots:
                if slot is None or slot.episode != game.episode:
                    continue
                if not closes:
                    slot.status = "dropped"
                    continue
                steps = range(slot.t, len(game.rewards))
                ret = sum(
                    self.discount ** (k - slot.t) * game.rewards[k][slot.player] for k in steps
                )
                if not terminated[b]:
                    ret += self.discount ** (len(game.rewards) - slot.t) * values[b][slot.player]
                slot.status, slot.outcome = "final", ret
            self.finished += closes
            self.dropped += not closes
            game.episode += 1
            game.rewards = []

    def final(self):
        return {
            s.uid: s for g in self.games for s in g.slots if s is not None and s.status == "final"
        }


STEP = st.tuples(
    st.integers(0, 2),  # copies added this step (augmentation); 0 = position not stored
    st.lists(st.integers(0, P - 1), min_size=B, max_size=B),  # player to move per game
    st.lists(
        st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0]), min_size=P, max_size=P),
        min_size=B,
        max_size=B,
    ),
    st.lists(st.sampled_from([False, False, False, True]), min_size=B, max_size=B),
    st.lists(st.sampled_from([False, False, False, False, True]), min_size=B, max_size=B),
    st.lists(
        st.lists(st.sampled_from([-0.5, 0.25, 1.0]), min_size=P, max_size=P), min_size=B, max_size=B
    ),
)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@given(steps=st.lists(STEP, min_size=1, max_size=30), seed=st.integers(0, 2**16))
def test_buffer_matches_reference_model_and_samples_only_finished_outcomes(config, steps, seed):
    buffer, add, end_step, sample = compiled(config)
    model = Model(*CONFIGS[config])
    state = buffer.init(EXAMPLE)
    uid = 1
    for copies, players, rewards, terminated, truncated, values in steps:
        for _ in range(copies):
            uids = list(range(uid, uid + B))
            uid += B
            state = add(state, experience(uids), jnp.array(players, jnp.int32))
            model.add(uids, players)
        state = end_step(
            state,
            jnp.array(rewards, jnp.float32),
            jnp.array(terminated),
            jnp.array(truncated),
            jnp.array(values, jnp.float32),
        )
        model.end_step(rewards, terminated, truncated, values)

    final = model.final()
    got = outcomes_by_uid(state)
    assert got.keys() == final.keys()
    for u, slot in final.items():
        assert got[u] == pytest.approx(slot.outcome, abs=1e-5)
    assert int(state.positions_added) == model.added
    assert int(state.positions_sampleable) == len(final)
    assert int(state.episodes_finished) == model.finished
    assert int(state.episodes_dropped) == model.dropped

    for key in jax.random.split(jax.random.PRNGKey(seed), 3):
        batch = sample(state, key)
        assert int(batch.num_available) == len(final)
        assert bool(batch.complete) == (len(final) >= S)
        assert bool(batch.valid.all()) == (len(final) > 0)
        assert not batch.valid.any() or batch.valid.all()
        uids = batch.experience["uid"].tolist()
        for u, o, p, v in zip(
            uids, batch.outcome.tolist(), batch.player.tolist(), batch.valid.tolist(), strict=True
        ):
            if v:
                assert u in final
                assert o == pytest.approx(final[u].outcome, abs=1e-5)
                assert p == final[u].player
        if batch.complete:
            assert len(set(uids)) == S
