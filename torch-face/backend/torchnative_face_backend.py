"""PEP 517 build backend of the torch face (standard library only).

The wheel it writes is the distribution `torch` (version from ../pyproject.toml), made of
  * every file of the pinned upstream wheel under torch/, torchgen/ and functorch/, byte for byte,
    except native binaries and C/C++ build material (torch/lib, torch/include, torch/share,
    torch/bin, and any .so/.a/.dll/.dylib/.pyd or ELF/ar file elsewhere);
  * ours: the package torchnative_face (torch-face/python: capture to the native runtime, test-time adaptation), torch/_C.abi3.so (crates/torch-c, built here with cargo), torch/lib/libtorch_global_deps.so
    (an empty shared library, compiled here with cc: upstream's torch/__init__.py loads it),
    torch/bin/torch_shm_manager (a script that says there is no shared-memory manager: upstream
    checks that the file exists) and the marker torch/_torchnative_face.json;
  * a .dist-info with upstream's entry points, top_level.txt and license files.

The upstream wheel is read straight from its zip after its sha256 is checked; it comes from
$TORCHNATIVE_TORCH_WHEEL, else $TORCHNATIVE_HOME/wheels/ (default ~/.cache/torchnative), where
scripts/fetch-torch-wheel.sh downloads it from PyPI when it is missing.

The face is built from the repository (the directory above torch-face/), so there is no sdist.
"""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

__all__ = [
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_wheel",
]

FACE_DIR = Path(__file__).resolve().parent.parent
ROOT = FACE_DIR.parent

# What of the upstream wheel the face takes, and what it leaves out.
VENDORED_TOPS = ("torch/", "torchgen/", "functorch/")
DROPPED_DIRS = ("torch/lib/", "torch/include/", "torch/share/", "torch/bin/")
_BINARY_NAME = re.compile(r"\.(so|so\.[0-9][0-9.]*|a|dll|dylib|pyd)$")
_BINARY_MAGIC = (b"\x7fELF", b"!<arch>\n")

# Our files inside the package.
EXTENSION = "torch/_C.abi3.so"
GLOBAL_DEPS = "torch/lib/libtorch_global_deps.so"
SHM_MANAGER = "torch/bin/torch_shm_manager"
MARKER = "torch/_torchnative_face.json"
# torchnative's own Python additions (capture to the native runtime, test-time adaptation), a
# top-level package beside torch, so upstream's tree stays unmodified.
OUR_PACKAGE = "torchnative_face"

SHM_MANAGER_SCRIPT = b"""#!/bin/sh
# torchnative's stand-in for PyTorch's torch_shm_manager (upstream's torch/__init__.py checks that
# this file exists). The torch face has no shared-memory manager, which only the 'file_system'
# sharing strategy uses; the default 'file_descriptor' strategy works without it.
echo "torch_shm_manager: torchnative has no shared-memory manager; the 'file_system' sharing strategy is not supported (the default 'file_descriptor' strategy is)" >&2
exit 1
"""

# Entries we write get a fixed timestamp, so that the same inputs give the same wheel.
_FIXED_DATE = (2020, 1, 1, 0, 0, 0)
_COMPRESSLEVEL = 1


class FaceBuildError(RuntimeError):
    """A build of the torch face that cannot go on; the message says why and what to do."""


