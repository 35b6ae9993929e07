"""Files a pipeline or an IREE flag names as `{build}/NAME`: written next to the compile (and kept
in reproducers) by the backend, which puts the build directory in place of `{build}`."""

BUILD_DIR = "{build}"
# the tuning database (--tuning-db), read by inferx-dispatch-config and inferx-hopper-matmul
TUNING_DB_FILE = "tuning_db.json"


def build_file(name: str) -> str:
    return f"{BUILD_DIR}/{name}"
