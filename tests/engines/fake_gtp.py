"""A tiny GTP engine for the bridge's tests: it plays the first empty point (row-major from the
top left), or passes on a full board; `FAKE_GTP_DIE_AFTER=N` makes it exit after N genmoves."""

from __future__ import annotations

import os
import re
import sys

COLUMNS = "ABCDEFGHJKLMNOPQRST"


def main() -> None:
    size, stones, moves = 9, set(), 0
    die_after = int(os.environ.get("FAKE_GTP_DIE_AFTER", "0"))
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command, args = words[0], words[1:]
        answer = ""
        if command == "boardsize":
            size = int(args[0])
        elif command == "loadsgf":
            with open(args[0]) as f:
                text = f.read()
            stones = {p for p in re.findall(r"\[([a-s]{2})\]", text)}
        elif command == "genmove":
            moves += 1
            if die_after and moves > die_after:
                sys.exit(1)
            empty = [
                (r, c)
                for r in range(size)
                for c in range(size)
                if f"{'abcdefghijklmnopqrs'[c]}{'abcdefghijklmnopqrs'[r]}" not in stones
            ]
            answer = "pass" if not empty else f"{COLUMNS[empty[0][1]]}{size - empty[0][0]}"
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
