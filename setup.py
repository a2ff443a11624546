"""The build step pyproject.toml cannot declare: the console's `templates/` and `static/` live at the top of the
repository (where `make run`, Django's DIRS finders and the image's collectstatic read them), so the wheel's
build copies them into the `opsconsole` package (opsconsole/templates, opsconsole/static), where
`opsconsole.settings` looks first. Everything else is configured in pyproject.toml; MANIFEST.in puts both
folders in the sdist. An editable install leaves them where they are."""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: repository folder → where it goes inside the built packages
ASSETS = {"templates": "opsconsole/templates", "static": "opsconsole/static"}


class BuildPyWithAssets(build_py):
    """`build_py`, then the web assets copied into the build's `opsconsole` package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for source, target in ASSETS.items():
            if not (HERE / source).is_dir():
                raise SystemExit(f"setup.py: {source}/ is missing: the wheel would have no web console")
            self.copy_tree(str(HERE / source), str(Path(self.build_lib) / target))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            for source, target in ASSETS.items():
                outputs += [str(Path(self.build_lib) / target / p.relative_to(HERE / source))
                            for p in sorted((HERE / source).rglob("*")) if p.is_file()]
        return outputs


setup(cmdclass={"build_py": BuildPyWithAssets})
