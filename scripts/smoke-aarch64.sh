#!/usr/bin/env bash
# Smoke run of what we ship for aarch64, under qemu-user on an x86_64 machine:
#   1. the `torchnative` CLI cross-built with the Debian cross gcc (as scripts/test-aarch64.sh
#      builds its tests), run on the default model;
#   2. the Python wheel for manylinux_2_17_aarch64, built by maturin with zig (the Debian cross
#      gcc links against glibc 2.36, zig can target 2.17), its tag and glibc symbols checked;
#   3. that wheel imported by Debian's arm64 CPython (unpacked into a private root, never
#      installed) and run on the default model.
# Greedy tokens of both must equal the x86 CLI's for the same prompts and options.
# Idempotent: tools, the arm64 CPython root and the builds are cached under $TORCHNATIVE_HOME
# and target/, so a second run only re-checks and re-runs the smoke prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
home="$TORCHNATIVE_HOME"
model="${TORCHNATIVE_MODEL:-$(scripts/fetch-model.sh)}"
python="${PYTHON:-python3}"
triple=aarch64-unknown-linux-gnu

apt_install() {
  # A fresh machine may have no package lists yet.
  apt-get install -y "$@" >&2 || { apt-get update >&2 && apt-get install -y "$@" >&2; }
}
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  apt_install qemu-user gcc-aarch64-linux-gnu
fi
command -v file >/dev/null || apt_install file
if ! rustup target list --installed | grep -qx "$triple"; then
  rustup target add "$triple" >&2
fi
sysroot=/usr/aarch64-linux-gnu
[ -d "$sysroot/lib" ] || sysroot="$(aarch64-linux-gnu-gcc -print-sysroot)"
qemu=(qemu-aarch64 -L "$sysroot")

# Greedy, 2 threads, few tokens: qemu runs the model ~30-70x slower than the host.
opts=(--json --temperature 0 --threads 2 --max-tokens 8)
raw_prompt="The capital of France is"
chat_prompt="What is the capital of France?"
# The part of a CLI --json answer that must not depend on the machine (timings do).
answer() {
  "$python" -c 'import json, sys; d = json.load(sys.stdin)
print(json.dumps([d["tokens"], d["text"], d["finish_reason"], d["usage"]["prompt_tokens"]]))'
}
same() { # what, x86 line, aarch64 line
  if [ "$2" != "$3" ]; then
    printf 'smoke-aarch64: %s differs from x86\n  x86:     %s\n  aarch64: %s\n' "$1" "$2" "$3" >&2
    exit 1
  fi
  printf 'smoke-aarch64: %-12s %s\n' "$1" "$3"
}

# --- 1. The CLI ---------------------------------------------------------------------------
# The x86 reference, with the profile and target dir scripts/test.sh's `cargo test` uses (so
# there it is already built).
x86_dir="${CARGO_TARGET_DIR:-target}"
cargo build --profile ci -p torchnative-cli >&2
x86_cli="$x86_dir/ci/torchnative"
# Same environment as scripts/test-aarch64.sh, so the two share target/aarch64.
a64_dir="${CARGO_TARGET_DIR:-target/aarch64}"
CARGO_TARGET_DIR="$a64_dir" CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  cargo build --target "$triple" --profile ci -p torchnative-cli >&2
a64_cli="$a64_dir/$triple/ci/torchnative"
file -L "$a64_cli" | grep -q 'ELF 64-bit LSB .*ARM aarch64' \
  || { echo "smoke-aarch64: $a64_cli is not an aarch64 ELF: $(file -L "$a64_cli")" >&2; exit 1; }

"${qemu[@]}" "$a64_cli" info "$model"
# Owned weight bytes (and the memory estimate built on them) depend on the CPU: x86 with
# AVX-512 VNNI keeps an interleaved copy of Q4_0/Q4_1/Q8_0 matrices for its kernels.
portable_info() {
  python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in [k for k in v if k == "owned_weight_bytes" or k.startswith("estimated_memory")]:
    del v[k]
print(json.dumps(v, sort_keys=True))'
}
x86_info="$("$x86_cli" info --json "$model" | portable_info)"
[ "$x86_info" = "$("${qemu[@]}" "$a64_cli" info --json "$model" | portable_info)" ] \
  || { echo "smoke-aarch64: info --json differs from x86" >&2; exit 1; }
echo "smoke-aarch64: info --json   same as x86 (${#x86_info} bytes)"
x86_raw="$("$x86_cli" run "$model" "$raw_prompt" --raw "${opts[@]}" | answer)"
x86_chat="$("$x86_cli" run "$model" "$chat_prompt" "${opts[@]}" | answer)"
same "cli raw" "$x86_raw" "$("${qemu[@]}" "$a64_cli" run "$model" "$raw_prompt" --raw "${opts[@]}" | answer)"
same "cli chat" "$x86_chat" "$("${qemu[@]}" "$a64_cli" run "$model" "$chat_prompt" "${opts[@]}" | answer)"

# --- 2. The wheel -------------------------------------------------------------------------
# maturin, zig (from PyPI) and auditwheel in a venv of their own; pinned, as they are known
# to work together.
tools="$home/aarch64-tools-venv"
tool_pins=("maturin==1.16.0" "ziglang==0.17.1" "auditwheel==6.8.2")
if [ "$(cat "$tools/.pins" 2>/dev/null)" != "${tool_pins[*]}" ]; then
  rm -rf "$tools"
  "$python" -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --upgrade pip >&2
  "$tools/bin/python" -m pip install --quiet "${tool_pins[@]}" >&2
  echo "${tool_pins[*]}" > "$tools/.pins"
