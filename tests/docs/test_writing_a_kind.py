"""docs/writing-a-kind.md, executed: every `console` block marked `<!-- guide: run -->` runs in a temporary
directory (its `$ ` lines in order; the lines after a command are text its output must contain), and every code
block marked `<!-- guide: edit FILE after|replace "ANCHOR" -->` or `<!-- guide: append FILE -->` is applied to
the file the guide says, so the guide cannot rot. Doc checks hold what it must say: every annotation the engine
names, kubesim's failure markers (in healing.md too), the plugin's fixtures, a kind in its own repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "writing-a-kind.md"
MARK = re.compile(r"<!-- guide: (?P<what>run|edit|append)(?P<rest>[^>]*)-->\n```(?P<lang>\w+)\n(?P<body>.*?)\n```",
                  re.S)
EDIT = re.compile(r'^\s*(?P<file>\S+) (?P<how>after|replace) "(?P<anchor>[^"]+)"\s*$')


@dataclass
class Step:
    what: str
    target: str = ""
    how: str = ""
    anchor: str = ""
    body: str = ""
    commands: list[tuple[str, list[str]]] = field(default_factory=list)


def steps() -> list[Step]:
    out = []
    for m in MARK.finditer(GUIDE.read_text()):
        if m["what"] == "run":
            step = Step("run")
            for line in m["body"].splitlines():
                if line.startswith("$ "):
                    step.commands.append((line[2:], []))
                elif line.strip():
                    step.commands[-1][1].append(line.strip())
        elif m["what"] == "edit":
            edit = EDIT.match(m["rest"])
            assert edit, f"bad edit marker: {m['rest']!r}"
            step = Step("edit", edit["file"], edit["how"], edit["anchor"], m["body"])
        else:
            step = Step("append", m["rest"].strip(), body=m["body"])
        out.append(step)
    return out


def apply_edit(path: Path, step: Step) -> None:
    text = path.read_text()
    assert step.anchor in text, f"{path}: the guide's anchor {step.anchor!r} is not in the file"
    if step.how == "after":
        start = text.index(step.anchor)
        end = text.index("\n", start) + 1
        path.write_text(text[:end] + step.body + "\n" + text[end:])
    else:  # replace the top-level definition that starts with the anchor
        start = text.index(step.anchor)
        following = re.search(r"\n\n\n(?=\S)", text[start:])
        end = start + following.start() if following else len(text)
        path.write_text(text[:start] + step.body + text[end:])


def test_the_guide_has_steps_of_each_kind():
    kinds = [s.what for s in steps()]
    assert kinds.count("run") >= 3 and "edit" in kinds and "append" in kinds


@pytest.mark.integration
@pytest.mark.long_unit
def test_the_guide_runs_as_written(tmp_path):
    (tmp_path / "manage.py").symlink_to(ROOT / "manage.py")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "OPSCONSOLE_RECONCILERS", "PYTEST_ADDOPTS", "PYTHONPATH",
                        "DATABASE_URL")}  # the generated rollback test's engine records into its own SQLite file
    env.update(PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}", PYTHONPATH=str(tmp_path),
               OPSCONSOLE_DATA_DIR=str(tmp_path / "data"), PYTEST_ADDOPTS="-p no:cacheprovider")
    for step in steps():
        if step.what == "edit":
            apply_edit(tmp_path / step.target, step)
            continue
        if step.what == "append":
            with (tmp_path / step.target).open("a") as f:
                f.write(step.body + "\n")
            continue
        for command, expected in step.commands:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=180)
            output = done.stdout + done.stderr
            assert done.returncode == 0, f"$ {command}\n{output}"
            for line in expected:
                assert line in output, f"$ {command}: {line!r} not in its output:\n{output}"
    kind = (tmp_path / "website" / "kind.py").read_text()
    assert "GREETING" in kind and "greeting: str" in kind


# -- what a kind author meets, documented (doc checks) ------------------------------------------------------------

HEALING = ROOT / "docs" / "healing.md"
KUBESIM_README = ROOT / "kubesim" / "README.md"


def engine_annotations() -> set[str]:
    """Every `opsconsole.io/...` annotation the engine's code names."""
    found = set()
    for path in (ROOT / "reconcilers").rglob("*.py"):
        if "migrations" not in path.parts:
            found |= set(re.findall(r'"(opsconsole\.io/[a-z][a-z0-9-]*)"', path.read_text()))
    return found


def test_the_guide_names_every_annotation_the_engine_writes_or_reads():
    guide = GUIDE.read_text()
    annotations = engine_annotations()
    assert "opsconsole.io/applied-digest" in annotations
    assert [a for a in sorted(annotations) if f"`{a}`" not in guide] == []


def test_kubesims_failure_markers_are_in_the_guide_and_healing_with_a_link_to_kubesims_readme():
    from kubesim.options import KubeletOptions

    defaults = KubeletOptions()
    guide, healing = GUIDE.read_text(), HEALING.read_text()
    for marker in [*defaults.broken_image_markers, *defaults.crash_image_markers]:
        assert f"`{marker}`" in guide and f"`{marker}`" in healing, marker
    link = "../kubesim/README.md#broken-images-crash-loops-and-events"
    assert link in guide and link in healing
    assert "### Broken images, crash loops and Events" in KUBESIM_README.read_text()
    assert "writing-a-kind.md#kubesims-failure-markers" in healing and "### kubesim's failure markers" in guide
    assert "`nginx:does-not-exist` runs" in guide  # the one a newcomer tries first


def test_the_guide_documents_the_plugins_fixtures_and_errors():
    guide = GUIDE.read_text()
    for name in ("update_spec(obj, **changes)", "kubesim_faults", "fail_image_pull(", "crash_loop(", "SpecRejected",
                 "reconcile_until(sample(replicas=3)"):
        assert name in guide, name


def test_the_guide_says_kubectl_explain_works_and_that_workers_restart_for_new_code():
    guide = GUIDE.read_text()
    assert "kubesim does not yet" not in guide and "explain websites.spec` shows the fields" in guide
    assert "after changing its code, restart them" in guide


def test_the_guide_has_a_section_for_a_kind_in_its_own_repository():
    guide = GUIDE.read_text()
    section = guide[guide.index("## 7. Your kind in its own repository"):guide.index("## What a kind declares")]
    for needed in ("python -m build", "--project", "ci.sh", "FROM ${OPSCONSOLE_IMAGE}", "--no-deps",
                   "PIP_FIND_LINKS", "opsconsole crds Website", "tests/packaging/test_wheel.py"):
        assert needed in section, needed
    assert "(#7-your-kind-in-its-own-repository)" in guide
