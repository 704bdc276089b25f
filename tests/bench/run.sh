#!/usr/bin/env bash
# rayshare's benchmark (issue 9), one command:
#
#   bash tests/bench/run.sh            # ~8 min on 2 cores (after the first build)
#   bash tests/bench/run.sh --quick    # short windows and small caches, to try it out
#
# Trying a change: cargo bench --bench load -- --quick --compare OLD_BIN,NEW_BIN
# (saturation side by side), --profile KIND (perf record), --report results.json
# (rewrites summary.md from a results.json without running anything).
#
# 1. builds (or reuses) the local control plane (tests/controlplane);
# 2. criterion micro-benchmarks of the pure mutation code: cargo bench --bench mutate;
# 3. instructions of one request per kind, counted by callgrind (exact, unlike the
#    wall clock on a shared machine): cargo bench --bench mutate -- --instructions;
# 4. bursts through the API server: cargo bench --bench bursts;
# 5. the load benchmark: cargo bench --bench load (starts the control plane, rayshare
#    and the floor server, drives them over TLS on 127.0.0.1);
# 6. plots latency against offered load (Python matplotlib, installed into a venv
#    under target/bench when missing).
#
# Results: target/bench/results.json, summary.md, latency.png, mutate.txt, instructions.md,
# bursts.md.
# Not part of tests/run.sh: under `cargo test` the benches run each case once or skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

out="${RAYSHARE_BENCH_OUT:-$PWD/target/bench}"
mkdir -p "$out"
export RAYSHARE_BENCH_OUT="$out"
step() { printf '\n==> %s\n' "$*" >&2; }

quick=""
for a in "$@"; do [[ "$a" == "--quick" ]] && quick=1; done

step "building the local control plane (cached after the first build)"
RAYSHARE_CONTROLPLANE="$(bash tests/controlplane/build.sh)"
export RAYSHARE_CONTROLPLANE
# The CRDs from their Go modules, where the load benchmark looks: $RAYSHARE_CRDS.
RAYSHARE_CRDS="${RAYSHARE_CRDS:-$(bash tests/tools/crds.sh)}"
export RAYSHARE_CRDS

if [[ -z "${BENCH_SKIP_MICRO:-}" ]]; then
  step "micro-benchmarks: cargo bench --bench mutate"
  micro_args=()
  [[ -n "$quick" ]] && micro_args=(--warm-up-time 0.5 --measurement-time 1)
  cargo bench --bench mutate -- "${micro_args[@]}" 2>&1 | tee "$out/mutate.txt"
fi

step "instructions per request (callgrind): cargo bench --bench mutate -- --instructions"
cargo bench --bench mutate -- --instructions

step "bursts: cargo bench --bench bursts (RayJobs, a multi-host slice, Volcano pods)"
cargo bench --bench bursts

step "load benchmark: cargo bench --bench load"
cargo bench --bench load -- "$@"

step "plot: $out/latency.png"
python=python3
if ! "$python" -c 'import matplotlib' 2>/dev/null; then
  venv="$out/venv"
  if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    echo "installing matplotlib into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet matplotlib
  fi
  python="$venv/bin/python"
fi
"$python" tests/bench/plot.py "$out/results.json" "$out/latency.png"
echo "results: $out/results.json, $out/summary.md, $out/latency.png" >&2
