#!/usr/bin/env bash
# The whole test suite on a fresh virtual environment: lit (FileCheck) tests, then pytest
# (end-to-end against onnxruntime, a conformance sample). Slow suites: INFERX_RUN_SLOW=1.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${INFERX_TEST_VENV:-.venv-test}
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q '.[test,hopper]'
# torch is an optional extra (the FX front end); its tests skip cleanly without it.
"$VENV/bin/pip" install -q 'torch==2.13.0' || echo "torch not installable here: PyTorch tests will skip"
export PATH="$PWD/$VENV/bin:$PATH"
unset PYTHONPATH
inferx-licenses --extra test --extra hopper
lit -v test/lit
# One worker per core (pytest-xdist); a test file stays on one worker, so its module fixtures
# are built once.
# -rs: every skipped test, counted and with its reason, at the end (which host features a run lacked)
pytest -q -rs -n auto --dist loadfile test/e2e "$@"
