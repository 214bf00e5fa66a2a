#!/usr/bin/env bash
# The SASS of a CUDA source's kernels on this machine (no GPU, no CUDA disassembler in the image):
# fetches PyPI's cuobjdump and nvdisasm wheels once into ~/.cache/vosti-cuda-tools, compiles FILE
# for sm_90a as the build does, and for each kernel whose mangled name matches REGEX prints
# registers, spill bytes and the count of local loads and stores inside the span of its HMMAs
# (the tile loop's) and outside it; the SASS goes to $SASS_OUT (default /tmp/vosti.sass).
#   dev/cuda/sass.sh src/kernels/cuda/attention/attention_mma_stream.cu 'attention_mma_kernelILi128E13__nv_bfloat16'
set -euo pipefail
cd "$(dirname "$0")/../.."
file=$1 regex=${2:-.}
tools=${HOME}/.cache/vosti-cuda-tools
if [[ ! -x $tools/bin/nvdisasm || ! -x $tools/bin/cuobjdump ]]; then
  mkdir -p "$tools/bin" "$tools/wheels"
  python3 -m pip download --quiet --no-deps -d "$tools/wheels" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
  for w in "$tools"/wheels/*.whl; do
    python3 -m zipfile -e "$w" "$tools/unpacked"
  done
  cp "$(find "$tools/unpacked" -name cuobjdump -type f | head -1)" "$(find "$tools/unpacked" -name nvdisasm -type f | head -1)" "$tools/bin/"
  chmod +x "$tools"/bin/*
fi
obj=$(mktemp --suffix=.o)
trap 'rm -f "$obj"' EXIT
out=${SASS_OUT:-/tmp/vosti.sass}
nvcc -O3 -DNDEBUG -std=c++20 -Isrc -I. --generate-code=arch=compute_90a,code=sm_90a -Xptxas -v -c "$file" -o "$obj" \
  2>"$out.ptxas"
PATH=$tools/bin:$PATH NVDISASM_PATH=$tools/bin "$tools/bin/cuobjdump" -sass "$obj" >"$out"
python3 - "$out" "$out.ptxas" "$regex" <<'PY'
import re, sys
sass, ptxas, regex = sys.argv[1:]
info, name = {}, None
for line in open(ptxas):
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m:
        name = m.group(1)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and name:
        info.setdefault(name, {})["spill"] = m.groups()
    m = re.search(r"Used (\d+) registers", line)
    if m and name:
        info.setdefault(name, {})["regs"] = m.group(1)
funcs, cur = {}, None
for line in open(sass):
    m = re.search(r"Function : (\S+)", line)
    if m:
        cur = m.group(1)
        funcs[cur] = []
    elif cur:
        funcs[cur].append(line)
for f, lines in funcs.items():
    if not re.search(regex, f):
        continue
    hmma = [i for i, l in enumerate(lines) if "HMMA" in l]
    lo, hi = (hmma[0], hmma[-1]) if hmma else (0, -1)
    local = [(i, l) for i, l in enumerate(lines) if re.search(r"\b(LDL|STL)\b", l)]
    inside = sum(1 for i, _ in local if lo <= i <= hi)
    d = info.get(f, {})
    print(f"{f[-90:]}\n  registers {d.get('regs', '?')}, spill stores/loads {d.get('spill', ('?', '?'))} bytes; "
          f"{len(hmma)} HMMA; local loads/stores {inside} inside the HMMA span, {len(local) - inside} outside")
PY
