"""inferx-licenses: check the licenses of inferx-compiler's installed dependencies."""

from __future__ import annotations

import json
import sys

import click
from packaging.utils import canonicalize_name

from inferx_compiler.compliance import licenses
from inferx_compiler.cli.common import CONTEXT_SETTINGS, click_main, completion_epilog, options_namespace, run_cli

EXAMPLES = """\b
Examples:
  inferx-licenses                          the base dependencies of inferx-compiler
  inferx-licenses --extra test             ... and those of its `test` extra
  inferx-licenses --all-installed          every distribution in this environment
  inferx-licenses --json > licenses.json
  inferx-licenses --allowlist ours.txt --path site-packages --root my-app

\b
Exit status: 0 every license allowed, 1 some license not allowed (or UNKNOWN), 2 bad usage.
The license is the License-Expression field, else a short License field, else the
License :: classifiers; the allowlist's [exceptions] state it by hand where those are wrong.
"""


@click.command("inferx-licenses", context_settings=CONTEXT_SETTINGS,
               epilog=EXAMPLES + "\n" + completion_epilog("inferx-licenses"))
@click.option("--allowlist", metavar="FILE", type=click.Path(exists=True, dir_okay=False),
              help="allowed SPDX licenses and per-package exceptions (default: the list "
                   "shipped in inferx_compiler/data/license-allowlist.txt)")
@click.option("--root", default=licenses.DEFAULT_ROOT, show_default=True, metavar="NAME",
              help="the distribution whose dependency closure is checked")
@click.option("--extra", multiple=True, metavar="NAME",
              help="also follow the requirements of this extra of the root (repeatable)")
@click.option("--all-installed", is_flag=True,
              help="check every installed distribution, not just the root's closure")
@click.option("--path", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="look for distributions in this directory instead of sys.path (repeatable)")
@click.option("--json", "as_json", is_flag=True,
              help="print a JSON list of {name, version, license, source, allowed}")
@click.option("--debug", is_flag=True, help="show tracebacks")
def command(**params) -> int:
    """List the SPDX license of every distribution inferx-compiler depends on and check
    each against an allowlist."""
    args = options_namespace(params)
    if args.all_installed and args.extra:
        raise click.UsageError("--extra selects part of the closure; "
                               "--all-installed checks everything.")
    selection = _select(args)  # usage errors (exit 2) before any work
    return run_cli(lambda: _work(args, *selection), args.debug)


def main(argv: list[str] | None = None) -> int:
    return click_main(command, argv)


def _select(args) -> tuple[dict, list[str], str]:
    """(distributions to check, missing requirements, what was selected, in words)."""
    index = licenses.installed(args.path or None)
    if args.all_installed:
        return index, [], "all installed distributions"
    root = index.get(canonicalize_name(args.root))
    where = ", ".join(args.path) if args.path else "sys.path"
    if root is None:
        raise click.BadParameter(f"no distribution named {args.root!r} is installed ({where})",
                                 param_hint="'--root'")
    known = licenses.provided_extras(root)
    unknown = [e for e in args.extra if canonicalize_name(e) not in known]
    if unknown:
        raise click.BadParameter(f"{args.root} has no extra {', '.join(unknown)} "
                                 f"(it has: {', '.join(sorted(known)) or 'none'})",
                                 param_hint="'--extra'")
    dists, missing = licenses.dependency_closure(index, args.root, args.extra)
    extras = f" with extras {', '.join(args.extra)}" if args.extra else ""
    return dists, missing, f"{root.metadata['Name']} and its dependencies{extras}"


def _work(args, dists: dict, missing: list[str], selection: str) -> int:
    allowlist = licenses.load_allowlist(args.allowlist)
    entries = licenses.audit(dists, allowlist)
    for text in missing:
        print(f"warning: {text} is not installed; its license was not checked", file=sys.stderr)
    if args.as_json:
        print(json.dumps([vars(e) for e in entries], indent=2))
    else:
        print(licenses.format_table(entries))
    bad = [e for e in entries if not e.allowed]
    summary = (f"{len(entries)} distributions ({selection}): "
               + (f"{len(bad)} not allowed" if bad else "all licenses allowed")
               + f" by {allowlist.path}")
    print(summary, file=sys.stderr if args.as_json else sys.stdout)
    for e in bad:
        hint = (" (add an [exceptions] line stating its actual license)"
                if e.license == licenses.UNKNOWN else "")
        print(f"error: {e.name} {e.version}: license {e.license} is not allowed{hint}",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
