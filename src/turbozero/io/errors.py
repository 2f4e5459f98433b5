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


class RunPathError(ValueError):
    """A run directory path that checkpoints cannot live under (see `rundir.check_run_path`)."""


class MissingExtraError(ValueError):
    """An optional dependency that a requested feature needs is not installed; the message
    names the extra to install (`pip install 'turbozero[EXTRA]'`)."""

    def __init__(self, feature: str, extra: str, package: str):
        super().__init__(
            f"{feature} needs the {package!r} package: pip install 'turbozero[{extra}]'"
        )
        self.extra = extra
        self.package = package


class TooLargeError(ValueError):
    """A run whose arrays would not fit in the machine's memory (refused before allocating)."""


class NotRebuildableError(ValueError):
    """A run's part that was given from Python has no recipe to rebuild it."""


class UntrustedRunError(ValueError):
    """A run directory whose `config.json` names code to import or a command to start, opened
    without the user's word that it may be (`--trust-run`, `trust=True`)."""


#: how to open a run that names code, said by every refusal of one
TRUST_HOW = "pass --trust-run (Python: load_agent(..., trust=True)) if you trust who made it"


class EngineError(RuntimeError):
    """An engine outside turbozero failed (its process exited, did not answer in time, or
    answered what its protocol does not allow); the message names it in one line."""
