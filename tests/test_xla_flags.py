"""`turbozero.configure()` and `turbozero.xla_flags`: the small-loop option and the scheduler flag
are added once, by an explicit call, merged, never over the user's; `import turbozero` changes
nothing; a program that XLA's concurrency-optimized scheduler never finishes finishes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.subprocesses import pythonpath
from turbozero import xla_flags
from turbozero.xla_flags import (
    SCHEDULER_FLAG,
    SMALL_LOOP_BYTES,
    SMALL_LOOP_OPTION,
    with_small_loop_kernels,
    with_turbozero_flags,
)

OPTION = f"{SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"


def test_the_option_is_added_as_a_flag_of_its_own():
    assert with_small_loop_kernels("") == f"--xla_backend_extra_options={OPTION}"
    assert with_small_loop_kernels("--xla_force_host_platform_device_count=4") == (
        f"--xla_force_host_platform_device_count=4 --xla_backend_extra_options={OPTION}"
    )
    flags = '--xla_backend_extra_options="foo=1, bar=2" --b=4'  # the user's list is not edited
    assert with_small_loop_kernels(flags) == f"{flags} --xla_backend_extra_options={OPTION}"


def test_a_value_the_user_chose_and_a_flags_file_are_kept():
    for flags in (
        f"--xla_backend_extra_options={SMALL_LOOP_OPTION}=0",
        f"--xla_backend_extra_options=foo=1,{SMALL_LOOP_OPTION}=1024 --b=2",
        "/etc/xla.flags",
    ):
        assert with_small_loop_kernels(flags) == flags
    named = f"--xla_dump_to=/tmp/{SMALL_LOOP_OPTION}"  # the name alone is not a chosen value
    assert with_small_loop_kernels(named) == f"{named} --xla_backend_extra_options={OPTION}"


def test_configure_changes_nothing_once_jax_has_started(monkeypatch):
    environ = {"XLA_FLAGS": "--x=1"}
    monkeypatch.setattr(xla_flags, "_jax_started", lambda: True)
    assert not xla_flags.configure(environ)
    assert environ == {"XLA_FLAGS": "--x=1"}
    monkeypatch.setattr(xla_flags, "_jax_started", lambda: False)
    assert xla_flags.configure(environ)
    assert environ["XLA_FLAGS"] == f"--x=1 --xla_backend_extra_options={OPTION} {SCHEDULER_FLAG}"
    assert not xla_flags.configure(environ)  # already there


def test_the_scheduler_flag_is_added_unless_the_user_chose_the_scheduler():
    assert with_turbozero_flags("") == f"--xla_backend_extra_options={OPTION} {SCHEDULER_FLAG}"
    for chosen in (
        "--xla_cpu_enable_concurrency_optimized_scheduler=true",
        "--xla_cpu_enable_concurrency_optimized_scheduler",
    ):
        assert with_turbozero_flags(chosen) == f"{chosen} --xla_backend_extra_options={OPTION}"
    assert with_turbozero_flags("/etc/xla.flags") == "/etc/xla.flags"
    named = "--xla_dump_to=/tmp/xla_cpu_enable_concurrency_optimized_scheduler_dump"
    assert with_turbozero_flags(named).endswith(SCHEDULER_FLAG)


def test_jax_counts_as_not_started_until_its_bridge_is_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "jax._src.xla_bridge")
    assert not xla_flags._jax_started()


def test_the_suite_runs_with_the_option_as_users_do():
    chosen = os.environ.get("TURBOZERO_SUITE_XLA_FLAGS")  # flags the suite was started with
    if chosen is not None and SMALL_LOOP_OPTION in chosen:
        pytest.skip("the suite was started with a small-loop bound of its own")
    assert OPTION in os.environ.get("XLA_FLAGS", "")


UNFINISHED_BY_THE_SCHEDULER = """
import turbozero, jax
{configure}
from turbozero.io import enable_compilation_cache
enable_compilation_cache()  # (a program read back was compiled with the same flags)
from turbozero.ppo import make_ppo
ppo = make_ppo(env="jumanji:Minesweeper-v0", action_head="multi_discrete", num_envs=32,
               rollout_length=16, num_minibatches=8, normalize_observations=True)
