"""Fixtures shared across the suite. Compiled programs are cached on disk between runs."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# (what XLA_FLAGS was before `turbozero.configure()` added to it; see tests/test_xla_flags.py)
os.environ.setdefault("TURBOZERO_SUITE_XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))

import turbozero

turbozero.configure()  # as the CLI does, before any JAX computation (and pgx's import)

import jax
import pytest
from hypothesis import settings

from turbozero.io import enable_compilation_cache

enable_compilation_cache()
settings.register_profile("turbozero", max_examples=15, deadline=None, derandomize=True)
settings.load_profile("turbozero")


@pytest.fixture(scope="session")
def tic_tac_toe():
    from turbozero import envs

    return envs.make("tic_tac_toe")


@pytest.fixture(scope="session")
def connect_four():
    from turbozero import envs

    return envs.make("connect_four")


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
