#!/usr/bin/env bash
# `bash scripts/pip_install.sh PYTHON ARGS...`: `PYTHON -m pip install -q ARGS`,
# the one way the Makefile and scripts/integration_env.sh install packages.
# Where Python writes bytecode as it imports (PYTHONDONTWRITEBYTECODE unset or
# empty, Python's default), pip skips compiling every file of every package
# (--no-compile): a module is compiled once, when it is first imported, and
# most of a package's files never are (PaddleFormers' environment installed in
# 54 s instead of 115 s here). Where Python does not write bytecode, pip
# compiles them all, or every process would compile what it imports again.
set -euo pipefail
python="${1:?usage: scripts/pip_install.sh PYTHON ARGS...}"
shift
if [ -z "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    set -- --no-compile "$@"
fi
exec "$python" -m pip install -q "$@"
