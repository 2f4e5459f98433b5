"""The run directory layout, shared by every algorithm.

RUN/
  config.json       the full typed config (with `algorithm` and `preset`)
  checkpoints/      orbax checkpoints (checkpoints.unreadable/: damaged ones a resume passed)
  metrics.jsonl     one JSON object per line: epoch, env_steps, wall_seconds, metrics...
  summary.json      preset, env, algorithm, epochs, env_steps, wall_seconds, final_metrics,
                    eval (AlphaZero adds costs; PPO seeds and updates)
  plots/            PNGs
  games/            HTML pages of evaluation games (SVG boards)
  .lock             held while a training writes the run (`RunDir.lock`)
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from turbozero.algorithms import UnknownAlgorithmError
from turbozero.algorithms import algorithm as algorithm_entry
from turbozero.gamespec import game_spec, is_builtin_game_module, load_game_module
from turbozero.io.errors import (
    TRUST_HOW,
    DamagedRunError,
    RunInUseError,
    RunPathError,
    UntrustedRunError,
)
from turbozero.io.migrations import migrate
from turbozero.validate import is_digits

#: files a run writes in place (appended to, or truncated and rewritten) rather than replaces
IN_PLACE = (".lock", "metrics.jsonl")
#: open flag refusing to write through a link (0 where the system has none)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

#: `flock` errors of filesystems that have no locks (not of a lock held elsewhere)
UNLOCKABLE = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, the run directory is not guarded
    fcntl = None  # type: ignore[assignment]


def enable_compilation_cache(path: str | os.PathLike[str] | None = None) -> Path:
    """Turn on JAX's persistent compilation cache outside the work tree.

    Defaults to `$TURBOZERO_CACHE/jax` or `~/.cache/turbozero/jax`, so fresh clones on the same
    machine reuse compiled programs. A directory already set in this process (by an earlier
    call, or by the user) is kept and returned: JAX opens its cache once per process, and a
    directory changed afterwards only changes every program's cache key (JAX writes it into the
    compile options), so each later program would be compiled afresh and stored again.
    """
    import jax

    current = getattr(jax.config, "jax_compilation_cache_dir", None)
    if current:
        return Path(current)
    base = Path(path or os.environ.get("TURBOZERO_CACHE") or Path.home() / ".cache" / "turbozero")
    cache = base / "jax" if path is None else base
    cache.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(cache))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return cache


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and getattr(x, "size", 2) == 1:
        x = x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


#: characters orbax reads as glob patterns or separators when it gathers a checkpoint's files:
#: under such a path saves "succeed" and can never be read back
UNSAFE_PATH_CHARACTERS = "[]*?\\"


def check_run_path(path: str | os.PathLike[str]) -> None:
    """Refuse a run directory the checkpoints cannot live under: an empty path, or one (with
    its parent folders) holding a character of `UNSAFE_PATH_CHARACTERS`.

    Raises:
        RunPathError: naming the path and the character.
    """
    if not str(path).strip():
        raise RunPathError("the run directory is an empty path: name a directory (--out)")
    full = str(Path(path).absolute())
    bad = sorted({c for c in full if c in UNSAFE_PATH_CHARACTERS})
    quoted = [f"'{c}'" for c in bad]  # (as typed: repr would double a backslash)
    if bad:
        raise RunPathError(
            f"the run directory '{full}' holds {' '.join(quoted)}, which the "
            f"checkpoint library reads as a pattern (its saves could not be read back): choose "
            f"a path without {UNSAFE_PATH_CHARACTERS}"
        )


class RunDir:
    """Paths and small writers of one run directory."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    @property
    def games(self) -> Path:
        return self.path / "games"

    def is_run(self) -> bool:
        return self.config_path.is_file()

    def create(self, *, resume: bool = False) -> RunDir:
        """Create the layout. An existing run without `resume` is an error, never overwritten;
        so is a path the checkpoints cannot live under (`check_run_path`)."""
        check_run_path(self.path)
        if self.path.exists() and not self.path.is_dir():
            raise FileExistsError(
                f"{str(self.path)!r} is a file, not a run directory: choose another directory "
                f"(--out)"
            )
        if self.path.exists() and any(self.path.iterdir()) and not resume:
            raise FileExistsError(
                f"run directory {str(self.path)!r} already exists; continue it with --resume "
                f"(resume=True from Python), or choose another directory (--out)"
            )
        if resume and not self.is_run():
            raise FileNotFoundError(f"{str(self.path)!r} is not a run directory (no config.json)")
        self.check_writes_stay_inside()
        for p in (self.path, self.checkpoints, self.plots, self.games):
            p.mkdir(parents=True, exist_ok=True)
        return self

    def check_writes_stay_inside(self) -> None:
        """Refuse a run directory where a write could land outside it: a link anywhere inside
        (`.lock`, a `*.tmp`, `checkpoints/`, `best/`, `plots/strength.png`, ...) whose target is
        not inside the run directory, or a file written in place (`.lock`, `metrics.jsonl`)
        that is a hard link (another name of a file that may live anywhere). Called before a
        run writes anything (`create`, `turbozero plot`): a run directory may come from anyone.

        Raises:
            RunPathError: naming the first such entry and where it leads, in one line.
        """
        if not self.path.is_dir():
            return
        root = self.path.resolve()
        for folder, dirs, files in os.walk(self.path):  # (links to folders are not entered)
            for name in sorted(dirs) + sorted(files):
                entry = Path(folder) / name
                if entry.is_symlink():
                    target = entry.resolve()
                    if target != root and root not in target.parents:
                        raise RunPathError(
                            f"{entry} is a link to {target}, outside the run directory: a run "
                            f"writes only inside itself, so it is refused before anything is "
                            f"written; replace the link with a real {_kind(entry)} (or copy the "
                            f"run elsewhere and open the copy)"
                        )
        for name in IN_PLACE:
            entry = self.path / name
            if entry.is_file() and not entry.is_symlink() and entry.stat().st_nlink > 1:
                raise RunPathError(
                    f"{entry} is a hard link ({entry.stat().st_nlink} names for one file), "
                    f"which a run would write through to its other names: replace it with a "
                    f"copy (cp {name} {name}.copy && mv {name}.copy {name})"
                )

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run for one writer: a second process (or a second `train` in this one)
        that takes the lock while it is held gets `RunInUseError` and writes nothing.

        An advisory `flock` on `RUN/.lock`, released when the block ends and by the operating
        system when the process dies (a crashed run never leaves a stale lock). No-op where
        `fcntl` does not exist (Windows).
        """
        if fcntl is None:
            yield
            return
        path = self.path / ".lock"
        # (never through a link: `check_writes_stay_inside` refuses one, and this holds anyway)
        f = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644), "a+")
        try:
            if self._take(f):
                f.seek(0)
                f.truncate()
                f.write(f"process {os.getpid()}\n")
                f.flush()
            yield
        finally:
            f.close()  # closing the file releases the lock

    def _take(self, f: Any) -> bool:
        """Lock the open lock file `f`: True when held, False on a filesystem without locks."""
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise RunInUseError(
                f"run directory {str(self.path)!r} is in use by {holder}: two trainings "
                f"writing one run would mix their metrics and checkpoints; wait for it to "
                f"end, or stop it (Ctrl-C saves a checkpoint) and then --resume"
            ) from None
        except OSError as err:
            if err.errno not in UNLOCKABLE:
                raise
            reason = os.strerror(err.errno)
        # a filesystem without locks (Lustre without -o flock, NFS with nolock): training goes
        # on unguarded, as it would have without this lock
        warnings.warn(
            f"run directory {str(self.path)!r} cannot be locked ({reason}): nothing stops a "
            f"second training from writing it too",
            RuntimeWarning,
            stacklevel=4,
        )
        return False

    def write_json(self, name: str, data: Any) -> None:
        """Write `name` atomically (write, then rename)."""
        target = self.path / name
        _replace_durably(target, json.dumps(_jsonable(data), indent=2, sort_keys=True))

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())

    def read_config(self, algorithm: str | None = None) -> dict[str, Any]:
        """The run's `config.json`: an object naming a registered algorithm
        (`turbozero.algorithms`; exactly `algorithm` when given) and holding its `config` object
        (and, if any, a `parts` object), in today's format (`turbozero.io.migrations.migrate`:
        a run written by an older turbozero is read as it ran).

        Raises:
            FileNotFoundError: no config.json.
            DamagedRunError: config.json is not such an object (hand-edited or cut short).
            ValueError: it names another algorithm than `algorithm`.
            ConfigError: the run used a setting this version removed (`migrate`).
        """
        if not self.is_run():
            raise FileNotFoundError(f"{str(self.path)!r} is not a run directory (no config.json)")
        try:
            saved = json.loads(self.config_path.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DamagedRunError(f"{self.config_path} is not valid JSON ({err})") from None
        if not isinstance(saved, dict):
            raise DamagedRunError(
                f"{self.config_path} holds a JSON {type(saved).__name__}, not the object a run "
                f"writes"
            )
        name = saved.get("algorithm")
        try:
            algorithm_entry(name, where=str(self.config_path))
        except UnknownAlgorithmError as err:
            raise DamagedRunError(str(err)) from None
        if not isinstance(saved.get("config"), dict):
            raise DamagedRunError(f"{self.config_path} has no 'config' object")
        if not isinstance(saved.get("parts", {}), dict):
            raise DamagedRunError(f"{self.config_path} holds a 'parts' entry that is no object")
        if algorithm is not None and name != algorithm:
            raise ValueError(f"{self.path} is a {name!r} run, not {algorithm!r}")
        return migrate(saved, where=str(self.config_path))

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one JSON object (must hold epoch, env_steps, wall_seconds) to metrics.jsonl."""
        for k in ("epoch", "env_steps", "wall_seconds"):
            if k not in row:
                raise KeyError(f"metrics row needs {k!r}")
        fd = os.open(self.metrics_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o644)
        with os.fdopen(fd, "a") as f:
            f.write(json.dumps(_jsonable(row)) + "\n")
            f.flush()
            os.fsync(f.fileno())  # before the epoch's checkpoint, so no saved epoch lacks a row

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_path.exists():
            return []
        rows = []
        for line in self.metrics_path.read_text().splitlines():
            line = line.strip()
            if line:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a crash
                    continue
                if isinstance(row, dict):  # (anything else is not a row of ours)
                    rows.append(row)
        return rows

    def truncate_metrics(self, last_epoch: int) -> None:
        """Drop rows after `last_epoch` (used on resume so the log matches the checkpoint)."""
        rows = [r for r in self.read_metrics() if r.get("epoch", -1) <= last_epoch]
        _replace_durably(self.metrics_path, "".join(json.dumps(r) + "\n" for r in rows))


