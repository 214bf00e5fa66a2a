#!/usr/bin/env bash
# ncu profile of the tensor-core attention on the lent GPU (from the gpu-bundle, unpacked by
# scripts/gpu-run into /tmp/vosti-gpu): the bench's --quick cases (prefill 8 x 1024, decode
# 64 x 2048), a few launches each, with the sections that say where a tile's time goes; plus
# the SASS of the hd 128 kernels. Writes $OUT/attn_ncu.csv, $OUT/attn_sass.txt, prints a summary.
set -uo pipefail
B=/tmp/vosti-gpu
if [[ ! -x $B/bin/attention_cuda_bench ]]; then
  mkdir -p $B && tar -C $B -xJf .gpu-bundle/bundle.tar.xz
fi
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
# Launch order in --quick: prefill 8 x 1024 (one-split then folding launch, per call), then
# the decode 64 x 2048 calls; launch 20 is the first call at split 512.
: >"$OUT/attn_ncu.csv"
for range in "0 2" "20 1"; do
  read -r skip count <<<"$range"
  timeout 200 ncu --clock-control none -k regex:attention_mma --launch-skip "$skip" --launch-count "$count" $sections \
    --csv --page details "$B/bin/attention_cuda_bench" --quick --reps 1 >>"$OUT/attn_ncu.csv" 2>>"$OUT/attn_ncu.err"
done
echo "ncu exit $?"
python3 - "$OUT/attn_ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
keep = ("Duration", "Registers Per Thread", "Achieved Occupancy", "Theoretical Occupancy", "Block Limit",
        "Compute (SM) Throughput", "Memory Throughput", "DRAM Throughput", "Issue Slots Busy", "Executed Ipc Active",
        "Warp Cycles Per Issued Instruction", "Avg. Active Threads Per Warp", "Dynamic Shared Memory Per Block",
        "Grid Size", "L1/TEX Hit Rate", "L2 Hit Rate", "Mem Busy", "Max Bandwidth", "Stall")
seen = set()
for r in rows:
    key = (r["ID"], r["Metric Name"])
    if key in seen: continue
    seen.add(key)
    if any(k in r["Metric Name"] for k in keep):
        print(r["ID"], r["Kernel Name"][:60], "|", r["Metric Name"], "=", r["Metric Value"], r["Metric Unit"])
PY
cuobjdump -sass "$B/bin/attention_cuda_bench" 2>/dev/null | awk '/Function : .*attention_mma_kernelILi128E13__nv_bfloat16Lb[01]ELi1E/{p=1} /Function : /{if(!/attention_mma_kernelILi128E13__nv_bfloat16Lb[01]ELi1E/)p=0} p' >"$OUT/attn_sass.txt"
echo "sass lines $(wc -l <"$OUT/attn_sass.txt")"
for op in HMMA LDSM LDGSTS MUFU.EX2 BAR.SYNC LDG LDL STL IMAD.HI I2F.RP; do echo "$op $(grep -c "$op" "$OUT/attn_sass.txt")"; done
