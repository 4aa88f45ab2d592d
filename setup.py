"""The package list, derived from the tree: the repository root is the package ``membudget`` (pyproject.toml's
``package-dir``) and every folder below it holding an ``__init__.py`` is one of its subpackages, so a new subpackage
cannot be left out of the wheel. Everything else about the build lives in pyproject.toml."""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    """Leaves this file out of the root package: under PEP 517 builds distutils' own exclusion of the setup script
    compares against the build hook's ``argv[0]`` and keeps ``membudget/setup.py``."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir) if m[:2] != ("membudget", "setup")]


setup(
    packages=["membudget", *(f"membudget.{name}" for name in find_packages(exclude=["tests", "tests.*"]))],
    cmdclass={"build_py": BuildPy},
)
