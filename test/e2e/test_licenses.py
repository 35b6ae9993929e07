"""inferx-licenses: the dependency closure's SPDX licenses checked against an allowlist.

Most cases run on a synthetic environment of fake `*.dist-info/METADATA` directories
(`--path`), so the closure, the licenses and the verdicts are known exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from inferx_compiler.cli.licenses import main
from inferx_compiler.compliance.licenses import classifier_license, is_allowed, normalize_license

MIT_CLASSIFIER = "Classifier: License :: OSI Approved :: MIT License"


def _dist(site, name, version, *lines):
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    header = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    (info / "METADATA").write_text("\n".join(header + list(lines)) + "\n")


@pytest.fixture
def site(tmp_path):
    """root-pkg needs mit-dep (MIT by classifier, which needs sub-dep[fast]) and gpl-dep
    (GPL-3.0-only); win-dep is behind a false marker, test-dep behind the `test` extra."""
    site = tmp_path / "site"
    _dist(site, "root-pkg", "1.0", "License-Expression: Apache-2.0",
          "Requires-Dist: mit-dep", "Requires-Dist: gpl_dep>=3",
          'Requires-Dist: win-dep; sys_platform == "no-such-platform"',
          'Requires-Dist: py2-dep; python_version < "3"',
          'Requires-Dist: test-dep; extra == "test"', "Provides-Extra: test")
    _dist(site, "mit-dep", "2.0", MIT_CLASSIFIER, "Requires-Dist: sub-dep[fast]")
    _dist(site, "sub-dep", "0.1", "License: BSD", 'Requires-Dist: fast-dep; extra == "fast"')
    _dist(site, "fast-dep", "0.2", "License: Apache 2.0")
    _dist(site, "gpl-dep", "3.1", "License-Expression: GPL-3.0-only")
    _dist(site, "win-dep", "1.0", "License-Expression: LicenseRef-Proprietary")
    _dist(site, "py2-dep", "1.0", "License-Expression: LicenseRef-Proprietary")
    _dist(site, "test-dep", "0.5", "License: MIT OR GPL-2.0-only")
    _dist(site, "stray", "9.9", "License: UNKNOWN")
    return site


def _allowlist(tmp_path, *lines):
    path = tmp_path / "allow.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _run(capsys, site, allowlist, *args):
    code = main(["--path", str(site), "--root", "root-pkg", "--allowlist", allowlist, "--json", *args])
    out, err = capsys.readouterr()
    return code, {e["name"]: (e["license"], e["source"], e["allowed"]) for e in json.loads(out)}, err


def test_gpl_dependency_fails_and_is_named(tmp_path, site, capsys):
    allow = _allowlist(tmp_path, "# permissive only", "MIT", "BSD-3-Clause", "Apache-2.0")
    code, found, err = _run(capsys, site, allow)
    assert code == 1
    assert found == {
        "root-pkg": ("Apache-2.0", "License-Expression", True),
        "mit-dep": ("MIT", "Classifier", True),
        "sub-dep": ("BSD-3-Clause", "License", True),
        "fast-dep": ("Apache-2.0", "License", True),
        "gpl-dep": ("GPL-3.0-only", "License-Expression", False),
    }
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == ["error: gpl-dep 3.1: license GPL-3.0-only is not allowed"]


def test_allowlisted_gpl_passes_and_table_says_so(tmp_path, site, capsys):
    allow = _allowlist(tmp_path, "MIT", "BSD-3-Clause", "Apache-2.0", "gpl-3.0-only  # case-insensitive")
    assert main(["--path", str(site), "--root", "root-pkg", "--allowlist", allow]) == 0
    out, err = capsys.readouterr()
    assert "error:" not in err
    rows = {line.split()[0]: line.split()[1:4] for line in out.splitlines()[1:-1]}
    assert rows["gpl-dep"] == ["3.1", "GPL-3.0-only", "yes"]
    assert out.splitlines()[-1].startswith("5 distributions (root-pkg and its dependencies): all licenses allowed")


def test_extra_follows_its_requirements_and_or_expression_passes(tmp_path, site, capsys):
    allow = _allowlist(tmp_path, "MIT", "BSD-3-Clause", "Apache-2.0", "GPL-3.0-only")
    code, found, _ = _run(capsys, site, allow, "--extra", "test")
    assert code == 0
    assert found["test-dep"] == ("MIT OR GPL-2.0-only", "License", True)
    assert "win-dep" not in found and "py2-dep" not in found


def test_unknown_license_fails_until_an_exception_states_it(tmp_path, site, capsys):
    _dist(site, "mystery", "1.0", "License: see LICENSE file")
    _dist(site, "needs-mystery", "1.0", "Requires-Dist: mystery", "License-Expression: MIT")
    allow = _allowlist(tmp_path, "MIT")
    code, found, err = _run(capsys, site, allow, "--root", "needs-mystery")
    assert code == 1
    assert found["mystery"] == ("UNKNOWN", "none", False)
    assert "error: mystery 1.0: license UNKNOWN is not allowed (add an [exceptions] line" in err

    allow = _allowlist(tmp_path, "MIT", "[exceptions]",
                       "Mystery = MIT ; LICENSE in the sdist is the MIT text")
    code, found, _ = _run(capsys, site, allow, "--root", "needs-mystery")
    assert code == 0
    assert found["mystery"] == ("MIT", "exception", True)


def test_all_installed_lists_everything(tmp_path, site, capsys):
    allow = _allowlist(tmp_path, "MIT")
    code = main(["--path", str(site), "--allowlist", allow, "--all-installed", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert sorted(e["name"] for e in json.loads(out)) == [
        "fast-dep", "gpl-dep", "mit-dep", "py2-dep", "root-pkg", "stray", "sub-dep", "test-dep", "win-dep"]
    assert "error: stray 9.9: license UNKNOWN is not allowed" in err


def test_missing_requirement_is_a_warning(tmp_path, site, capsys):
    _dist(site, "needs-absent", "1.0", "License-Expression: MIT", "Requires-Dist: absent-dep>=1")
    code, found, err = _run(capsys, site, _allowlist(tmp_path, "MIT"), "--root", "needs-absent")
    assert code == 0 and list(found) == ["needs-absent"]
    assert "warning: absent-dep (required by needs-absent) is not installed" in err


@pytest.mark.parametrize("args, message", [
    (["--extra", "docs"], "root-pkg has no extra docs (it has: test)"),
    (["--root", "nope"], "no distribution named 'nope' is installed"),
    (["--all-installed", "--extra", "test"], "--all-installed checks everything"),
])
def test_usage_errors_exit_2(tmp_path, site, capsys, args, message):
    allow = _allowlist(tmp_path, "MIT")
    assert main(["--path", str(site), "--root", "root-pkg", "--allowlist", allow, *args]) == 2
    assert message in capsys.readouterr().err


def test_exception_without_reason_is_refused(tmp_path, site, capsys):
    allow = _allowlist(tmp_path, "MIT", "[exceptions]", "gpl-dep = MIT")
    assert main(["--path", str(site), "--root", "root-pkg", "--allowlist", allow]) == 1
    assert "allow.txt:3: an exception reads 'NAME = SPDX-EXPRESSION ; reason'" in capsys.readouterr().err


@pytest.mark.parametrize("text, spdx", [
    ("Apache 2.0", "Apache-2.0"),
    ("Apache License, Version 2.0", "Apache-2.0"),
    ("MIT License", "MIT"),
    ("BSD", "BSD-3-Clause"),
    ("3-Clause BSD License", "BSD-3-Clause"),
    ("Apache-2.0 with LLVM exception", "Apache-2.0 WITH LLVM-exception"),
    ("mit or apache 2.0", "MIT OR Apache-2.0"),
    ("(MIT OR Apache-2.0) AND BSD-2-Clause", "(MIT OR Apache-2.0) AND BSD-2-Clause"),
    ("UNKNOWN", None),
    ("Dual License", None),
    ("BSD 3-Clause License\n\nCopyright (c) 2021, someone", None),
])
def test_normalize_license(text, spdx):
    assert normalize_license(text) == spdx


def test_classifiers_map_to_spdx():
    assert classifier_license(["License :: OSI Approved :: BSD License"]) == "BSD-3-Clause"
    assert classifier_license(["License :: OSI Approved :: Apache Software License",
                               "License :: OSI Approved :: MIT License",
                               "Programming Language :: Python"]) == "Apache-2.0 AND MIT"
    assert classifier_license(["License :: OSI Approved"]) is None


@pytest.mark.parametrize("expression, ok", [
    ("MIT", True),
    ("GPL-3.0-only", False),
    ("MIT OR GPL-3.0-only", True),
    ("GPL-3.0-only OR MIT", True),
    ("MIT AND GPL-3.0-only", False),
    ("MIT AND Apache-2.0", True),
    ("GPL-3.0-only OR MIT AND Apache-2.0", True),   # AND binds tighter
    ("(GPL-3.0-only OR MIT) AND LGPL-3.0-only", False),
    ("Apache-2.0 WITH LLVM-exception", True),
    ("MIT WITH Classpath-exception-2.0", False),    # a WITH pair is allowed only as listed
    ("UNKNOWN", False),
    ("MIT OR", False),
])
def test_expressions(expression, ok):
    allowed = {"mit", "apache-2.0", "apache-2.0 with llvm-exception"}
    assert is_allowed(expression, allowed) is ok


def test_real_environment_passes_with_shipped_allowlist(capsys):
    assert main(["--json"]) == 0
    found = {e["name"].lower(): e for e in json.loads(capsys.readouterr().out)}
    assert {"inferx-compiler", "onnx", "numpy", "click", "torch-mlir"} <= set(found)
    assert found["inferx-compiler"]["license"] == "Apache-2.0"
    assert found["torch-mlir"]["source"] == "exception"
    assert "pytest" not in found  # only the `test` extra brings pytest in


def test_installed_script_with_test_extra():
    script = os.path.join(os.path.dirname(sys.executable), "inferx-licenses")
    if not os.path.exists(script):
        pytest.skip("inferx-licenses is not installed next to this interpreter")
    proc = subprocess.run([script, "--extra", "test"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all licenses allowed" in proc.stdout and "pytest" in proc.stdout
