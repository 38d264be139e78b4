"""pip install ./python: setuptools drives CMake on the nnlens source tree (the folder above this
one) to build the extension nnlens._core, and installs it with the pure-Python package.

No network is needed with --no-build-isolation: the build uses this interpreter's setuptools and
numpy and Debian's pybind11-dev, xtensor, ONNX and protobuf.  In a virtualenv, make it with
--system-site-packages so that numpy is there:

    python3 -m venv --system-site-packages venv && venv/bin/pip install --no-build-isolation ./python

NNLENS_SOURCE_DIR: the nnlens tree (default: ..); NNLENS_JOBS: build jobs (default 2);
NNLENS_CMAKE_ARGS: extra configure arguments.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("NNLENS_SOURCE_DIR", HERE.parent)).resolve()


def version() -> str:
    m = re.search(r"project\(nnlens VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    return m.group(1) if m else "0.0.0"


class CMakeBuild(build_ext):
    """Configures the nnlens tree with only the Python package on, builds nnlens_python, and puts
    its _core module where setuptools installs the package from."""

    def build_extension(self, ext: Extension) -> None:
        out = Path(self.get_ext_fullpath(ext.name)).resolve()
        tree = Path(self.build_temp).resolve() / "cmake"
        args = [f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release", "-DNNLENS_BUILD_PYTHON=ON",
                "-DNNLENS_BUILD_TESTS=OFF", "-DNNLENS_BUILD_EXAMPLES=OFF", "-DNNLENS_BUILD_TOOLS=OFF",
                "-DNNLENS_BUILD_BENCHMARKS=OFF", "-DNNLENS_WITH_THRUST=OFF", "-DNNLENS_WITH_MPI=OFF"]
        args += shlex.split(os.environ.get("NNLENS_CMAKE_ARGS", ""))
        gen = ["-G", "Ninja"] if subprocess.run(["ninja", "--version"], capture_output=True).returncode == 0 else []
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tree), *gen, *args], check=True)
        subprocess.run(["cmake", "--build", str(tree), "--target", "nnlens_python", "--parallel",
                        os.environ.get("NNLENS_JOBS", "2")], check=True)
        built = next((tree / "python" / "nnlens").glob("_core*.so"), None)
        if built is None:
            raise RuntimeError(f"the nnlens extension was not built in {tree} (see CMake's messages above)")
        out.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), str(out))


setup(
    name="nnlens",
    version=version(),
    description="Analyses of trained piecewise-linear neural networks: ExactLine, NNSlicer, DeepImportance, "
                "NeuSemSlice, DFlare",
    packages=["nnlens"],
    package_dir={"nnlens": "nnlens"},
    package_data={"nnlens": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("nnlens._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
