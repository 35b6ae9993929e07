"""PyTorch modules through torch-mlir's FX importer (needs the torch extra)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import inferx_compiler  # noqa: E402
from helpers import rel_l2  # noqa: E402


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(y, 1))


def test_torch_module_matches_eager(tmp_path):
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(2, 3, 8, 8)
    batch = torch.export.Dim("batch", min=1, max=1024)
    manifest = inferx_compiler.compile(net, (x,), target="cpu", output=str(tmp_path / "net.ixa"),
                                       dynamic_shapes=({0: batch},))
    assert manifest.model["source"] == "torch"
    assert manifest.weights["count"] >= 4  # conv w/b, bn stats, fc w/b
    sess = inferx_compiler.load(str(tmp_path / "net.ixa"))
    assert isinstance(sess.inputs[0].shape[0], str)  # batch stays dynamic
    assert [f["name"] for f in manifest.functions] == ["main$b1"]  # plus a static batch-1 function
    for n, function in ((1, "main$b1"), (5, "main")):
        xs = torch.randn(n, 3, 8, 8)
        with torch.no_grad():
            expected = net(xs).numpy()
        got = sess.run({sess.inputs[0].name: xs.numpy()})
        assert sess.function_for([xs.shape]) == function
        assert rel_l2(next(iter(got.values())), expected) <= 1e-4
