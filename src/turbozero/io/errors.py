"""Errors of the input/output layer, in a module light enough for the CLI to import up front."""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint that this version cannot restore into the state asked for."""


class UnreadableCheckpointError(CheckpointError):
    """A checkpoint whose files cannot be read back (damaged, or cut short by a crash)."""


class RunInUseError(FileExistsError):
    """A run directory that another training holds (its lock is taken)."""


class DamagedRunError(ValueError):
    """A run directory whose `config.json` is not what a run writes (hand-edited, cut short)."""