def _log(msg: str) -> None:
    print(f"torchnative-face: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Configuration (../pyproject.toml)


def _config() -> tuple[dict, dict]:
    with open(FACE_DIR / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    return data["project"], data["tool"]["torchnative-face"]


def _profile(config_settings: dict | None) -> str:
    profile = (config_settings or {}).get("profile") or os.environ.get("TORCHNATIVE_FACE_PROFILE") or "release"
    if not re.fullmatch(r"[A-Za-z0-9_-]+", profile):
        raise FaceBuildError(f"invalid cargo profile {profile!r} (TORCHNATIVE_FACE_PROFILE or config setting 'profile')")
    return profile


def _check_interpreter() -> None:
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        raise FaceBuildError(
            "the torch face needs CPython >= 3.11 (its torch._C is a CPython abi3 extension); "
            f"this is {sys.implementation.name} {sys.version.split()[0]}"
        )


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _names(project: dict) -> tuple[str, str, str]:
    """(wheel file name, .dist-info directory, tag)."""
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    version = project["version"]
    tag = f"cp311-abi3-{_platform_tag()}"
    return f"{name}-{version}-{tag}.whl", f"{name}-{version}.dist-info", tag


# --------------------------------------------------------------------------------------------
# The upstream wheel


def _home() -> Path:
    return Path(os.environ.get("TORCHNATIVE_HOME") or Path.home() / ".cache" / "torchnative")


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _upstream_wheel(tool: dict) -> Path:
    """The pinned upstream wheel, fetched if missing, its sha256 checked."""
    name, want = tool["upstream-wheel"], tool["upstream-sha256"]
    override = os.environ.get("TORCHNATIVE_TORCH_WHEEL")
    if override:
        path = Path(override)
        if not path.is_file():
            raise FaceBuildError(f"TORCHNATIVE_TORCH_WHEEL={override}: no such file (it should be the pinned {name})")
    else:
        path = _home() / "wheels" / name
        if not path.is_file():
            _fetch_upstream_wheel(name)
            if not path.is_file():
                raise FaceBuildError(f"scripts/fetch-torch-wheel.sh did not leave {path}")
    start = time.monotonic()
    got = _sha256_file(path)
    if got != want:
        raise FaceBuildError(
            f"sha256 mismatch for the upstream wheel {path}: got {got}, want {want} "
            f"(delete it and run scripts/fetch-torch-wheel.sh)"
        )
    _log(f"upstream wheel {path} (sha256 checked in {time.monotonic() - start:.1f}s)")
    return path


def _fetch_upstream_wheel(name: str) -> None:
    script = ROOT / "scripts" / "fetch-torch-wheel.sh"
    if not script.is_file():
        raise FaceBuildError(f"{script} not found: the torch face is built from the torchnative repository")
    _log(f"{name} is not cached: downloading it from PyPI with {script} (about 540 MB, once)")
    # pip's build isolation hides this interpreter's site-packages (and with them pip) from child
    # processes through PYTHONPATH; the download needs them back.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")}
    env.setdefault("PYTHON", sys.executable)
    sys.stdout.flush()
    result = subprocess.run(["bash", str(script)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise FaceBuildError(
            f"downloading the upstream wheel {name} failed (scripts/fetch-torch-wheel.sh exited with "
            f"{result.returncode}; its output is above); run scripts/fetch-torch-wheel.sh by hand, or point "
            "TORCHNATIVE_TORCH_WHEEL at a copy of the wheel"
        )


def is_vendored(name: str) -> bool:
    """Whether the upstream wheel's member `name` belongs in the face (judged by its name)."""
    if name.endswith("/") or not name.startswith(VENDORED_TOPS) or name.startswith(DROPPED_DIRS):
        return False
    return not _BINARY_NAME.search(name)


def is_native_binary(data: bytes) -> bool:
    return data.startswith(_BINARY_MAGIC)


def _upstream_dist_info(src: zipfile.ZipFile) -> str:
    dirs = {n.split("/", 1)[0] for n in src.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
    if len(dirs) != 1:
        raise FaceBuildError(f"the upstream wheel has {len(dirs)} .dist-info directories: {sorted(dirs)}")
    return dirs.pop()


# --------------------------------------------------------------------------------------------
# Metadata


def _metadata_files(project: dict, tool: dict, src: zipfile.ZipFile) -> dict[str, bytes]:
    """The .dist-info files other than RECORD, keyed by their path inside the .dist-info."""
    _, _, tag = _names(project)
    up = _upstream_dist_info(src)
    up_meta = email.parser.BytesHeaderParser().parsebytes(src.read(f"{up}/METADATA"))

    lines = [
        "Metadata-Version: 2.4",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
    ]
    if up_meta["License-Expression"]:
        lines.append(f"License-Expression: {up_meta['License-Expression']}")
    lines += [f"License-File: {f}" for f in up_meta.get_all("License-File") or []]
    lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {r}" for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for r in reqs:
            req, _, marker = r.partition(";")
            marker = f"({marker.strip()}) and " if marker.strip() else ""
            lines.append(f'Requires-Dist: {req.strip()}; {marker}extra == "{extra}"')
    lines += [
        "Description-Content-Type: text/plain",
        "",
        "The torch face of torchnative: the Python package of upstream PyTorch "
        f"({tool['upstream-wheel']}, sha256 {tool['upstream-sha256']}), its .py tree unmodified, "
        "running on torchnative's own Rust extension module torch._C.",
        "",
    ]
    files = {
        "METADATA": "\n".join(lines).encode(),
        "WHEEL": (
            "Wheel-Version: 1.0\n"
            "Generator: torchnative_face_backend\n"
            "Root-Is-Purelib: false\n"
            f"Tag: {tag}\n"
        ).encode(),
    }
    for name in ("entry_points.txt", "top_level.txt"):
        if f"{up}/{name}" in src.namelist():
            files[name] = src.read(f"{up}/{name}")
    files["entry_points.txt"] = _with_our_backend(files.get("entry_points.txt", b""))
    for info in src.infolist():
        if info.filename.startswith(f"{up}/licenses/") and not info.is_dir():
            files[info.filename[len(up) + 1 :]] = src.read(info)
    return files


def _with_our_backend(entry_points: bytes) -> bytes:
    """Upstream's entry points plus torchnative's c10d backend, which upstream's
    `Backend._ensure_backend_registered` loads when a process asks for `torchnative` by name."""
    line = b"torchnative = torch._C._distributed_c10d:_register_torchnative_backend\n"
    section = b"[torch.distributed.backends]\n"
    if section not in entry_points:
        return entry_points.rstrip(b"\n") + b"\n\n" + section + line
    return entry_points.replace(section, section + line, 1)


def _marker(tool: dict) -> bytes:
    marker = {"torchnative": True, "upstream_wheel": tool["upstream-wheel"], "upstream_sha256": tool["upstream-sha256"]}
    return (json.dumps(marker, indent=2) + "\n").encode()


# --------------------------------------------------------------------------------------------
# Our native files


def _find_cargo() -> str:
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo and (Path.home() / ".cargo" / "bin" / "cargo").is_file():
        cargo = str(Path.home() / ".cargo" / "bin" / "cargo")
    if not cargo:
        raise FaceBuildError(
            "cargo not found: the torch face builds its torch._C from the Rust crate crates/torch-c "
            "with cargo (install Rust, e.g. with rustup, or point $CARGO at cargo)"
        )
    return cargo


def _build_extension(cargo: str, tool: dict, profile: str) -> Path:
    """Builds crates/torch-c with cargo (its output streamed to stderr); returns the cdylib."""
    package, lib = tool["cargo-package"], tool["cargo-lib-name"]
    cmd = [cargo, "build", "-p", package, "--profile", profile, "--message-format=json-render-diagnostics"]
    _log(f"building torch._C: {shlex.join(cmd)} (in {ROOT})")
    start = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    artifact = None
    try:
        # Diagnostics and progress go to our stderr as cargo writes them; stdout carries cargo's
        # JSON messages, which name the file it built.
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    except OSError as e:
        raise FaceBuildError(f"could not run cargo ({cmd[0]}): {e}") from e
    with proc:
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                sys.stderr.write(line)
                continue
            target = msg.get("target") or {}
            if msg.get("reason") == "compiler-artifact" and target.get("name") == lib and "cdylib" in target.get("kind", []):
                artifact = next((Path(f) for f in msg.get("filenames", []) if f.endswith(".so")), artifact)
    if proc.returncode != 0:
        raise FaceBuildError(
            f"building torch._C failed: `{shlex.join(cmd)}` exited with status {proc.returncode} "
            "(cargo's output is above; pip shows it with -v)"
        )
    if artifact is None:
        target_dir = Path(os.environ.get("CARGO_TARGET_DIR") or "target")
        target_dir = target_dir if target_dir.is_absolute() else ROOT / target_dir
        artifact = target_dir / {"dev": "debug", "test": "debug", "bench": "release"}.get(profile, profile) / f"lib{lib}.so"
    if not artifact.is_file():
        raise FaceBuildError(f"cargo succeeded but {artifact} (the {package} cdylib) is missing")
    _log(f"built {artifact} in {time.monotonic() - start:.1f}s")
    return artifact


def _find_cc() -> list[str]:
    cc = shlex.split(os.environ.get("CC") or "cc")
    if not cc or not shutil.which(cc[0]):
        raise FaceBuildError(
            f"C compiler {cc[0] if cc else '(empty $CC)'!r} not found: the torch face needs one (cc, or $CC) to "
            "write torch/lib/libtorch_global_deps.so, the empty shared library upstream's torch/__init__.py loads"
        )
    return cc


def _empty_shared_library(cc: list[str], out: Path) -> None:
    cmd = cc + ["-shared", "-fPIC", "-o", str(out), "-x", "c", "/dev/null"]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0 or not out.is_file():
        raise FaceBuildError(f"`{shlex.join(cmd)}` failed (status {result.returncode}):\n{result.stdout}")


# --------------------------------------------------------------------------------------------
# The wheel


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(
    path: Path, project: dict, tool: dict, src: zipfile.ZipFile, ours: dict[str, tuple[bytes, int]]
) -> dict[str, int]:
    _, dist_info, _ = _names(project)
    record: list[tuple[str, str, str]] = []
    counts = {"upstream": 0, "dropped": 0}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=_COMPRESSLEVEL) as out:

        def add(name: str, data: bytes, mode: int = 0o644, date_time=_FIXED_DATE) -> None:
            info = zipfile.ZipInfo(name, date_time)
            info.create_system = 3
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, data, compresslevel=_COMPRESSLEVEL)
            record.append((name, _record_hash(data), str(len(data))))

        for info in src.infolist():
            if info.is_dir() or not info.filename.startswith(VENDORED_TOPS):
                continue
            if not is_vendored(info.filename):
                counts["dropped"] += 1
                continue
            data = src.read(info)
            if is_native_binary(data):
                counts["dropped"] += 1
                continue
            add(info.filename, data, (info.external_attr >> 16) & 0o777 or 0o644, info.date_time)
            counts["upstream"] += 1
        for name, (data, mode) in ours.items():
            add(name, data, mode)
        for name, data in _metadata_files(project, tool, src).items():
            add(f"{dist_info}/{name}", data)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows(record)
        writer.writerow((f"{dist_info}/RECORD", "", ""))
        add(f"{dist_info}/RECORD", buf.getvalue().encode())
    return counts


# --------------------------------------------------------------------------------------------
# PEP 517 hooks


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _check_interpreter()
    project, tool = _config()
    _, dist_info, _ = _names(project)
    with zipfile.ZipFile(_upstream_wheel(tool)) as src:
        files = _metadata_files(project, tool, src)
    for name, data in files.items():
        path = Path(metadata_directory) / dist_info / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _check_interpreter()
    project, tool = _config()
    profile = _profile(config_settings)
    wheel_name, _, _ = _names(project)
    # What is missing is reported before anything long (a download, a cargo build) starts.
    if not (ROOT / "Cargo.toml").is_file():
        raise FaceBuildError(f"{ROOT / 'Cargo.toml'} not found: the torch face is built from the torchnative repository")
    cargo, cc = _find_cargo(), _find_cc()
    upstream = _upstream_wheel(tool)
    with tempfile.TemporaryDirectory(prefix="torchnative-face-") as tmp:
        global_deps = Path(tmp) / "libtorch_global_deps.so"
        _empty_shared_library(cc, global_deps)
        extension = _build_extension(cargo, tool, profile)
        start = time.monotonic()
        ours = {
            EXTENSION: (extension.read_bytes(), 0o755),
            GLOBAL_DEPS: (global_deps.read_bytes(), 0o755),
            SHM_MANAGER: (SHM_MANAGER_SCRIPT, 0o755),
            MARKER: (_marker(tool), 0o644),
        }
        for source in sorted((FACE_DIR / "python" / OUR_PACKAGE).glob("*.py")):
            ours[f"{OUR_PACKAGE}/{source.name}"] = (source.read_bytes(), 0o644)
    out = Path(wheel_directory) / wheel_name
    part = out.with_name(out.name + ".part")
    try:
        with zipfile.ZipFile(upstream) as src:
            counts = _write_wheel(part, project, tool, src, ours)
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
    _log(
        f"wrote {out} ({counts['upstream']} upstream files, {counts['dropped']} native/build files left out, "
        f"{len(ours)} of ours) in {time.monotonic() - start:.1f}s"
    )
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    raise FaceBuildError(
        "the torch face has no sdist: it is built from the torchnative repository (its Rust crates and "
        "the pinned upstream wheel); build a wheel instead (`pip install ./torch-face`, "
        "`pip wheel ./torch-face` or `python -m build --wheel torch-face`)"
    )
