"""`turbozero.xla_flags`: the small-loop option is added once, merged, never over the user's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from turbozero import xla_flags
from turbozero.xla_flags import SMALL_LOOP_BYTES, SMALL_LOOP_OPTION, with_small_loop_kernels

OPTION = f"{SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_the_option_is_added_to_empty_or_other_flags():
    assert with_small_loop_kernels("") == f"--xla_backend_extra_options={OPTION}"
    assert with_small_loop_kernels("--xla_force_host_platform_device_count=4") == (
        f"--xla_force_host_platform_device_count=4 --xla_backend_extra_options={OPTION}"
    )


def test_the_option_joins_an_existing_extra_options_list():
    flags = "--a=1 --xla_backend_extra_options=foo=2,bar=3 --b=4"
    assert with_small_loop_kernels(flags) == (
        f"--a=1 --xla_backend_extra_options=foo=2,bar=3,{OPTION} --b=4"
    )
    assert with_small_loop_kernels("--xla_backend_extra_options=") == (
        f"--xla_backend_extra_options={OPTION}"
    )


def test_a_value_the_user_chose_is_kept():
    flags = f"--xla_backend_extra_options={SMALL_LOOP_OPTION}=0"
    assert with_small_loop_kernels(flags) == flags


def test_configure_changes_nothing_once_jax_has_started(monkeypatch):
    environ = {"XLA_FLAGS": "--x=1"}
    monkeypatch.setattr(xla_flags, "_jax_started", lambda: True)
    assert not xla_flags.configure(environ)
    assert environ == {"XLA_FLAGS": "--x=1"}
    monkeypatch.setattr(xla_flags, "_jax_started", lambda: False)
    assert xla_flags.configure(environ)
    assert environ["XLA_FLAGS"] == f"--x=1 --xla_backend_extra_options={OPTION}"
    assert not xla_flags.configure(environ)  # already there


def test_the_suite_runs_with_the_option_as_users_do():
    assert OPTION in os.environ.get("XLA_FLAGS", "")


SMALL_CALLS = """
import turbozero, jax, jax.numpy as jnp
loop = lambda x: jax.lax.while_loop(lambda c: c[0] < 9, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, x))
print(jax.jit(loop).lower(jnp.ones(3000)).compile().as_text().count("xla_cpu_small_call"))
"""


@pytest.mark.parametrize(("flags", "hoisted"), [(None, True), (f"{SMALL_LOOP_OPTION}=0", False)])
def test_import_turbozero_compiles_small_loops_whole_unless_the_user_says_otherwise(flags, hoisted):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if flags is not None:
        env["XLA_FLAGS"] = f"--xla_backend_extra_options={flags}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, "-c", SMALL_CALLS], env=env, capture_output=True, text=True, check=True
    )
    assert (int(out.stdout.split()[-1]) > 0) == hoisted
