"""examples/ci/build-artifacts.yml: its `run:` steps, executed here with the same commands.

Matrix values and `${{ env.X }}` are substituted as GitHub Actions would; `uses:` steps (checkout,
cache, upload) and the install step are the runner's. Two matrix entries run (a CPU target with
its smoke run, and a CUDA target compiled without a GPU) to keep the suite's time down; the
others differ only in the target name, which test_targets checks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPE = os.path.join(ROOT, "examples", "ci", "build-artifacts.yml")
RUN_HERE = ("x86-avx2", "a100")
_EXPR = re.compile(r"\$\{\{\s*([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _workflow() -> dict:
    import yaml

    with open(RECIPE) as f:
        return yaml.safe_load(f)


def _substitute(text: str, scopes: dict) -> str:
    def value(m):
        scope, name = m.group(1), m.group(2)
        if scope not in scopes or name not in scopes[scope]:
            raise AssertionError(f"the recipe uses ${{{{ {scope}.{name} }}}}, which this test cannot supply")
        return str(scopes[scope][name]).lower() if isinstance(scopes[scope][name], bool) else str(scopes[scope][name])

    return _EXPR.sub(value, text)


def _run_steps(job: dict, env: dict, matrix: dict, cwd: str) -> list[str]:
    """Run the job's `run:` steps in order, as bash scripts (GitHub's default shell for run
    steps: `bash -e {0}`). Returns the names of the steps run."""
    ran = []
    scopes = {"env": env, "matrix": matrix}
    for step in job["steps"]:
        if "run" not in step or step.get("name", "").startswith("Install"):
            continue
        if "if" in step and _substitute(str(step["if"]), scopes) != "true":
            continue
        script = _substitute(step["run"], scopes)
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"step {step.get('name')!r} failed:\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        ran.append(step.get("name", script.splitlines()[0]))
    return ran


def _environment(workflow: dict, cwd: str) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # the installed scripts
    env.update({k: str(v) for k, v in workflow["env"].items()})
    shutil.copytree(os.path.join(ROOT, "examples"), os.path.join(cwd, "examples"))
    return env


def test_recipe_is_a_valid_workflow():
    wf = _workflow()
    assert set(wf["jobs"]) == {"licenses", "build"}
    targets = [entry["target"] for entry in wf["jobs"]["build"]["strategy"]["matrix"]["include"]]
    from inferx_compiler.targets import all_targets

    assert set(targets) <= set(all_targets()) and len(targets) >= 3
    uses = {s["uses"].split("@")[0] for job in wf["jobs"].values() for s in job["steps"] if "uses" in s}
    assert {"actions/checkout", "actions/cache", "actions/upload-artifact"} <= uses


@pytest.mark.parametrize("target", RUN_HERE)
def test_build_job_runs_locally(tmp_path, target):
    wf = _workflow()
    job = wf["jobs"]["build"]
    (matrix,) = [m for m in job["strategy"]["matrix"]["include"] if m["target"] == target]
    env = _environment(wf, str(tmp_path))
    ran = _run_steps(job, env, matrix, str(tmp_path))
    assert ran[:3] == ["Pre-flight check", "Build", "Reproducibility (a fresh build gives the same bytes)"]
    assert ("Smoke run" in ran) == matrix["smoke"]
    assert (tmp_path / "dist" / f"model-{target}.ixa").is_file()
    assert (tmp_path / "dist" / f"model-{target}.report.json").is_file()
    assert list((tmp_path / env["INFERX_CACHE_DIR"]).rglob("*.ixa")), "the build went through the cache"
    # a second run of the job (a warm cache, as on the next push) serves the build from the cache
    (build,) = [s for s in job["steps"] if s.get("name") == "Build"]
    again = subprocess.run(["bash", "-e", "-c", _substitute(build["run"], {"env": env, "matrix": matrix})],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "from the build cache" in again.stderr, again.stderr


def test_licenses_job_runs_locally(tmp_path):
    wf = _workflow()
    env = _environment(wf, str(tmp_path))
    assert _run_steps(wf["jobs"]["licenses"], env, {}, str(tmp_path)) == ["License compliance"]