def _kind(entry: Path) -> str:
    return "folder" if entry.is_dir() else "file"


def _replace_durably(target: Path, text: str) -> None:
    """Replace `target` with `text` atomically, synced to disk: written to a temporary file,
    synced, renamed over `target`, and the directory synced, so that a power loss leaves the old
    or the new file whole, never an empty one."""
    tmp = target.with_name(target.name + ".tmp")
    if tmp.is_symlink():  # (removing a link touches nothing it points at)
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    try:
        fd = os.open(target.parent, os.O_RDONLY)
    except OSError:  # a directory cannot be opened for syncing (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load_run_game(rd: RunDir, *, trust: bool) -> None:
    """Register the game of a run trained on a game of one's own (`turbozero train --game`):
    import the file or module its `config.json` records as `"game_module"` and call its
    `register()` (`turbozero.gamespec.load_game_module`). Nothing for other runs, for
    turbozero's own game modules, or when the run's game is registered already (after `trust`
    is checked: the answer never depends on what this process did before).

    Args:
        rd: the run.
        trust: the user's word that the code the run names may be imported and called
            (`--trust-run`, `load_agent(..., trust=True)`); trusted, it is said on stderr first.

    Raises:
        UntrustedRunError: the run names a game module outside turbozero and not `trust`, in
            one line naming it and how to allow it.
        DamagedRunError: `"game_module"` is not a module's name or a file's path.
    """
    saved = rd.read_config()
    module = saved.get("game_module")
    if module is None or is_builtin_game_module(module):
        return  # (turbozero's own games are registered on their first lookup)
    if not isinstance(module, str) or not module.strip():
        raise DamagedRunError(f"{rd.config_path} holds a 'game_module' that is no module name")
    if not trust:
        raise UntrustedRunError(
            f"{rd.path}'s config.json names a game module to import and call (its register()) "
            f"for its game: {module!r}; a run directory is opened as data, running none of "
            f"it: {TRUST_HOW}"
        )
    env = saved["config"].get("env")
    if isinstance(env, str) and game_spec(env) is not None:
        return
    print(f"trusting {rd.path}: importing {module} (its game)", file=sys.stderr, flush=True)
    load_game_module(module)


def find_run_dir(path: str | os.PathLike[str]) -> RunDir:
    """The run directory named by `path`, or holding it as one checkpoint (`checkpoints/N` or
    `best/N`); any other path inside a run (`plots/`, `games/`) is refused rather than read as
    the run."""
    p = Path(path)
    if not p.exists():  # (a typo inside a run must not fall back to the run itself)
        raise FileNotFoundError(f"{str(path)!r} does not exist")
    if RunDir(p).is_run():
        return RunDir(p)
    step_of_run = is_digits(p.name) and p.parent.name in ("checkpoints", "best")
    if step_of_run and RunDir(p.parent.parent).is_run():
        return RunDir(p.parent.parent)
    raise FileNotFoundError(
        f"{str(path)!r} is not a run directory (no config.json) or a checkpoint inside one "
        f"(checkpoints/N or best/N)"
    )
