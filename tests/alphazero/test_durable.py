"""Durable and scalable training: devices, signals, interrupted saves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.subprocesses import pythonpath

ROOT = Path(__file__).resolve().parents[2]

#: what the multi-device checks start from: a tiny run's state laid out over the devices
SETUP = textwrap.dedent(
    """
    import jax
    from turbozero.io import enable_compilation_cache
    enable_compilation_cache()
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.sharding import Sharder

    def sharded(overrides, on_mesh=True):
        cfg = TINY.with_overrides(overrides)
        sh = Sharder(cfg)
        az = make_alphazero(cfg, mesh=sh.mesh if on_mesh else None)
        shape = jax.eval_shape(az.init, jax.random.PRNGKey(0))
        state = sh.jit_init(az.init)(jax.random.PRNGKey(0))
        return sh, az, shape, state
    """
)

ONE_EPOCH = textwrap.dedent(
    """
    import json, sys
    import numpy as np

    def one_epoch(n):
        # (with reanalysis: its positions are searched on the devices too)
        # (and the weights' moving average: updated on the devices after each step)
        sh, az, shape, state = sharded([f"devices={n}", "reanalyse_positions=16", "ema_decay=0.9"])
        state, played = sh.jit_step(az.collect, shape)(state, 9)
        state, m = sh.jit_step(az.train_steps, shape)(state, 2)
        spread = len(state.selfplay.tree.visits.sharding.device_set)
        return (jax.device_get((state.params, state.ema)), float(m["loss"]), spread,
                float(played["reanalysed"]))

    ref, loss1, _, _ = one_epoch(1)
    out = {}
    for n in map(int, sys.argv[1:]):
        p, loss, spread, reanalysed = one_epoch(n)
        diff = max(float(np.max(np.abs(a - b))) for a, b in
                   zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(p)))
        out[n] = {"max_param_diff": diff, "loss": loss, "loss1": loss1, "spread": spread,
                  "reanalysed": reanalysed}
    print("RESULT" + json.dumps(out))
    """
)

SHARDED = SETUP + ONE_EPOCH


def _run(code: str, *args: str, devices: int = 1, timeout: int = 600) -> str:
    # the devices are emulated CPU devices, whatever accelerator the machine has; the suite's
    # own XLA flags are kept (tests/conftest.py), so its compiled programs are reused
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env = dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = pythonpath()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _check_one_epoch(out: str, counts: tuple[str, ...]) -> None:
    result = json.loads(out.split("RESULT", 1)[1])
    for n in counts:
        assert result[n]["spread"] == int(n), "games are split over the devices"
        assert result[n]["reanalysed"] == 16
        assert result[n]["max_param_diff"] < 1e-4, result
        assert result[n]["loss"] == pytest.approx(result[n]["loss1"], rel=1e-4)


def test_one_epoch_on_two_devices_matches_one_device(two_device_programs):
    _check_one_epoch(two_device_programs, ("2",))


@pytest.mark.slow  # (4 devices: one more program, about 30 s cold)
def test_one_epoch_on_two_and_four_devices_matches_one_device():
    _check_one_epoch(_run(SHARDED, "2", "4", devices=4), ("2", "4"))


#: the checks of the programs compiled for 2 devices, in one process (they share its start and
#: the sharded state); each prints its lines, which the tests read, and one epoch on 2 devices
#: against 1 ends it (`ONE_EPOCH`, given "2")
TWO_DEVICE_PROGRAMS = (
    SETUP
    + textwrap.dedent(
        """
    import re
    from turbozero.alphazero.train import _CompiledAhead

    # the compiled self-play's collectives
    sh, az, shape, state = sharded(["devices=2"])
    text = sh.jit_step(az.collect, shape).lower(state, 2).compile().as_text()
    for line in text.splitlines():
        kinds = "all-gather|all-reduce|all-to-all|collective-permute"
        m = re.search(rf" ({kinds})(-start)?\\(", line)
        if m:
            print("COLLECTIVE", m.group(1), re.search(r'op_name="([^"]*)"', line).group(1))
    print("DONE")

    # the gradient steps' windows over the memory
    text = sh.jit_step(az.train_steps, shape).lower(state, 1).compile().as_text()
    # (a sliding window: one without a stride; a strided one is a plain chunked sum)
    sliding = [l for l in text.splitlines() if " reduce-window(" in l and "stride=" not in l]
    print("SLIDING", len(sliding), sliding)

    # steps compiled ahead for the sharded layout, given a state laid out otherwise
    sh, az, shape, state = sharded(["devices=2"], on_mesh=False)
    collect = _CompiledAhead(sh.jit_step(az.collect, shape))
    collect.prepare(state, 2)
    for layout in (sh.replicated, jax.devices()[0]):
        other = jax.device_put(state, layout)
        state, _ = collect(other, 2)
    print("SPREAD", len(state.selfplay.tree.visits.sharding.device_set))
    """
    )
    + ONE_EPOCH
)


@pytest.fixture(scope="module")
def two_device_programs() -> str:
    return _run(TWO_DEVICE_PROGRAMS, "2", devices=2)


def test_self_play_on_several_devices_searches_each_games_trees_without_collectives(
    two_device_programs,
):
    """Each device searches its own games: the compiled collect holds no all-gather, and its
    only all-reduces are the per-move sums (metrics, memory counters), none inside the search's
    loops over tree levels (XLA's partitioner put collectives in every level's gathers)."""
    out = two_device_programs
    assert "DONE" in out
    found = [line.split()[1:] for line in out.splitlines() if line.startswith("COLLECTIVE")]
    assert found, "the per-move sums over the devices' games are all-reduces"
    for kind, where in found:
        assert kind == "all-reduce" and where.endswith("reduce_sum"), (kind, where)
        # the scan over moves and nothing deeper: jit(collect)/while/body/closed_call/...
        assert where.count("/while/") == 1, where


def test_the_gradient_steps_on_several_devices_hold_no_window_across_the_memory(
    two_device_programs,
):
    """The batch's draw with replacement ranks the memory's slots: as a `cumsum` split over the
    devices, XLA made it a window the memory's size sliding over every slot, and a
    connect_four gradient step on 2 devices took 2 s instead of 0.12 s."""
    assert "SLIDING 0 []" in two_device_programs


def test_compiled_steps_take_a_state_laid_out_otherwise(two_device_programs):
    """The trainer's steps are compiled ahead for the sharded layout; a state that arrives
    replicated (or on one device) is laid out for them rather than refused."""
    assert "SPREAD 2" in two_device_programs


def test_batch_sizes_that_do_not_divide_the_devices_are_refused():
    code = textwrap.dedent(
        """
        from tests.alphazero.test_selfplay_and_trainer import TINY
        from turbozero.alphazero.sharding import Sharder
        try:
            Sharder(TINY.with_overrides(["num_games=6"]))
        except ValueError as e:
            print("ERR", e)
        """
    )
    out = _run(code, devices=4)
    assert "ERR num_games=6 must be divisible by the number of devices (4)" in out


def test_overlap_on_several_devices_is_refused_naming_the_ways_out_and_none_runs_in_turn():
    code = textwrap.dedent(
        """
        from tests.alphazero.test_selfplay_and_trainer import TINY
        from turbozero.alphazero.sharding import Sharder
        assert Sharder(TINY.with_overrides(["overlap=true", "devices=1"])).overlap  # one: fine
        # overlap=none: beside each other on one device, in turn on several
        assert Sharder(TINY.with_overrides(["overlap=none", "devices=1"])).overlap is True
        assert Sharder(TINY.with_overrides(["overlap=none"])).overlap is False
        print("AUTO OK")
        try:
            Sharder(TINY.with_overrides(["overlap=true"]))
        except ValueError as e:
            print("ERR", e)
        """
    )
    out = _run(code, devices=2)
    assert (
        "ERR overlap=true runs self-play and the gradient steps side by side on one device" in out
    )
    assert "set devices=1 or overlap=false, or overlap=none" in out
    assert "AUTO OK" in out


TRAIN_FOREVER = textwrap.dedent(
    """
    import sys
    from turbozero.io import enable_compilation_cache
    enable_compilation_cache()
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import train
    cfg = TINY.with_overrides(["num_epochs=100000", "eval_every=100000", f"overlap={sys.argv[2]}"])
    train(cfg, sys.argv[1], progress=False)
    print("CLEAN EXIT")
    """
)


@pytest.mark.parametrize(
    "overlap",
    [
        pytest.param("false", marks=pytest.mark.slow),  # (a second training process, 7 s)
        "true",  # (the default on one device)
    ],
)
def test_sigterm_finishes_the_step_saves_and_exits_zero(tmp_path, overlap):
    run = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAIN_FOREVER, str(run), overlap],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 300
    metrics = run / "metrics.jsonl"
    while time.time() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 2:
            break
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "CLEAN EXIT" in out
    from turbozero.io.checkpoint import Checkpointer

    last = json.loads(metrics.read_text().splitlines()[-1])["epoch"]
    ck = Checkpointer(run / "checkpoints")
    assert ck.latest_step() == last
    assert ck.restore_meta()["epoch"] == last
    ck.close()


SAVE_FOREVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from turbozero.io.checkpoint import Checkpointer
    ck = Checkpointer(sys.argv[1], keep=None)
    big = np.zeros((8, 1024, 1024), np.float32)
    step = 0
    while True:
        step += 1
        ck.save(step, {"x": big + step}, {"step_value": step})
        print(step, flush=True)
    """
)


