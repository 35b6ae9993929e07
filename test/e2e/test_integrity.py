"""Load-time integrity: a modified, incomplete or padded artifact, a newer format, or a module
from another IREE release is refused with a message that says what to do; the opt-outs
(`verify=`, $INFERX_VERIFY_ARTIFACT) load it and say what they skipped."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import time
import warnings
import zipfile

import numpy as np
import pytest

import inferx_compiler
from e2e_models import mlp
from helpers import onnxruntime_outputs, rel_l2, save
from inferx_compiler.artifact.archive import VERIFY_ENV, ArtifactVerificationWarning
from inferx_compiler.errors import ArtifactError
from inferx_compiler.runtime.session import load
from inferx_compiler.versions import installed_iree_runtime

FEEDS = {"x": np.random.default_rng(5).standard_normal((3, 64)).astype(np.float32)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(onnx path, artifact path): the e2e MLP compiled for `cpu`."""
    root = tmp_path_factory.mktemp("integrity")
    onnx_path = save(mlp(), root / "m.onnx")
    inferx_compiler.compile_onnx(onnx_path, target="cpu", output=str(root / "m.ixa"))
    return onnx_path, str(root / "m.ixa")


@pytest.fixture(autouse=True)
def no_env_policy(monkeypatch):
    """The tests choose the policy; none inherits one from the shell."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)


def _member_span(path: str, name: str) -> tuple[int, int]:
    """(offset, size) of a member's bytes in the zip file (as stored: deflated ones compressed)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + name_len + extra_len, info.compress_size


def _flipped(src: str, dst, member: str, at: int | None = None) -> str:
    """A copy of the artifact with one byte of `member` flipped (at `at` within it, default
    its middle); every other byte, the manifest included, is unchanged."""
    shutil.copyfile(src, dst)
    offset, size = _member_span(src, member)
    with open(dst, "r+b") as f:
        f.seek(offset + (size // 2 if at is None else at))
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte ^ 0xFF]))
    return str(dst)


def _tampered_weights(src: str, dst, onnx_path: str) -> str:
    """A copy whose weights member has one byte of w1's data flipped (so results change)."""
    import onnx
    from onnx import numpy_helper

    w1 = next(numpy_helper.to_array(i) for i in onnx.load(onnx_path).graph.initializer if i.name == "w1")
    with zipfile.ZipFile(src) as zf:
        at = zf.read("weights.irpa").find(np.ascontiguousarray(w1).tobytes()[:256])
    assert at >= 0, "w1's bytes not found in weights.irpa"
    return _flipped(src, dst, "weights.irpa", at + 103)  # w1[0, 25]'s sign and exponent


def _rewritten(src: str, dst, drop=(), add=None, manifest_edit=None) -> str:
    """A copy of the artifact's zip without the `drop` members, with the `add` members
    (name -> bytes) appended, and its manifest passed through `manifest_edit`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "manifest.json" and manifest_edit is not None:
                manifest = json.loads(data)
                manifest_edit(manifest)
                data = json.dumps(manifest, indent=1, sort_keys=True).encode()
            if info.filename not in drop:
                zout.writestr(info.filename, data)
        for name, data in (add or {}).items():
            zout.writestr(name, data)
    return str(dst)


def _refusal(path: str, **kw) -> str:
    with pytest.raises(ArtifactError) as err:
        load(path, device="cpu", **kw)
    return str(err.value)


def _assert_says_rebuild(message: str, path: str) -> None:
    assert "the artifact is corrupt or was modified after it was built" in message
    assert f"Rebuild it (inferx-compile MODEL --target cpu -o {path}) or download it again" in message


def test_untouched_artifact_loads_runs_and_matches(built):
    onnx_path, artifact = built
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArtifactVerificationWarning)
        got = load(artifact, device="cpu").run(FEEDS)
    expected = onnxruntime_outputs(onnx_path, FEEDS)
    assert rel_l2(got["y"], expected["y"]) <= 1e-4


def test_flipped_byte_is_refused_naming_the_member(built, tmp_path):
    """The weights (stored): a hash that differs from the manifest's."""
    from inferx_compiler.artifact.archive import _sha256_view, Artifact

    member = "weights.irpa"
    path = _flipped(built[1], tmp_path / "t.ixa", member)
    message = _refusal(path)
    assert message.startswith(f"{path}: ")
    _assert_says_rebuild(message, path)
    expected = json.loads(zipfile.ZipFile(built[1]).read("manifest.json"))["members"][member]
    actual = _sha256_view(Artifact(path).member_view(member))
    assert f"member '{member}': sha256 {actual[:12]}... but the manifest expects {expected[:12]}..." in message
    assert sum(f"member '{m}'" in message for m in ("module.vmfb", "weights.irpa", "report.json")) == 1


