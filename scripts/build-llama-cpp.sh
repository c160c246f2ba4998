#!/usr/bin/env bash
# Build (once) llama.cpp as a benchmark and logit peer: the copy vendored in the PyPI sdist of
# llama-cpp-python 0.3.36, CPU only, Release, native CPU features. Nothing of it is committed;
# everything lives under $TORCHNATIVE_HOME/llama.cpp-0.3.36/. A second run does nothing.
# Prints the bin dir (llama-bench, llama-quantize, llama-simple, llama-tokenize, llama-perplexity,
# llama-server, and libllama.so / libggml*.so next to them) on stdout.
#   scripts/build-llama-cpp.sh [--tests | --avx2]
# --tests builds only what the test suite runs (libllama, llama-bench, llama-quantize,
# llama-tokenize): the server and the benchmark-only tools are a third of a cold build. A full
# build (no argument) satisfies --tests too, and builds on what --tests left in the build dir.
# --avx2 builds a second copy (llama-bench only, in build-avx2/) for CPUs without AVX-512:
# AVX2 + FMA + F16C, AVX-512 off, the peer of our TORCHNATIVE_ISA=avx2 kernels.
set -euo pipefail
version=0.3.36
home="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
root="$home/llama.cpp-$version"
jobs="${LLAMA_CPP_JOBS:-2}"
variant=native
if [ "${1:-}" = "--avx2" ]; then
  variant=avx2
elif [ "${1:-}" = "--tests" ]; then
  variant=tests
elif [ -n "${1:-}" ]; then
  echo "build-llama-cpp: unknown argument '$1' (expected --tests, --avx2 or nothing)" >&2
  exit 2
fi
if [ "$variant" = tests ]; then
  # The same build dir and configuration as the full build below, fewer targets.
  build="$root/build"
  stamp="$root/.torchnative-built-tests-v1"
  [ -f "$root/.torchnative-built-v2" ] && stamp="$root/.torchnative-built-v2"
  features=(-DGGML_NATIVE=ON)
  tools=(llama-bench llama-quantize llama-tokenize llama)
  server=ON
elif [ "$variant" = native ]; then
  build="$root/build"
  # v2: + llama-server (the peer of bench/serve). The build dir is kept, so a v1 cache only
  # compiles the server's targets.
  stamp="$root/.torchnative-built-v2"
  features=(-DGGML_NATIVE=ON)
  tools=(llama-bench llama-quantize llama-simple llama-tokenize llama-perplexity llama-server)
  server=ON
else
  build="$root/build-avx2"
  stamp="$root/.torchnative-built-avx2-v1"
  features=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
    -DGGML_AVX_VNNI=OFF)
  tools=(llama-bench)
  server=OFF
fi
bin="$build/bin"

if [ -f "$stamp" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$root"
python="${PYTHON:-python3}"
venv="$root/tools-venv"
# cmake and ninja from PyPI so the build does not depend on the system's (often old) cmake.
if [ ! -x "$venv/bin/cmake" ] || [ ! -x "$venv/bin/ninja" ]; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet cmake ninja >&2
fi

src="$root/src"
if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
  dl="$root/sdist"
  mkdir -p "$dl"
  # Only this package from source: `--no-binary :all:` would also build its build
  # dependencies (cmake itself) from source just to read the sdist's metadata.
  "$venv/bin/pip" download --quiet --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$version" -d "$dl" >&2
  tarball=$(ls "$dl"/llama_cpp_python-"$version".tar.gz)
  rm -rf "$src.tmp"
  mkdir -p "$src.tmp"
  tar -xzf "$tarball" -C "$src.tmp" --strip-components=1
  rm -rf "$src"
  mv "$src.tmp" "$src"
fi

# Shared libs so a ctypes program (the logit oracle) can load libllama; llama-bench etc. use
# them through the build tree's rpath. llama-server without its web UI: no npm build and no
# download of prebuilt UI assets at build time (the API alone is what bench/serve talks to).
nice -n 19 "$venv/bin/cmake" -S "$src/vendor/llama.cpp" -B "$build" -G Ninja \
  -DCMAKE_MAKE_PROGRAM="$venv/bin/ninja" \
  -DCMAKE_BUILD_TYPE=Release \
  "${features[@]}" \
  -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_SERVER="$server" -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON >&2
nice -n 19 "$venv/bin/cmake" --build "$build" -j "$jobs" --target "${tools[@]}" >&2

for tool in "${tools[@]}"; do
  [ "$tool" = llama ] && tool=libllama.so
  [ -e "$bin/$tool" ] || { echo "build-llama-cpp: $bin/$tool missing after build" >&2; exit 1; }
done
touch "$stamp"
echo "$bin"
