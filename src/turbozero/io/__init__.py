"""Input/output: run directories, metrics, checkpoints, plots (generic; no algorithm imports)."""

from turbozero.io.rundir import RunDir, enable_compilation_cache

__all__ = ["RunDir", "enable_compilation_cache"]