@pytest.mark.parametrize("member", ["module.vmfb", "report.json"])
def test_flipped_byte_in_a_deflated_member_is_refused_naming_it(built, tmp_path, member):
    """The module and the report are deflated: a flipped byte of their compressed bytes no longer
    decompresses to what was stored (zlib's or the zip's CRC check), refused as damaged, with no
    traceback and the rebuild hint; the other members are still checked."""
    path = _flipped(built[1], tmp_path / "t.ixa", member)
    message = _refusal(path)
    assert message.startswith(f"{path}: ")
    _assert_says_rebuild(message, path)
    assert f"member '{member}' is damaged: it does not decompress to the bytes that were stored" in message
    assert sum(f"member '{m}'" in message for m in ("module.vmfb", "weights.irpa", "report.json")) == 1


def test_format_version_1_with_every_member_stored_still_loads(built, tmp_path):
    """Artifacts written before the module and report were deflated (format version 1, every
    member stored) load, verify and run as before."""
    path = _rewritten(built[1], tmp_path / "v1.ixa", manifest_edit=lambda m: m.update(format_version=1))
    with zipfile.ZipFile(path) as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_STORED}
    got = load(path, device="cpu").run(FEEDS)
    assert rel_l2(got["y"], onnxruntime_outputs(built[0], FEEDS)["y"]) <= 1e-4


def test_missing_member_is_refused(built, tmp_path):
    path = _rewritten(built[1], tmp_path / "t.ixa", drop=("weights.irpa",))
    message = _refusal(path)
    assert "member 'weights.irpa' is listed in the manifest but missing from the zip" in message
    _assert_says_rebuild(message, path)


def test_extra_member_is_refused(built, tmp_path):
    path = _rewritten(built[1], tmp_path / "t.ixa", add={"payload.bin": b"\x00" * 10})
    message = _refusal(path)
    assert "member 'payload.bin' is in the zip but not listed in the manifest" in message
    _assert_says_rebuild(message, path)