def test_a_save_killed_halfway_leaves_the_previous_checkpoint_loadable(tmp_path):
    import numpy as np

    from turbozero.io.checkpoint import Checkpointer

    directory = tmp_path / "ck"
    proc = subprocess.Popen(
        [sys.executable, "-c", SAVE_FOREVER, str(directory)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=pythonpath()),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # step 1 is complete
    # kill while a later save is being written: its temporary directory is there
    deadline = time.monotonic() + 60
    while not any("tmp" in p.name for p in directory.iterdir()):
        assert time.monotonic() < deadline, "no save in progress was seen"
        time.sleep(0.001)
    proc.kill()
    proc.wait()
    proc.stdout.close()
    assert any("tmp" in p.name for p in directory.iterdir())  # the save was cut off
    reader = Checkpointer(directory, keep=None)  # e.g. `turbozero eval` while a run trains
    assert any("tmp" in p.name for p in directory.iterdir())  # might be a save in progress
    reader.close()
    ck = Checkpointer(directory, keep=None, writer=True)  # the resumed training
    deadline = time.monotonic() + 60  # (orbax removes it in the background)
    while any("tmp" in p.name for p in directory.iterdir()):  # the cut-off save goes
        assert time.monotonic() < deadline, "the cut-off save was not removed"
        time.sleep(0.01)
    step = ck.latest_step()
    assert step is not None and step >= 1
    restored, meta = ck.restore({"x": np.zeros((8, 1024, 1024), np.float32)})
    assert meta["step_value"] == step
    assert float(restored["x"][0, 0, 0]) == step
    ck.close()