state = jax.jit(jax.vmap(ppo.init))(jax.random.split(jax.random.PRNGKey(0), 2))
print(float(jax.block_until_ready(state.obs_stats.count)[0]))
"""


@pytest.mark.slow
def test_configure_lets_a_program_finish_that_the_concurrency_optimized_scheduler_never_does():
    """PPO's init (multi-discrete head, Minesweeper, two seeds under vmap, observation
    normalisation) compiled with XLA's concurrency-optimized scheduler waits forever with every
    thread idle; with `configure()`'s flags it finishes in seconds.

    An integration run at XLA's default optimisation (20 s cold in a subprocess), so in
    `make check`; the fast suite keeps the rule that `configure()` adds the scheduler flag
    (`test_the_scheduler_flag_is_added_unless_the_user_chose_the_scheduler`)."""
    pytest.importorskip("jumanji")
    code = UNFINISHED_BY_THE_SCHEDULER.format(configure="turbozero.configure()")
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**_clean_env(), "PYTHONPATH": pythonpath(), "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("PPO's init did not finish within 240 s with turbozero.configure()'s flags")
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) > 0


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}


SMALL_CALLS = """
import turbozero, jax, jax.numpy as jnp
{configure}
loop = lambda x: jax.lax.while_loop(lambda c: c[0] < 9, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, x))
print(jax.jit(loop).lower(jnp.ones(3000)).compile().as_text().count("xla_cpu_small_call"))
"""


def _run(code: str, flags: str | None = None, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if flags is not None:
        env["XLA_FLAGS"] = flags
    env.update(PYTHONPATH=pythonpath(), JAX_PLATFORMS="cpu", **extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("flags", "configure", "hoisted"),
    [
        (None, "turbozero.configure()", True),
        (f"--xla_backend_extra_options={SMALL_LOOP_OPTION}=0", "turbozero.configure()", False),
        (None, "", False),  # imported, not configured: XLA's own bound
    ],
)
def test_configure_compiles_small_loops_whole_unless_the_user_says_otherwise(
    flags, configure, hoisted
):
    out = _run(SMALL_CALLS.format(configure=configure), flags)
    assert out.returncode == 0, out.stderr
    assert (int(out.stdout.split()[-1]) > 0) == hoisted


def test_import_turbozero_leaves_the_environment_as_it_was():
    code = (
        "import os, json; before = dict(os.environ); import turbozero, turbozero.alphazero, "
        "turbozero.ppo, turbozero.cli; print(json.dumps(dict(os.environ) == before))"
    )
    out = _run(code, "--xla_force_host_platform_device_count=1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "true"


def test_a_trainer_called_after_jax_started_says_so_once_in_one_line():
    code = (
        "import jax, jax.numpy as jnp; jnp.ones(2).block_until_ready()\n"
        "from turbozero.runtime import configure_or_say_why\n"
        "configure_or_say_why(); configure_or_say_why()\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("turbozero:")]
    assert len(lines) == 1 and "call turbozero.configure() before any JAX code" in lines[0]
    chosen = _run(code, f"--xla_backend_extra_options={SMALL_LOOP_OPTION}=1024")
    assert "turbozero:" not in chosen.stderr  # the user chose XLA's default: nothing to say


def test_configure_refuses_to_join_processes_once_jax_has_started(monkeypatch):
    import jax

    from turbozero import distributed, runtime

    jax.numpy.ones(1).block_until_ready()  # JAX has started
    monkeypatch.setattr(runtime, "_CONFIGURED", False)
    monkeypatch.setattr(distributed, "_INITIALIZED", False)
    monkeypatch.setenv("TURBOZERO_COORDINATOR", "127.0.0.1:1")
    with pytest.raises(RuntimeError, match="before any JAX code"):
        runtime.configure()


def test_the_search_walk_compiles_into_one_function_per_loop():
    """docs/search.md's claim: with the option, the walk's loops (no scatter in them) are
    compiled whole on the CPU; the backup's (scatters) are not."""
    import jax

    from turbozero import envs
    from turbozero.search import make_search, muzero_puct

    if jax.default_backend() != "cpu" or OPTION not in os.environ.get("XLA_FLAGS", ""):
        pytest.skip("whole-loop kernels are an XLA:CPU feature turned on by the option")
    env = envs.make("connect_four")

    def eval_fn(params, observations, key):
        B = observations.shape[0]
        return jax.numpy.zeros((B, env.num_actions)), jax.numpy.zeros((B,))

    search = make_search(env, eval_fn, selector=muzero_puct(), num_simulations=4, max_nodes=5)
    states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 8))[0]
    run = jax.jit(search.search)
    text = run.lower(search.init(8), None, states, jax.random.PRNGKey(1)).compile().as_text()
    whole = [line for line in text.splitlines() if "xla_cpu_small_call" in line]
    assert any("closed_call/while" in line for line in whole)  # the walk, inside the simulation


def test_the_fast_suite_compiles_at_llvm_level_0_with_older_emitters_unless_chosen():
    from tests.conftest import SUITE_EMITTERS, SUITE_OPTIMIZATION_LEVEL

    chosen = os.environ.get("TURBOZERO_SUITE_XLA_FLAGS", "")  # flags the suite was started with
    flags = os.environ.get("XLA_FLAGS", "")
    for option, setting in [
        ("xla_backend_optimization_level", SUITE_OPTIMIZATION_LEVEL),
        ("xla_cpu_use_fusion_emitters", SUITE_EMITTERS),
    ]:
        if option in chosen:
            assert setting not in flags.replace(chosen, "")
        else:
            assert setting in flags


@pytest.mark.optimized
def test_tests_marked_optimized_run_where_llvm_optimises():
    """(tests/conftest.py runs them at level 1 in a subprocess when the suite's level is 0)"""
    import re

    level = re.search(r"--xla_backend_optimization_level=(\d+)", os.environ.get("XLA_FLAGS", ""))
    assert level is None or int(level.group(1)) >= 1
