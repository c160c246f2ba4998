"""The installed torch face holds upstream's files byte for byte, and of native code only ours.

Run with the face venv's python (scripts/face-venv.sh prints it). Nothing here imports torch: the
installed package is found with importlib.util.find_spec, which does not run torch/__init__.py.

The pinned upstream wheel comes from $TORCHNATIVE_TORCH_WHEEL, else
$TORCHNATIVE_HOME/wheels/ (default ~/.cache/torchnative; scripts/fetch-torch-wheel.sh puts it
there). Without it the tests skip, unless TORCHNATIVE_REQUIRE_ORACLE is set: then they fail.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import tomllib
import zipfile
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
VERSION = "2.15.0+torchnative"
VENDORED_TOPS = ("torch/", "torchgen/", "functorch/")
# Upstream's native binaries and C/C++ build material: none of it belongs in the face.
DROPPED_DIRS = ("torch/lib/", "torch/include/", "torch/share/", "torch/bin/")
BINARY_NAME = re.compile(r"\.(so|so\.[0-9][0-9.]*|a|dll|dylib|pyd)$")
# Our files: the extension, the two placeholders upstream's torch/__init__.py needs, the marker.
OURS = {
    "torch/_C.abi3.so",
    "torch/lib/libtorch_global_deps.so",
    "torch/bin/torch_shm_manager",
    "torch/_torchnative_face.json",
}


def _pin() -> dict:
    with open(PYPROJECT, "rb") as f:
        return tomllib.load(f)["tool"]["torchnative-face"]


def _is_vendored(name: str) -> bool:
    if name.endswith("/") or not name.startswith(VENDORED_TOPS) or name.startswith(DROPPED_DIRS):
        return False
    return not BINARY_NAME.search(name)


@pytest.fixture(scope="module")
def pin() -> dict:
    return _pin()


@pytest.fixture(scope="module")
def upstream(pin):
    """The pinned upstream wheel, its sha256 checked."""
    override = os.environ.get("TORCHNATIVE_TORCH_WHEEL")
    if override:
        path = Path(override)
    else:
        home = Path(os.environ.get("TORCHNATIVE_HOME") or Path.home() / ".cache" / "torchnative")
        path = home / "wheels" / pin["upstream-wheel"]
    if not path.is_file():
        msg = f"the pinned upstream wheel {path} is missing (scripts/fetch-torch-wheel.sh fetches it)"
        if os.environ.get("TORCHNATIVE_REQUIRE_ORACLE"):
            pytest.fail(msg + "; TORCHNATIVE_REQUIRE_ORACLE is set")
        pytest.skip(msg)
    with open(path, "rb") as f:
        got = hashlib.file_digest(f, "sha256").hexdigest()
    assert got == pin["upstream-sha256"], f"sha256 mismatch for {path}: got {got}, want {pin['upstream-sha256']}"
    with zipfile.ZipFile(path) as z:
        yield z


@pytest.fixture(scope="module")
def site() -> Path:
    """The directory the face is installed in (the parent of torch/), found without importing torch."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "no torch package is installed"
    locations = list(spec.submodule_search_locations)
    assert len(locations) == 1, f"torch is a namespace package spread over {locations}"
    torch_dir = Path(locations[0]).resolve()
    assert (torch_dir / "__init__.py").is_file(), f"{torch_dir} has no __init__.py"
    assert PYPROJECT.parent not in torch_dir.parents, f"torch resolves to the source tree ({torch_dir}), not an install"
    return torch_dir.parent


def _installed_files(site: Path) -> set[str]:
    files = set()
    for top in VENDORED_TOPS:
        for path in (site / top).rglob("*"):
            rel = path.relative_to(site).as_posix()
            if path.is_dir() or "__pycache__" in path.parts:
                continue
            files.add(rel)
    return files


def test_every_upstream_py_file_is_installed_byte_for_byte(upstream, site):
    py = [i for i in upstream.infolist() if i.filename.startswith(VENDORED_TOPS) and i.filename.endswith(".py")]
    assert len(py) > 2000, f"only {len(py)} .py files in the upstream wheel"
    missing, differ = [], []
    for info in py:
        installed = site / info.filename
        if not installed.is_file():
            missing.append(info.filename)
        elif installed.read_bytes() != upstream.read(info):
            differ.append(info.filename)
    assert not missing, f"{len(missing)} upstream .py files not installed, e.g. {missing[:5]}"
    assert not differ, f"{len(differ)} installed .py files differ from upstream, e.g. {differ[:5]}"


def test_every_vendored_data_file_is_installed_byte_for_byte(upstream, site):
    # Templates, .pyi stubs, yaml (torchgen's native_functions.yaml), the .cpp/.h files Python code
    # reads as data (torch/_inductor/codegen/aoti_runtime/interface.cpp), ...
    data = [i for i in upstream.infolist() if _is_vendored(i.filename) and not i.filename.endswith(".py")]
    names = {i.filename for i in data}
    for must in (
        "torchgen/packaged/ATen/native/native_functions.yaml",
        "torch/_inductor/codegen/aoti_runtime/interface.cpp",
        "torch/_C/__init__.pyi",
    ):
        assert must in names
    differ = [i.filename for i in data if not (site / i.filename).is_file() or (site / i.filename).read_bytes() != upstream.read(i)]
    assert not differ, f"{len(differ)} vendored upstream files missing or different, e.g. {differ[:5]}"


def test_installed_files_are_upstream_or_ours(upstream, site):
    expected = {n for n in upstream.namelist() if _is_vendored(n)} | OURS
    extra = sorted(_installed_files(site) - expected)
    assert not extra, f"{len(extra)} installed files are neither upstream's nor ours, e.g. {extra[:10]}"


def test_no_upstream_native_library_is_installed(upstream, site):
    native = sorted(f for f in _installed_files(site) if BINARY_NAME.search(f))
    assert native == sorted(f for f in OURS if f.endswith(".so")), native
    assert not list((site / "torch").glob("_C.cpython-*.so"))
    assert not (site / "torch/lib/libtorch_cpu.so").exists()
    for dropped in ("torch/include", "torch/share"):
        assert not (site / dropped).exists(), f"{dropped} is installed"
    # Our placeholders are not upstream's files of the same names.
    for name in ("torch/lib/libtorch_global_deps.so", "torch/bin/torch_shm_manager"):
        assert (site / name).read_bytes() != upstream.read(name), f"{name} is upstream's"
    shm = site / "torch/bin/torch_shm_manager"
    assert os.access(shm, os.X_OK) and shm.read_bytes().startswith(b"#!"), "torch_shm_manager is not an executable script"


def test_marker(site, pin):
    marker = json.loads((site / "torch/_torchnative_face.json").read_text())
    assert marker == {"torchnative": True, "upstream_wheel": pin["upstream-wheel"], "upstream_sha256": pin["upstream-sha256"]}


def test_distribution_metadata(site):
    assert importlib.metadata.version("torch") == VERSION
    dists = [d for d in importlib.metadata.distributions() if (d.metadata["Name"] or "").lower() == "torch"]
    assert len(dists) == 1, f"{len(dists)} torch distributions are installed: {[d.version for d in dists]}"
    dist = dists[0]
    assert Path(dist.locate_file("torch")).resolve() == (site / "torch").resolve()
    # Nothing upstream-native (CUDA wheels, triton) is required.
    requires = dist.requires or []
    assert not [r for r in requires if re.match(r"(nvidia-|cuda-|triton)", r)], requires