fi
# Its own target dir: cargo fingerprints the linker, so zig-linked and gcc-linked builds
# sharing target/aarch64 would rebuild each other's units every time.
wheel_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}/aarch64-zig")"
rm -rf "$wheel_dir/wheels"
# maturin reads python/pyproject.toml (crate path, module name, profile ci) from there.
(cd python && PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$wheel_dir" \
  maturin build --target "$triple" --zig --compatibility manylinux2014 --out "$wheel_dir/wheels") >&2
wheel="$(ls "$wheel_dir"/wheels/torchnative-*.whl)"
echo "smoke-aarch64: built $(basename "$wheel")"
# The platform tag it claims, and that the binary keeps to it: auditwheel's verdict, and no
# glibc symbol newer than 2.17 (the oldest glibc aarch64 has).
site="$home/aarch64-site"
rm -rf "$site"
"$python" -m zipfile -e "$wheel" "$site"
grep -qx 'Tag: cp3[0-9]*-abi3-manylinux_2_17_aarch64' "$site"/torchnative-*.dist-info/WHEEL \
  || { echo "smoke-aarch64: wheel tag is not manylinux_2_17_aarch64" >&2; exit 1; }
so="$(ls "$site"/torchnative/_native*.so)"
file -L "$so" | grep -q 'ELF 64-bit LSB .*ARM aarch64' \
  || { echo "smoke-aarch64: $so is not an aarch64 ELF" >&2; exit 1; }
"$tools/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ' \
  | grep -q 'consistent with the following platform tag: "manylinux_2_17_aarch64"' \
  || { "$tools/bin/auditwheel" show "$wheel" >&2; exit 1; }
glibc="$(aarch64-linux-gnu-objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)"
if [ "$(printf '%s\n' "$glibc" 2.17 | sort -V | tail -n 1)" != 2.17 ]; then
  echo "smoke-aarch64: $so needs GLIBC_$glibc, newer than manylinux_2_17 allows" >&2
  exit 1
fi
echo "smoke-aarch64: wheel is manylinux_2_17_aarch64 (auditwheel), newest glibc symbol GLIBC_$glibc"

# --- 3. The wheel on an aarch64 CPython ------------------------------------------------------
# Debian's own arm64 CPython, unpacked (dpkg -x) into a root of its own that qemu uses as /.
pyroot="$home/aarch64-python"
if ! ls "$pyroot"/usr/bin/python3.* >/dev/null 2>&1; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update >&2
  fi
  # The interpreter Debian's python3 stands for here (3.11 on bookworm).
  pyver="$(apt-cache depends python3-minimal:arm64 | sed -n 's/.*Depends: \(python3\.[0-9]*\)-minimal.*/\1/p')"
  if [ -z "$pyver" ]; then
    apt-get update >&2
    pyver="$(apt-cache depends python3-minimal:arm64 | sed -n 's/.*Depends: \(python3\.[0-9]*\)-minimal.*/\1/p')"
  fi
  debs=("$pyver-minimal:arm64" "lib$pyver-minimal:arm64" "lib$pyver-stdlib:arm64" libc6:arm64
        libgcc-s1:arm64 zlib1g:arm64 libexpat1:arm64)
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  # Root downloads into a private dir: no sandbox user (it could not write there).
  (cd "$dl" && { apt-get download -o APT::Sandbox::User=root "${debs[@]}" >&2 \
    || { apt-get update >&2 && apt-get download -o APT::Sandbox::User=root "${debs[@]}" >&2; }; })
  rm -rf "$pyroot.tmp"
  for deb in "$dl"/*.deb; do dpkg -x "$deb" "$pyroot.tmp"; done
  rm -rf "$pyroot"
  mv "$pyroot.tmp" "$pyroot"
fi
a64_python="$(ls "$pyroot"/usr/bin/python3.* | head -n 1)"
# -I: none of the host's PYTHON* variables (a pyenv, a venv) may reach the arm64 interpreter.
py_out="$(qemu-aarch64 -L "$pyroot" "$a64_python" -I - "$site" "$model" "$raw_prompt" "$chat_prompt" <<'PY'
import json, platform, sys
sys.path.insert(0, sys.argv[1])
import torchnative
print(f"smoke-aarch64: python {platform.python_version()} on {platform.machine()}, "
      f"{torchnative._native.__file__}", file=sys.stderr)
llm = torchnative.load_llm(sys.argv[2], threads=2)
for r in (llm.generate(sys.argv[3], max_new_tokens=8, do_sample=False),
          llm.chat([{"role": "user", "content": sys.argv[4]}], max_new_tokens=8, do_sample=False)):
    print(json.dumps([r.tokens, r.text, r.finish_reason, r.usage.prompt_tokens]))
PY
)"
same "wheel raw" "$x86_raw" "$(sed -n 1p <<<"$py_out")"
same "wheel chat" "$x86_chat" "$(sed -n 2p <<<"$py_out")"
echo "smoke-aarch64: ok in $((SECONDS - start))s"
