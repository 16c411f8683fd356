#!/bin/sh
# A toy media player driven by messages, to show the whole actor loop: it waits on
# `actors recv`, acts on player.next / pause / resume / stop, and reports every change
# as a player.track actor message (player.stopped at the end).
count=${1:-3}
index=1
announce() {
    actors emit player.track "{\"index\": $index, \"count\": $count, \"state\": \"$1\"}" --body-json \
        --summary "$1: track $index of $count"
}
announce playing
while message=$(actors recv); do
    case "${message%% *}" in
        player.next) index=$((index % count + 1)); announce playing ;;
        player.pause) announce paused ;;
        player.resume) announce playing ;;
        player.stop)
            actors emit player.stopped "{\"index\": $index}" --body-json --summary "stopped at track $index"
            exit 0 ;;
    esac
done
