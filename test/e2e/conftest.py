import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("INFERX_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or INFERX_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cnn_artifact(tmp_path_factory):
    """(onnx path, artifact path): the e2e CNN built for `cpu` with batch buckets 1,2,4,8."""
    from e2e_models import cnn
    from helpers import save
    from inferx_compiler.cli.compile import main as compile_main

    root = tmp_path_factory.mktemp("cnn_buckets")
    path = save(cnn(), root / "cnn.onnx")
    out = root / "cnn.ixa"
    assert compile_main([path, "--target", "cpu", "--batch-sizes", "1,2,4,8", "-o", str(out), "-q"]) == 0
    return path, str(out)


@pytest.fixture(scope="session")
def served_mlp(tmp_path_factory):
    """URL of a real `inferx-serve` (the CLI, in a child process, any free ports) serving the
    e2e MLP as model 'mlp'; stopped with SIGTERM at the end of the session."""
    import re
    import signal
    import subprocess

    from e2e_models import mlp
    from helpers import save
    from inferx_compiler.cli.common import python_entry
    from inferx_compiler.cli.compile import main as compile_main

    root = tmp_path_factory.mktemp("served_mlp")
    artifact = root / "mlp.ixa"
    assert compile_main([save(mlp(), root / "mlp.onnx"), "--target", "cpu", "-o", str(artifact), "-q"]) == 0
    proc = subprocess.Popen(python_entry("inferx_compiler.cli.serve") + [str(artifact), "--port", "0", "--grpc-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.match(r"serving \S+ on (http://127\.0\.0\.1:\d+)", line.strip())
        assert match, line + (proc.stderr.read() if proc.poll() is not None else "")
        yield match.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
