"""A fresh virtual environment with only what a wheel declares, offline: the dependency closure of a list of
requirements (PEP 508 strings, e.g. a wheel's `Requires-Dist`), walked through the metadata of the distributions
installed in this repository's virtual environment, and those distributions' files linked into the fresh
environment's site-packages.

`closure` follows each requirement's own requirements (with the extras asked for, markers evaluated for this
interpreter); a requirement behind an extra nobody asked for (opsconsole's `dev`: pytest, helm, playwright…) is
not followed. `link_distributions` links each top-level entry of site-packages (a package, a module, a
`.dist-info`) whose every installed owner is in the closure, and the closure's own files one by one inside an entry
it shares with a distribution outside it (a namespace package such as `opentelemetry/`), so nothing the closure
does not own is importable there. A dependency missing from a wheel's requirements is then missing in the fresh
environment too, as it would be on a user's machine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name


class NotInstalled(LookupError):
    """A requirement of the closure that this repository's virtual environment does not have."""


def wheel_requirements(metadata_text: str) -> list[str]:
    """The `Requires-Dist` of a wheel's METADATA that apply without extras (the runtime's, not `dev`'s)."""
    requirements = [Requirement(r) for r in HeaderParser().parsestr(metadata_text).get_all("Requires-Dist") or []]
    return [str(r) for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def closure(requirements: Iterable[str], site: Path,
            exclude: Iterable[str] = ()) -> dict[NormalizedName, metadata.Distribution]:
    """Every distribution the requirements need, installed in `site`, by canonical name (`exclude`d names, e.g.
    the wheel's own, are neither included nor walked). NotInstalled names a requirement `site` lacks."""
    excluded = {canonicalize_name(n) for n in exclude}
    found: dict[NormalizedName, metadata.Distribution] = {}
    walked: set[tuple[NormalizedName, str]] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        requirement, needed_by = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in excluded:
            continue
        if name not in found:
            dist = next(iter(metadata.distributions(name=requirement.name, path=[str(site)])), None)
            if dist is None:
                raise NotInstalled(f"{requirement} (needed by {needed_by or 'the wheel'}) is not installed in {site}")
            found[name] = dist
        for extra in ("", *sorted(requirement.extras)):
            if (name, extra) in walked:
                continue
            walked.add((name, extra))
            for text in found[name].requires or []:
                sub = Requirement(text)
                if sub.marker is None or sub.marker.evaluate({"extra": extra}):
                    todo.append((sub, str(name)))
    return found


def _top(path: Path) -> str | None:
    """The site-packages entry a RECORD path lives under (None for a file outside site-packages, e.g. bin/)."""
    return None if path.parts[0] == ".." else path.parts[0]


def link_distributions(dists: Iterable[metadata.Distribution], site: Path, target: Path) -> list[str]:
    """Link the distributions' files from `site` into `target` (another site-packages). Returns the entries
    linked whole, sorted."""
    owners: dict[str, set[str]] = defaultdict(set)
    for dist in metadata.distributions(path=[str(site)]):  # RECORD read as text: dist.files is slow on thousands
        owner = canonicalize_name(dist.name)
        for line in (dist.read_text("RECORD") or "").splitlines():
            top = line.split(",", 1)[0].split("/", 1)[0]
            if top and top != "..":
                owners[top].add(owner)
    chosen = list(dists)
    names = {canonicalize_name(d.name) for d in chosen}
    whole: set[str] = set()
    for dist in chosen:
        if dist.files is None:
            raise NotInstalled(f"{dist.name} has no RECORD in {site}: its files are unknown")
        for file in dist.files:
            top = _top(Path(file))
            if top is None or not (site / top).exists():
                continue
            if owners[top] <= names:
                if top not in whole and not (target / top).exists():
                    (target / top).symlink_to(site / top)
                whole.add(top)
            elif (site / file).is_file() and not (target / file).exists():
                (target / file).parent.mkdir(parents=True, exist_ok=True)
                (target / file).symlink_to(site / file)
    return sorted(whole)
