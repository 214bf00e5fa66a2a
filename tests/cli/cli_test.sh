#!/usr/bin/env bash
# The vosti CLI as a user runs it: exit codes, errors on bad input, generation that
# replays from its reported seed, tokenize/detokenize, inspect, verify and the engine options.
#   tests/cli/cli_test.sh path/to/vosti
set -uo pipefail
vosti="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() {  # check NAME CONDITION...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}

"$vosti" --help >"$tmp/help" 2>&1; check "help exits 0" test $? -eq 0
check "help lists generate" grep -q generate "$tmp/help"
"$vosti" frobnicate >/dev/null 2>&1; check "unknown command exits 2" test $? -eq 2

printf 'GGUF\3\0\0\0garbage' >"$tmp/bad.gguf"
"$vosti" inspect "$tmp/bad.gguf" >"$tmp/out" 2>&1; rc=$?
check "inspect of a truncated file exits 1" test $rc -eq 1
check "inspect error names the file" grep -q "bad.gguf" "$tmp/out"
"$vosti" generate --model "$tmp/missing.gguf" --prompt hi >"$tmp/out" 2>&1; rc=$?
check "generate with a missing model exits 1" test $rc -eq 1
check "the error names the path" grep -q "missing.gguf" "$tmp/out"

"$vosti" verify --model "$src/tests/golden/models/llama-tiny" >"$tmp/verify" 2>&1; rc=$?
check "verify passes on a tiny model" test $rc -eq 0
check "verify prints the table" grep -q "shuffled_blocks" "$tmp/verify"
# The planted batch-variant kernel is a test-only component (tests/support), no CLI value
# (tests/determinism plants it): an unknown backend is a usage error that names it.
"$vosti" verify --model "$src/tests/golden/models/llama-tiny" --backend cpu-planted-bug >"$tmp/verify" 2>&1; rc=$?
check "verify refuses a test-only backend" test $rc -eq 2
check "the error names the backend" grep -q "cpu-planted-bug" "$tmp/verify"
# The paper's protocol (one relation, a short context: seconds), its JSON, and its usage errors.
"$vosti" verify --protocol paper --relations cache --max-context 512 --json "$tmp/paper.json" \
  --model "$src/tests/golden/models/llama-tiny" >"$tmp/paper" 2>&1; rc=$?
check "verify --protocol paper passes on a tiny model" test $rc -eq 0
check "it prints the paper's table" grep -q "prefix reuse *14 *14 *14 *pass" "$tmp/paper"
check "it says the run is adapted" grep -q "adapted run" "$tmp/paper"
check "its JSON names the relation and the commit" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["reports"][0]["relations"]
sys.exit(0 if d["commit"] and [x["relation"] for x in r] == ["cache"] and r[0]["identical"] == 14 else 1)' "$tmp/paper.json"
"$vosti" verify --base-url http://127.0.0.1:9 >"$tmp/paper" 2>&1; rc=$?
check "--base-url without --protocol paper is a usage error" test $rc -eq 2
"$vosti" verify --protocol paper --relations nope --model "$src/tests/golden/models/llama-tiny" >"$tmp/paper" 2>&1; rc=$?
check "an unknown relation is a usage error" test $rc -eq 2
"$vosti" verify --protocol paper --base-url http://127.0.0.1:9 >"$tmp/paper" 2>&1; rc=$?
check "an unreachable server fails and says so" test $rc -eq 1
check "the error names the server" grep -q "127.0.0.1:9" "$tmp/paper"

# The engine options: one table (vosti engine-options), the same flags in every command that runs an engine.
"$vosti" engine-options >"$tmp/options.json" 2>&1; rc=$?
check "engine-options exits 0" test $rc -eq 0
check "engine-options prints the table as JSON" python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
sys.exit(0 if {"--device", "--max-num-seqs", "--kv-cache-mb", "--no-cuda-graphs"} <= {o["flag"] for o in t} else 1)' "$tmp/options.json"
for cmd in serve generate bench; do
  "$vosti" $cmd --help >"$tmp/help" 2>&1
  check "$cmd --help lists the engine options" grep -q -- "--num-blocks" "$tmp/help"
done
"$vosti" verify --help >"$tmp/help" 2>&1
check "verify takes the deployment options" grep -q -- "--attention-split" "$tmp/help"
check "verify leaves the scheduling options to its matrix" test "$(grep -c -- "--max-num-seqs" "$tmp/help")" -eq 0

if [[ -n "${VOSTI_DEFAULT_MODEL:-}" && -f "${VOSTI_DEFAULT_MODEL}" ]]; then
  "$vosti" inspect >"$tmp/inspect" 2>&1; check "inspect default model" test $? -eq 0
  check "inspect shows the architecture" grep -q "llama" "$tmp/inspect"
  check "inspect shows Q4_1 tensors" grep -q "Q4_1" "$tmp/inspect"

  ids=$("$vosti" tokenize --text "Hello, world!" 2>/dev/null)
  check "tokenize prints ids" test -n "$ids"
  text=$("$vosti" detokenize $ids 2>/dev/null)
  check "detokenize round trips" test "$text" = "Hello, world!"

  "$vosti" generate --chat --prompt "Name a colour." --max-tokens 12 --temperature 0.8 --json >"$tmp/a.json" 2>"$tmp/a.err"
  check "generate --json exits 0" test $? -eq 0
  seed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seed"])' "$tmp/a.json")
  "$vosti" generate --chat --prompt "Name a colour." --max-tokens 12 --temperature 0.8 --seed "$seed" --json >"$tmp/b.json" 2>/dev/null
  check "the reported seed replays the run bit for bit (ids and logprobs)" python3 - "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if a["ids"] == b["ids"] and a["logprobs"] == b["logprobs"] and a["text"] == b["text"] and len(a["ids"]) > 0 else 1)
PY
  "$vosti" generate --prompt "The capital of France is" --max-tokens 8 --temperature 0 >"$tmp/g.txt" 2>/dev/null
  check "greedy completion streams text" test -s "$tmp/g.txt"
  # Structured outputs: a JSON schema file, a choice list; a bad regex is a usage error naming it.
  printf '{"type":"object","properties":{"city":{"type":"string","maxLength":12}},"required":["city"]}' >"$tmp/s.json"
  "$vosti" generate --prompt "A city as JSON: " --json-schema "$tmp/s.json" --temperature 0.7 --seed 2 --json \
    >"$tmp/s.out" 2>/dev/null
  check "generate --json-schema gives JSON with the required key" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["finish_reason"] == "stop" and isinstance(json.loads(r["text"])["city"], str) else 1)' "$tmp/s.out"
  "$vosti" generate --prompt "Pick: " --choice red --choice blue --seed 1 >"$tmp/c.txt" 2>/dev/null
  check "generate --choice gives one of the choices" grep -qxE "red|blue" "$tmp/c.txt"
  "$vosti" generate --prompt "x" --regex "(" >"$tmp/r.txt" 2>&1; rc=$?
  check "a bad --regex exits 1 naming the regex" test $rc -eq 1 -a -n "$(grep -l "invalid regex" "$tmp/r.txt")"
else
  echo "SKIP: default-model CLI checks (VOSTI_DEFAULT_MODEL is not set; scripts/test sets it)"
fi

echo "cli: $passed passed, $failed failed"
test "$failed" -eq 0
