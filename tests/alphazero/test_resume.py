"""Resuming interrupted runs: what the interrupted attempt wrote after its last checkpoint is
redone exactly, the evaluation schedule does not depend on where a run was stopped, and the
choice of the "best" network compares like with like."""

from __future__ import annotations

import gc
import shutil
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.alphazero.test_selfplay_and_trainer import TINY
from turbozero.alphazero import train
from turbozero.alphazero.evaluate import better_than_best
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.errors import RunInUseError
from turbozero.io.rundir import RunDir

ELO = TINY.with_overrides(
    ["eval_opponents=random,best", "elo_pool_size=2", "elo_games_per_opponent=4"]
)
TIMING = (
    "wall_seconds",
    "positions_per_s",
    "simulations_per_s",
    "train_steps_per_s",
    "selfplay_seconds",
    "train_seconds",
    "eval_seconds",
)
ONCE = ("compile_seconds", "startup_seconds")  # a process's start: compiling, warm-up moves


def _meta(run):
    ck = Checkpointer(RunDir(run).checkpoints)
    try:
        return ck.restore_meta()
    finally:
        ck.close()


def _rows(run):
    return [
        {k: v for k, v in r.items() if k not in TIMING and k not in ONCE}
        for r in RunDir(run).read_metrics()
    ]


def test_a_run_stopped_early_evaluates_on_the_configs_schedule_when_resumed(systems, tmp_path):
    """Stopping at epoch 1 (`num_epochs=1`) of a run that evaluates every 2 epochs must not add
    an evaluation there: it would play Elo games and pick a "best" an uninterrupted run never
    had."""
    cfg = ELO.with_overrides(["eval_every=2"])
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(cfg, whole, progress=False, systems=systems)
    train(cfg, split, progress=False, num_epochs=1, systems=systems)
    assert "eval/random/win" not in RunDir(split).read_metrics()[0]
    train(cfg, split, progress=False, resume=True, systems=systems)
    a, b = _meta(whole), _meta(split)
    for k in ("best_name", "elo_names", "elo_games", "pool_names", "eval"):
        assert a[k] == b[k], k
    assert _rows(whole) == _rows(split)


def test_resume_redoes_epochs_after_the_last_checkpoint_without_duplicates(systems, tmp_path):
    """A crash after epoch 2 whose checkpoint never landed (here: deleted) leaves metric rows
    and a `best/` network of epochs the resumed run computes again; resuming must neither
    append duplicate rows nor fail saving `best/` at a step that already exists."""
    cfg = ELO.with_overrides(["eval_every=1", "checkpoint_every=2"])
    run = tmp_path / "run"
    train(cfg, run, progress=False, systems=systems)
    rows = _rows(run)
    best = Checkpointer(run / "best")
    best_step = best.latest_step()
    best.close()
    assert best_step is not None
    shutil.rmtree(RunDir(run).checkpoints / "2")  # the only checkpoint: resume starts afresh
    summary = train(cfg, run, progress=False, resume=True, systems=systems)
    assert summary["epochs"] == 2
    assert _rows(run) == rows
    best = Checkpointer(run / "best")
    assert best.all_steps() == [best_step]
    best.close()


def test_resume_goes_back_past_a_damaged_checkpoint_and_redoes_its_epoch_exactly(systems, tmp_path):
    """A crash or a full disk can leave the newest checkpoint unreadable: the run resumes from
    the newest intact one (the damaged one is rewritten) and ends as the uninterrupted run."""
    cfg = ELO.with_overrides(["checkpoint_every=1"])
    whole, damaged = tmp_path / "whole", tmp_path / "damaged"
    train(cfg, whole, progress=False, systems=systems)
    train(cfg, damaged, progress=False, systems=systems)
    (RunDir(damaged).checkpoints / "2" / "meta" / "metadata").write_text("{cut")
    summary = train(cfg, damaged, progress=False, resume=True, systems=systems)
    assert summary["epochs"] == 2
    assert _rows(damaged) == _rows(whole)
    a, b = _meta(whole), _meta(damaged)
    for k in ("best_name", "elo_names", "elo_games", "pool_names", "eval", "step"):
        assert a[k] == b[k], k


