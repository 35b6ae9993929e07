"""License compliance: the SPDX license of every distribution inferx-compiler depends on.

Walk the installed dependency closure of a root distribution (its Requires-Dist, recursively,
honouring environment markers and the requested extras), find each distribution's license
as an SPDX expression and check it against an allowlist:

- the license comes from `License-Expression` (PEP 639), else from `License` when that is a
  short SPDX-like value ("MIT", "Apache 2.0", "3-Clause BSD License" are normalised), else
  from the `License :: ...` trove classifiers (several classifiers: all of them, AND), else
  it is UNKNOWN;
- an expression passes when it is allowed as a whole: `A OR B` needs one of A, B allowed,
  `A AND B` needs both; `X WITH E` must be allowed as that pair ("Apache-2.0 WITH LLVM-exception");
- the allowlist file may name per-package exceptions: the package's real license, stated by
  hand with a reason, for metadata that is missing or wrong; that license is then checked.

Only the public `importlib.metadata` API reads the environment; requirement strings and
markers are parsed with `packaging` (a dependency of torch-mlir and onnxruntime).
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.resources
import re
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from inferx_compiler.errors import InferXError

UNKNOWN = "UNKNOWN"
DEFAULT_ROOT = "inferx-compiler"
ALLOWLIST_RESOURCE = "data/license-allowlist.txt"

# SPDX ids whose spelling we restore from any letter case.
_SPDX_IDS = (
    "0BSD", "AFL-3.0", "AGPL-3.0-only", "AGPL-3.0-or-later", "Apache-1.1", "Apache-2.0",
    "Artistic-2.0", "BSD-1-Clause", "BSD-2-Clause", "BSD-3-Clause", "BSD-4-Clause", "BSL-1.0",
    "CC0-1.0", "CC-BY-4.0", "CDDL-1.0", "CNRI-Python", "EPL-1.0", "EPL-2.0", "EUPL-1.2",
    "GPL-1.0-or-later", "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-only", "GPL-3.0-or-later",
    "HPND", "ISC", "LGPL-2.0-only", "LGPL-2.0-or-later", "LGPL-2.1-only", "LGPL-2.1-or-later",
    "LGPL-3.0-only", "LGPL-3.0-or-later", "LLVM-exception", "MIT", "MIT-0", "MIT-CMU",
    "MPL-1.1", "MPL-2.0", "NCSA", "PSF-2.0", "Python-2.0", "Unlicense", "UPL-1.0", "WTFPL",
    "Zlib", "ZPL-2.1",
)

# Common non-SPDX spellings (compared lower-case, whitespace collapsed) -> SPDX. None means
# "says nothing" (setuptools writes UNKNOWN when no license was given).
_ALIASES: dict[str, str | None] = {
    **{i.lower(): i for i in _SPDX_IDS},
    **dict.fromkeys(("unknown", "none", "n/a", "other", "see license", "see license file",
                     "license", "license.txt"), None),
    **dict.fromkeys(("mit license", "the mit license", "mit licence", "expat", "mit/expat"), "MIT"),
    **dict.fromkeys(("bsd", "bsd license", "new bsd", "new bsd license", "modified bsd",
                     "modified bsd license", "revised bsd", "bsd-3", "bsd3", "3-clause bsd",
                     "3-clause bsd license", "bsd 3-clause", "bsd 3-clause license",
                     "bsd-3-clause license", "bsd 3 clause"), "BSD-3-Clause"),
    **dict.fromkeys(("bsd-2", "2-clause bsd", "2-clause bsd license", "bsd 2-clause",
                     "bsd 2-clause license", "simplified bsd", "freebsd"), "BSD-2-Clause"),
    **dict.fromkeys(("apache", "apache 2", "apache 2.0", "apache-2", "apache2", "apache v2",
                     "apache license", "apache license 2.0", "apache license, version 2.0",
                     "apache license version 2.0", "apache license v2.0", "apache-2.0 license",
                     "apache software license", "apache software license 2.0", "asl 2.0",
                     "al2"), "Apache-2.0"),
    **dict.fromkeys(("llvm exception", "llvm exceptions", "llvm-exceptions"), "LLVM-exception"),
    **dict.fromkeys(("psf", "psfl", "psf license", "psf-2", "python software foundation license",
                     "python software foundation"), "PSF-2.0"),
    **dict.fromkeys(("mpl 2.0", "mpl-2", "mpl2", "mozilla public license 2.0"), "MPL-2.0"),
    **dict.fromkeys(("isc license", "iscl"), "ISC"),
    **dict.fromkeys(("zlib/libpng", "zlib license"), "Zlib"),
    **dict.fromkeys(("the unlicense", "unlicensed"), "Unlicense"),
    **dict.fromkeys(("boost", "boost software license", "boost software license 1.0"), "BSL-1.0"),
    **dict.fromkeys(("cc0", "cc0 1.0", "cc0 1.0 universal"), "CC0-1.0"),
    **dict.fromkeys(("zpl", "zpl 2.1", "zope public license"), "ZPL-2.1"),
    "gpl": "GPL-1.0-or-later", "gplv2": "GPL-2.0-only", "gpl-2.0": "GPL-2.0-only",
    "gplv2+": "GPL-2.0-or-later", "gplv3": "GPL-3.0-only", "gpl-3.0": "GPL-3.0-only",
    "gplv3+": "GPL-3.0-or-later", "lgpl": "LGPL-2.0-or-later", "lgplv2": "LGPL-2.0-only",
    "lgplv2+": "LGPL-2.0-or-later", "lgplv3": "LGPL-3.0-only", "lgplv3+": "LGPL-3.0-or-later",
    "agplv3": "AGPL-3.0-only", "agplv3+": "AGPL-3.0-or-later",
    "proprietary": "LicenseRef-Proprietary", "public domain": "LicenseRef-Public-Domain",
}

# Trove classifiers (after "License :: ") -> SPDX.
_CLASSIFIERS = {
    "OSI Approved :: MIT License": "MIT",
    "OSI Approved :: MIT No Attribution License (MIT-0)": "MIT-0",
    "OSI Approved :: BSD License": "BSD-3-Clause",
    "OSI Approved :: Apache Software License": "Apache-2.0",
    "OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "OSI Approved :: Mozilla Public License 1.1 (MPL 1.1)": "MPL-1.1",
    "OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "OSI Approved :: ISC License (ISCL)": "ISC",
    "OSI Approved :: Historical Permission Notice and Disclaimer (HPND)": "HPND",
    "OSI Approved :: Zope Public License": "ZPL-2.1",
    "OSI Approved :: zlib/libpng License": "Zlib",
    "OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
    "OSI Approved :: Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
    "OSI Approved :: Universal Permissive License (UPL)": "UPL-1.0",
    "OSI Approved :: University of Illinois/NCSA Open Source License": "NCSA",
    "OSI Approved :: Artistic License": "Artistic-2.0",
    "OSI Approved :: Eclipse Public License 1.0 (EPL-1.0)": "EPL-1.0",
    "OSI Approved :: Eclipse Public License 2.0 (EPL-2.0)": "EPL-2.0",
    "OSI Approved :: European Union Public Licence 1.2 (EUPL 1.2)": "EUPL-1.2",
    "OSI Approved :: Common Development and Distribution License 1.0 (CDDL-1.0)": "CDDL-1.0",
    "OSI Approved :: GNU General Public License (GPL)": "GPL-1.0-or-later",
    "OSI Approved :: GNU General Public License v2 (GPLv2)": "GPL-2.0-only",
    "OSI Approved :: GNU General Public License v2 or later (GPLv2+)": "GPL-2.0-or-later",
    "OSI Approved :: GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "OSI Approved :: GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "OSI Approved :: GNU Library or Lesser General Public License (LGPL)": "LGPL-2.0-or-later",
    "OSI Approved :: GNU Lesser General Public License v2 (LGPLv2)": "LGPL-2.0-only",
    "OSI Approved :: GNU Lesser General Public License v2 or later (LGPLv2+)": "LGPL-2.0-or-later",
    "OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "OSI Approved :: GNU Lesser General Public License v3 or later (LGPLv3+)": "LGPL-3.0-or-later",
    "OSI Approved :: GNU Affero General Public License v3": "AGPL-3.0-only",
    "OSI Approved :: GNU Affero General Public License v3 or later (AGPLv3+)": "AGPL-3.0-or-later",
    "CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
    "Public Domain": "LicenseRef-Public-Domain",
    "Other/Proprietary License": "LicenseRef-Proprietary",
}

_OPERATORS = ("AND", "OR", "WITH")
_SPLIT = re.compile(r"(\(|\)|\s+(?:and|or|with)\s+)", re.IGNORECASE)
# A token we accept as an SPDX id without knowing it: LicenseRef-..., or Name-Version shaped.
_ID_SHAPED = re.compile(r"^(LicenseRef-[A-Za-z0-9.-]+|[A-Za-z0-9.]+-[A-Za-z0-9.-]+\+?)$")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _term(text: str) -> str | None:
    """One license id (or exception id) as SPDX, or None when it is not recognisably one."""
    key = text.lower()
    if key in _ALIASES:
        return _ALIASES[key]
    return text if _ID_SHAPED.match(text) else None


def normalize_license(text: str | None) -> str | None:
    """`text` as an SPDX expression ("Apache 2.0 or MIT" -> "Apache-2.0 OR MIT"), or None when
    it is not a short SPDX-like value (a pasted license text, "UNKNOWN", "Dual License")."""
    if not text or "\n" in text.strip():
        return None
    text = _collapse(text)
    if text.lower() in _ALIASES:
        return _ALIASES[text.lower()]
    out = []
    for piece in (p.strip() for p in _SPLIT.split(text)):
        if not piece:
            continue
        if piece.upper() in _OPERATORS or piece in ("(", ")"):
            out.append(piece.upper())
        elif (term := _term(piece)) is not None:
            out.append(term)
        else:
            return None
    return " ".join(out).replace("( ", "(").replace(" )", ")") or None


def classifier_license(classifiers: list[str]) -> str | None:
    """The SPDX expression the `License :: ...` classifiers name (several: AND), or None."""
    ids = []
    for c in classifiers:
        spdx = _CLASSIFIERS.get(c.removeprefix("License :: ").strip())
        if spdx and spdx not in ids:
            ids.append(spdx)
    if not ids:
        return None
    return " AND ".join(f"({i})" if " " in i else i for i in ids)


def license_of(metadata) -> tuple[str, str]:
    """(SPDX expression, the metadata field it came from) for one distribution's metadata;
    (UNKNOWN, "none") when no field names a license we can read."""
    expression = metadata.get("License-Expression")
    if expression and expression.strip():
        return normalize_license(expression) or _collapse(expression), "License-Expression"
    if spdx := normalize_license(metadata.get("License")):
        return spdx, "License"
    if spdx := classifier_license(metadata.get_all("Classifier") or []):
        return spdx, "Classifier"
    return UNKNOWN, "none"


# ---- evaluating an expression against the allowlist ----------------------------------------

def _tokens(expression: str) -> list[str]:
    return re.findall(r"\(|\)|[^\s()]+", expression)


def is_allowed(expression: str, allowed: set[str]) -> bool:
    """Whether `expression` passes: OR needs one side allowed, AND both, `X WITH E` the pair.
    `allowed` holds lower-case ids ("mit", "apache-2.0 with llvm-exception"). An expression
    that does not parse is not allowed."""
    tokens = _tokens(expression)
    pos = 0

    def peek() -> str | None:
        return tokens[pos].upper() if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("unexpected end")
        pos += 1
        return tokens[pos - 1]

    def any_of() -> bool:  # or-expression
        ok = all_of()
        while peek() == "OR":
            take()
            ok = all_of() or ok
        return ok

    def all_of() -> bool:  # and-expression
        ok = leaf()
        while peek() == "AND":
            take()
            ok = leaf() and ok
        return ok

    def leaf() -> bool:
        token = take()
        if token == "(":
            ok = any_of()
            if take() != ")":
                raise ValueError("expected )")
            return ok
        if token.upper() in _OPERATORS or token == ")":
            raise ValueError(f"unexpected {token}")
        if peek() == "WITH":
            take()
            token = f"{token} WITH {take()}"
        return token.upper() != UNKNOWN and token.lower() in allowed

    try:
        ok = any_of()
        return ok and pos == len(tokens)
    except ValueError:
        return False


# ---- the allowlist file --------------------------------------------------------------------

@dataclass
class Allowlist:
    """Allowed SPDX ids (lower-case) and per-package exceptions: name -> (license, reason)."""

    path: str
    allowed: set[str] = field(default_factory=set)
    exceptions: dict[str, tuple[str, str]] = field(default_factory=dict)


def default_allowlist_path() -> str:
    """The allowlist shipped inside the package."""
    return str(importlib.resources.files("inferx_compiler") / ALLOWLIST_RESOURCE)


def load_allowlist(path: str | None = None) -> Allowlist:
    """Read an allowlist: one SPDX id or `X WITH E` per line, `#` starts a comment; after a
    `[exceptions]` line, `NAME = SPDX-EXPRESSION ; reason` lines (the reason is required)."""
    path = path or default_allowlist_path()
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InferXError(f"{path}: cannot read the license allowlist ({e.strerror})") from None
    result, section = Allowlist(path), "licenses"
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip().lower()
            if section not in ("licenses", "exceptions"):
                raise InferXError(f"{path}:{number}: unknown section [{section}] "
                                  "(expected [licenses] or [exceptions])")
        elif section == "licenses":
            result.allowed.add(_collapse(line).lower())
        else:
            name, expression, reason = _exception_line(line, f"{path}:{number}")
            result.exceptions[name] = (expression, reason)
    return result


def _exception_line(line: str, where: str) -> tuple[str, str, str]:
    """`NAME = SPDX-EXPRESSION ; reason` -> (canonical name, expression, reason)."""
    name, eq, rest = line.partition("=")
    expression, semi, reason = rest.partition(";")
    if not (eq and semi and name.strip() and expression.strip() and reason.strip()):
        raise InferXError(f"{where}: an exception reads 'NAME = SPDX-EXPRESSION ; reason', "
                          f"got {line!r}")
    return canonicalize_name(name.strip()), _collapse(expression), _collapse(reason)


# ---- the environment -----------------------------------------------------------------------

def installed(paths: list[str] | None = None) -> dict[str, md.Distribution]:
    """Installed distributions by canonical name (the first on the path wins, as for imports),
    from sys.path or from the given directories."""
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions(**({"path": list(paths)} if paths else {})):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def provided_extras(dist: md.Distribution) -> set[str]:
    return {canonicalize_name(e) for e in dist.metadata.get_all("Provides-Extra") or []}


def _requirements(dist: md.Distribution) -> list[Requirement]:
    reqs = []
    for text in dist.requires or []:
        try:
            reqs.append(Requirement(text))
        except InvalidRequirement:
            continue  # a broken Requires-Dist line cannot name a distribution to check
    return reqs


def dependency_closure(index: dict[str, md.Distribution], root: str, extras=()
                       ) -> tuple[dict[str, md.Distribution], list[str]]:
    """({canonical name: distribution} for `root` and everything it requires, recursively,
    with `extras` of the root; markers are evaluated for this interpreter),
    and the requirements that are not installed ("name (required by X)")."""
    found: dict[str, md.Distribution] = {}
    missing: list[str] = []
    root = canonicalize_name(root)
    stack = [(root, "")] + [(root, canonicalize_name(e)) for e in extras]
    visited: set[tuple[str, str]] = set()
    while stack:
        name, extra = stack.pop()
        if (name, extra) in visited:
            continue
        visited.add((name, extra))
        dist = index.get(name)
        if dist is None:
            continue
        found[name] = dist
        for req in _requirements(dist):
            if not _applies(req, extra):
                continue
            dep = canonicalize_name(req.name)
            if dep not in index:
                text = f"{req.name} (required by {dist.metadata['Name']})"
                if text not in missing:
                    missing.append(text)
                continue
            stack.append((dep, ""))
            stack.extend((dep, canonicalize_name(e)) for e in req.extras)
    return found, missing


def _applies(req: Requirement, extra: str) -> bool:
    """Whether `req` is needed by its distribution's base ("") or by the extra `extra`."""
    if req.marker is None:
        return extra == ""
    return req.marker.evaluate({"extra": extra})


# ---- the audit -----------------------------------------------------------------------------

@dataclass
class Entry:
    """One distribution's verdict."""

    name: str
    version: str
    license: str
    source: str  # License-Expression, License, Classifier, exception (allowlist), none
    allowed: bool


def audit(dists: dict[str, md.Distribution], allowlist: Allowlist) -> list[Entry]:
    """An entry per distribution, sorted by name; an allowlist exception replaces the
    metadata's license with the one stated there."""
    entries = []
    for key, dist in dists.items():
        if key in allowlist.exceptions:
            spdx, source = allowlist.exceptions[key][0], "exception"
        else:
            spdx, source = license_of(dist.metadata)
        entries.append(Entry(dist.metadata["Name"], dist.version, spdx, source,
                             is_allowed(spdx, allowlist.allowed)))
    return sorted(entries, key=lambda e: canonicalize_name(e.name))


def format_table(entries: list[Entry]) -> str:
    """A readable table: name, version, SPDX license, allowed, where the license came from."""
    rows = [("NAME", "VERSION", "LICENSE", "ALLOWED", "FROM")]
    rows += [(e.name, e.version, e.license, "yes" if e.allowed else "NO", e.source)
             for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows)
