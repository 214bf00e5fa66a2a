#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and llama-server (or the TARGETS given) for
# bench/cpu_vs_llama_cpp.py, from PyPI's llama-cpp-python source package (its sdist carries
# llama.cpp's tree under vendor/), in a directory outside the repository. Nothing of llama.cpp
# is committed to Vosti.
# CPU flags match Vosti's build (x86-64-v3: AVX2, FMA, F16C): GGML_NATIVE=OFF, AVX-512 and
# AMX off (the dev VM advertises AMX, which faults with an illegal instruction).
#   bench/build_llama_cpp.sh [DIR] [VERSION] [TARGETS]   (default /tmp/llamacpp, 0.3.36,
#   "llama-bench llama-server"; examples are configured, so "llama-bench llama-simple" works too)
# Prints the bin directory and llama.cpp's commit.
set -euo pipefail
dir=${1:-/tmp/llamacpp}
version=${2:-0.3.36}
targets=${3:-llama-bench llama-server}
mkdir -p "$dir"
cd "$dir"
if [[ ! -f llama_cpp_python-$version.tar.gz ]]; then
  python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d .
fi
[[ -d llama_cpp_python-$version ]] || tar xzf "llama_cpp_python-$version.tar.gz"
src=$dir/llama_cpp_python-$version/vendor/llama.cpp
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX512=OFF \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$src/build" -j"$(nproc)" --target $targets
echo "bin: $src/build/bin"
echo "llama.cpp commit: $(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)"
