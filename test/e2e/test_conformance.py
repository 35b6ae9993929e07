"""ONNX backend conformance against the expected-failure list.

`test_conformance_sample` runs a deterministic sample of the ONNX backend cases (every k-th
case of each suite, sorted by id; a few minutes on 2 cores). `test_conformance_full` runs
all of them and is marked slow (run with --runslow or INFERX_RUN_SLOW=1).

Both fail on a case that fails but is not in conformance/expected_failures.txt, and on a
listed case that now passes (remove its line). Harness: conformance/harness.py.
"""

from __future__ import annotations

import os
import sys

import pytest

CONF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance")
sys.path.insert(0, CONF_DIR)

import harness  # noqa: E402

SAMPLE_SIZE = int(os.environ.get("INFERX_CONFORMANCE_SAMPLE", "200"))
JOBS = int(os.environ.get("INFERX_CONFORMANCE_JOBS", "2"))
CASE_TIMEOUT = 180.0


def _check(results: dict) -> None:
    expected = harness.read_expected_failures(harness.EXPECTED_FAILURES)
    unexpected, fixed = harness.check_against_expected(results, expected)
    problems = []
    if unexpected:
        problems.append(f"{len(unexpected)} case(s) fail but are not in expected_failures.txt:")
        problems += [f"  {cid}  # {status}: {reason}" for cid, status, reason in unexpected]
    if fixed:
        problems.append(f"{len(fixed)} case(s) in expected_failures.txt now pass; "
                        f"remove them from {harness.EXPECTED_FAILURES}:")
        problems += [f"  {cid}" for cid in fixed]
    assert not problems, "\n".join(problems)


def _run(sample):
    cases = harness.select_cases(harness.collect_cases(), sample=sample)
    assert cases, "no ONNX backend cases found (is the onnx package installed?)"
    results = harness.run_cases(cases, ("inferx",), jobs=JOBS, timeout=CASE_TIMEOUT)
    print(harness.markdown_summary(results, top=10))
    return results["inferx"]


def test_conformance_sample():
    _check(_run(SAMPLE_SIZE))


@pytest.mark.slow
def test_conformance_full():
    _check(_run(None))