def test_member_stored_twice_is_refused(built, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
        path = _rewritten(built[1], tmp_path / "t.ixa", add={"report.json": b"{}"})
    assert "member 'report.json' is stored 2 times" in _refusal(path)


def test_missing_member_is_refused_even_without_hashing(built, tmp_path):
    path = _rewritten(built[1], tmp_path / "t.ixa", drop=("report.json",))
    assert "member 'report.json' is listed in the manifest but missing" in _refusal(path, verify="none")


def test_newer_format_version_is_refused_with_the_rebuild_command(built, tmp_path):
    path = _rewritten(built[1], tmp_path / "t.ixa",
                      manifest_edit=lambda m: m.update(format_version=99))
    message = _refusal(path)
    assert message.startswith(f"{path}: artifact format version 99 is not supported by this inferx-compiler")
    assert "(it reads format versions 1, 2)" in message
    assert f"inferx-compile MODEL --target cpu -o {path}" in message


def test_other_iree_version_is_refused_naming_both(built, tmp_path):
    path = _rewritten(built[1], tmp_path / "t.ixa",
                      manifest_edit=lambda m: m["compiler"].update({"iree-base-compiler": "0.0.1"}))
    message = _refusal(path)
    installed = installed_iree_runtime()
    assert f"module.vmfb was compiled by IREE 0.0.1 (iree-base-compiler) but the installed IREE runtime is {installed}" in message
    assert f"Rebuild it with this installation (inferx-compile MODEL --target cpu -o {path})" in message
    assert "pip install iree-base-runtime==0.0.1" in message


def test_other_iree_version_runs_when_ignored(built, tmp_path):
    path = _rewritten(built[1], tmp_path / "t.ixa",
                      manifest_edit=lambda m: m["compiler"].update({"iree-base-compiler": "0.0.1"}))
    with pytest.warns(ArtifactVerificationWarning, match="compiled by IREE 0.0.1.*running it anyway"):
        sess = load(path, device="cpu", verify="ignore-iree-version")
    assert sess.run(FEEDS)["y"].shape == (3, 10)


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_skip_weights_loads_tampered_weights_and_says_so(built, tmp_path, monkeypatch, how):
    onnx_path, artifact = built
    path = _tampered_weights(artifact, tmp_path / "t.ixa", onnx_path)
    assert "member 'weights.irpa': sha256" in _refusal(path)
    kw = {"verify": "skip-weights"}
    if how == "environment":
        monkeypatch.setenv(VERIFY_ENV, "skip-weights")
        kw = {}
    with pytest.warns(ArtifactVerificationWarning) as record:
        got = load(path, device="cpu", **kw).run(FEEDS)["y"]
    messages = [str(w.message) for w in record if issubclass(w.category, ArtifactVerificationWarning)]
    assert messages == [f"{path}: integrity not checked for member(s) weights.irpa ({VERIFY_ENV}/verify=skip-weights)"]
    assert not np.allclose(got, load(artifact, device="cpu", verify="all").run(FEEDS)["y"])  # the flip is used


def test_skip_weights_still_checks_the_module(built, tmp_path):
    path = _flipped(built[1], tmp_path / "t.ixa", "module.vmfb")
    assert "member 'module.vmfb' is damaged" in _refusal(path, verify="skip-weights")


def test_none_names_every_unchecked_member(built, tmp_path):
    path = _flipped(built[1], tmp_path / "t.ixa", "report.json")
    with pytest.warns(ArtifactVerificationWarning,
                      match=r"not checked for member\(s\) module.vmfb, report.json, weights.irpa"):
        load(path, device="cpu", verify="none")


def test_argument_wins_over_environment(built, tmp_path, monkeypatch):
    path = _flipped(built[1], tmp_path / "t.ixa", "weights.irpa")
    monkeypatch.setenv(VERIFY_ENV, "none")
    assert "member 'weights.irpa': sha256" in _refusal(path, verify="all")


@pytest.mark.parametrize("spec", ["some", "all,none", "skip-weights,ignore-versions"])
def test_unknown_policy_is_refused(built, spec):
    message = _refusal(built[1], verify=spec)
    assert f"verify={spec!r}: expected one of all, skip-weights, none, optionally followed by ',ignore-iree-version'" in message


def test_file_changed_after_a_load_is_checked_again(built, tmp_path):
    path = shutil.copyfile(built[1], tmp_path / "t.ixa")
    load(str(path), device="cpu")  # verified and remembered
    time.sleep(0.05)  # file timestamps are as coarse as the kernel's tick
    _flipped(str(path), tmp_path / "t2.ixa", "module.vmfb")
    with open(tmp_path / "t2.ixa", "rb") as src, open(path, "r+b") as dst:
        dst.write(src.read())  # in place: same inode, same size
    assert "member 'module.vmfb' is damaged" in _refusal(str(path))


def _cli_run(artifact: str, tmp_path, env=None) -> subprocess.CompletedProcess:
    """inferx-run on the artifact in a subprocess ($INFERX_VERIFY_ARTIFACT as `env` says)."""
    from inferx_compiler.cli.common import python_entry

    np.savez(tmp_path / "in.npz", **FEEDS)
    return subprocess.run(python_entry("inferx_compiler.cli.run") + [
        artifact, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")],
        capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_cli_refuses_tampered_artifact_without_traceback(built, tmp_path):
    path = _flipped(built[1], tmp_path / "t.ixa", "weights.irpa")
    proc = _cli_run(path, tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"error: {path}: the artifact is corrupt or was modified after it was built" in proc.stderr
    assert "member 'weights.irpa': sha256" in proc.stderr
    assert not (tmp_path / "out.npz").exists()


def test_cli_skip_weights_from_environment_warns_on_stderr(built, tmp_path):
    path = _flipped(built[1], tmp_path / "t.ixa", "weights.irpa")
    proc = _cli_run(path, tmp_path, env={VERIFY_ENV: "skip-weights"})
    assert proc.returncode == 0, proc.stderr
    assert "integrity not checked for member(s) weights.irpa" in proc.stderr
