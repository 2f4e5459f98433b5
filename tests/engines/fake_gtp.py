"""A tiny GTP engine for the bridge's tests: it plays the first empty point (row-major from the
top left), or passes on a full board; `FAKE_GTP_DIE_AFTER=N` makes it exit after N genmoves.

Faults of real engines, chosen by flags (each game's engine is a fresh process):

- `--silent-at COMMAND`: read COMMAND and never answer it (a hung engine);
- `--deaf`: never answer `quit`, and ignore SIGTERM and SIGINT (only SIGKILL ends it);
- `--garbage`: answer `genmove` with a line that is not GTP;
- `--vertex V`: answer `genmove` with the vertex V (`Z99`: no point of the board);
- `--die`: exit at every `genmove`, started again or not;
- `--after N`: the faults at `genmove` begin after N genmoves answered well;
- `--pidfile PATH`: write the engine's process id there when it starts.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time

COLUMNS = "ABCDEFGHJKLMNOPQRST"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--silent-at", default=None)
    parser.add_argument("--deaf", action="store_true")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--vertex", default=None)
    parser.add_argument("--die", action="store_true")
    parser.add_argument("--after", type=int, default=0)
    parser.add_argument("--pidfile", default=None)
    flags = parser.parse_args()
    if flags.pidfile:
        with open(flags.pidfile, "w") as f:
            f.write(str(os.getpid()))
    if flags.deaf:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    size, stones, moves = 9, set(), 0
    die_after = int(os.environ.get("FAKE_GTP_DIE_AFTER", "0"))
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command, args = words[0], words[1:]
        moves += command == "genmove"
        faulty = command != "genmove" or moves > flags.after
        if (command == flags.silent_at and faulty) or (command == "quit" and flags.deaf):
            time.sleep(600)  # (stdin closed or not: a signal ends it, or 10 minutes)
            sys.exit(3)
        answer = ""
        if command == "boardsize":
            size = int(args[0])
        elif command == "loadsgf":
            with open(args[0]) as f:
                text = f.read()
            stones = {p for p in re.findall(r"\[([a-s]{2})\]", text)}
        elif command == "genmove":
            if (flags.die and faulty) or (die_after and moves > die_after):
                sys.exit(1)
            if flags.garbage and faulty:
                print("Segmentation fault (core dumped)\n", flush=True)
                continue
            empty = [
                (r, c)
                for r in range(size)
                for c in range(size)
                if f"{'abcdefghijklmnopqrs'[c]}{'abcdefghijklmnopqrs'[r]}" not in stones
            ]
            answer = "pass" if not empty else f"{COLUMNS[empty[0][1]]}{size - empty[0][0]}"
            answer = flags.vertex if flags.vertex and faulty else answer
        elif command == "name":
            answer = "fake"
        elif command not in ("komi", "clear_board", "quit"):
            print("? unknown command\n", flush=True)
            continue
        print(f"= {answer}\n", flush=True)
        if command == "quit":
            return


if __name__ == "__main__":
    main()
