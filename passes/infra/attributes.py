"""Names of the discardable attributes the passes, the driver and the IREE backend share.

A leaf module: every layer may import it, it imports nothing of the package.
"""

# the resolved target record on the builtin.module (inferx_compiler.targets.Target as a dictionary)
TARGET_ATTR = "inferx.target"
# on a dispatch's root op: the lowering configuration inferx-dispatch-config chose
CONFIG_ATTR = "inferx.config"
# on each hal.executable: what its dispatch computes (inferx-dispatch-report)
REPORT_ATTR = "inferx.dispatch"
# on each hal.executable: the configuration IREE itself would choose (written by the backend)
IREE_CONFIG_ATTR = "inferx.iree_config"
