"""Write a ResNet of half ResNet-50's width with one bottleneck block a stage (8 MB of weights):
ResNet-50's layer kinds at shapes small enough to carry to the lent GPU machine's CPU with the
runtime wheel and two artifacts (tools/bench/device_cpu_ab.sh).

    python tools/bench/resnet_half.py OUT.onnx
"""

import os
import sys

import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    onnx.save(models.resnet(blocks=(1, 1, 1, 1), width=32, size=224, classes=100, name="resnet_half"), argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
