#!/usr/bin/env bash
# Sets up this checkout for the Quickstart: the espeak-ng program (the real voice's phonemes; it is
# GPL, so it runs as a separate program and is never imported), a virtual environment in .venv, and
# the planner with its serving, benchmarking and test extras, pinned by constraints.txt.
# As root it calls apt-get itself, otherwise through sudo; when it cannot install, it says why and
# stops. Running it again is safe: what is already there is kept.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v espeak-ng >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    if ! { $sudo apt-get update -qq && $sudo apt-get install -y espeak-ng; }; then
        echo "error: no espeak-ng, and apt-get could not install it (see above): install" \
             "espeak-ng (as root: apt-get install -y espeak-ng; otherwise with sudo), then run" \
             "./setup.sh again" >&2
        exit 1
    fi
fi
[ -x .venv/bin/pip ] || python3 -m venv .venv
.venv/bin/pip install -q -c constraints.txt -e '.[bench,dev]'