def test_a_run_saved_without_its_memory_loads_and_resumes_saying_it_is_not_exact(
    systems, tmp_path, capsys
):
    import turbozero

    cfg = TINY.with_overrides(["save_memory=false", "num_epochs=1"])
    run = tmp_path / "nomem"
    train(cfg, run, progress=False, systems=systems)
    agent = turbozero.load_agent(run, which="latest")
    assert agent.epoch == 1
    capsys.readouterr()
    summary = train(
        cfg.with_overrides(["num_epochs=2"]), run, progress=False, resume=True, systems=systems
    )
    assert summary["epochs"] == 2
    assert "differs from an uninterrupted run" in capsys.readouterr().out


def _checkpoint_best(run, step):
    """The best network a training checkpoint holds, read without the trainer."""
    ck = Checkpointer(RunDir(run).checkpoints)
    try:
        meta = ck.restore_meta(step)
        assert meta["has_best"]
        args = ocp.args.Composite(state=ocp.args.StandardRestore())
        return ck.manager.restore(step, args=args)["state"]["best"]
    finally:
        ck.close()


def _assert_same_tree(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_best_network_lost_with_a_crash_is_saved_again_on_resume_and_loads_as_best(
    systems, tmp_path
):
    """`best/` is written before its epoch's checkpoint and keeps one network: a crash between
    the two leaves `best/` ahead of the checkpoint, and resuming deletes it. The resumed run
    saves the checkpoint's own best network there again, and until then (or without `best/`)
    the loader takes the checkpoint's best network, not the latest one."""
    import turbozero

    # gating at a full score against the best keeps epoch 1's network as the best
    cfg = ELO.with_overrides(
        ["eval_every=1", "checkpoint_every=1", "num_epochs=3", "gating_threshold=1"]
    )
    run = tmp_path / "run"
    train(cfg, run, progress=False, systems=systems)
    assert _meta(run)["best_name"] == "epoch_1"
    shutil.rmtree(run / "best")  # as if lost: the loader falls back to the checkpoint's best
    loaded = turbozero.load_agent(run)
    assert loaded.epoch == 1
    _assert_same_tree(loaded.agent.params, _checkpoint_best(run, 3))
    latest = turbozero.load_agent(run, which="latest").agent.params
    assert not np.array_equal(
        jax.tree_util.tree_leaves(latest)[0], jax.tree_util.tree_leaves(loaded.agent.params)[0]
    )

    for step in (2, 3):  # the crash: epochs 2 and 3 never checkpointed
        shutil.rmtree(RunDir(run).checkpoints / str(step))
    summary = train(
        cfg, run, progress=False, resume=True, num_epochs=1, systems=systems
    )  # trains nothing
    # the summary is where the checkpoint left the run, not the crashed attempt's file
    assert summary["epochs"] == RunDir(run).read_json("summary.json")["epochs"] == 1
    assert summary["final_metrics"]["epoch"] == 1 and summary["eval"] == _meta(run)["eval"]
    best = Checkpointer(run / "best")
    assert best.all_steps() == [1]
    assert best.restore_meta()["kind"] == "params"
    best.close()
    _assert_same_tree(turbozero.load_agent(run).agent.params, _checkpoint_best(run, 1))


def test_a_run_another_training_holds_is_refused_before_anything_is_written(systems, tmp_path):
    run = tmp_path / "held"
    train(TINY.with_overrides(["num_epochs=1"]), run, progress=False, systems=systems)
    before = (RunDir(run).metrics_path.read_text(), RunDir(run).config_path.read_text())
    with RunDir(run).lock(), pytest.raises(RunInUseError, match="in use"):
        train(TINY, run, progress=False, resume=True, systems=systems)
    assert (RunDir(run).metrics_path.read_text(), RunDir(run).config_path.read_text()) == before
    assert (
        train(TINY, run, progress=False, resume=True, systems=systems)["epochs"] == 2
    )  # lock released


def test_resuming_with_another_network_given_from_python_is_refused(systems, tmp_path):
    """A network of the same shapes but another definition (here: an unbounded value head)
    would restore without complaint: the run records what it was given and compares."""
    from turbozero.nets import PolicyValueMLP

    run = tmp_path / "parts"
    cfg = TINY.with_overrides(["num_epochs=1"])
    train(
        cfg,
        run,
        progress=False,
        parts={"module": PolicyValueMLP(num_actions=9, hidden=(16,))},
    )
    other = {"module": PolicyValueMLP(num_actions=9, hidden=(16,), bounded_value=False)}
    with pytest.raises(ValueError, match=r"parts given differ .*'module'.*bounded_value=False"):
        train(
            cfg.with_overrides(["num_epochs=2"]),
            run,
            progress=False,
            resume=True,
            parts=other,
        )
    same = {"module": PolicyValueMLP(num_actions=9, hidden=(16,))}
    resumed = train(
        cfg.with_overrides(["num_epochs=2"]),
        run,
        progress=False,
        resume=True,
        parts=same,
    )
    assert resumed["epochs"] == 2
    # and a run built from its config alone refuses a network given on resume (here its scalar
    # head already differs from the win/draw/loss head tic-tac-toe's run chose)
    plain = tmp_path / "plain"
    train(cfg, plain, progress=False, systems=systems)
    with pytest.raises(ValueError, match=r"parts given differ|'network.value_bins': \(3, 0\)"):
        train(
            cfg.with_overrides(["num_epochs=2"]),
            plain,
            progress=False,
            resume=True,
            parts=same,
        )


def test_a_run_out_of_wall_time_resumes_only_with_a_larger_budget(systems, tmp_path):
    cfg = TINY.with_overrides(["max_wall_seconds=0.001"])
    run = tmp_path / "timed"
    assert train(cfg, run, progress=False, systems=systems)["epochs"] == 1
    with pytest.raises(ValueError, match="used its max_wall_seconds"):
        train(cfg, run, progress=False, resume=True, systems=systems)
    more = cfg.with_overrides(["max_wall_seconds=0"])
    assert train(more, run, progress=False, resume=True, systems=systems)["epochs"] == 2


BEST = dict(has_best=True, me="epoch_3", best_name="epoch_2", gating_threshold=0.0)


def test_the_first_evaluation_makes_the_best():
    assert better_than_best(
        **{**BEST, "has_best": False}, score=None, best_score=-1.0, vs_best=None, ratings={}
    )


def test_with_no_measure_at_all_the_latest_network_is_the_best():
    """No opponents and no Elo pool: "best" must not stay the first (least trained) network."""
    assert better_than_best(**BEST, score=None, best_score=0.5, vs_best=None, ratings={})


def test_ungated_head_to_head_needs_half_the_points_not_a_higher_old_score():
    """With only a match against the best, an earlier score (the best's own result against
    *its* predecessor) is not comparable: 0.3 against the best is a loss, whatever the best
    scored before."""
    kw = dict(BEST, score=None, best_score=0.2, ratings={})
    assert not better_than_best(**kw, vs_best=0.3)
    assert better_than_best(**kw, vs_best=0.5)


def test_gating_uses_the_threshold_against_the_best():
    kw = dict(BEST, gating_threshold=0.55, score=1.0, best_score=0.0, ratings={})
    assert not better_than_best(**kw, vs_best=0.54)
    assert better_than_best(**kw, vs_best=0.55)


def test_elo_compares_ratings_of_the_same_fit_not_a_stored_rating():
    """Ratings drift as the pool grows: the best's rating now, not when it was made best."""
    kw = dict(BEST, score=None, best_score=44.4, vs_best=None)
    assert better_than_best(**kw, ratings={"epoch_3": 20.0, "epoch_2": 18.2})
    assert not better_than_best(**kw, ratings={"epoch_3": 17.0, "epoch_2": 18.2})


def test_fixed_opponent_scores_compare_with_the_bests_score_against_them():
    kw = dict(BEST, best_name=None, vs_best=0.9, ratings={}, best_score=0.75)
    assert not better_than_best(**kw, score=0.7)
    assert better_than_best(**kw, score=0.8)


def test_parts_are_described_alike_in_every_session():
    """No memory addresses, no hash-dependent set orders: the description a run records must
    come out the same when the same program runs again."""
    import dataclasses
    import functools

    from turbozero.alphazero.train import describe_parts

    @dataclasses.dataclass(frozen=True)
    class Net:
        names: frozenset
        act: object

    def loss(params, batch, *, l2):
        return l2

    a = describe_parts(
        {
            "module": Net(frozenset({"gamma", "alpha", "beta"}), jax.nn.relu),
            "loss_fn": functools.partial(loss, l2=0.5),
        }
    )
    assert a["module"].startswith("Net(names={'alpha', 'beta', 'gamma'}, act=")
    assert "0x" not in a["module"] and a["loss_fn"].endswith("loss, l2=0.5)")


@pytest.mark.parametrize("verdict", [False, True])
def test_the_evaluator_keeps_the_verdict_it_is_given_on_the_best_network(verdict):
    """Training on several processes passes process 0's verdict to every process
    (`Evaluator(decide=agree)`): the best network each keeps follows it, not its own."""
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.evaluate import Evaluator

    az = make_alphazero(TINY)
    asked = []
    evaluator = Evaluator(az, decide=lambda better: asked.append(better) or verdict)
    params = az.init(jax.random.PRNGKey(0)).params
    evaluator(params, 1, jax.random.PRNGKey(1), None)
    assert asked == [True]  # the first evaluation makes the best, unless overruled
    assert evaluator.improved is verdict and (evaluator.best_params is not None) is verdict


def test_games_between_two_networks_open_with_random_moves_played_from_both_seats(monkeypatch):
    """Two networks' searches make the same moves every time: without random openings a match
    replays two games (one per seat) over and over and counts them as many."""
    from turbozero.alphazero import evaluate, make_alphazero

    played = []

    def spy(env, a, b, key, **kwargs):
        played.append((b.name if b is not None else None, kwargs["opening_moves"]))
        return real(env, a, b, key, **kwargs)

    real = evaluate.play_match
    monkeypatch.setattr(evaluate, "play_match", spy)
    az = make_alphazero(ELO.with_overrides(["eval_opening_moves=1"]))
    evaluator = evaluate.Evaluator(az)
    params = az.init(jax.random.PRNGKey(0)).params
    for epoch in (1, 2):
        evaluator(params, epoch, jax.random.PRNGKey(epoch), None)
    # against random: eval_opening_moves; against the best and the Elo pool: at least 4
    assert played == [("random", 1), ("random", 1), ("best", 4), ("epoch_1", 4)]
    monkeypatch.setattr(evaluate, "play_match", real)
    r = evaluator._match(
        evaluator.agent(params, "a"),
        evaluator.agent(params, "b"),
        jax.random.PRNGKey(3),
        8,
        networks=True,
    )
    assert r.actions is not None and len({tuple(g) for g in r.actions.T}) > 2


def test_without_an_elo_pool_no_elo_games_are_kept():
    """The games are kept for the Elo fit only: a long run without one must not carry (and
    checkpoint) every evaluation game it ever played."""
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.evaluate import Evaluator

    # with the pool: both evaluations' games against random and the second's against epoch 1
    for cfg, kept in ((TINY, 0), (ELO, 2 * ELO.eval_games + ELO.elo_games_per_opponent)):
        az = make_alphazero(cfg)
        evaluator = Evaluator(az)
        params = az.init(jax.random.PRNGKey(0)).params
        evaluator(params, 1, jax.random.PRNGKey(1), None)
        evaluator(params, 2, jax.random.PRNGKey(2), None)
        assert len(evaluator.elo.games) == kept


def test_a_checkpoint_missing_its_manifests_is_passed_over_in_one_line(systems, tmp_path, capfd):
    """Orbax's reads of such a checkpoint failed with reads in flight, which then printed dozens
    of "Event loop is closed" tracebacks; the indexes are checked before reading."""
    run = tmp_path / "run"
    train(TINY, run, progress=False, systems=systems)
    for manifest in (RunDir(run).checkpoints / "2").rglob("manifest.ocdbt"):
        manifest.unlink()
    capfd.readouterr()
    summary = train(
        TINY.with_overrides(["num_epochs=3"]), run, progress=False, resume=True, systems=systems
    )
    out, err = capfd.readouterr()
    assert summary["epochs"] == 3
    passed = [line for line in out.splitlines() if "passed over a damaged checkpoint" in line]
    assert len(passed) == 1 and "manifest.ocdbt" in passed[0]
    assert "Event loop is closed" not in err and "Traceback" not in err


def test_a_checkpoint_with_emptied_array_files_is_passed_over_in_one_line(systems, tmp_path, capfd):
    """Its indexes are whole, so orbax starts every read; the first that fails ends the restore
    while the others are in flight, and those reported their failures one traceback each (a
    hundred, some after the restore had returned)."""
    run = tmp_path / "run"
    train(TINY, run, progress=False, systems=systems)
    data = [f for f in (RunDir(run).checkpoints / "2" / "state").rglob("d/*") if f.is_file()]
    assert data
    for f in data:
        f.write_bytes(b"")
    capfd.readouterr()
    summary = train(
        TINY.with_overrides(["num_epochs=3"]), run, progress=False, resume=True, systems=systems
    )
    gc.collect()  # (coroutines left unawaited report when collected)
    time.sleep(0.5)  # (and reads still in flight when they end)
    out, err = capfd.readouterr()
    assert summary["epochs"] == 3
    passed = [line for line in out.splitlines() if "passed over a damaged checkpoint" in line]
    assert len(passed) == 1 and "checkpoint step 2" in passed[0]
    assert "TensorStore" not in passed[0]  # (orbax's reason ends in a dump of the array's spec)
    assert "Event loop is closed" not in err and "Traceback" not in err, err[-2000:]
    assert "never retrieved" not in err and "never awaited" not in err, err[-2000:]


def _evaluated(run):
    return [r["epoch"] for r in RunDir(run).read_metrics() if "eval_seconds" in r]


def test_evaluations_over_their_share_of_the_clock_are_skipped_except_the_last(systems, tmp_path):
    """With a tiny `eval_share`, the first scheduled evaluation runs (none has taken time yet),
    later ones are skipped while the evaluations' seconds exceed the share, and the last epoch's
    always runs; the skipped evaluations change nothing in training. The clock is part of the
    checkpoint: a resumed run does not start its share afresh."""
    cfg = TINY.with_overrides(["eval_every=1", "num_epochs=4"])
    every, shared, resumed = tmp_path / "every", tmp_path / "shared", tmp_path / "resumed"
    train(cfg, every, progress=False, systems=systems)
    train(cfg.with_overrides(["eval_share=1e-9"]), shared, progress=False, systems=systems)
    assert _evaluated(every) == [1, 2, 3, 4]
    assert _evaluated(shared) == [1, 4]
    losses = [[r["loss"] for r in RunDir(run).read_metrics()] for run in (every, shared)]
    assert losses[0] == losses[1]
    train(
        cfg.with_overrides(["eval_share=1e-9"]),
        resumed,
        progress=False,
        num_epochs=2,
        systems=systems,
    )
    train(
        cfg.with_overrides(["eval_share=1e-9"]),
        resumed,
        progress=False,
        resume=True,
        systems=systems,
    )
    assert _evaluated(resumed) == [1, 4]
    assert _meta(resumed)["clock"]["eval"] > 0


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_an_eval_share_outside_zero_to_one_is_refused_by_name(share):
    with pytest.raises(ValueError, match="eval_share"):
        TINY.with_overrides([f"eval_share={share}"])


def test_eval_share_with_gating_is_refused_since_training_would_follow_the_clock():
    with pytest.raises(ValueError, match=r"eval_share.*gating_threshold"):
        TINY.with_overrides(
            ["eval_opponents=random,best", "gating_threshold=0.55", "eval_share=0.1"]
        )
