"""The algorithm registry is the one place that names the algorithms, and what the three share
(one loaded-agent type, the run kit) is written once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from turbozero.algorithms import (
    AlgorithmEntry,
    UnknownAlgorithmError,
    algorithm,
    algorithm_names,
    register_algorithm,
    unregister_algorithm,
)
from turbozero.io.errors import DamagedRunError
from turbozero.io.rundir import RunDir

SRC = Path(__file__).resolve().parents[1] / "src" / "turbozero"


def test_every_entry_names_parts_that_import_and_the_right_signatures():
    import inspect

    assert algorithm_names() == ("alphazero", "ppo", "td")
    for name in algorithm_names():
        entry = algorithm(name)
        run = inspect.signature(entry.run_function()).parameters
        assert {"resume", "preset", "check_memory"} <= set(run)
        assert ("trust" in run) == entry.opens_code, name
        load = inspect.signature(entry.load_function()).parameters
        assert {"which", "step"} <= set(load), name
        assert entry.config_class()().env  # (a config with its defaults)


def test_an_algorithm_of_ones_own_is_one_registration_and_an_unknown_one_is_refused(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.config_path.write_text('{"algorithm": "mine", "config": {}}')
    with pytest.raises(DamagedRunError, match="names no algorithm turbozero knows"):
        run.read_config()
    with pytest.raises(UnknownAlgorithmError, match="'alphazero' or 'ppo' or 'td'"):
        algorithm("mine")
    entry = AlgorithmEntry("mine", "Mine", "x:C", "x:run", "x:load", (), "it is mine")
    register_algorithm(entry)
    try:
        assert run.read_config()["algorithm"] == "mine"
        with pytest.raises(ValueError, match="registered already"):
            register_algorithm(AlgorithmEntry("mine", "Other", "y:C", "y:r", "y:l", (), "."))
    finally:
        unregister_algorithm("mine")
    with pytest.raises(ValueError, match="built-in"):
        unregister_algorithm("td")


def test_no_module_outside_the_registry_and_an_algorithms_own_folder_tests_its_name():
    """The algorithm is named by string in one place: generic code (the CLI, `load_agent`, run
    directories, the runner, the arena) asks `turbozero.algorithms`."""
    names = "|".join(algorithm_names())
    compared = re.compile(
        rf"""(==|!=|\bin)\s*\(?\s*["']({names})["']|["']({names})["']\s*(==|!=)"""
    )
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel == "algorithms.py" or rel.split("/")[0] in algorithm_names():
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if compared.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == []


def test_the_three_loaders_return_the_one_loaded_agent_type():
    import typing

    from turbozero.arena.agents import LoadedAgent

    for name in algorithm_names():
        hints = typing.get_type_hints(algorithm(name).load_function())
        assert hints["return"] is LoadedAgent, name
