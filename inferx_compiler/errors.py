"""One error type per layer. Every message names what is wrong and what to do.

The CLIs catch `InferXError` and print `error: <message>` with a non-zero exit code;
anything else is a bug and is shown with a traceback only under `--debug`.
"""


class InferXError(Exception):
    """Base of every error the toolchain reports to a user."""

    exit_code = 1


class ModelLoadError(InferXError):
    """The input file is missing, unreadable or not an ONNX model."""


class UnsupportedOpsError(InferXError):
    """The model holds ops that no lowering handles; lists every such node."""

    def __init__(self, nodes):
        self.nodes = list(nodes)
        lines = [
            f"{len(self.nodes)} node(s) use ops that inferx-compile cannot lower:",
        ]
        for n in self.nodes:
            lines.append(
                f"  node '{n['name']}': op_type={n['op_type']} domain={n['domain'] or 'ai.onnx'} "
                f"opset={n['opset']}"
            )
        lines.append(
            "Replace these ops (or export the model without them) and compile again."
        )
        super().__init__("\n".join(lines))


class TargetError(InferXError):
    """An unknown target name, or a request the target cannot satisfy."""

    exit_code = 2


class PipelineError(InferXError):
    """A pass pipeline failed; `reproducer` holds the saved input IR and command,
    `location_names` the names in its error diagnostics' locations (ONNX node names, see
    onnx_nodes.py), `messages` their texts and `stage` the pipeline stage that failed."""

    def __init__(self, message, reproducer=None, location_names=(), stage="", messages=()):
        self.reproducer = reproducer
        self.location_names = list(location_names)
        self.messages = list(messages)  # the error diagnostics' own texts
        self.stage = stage
        self.detail = message
        self.nodes: list = []  # the ONNX nodes it is attributed to (onnx_nodes.attribute_failure)
        self.unlowered: dict = {}  # location name -> torch op left unconverted (torch-to-linalg)
        if reproducer:
            message = f"{message}\n{reproducer}"
        super().__init__(message)

    def with_detail(self, detail: str) -> "PipelineError":
        """The same failure (reproducer, locations, stage, nodes) told with another message."""
        copy = PipelineError(detail, self.reproducer, self.location_names, self.stage, self.messages)
        copy.nodes, copy.unlowered = list(self.nodes), dict(self.unlowered)
        return copy


class PassOptionError(InferXError):
    """A pass or pipeline spelled wrongly: unknown pass, unknown option, bad value."""

    exit_code = 2


class ArtifactError(InferXError):
    """An artifact that cannot be read: wrong format, missing member, bad manifest."""


class InputValidationError(InferXError):
    """Run-time inputs that do not match the artifact's manifest."""


class DeviceError(InferXError):
    """A device string that is malformed or names a device that is not present."""
