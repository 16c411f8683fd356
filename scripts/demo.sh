#!/usr/bin/env bash
# `make demo`: real runs on the default state root ($ACTORS_HOME or ~/.local/state/actors).
set -euo pipefail

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

run actors spawn hello -v name=demo --wait
HELLO=$(actors ls --json | python3 -c 'import json,sys; print(next(r["run"] for r in json.load(sys.stdin) if r["recipe"]=="hello"))')
run actors tail "$HELLO"

say "actors spawn fanout --wait   # three parallel branches, gamma fails under failure=branch"
actors spawn fanout --wait || true
FAN=$(actors ls --json | python3 -c 'import json,sys; print(next(r["run"] for r in json.load(sys.stdin) if r["recipe"]=="fanout"))')
run actors result "$FAN"

say "actors spawn ticker --as run:demo-ticker-\$\$"
TICKER=$(actors spawn ticker --as "run:demo-ticker-$$")
echo "$TICKER"
say "actors tail $TICKER -f   # (for three seconds)"
timeout 3 actors tail "$TICKER" -f -n 5 || true
run actors status "$TICKER"
run actors cancel "$TICKER"
say "actors spawn player --as run:demo-player-\$\$ -v tracks=3   # an actor driven by messages"
PLAYER=$(actors spawn player --as "run:demo-player-$$" -v tracks=3)
echo "$PLAYER"
run actors message "$PLAYER" player.next
run actors message "$PLAYER" player.pause
run actors message "$PLAYER" player.stop
actors wait "$PLAYER" >/dev/null
run actors inspect "$PLAYER" --view messages -n 4
run actors ls --status terminal
say "actors inbox read   # follow-ups the runs delivered to this shell's session"
actors inbox read | cut -c1-160
say "done: state lives in ${ACTORS_HOME:-${XDG_STATE_HOME:-$HOME/.local/state}/actors}; clean up with 'actors prune --older-than 0s'"
