"""Run a module of inferx_compiler from another source tree: python use_pkg.py PKGROOT MODULE ARGS..."""
import runpy, sys
root, module = sys.argv[1], sys.argv[2]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
for k in [k for k in sys.modules if k.startswith("inferx_compiler")]:
    del sys.modules[k]
sys.path.insert(0, root)
sys.argv = [module] + sys.argv[3:]
import inferx_compiler.runtime.protocol as p
assert p.__file__.startswith(root), p.__file__
runpy.run_module(module, run_name="__main__")
