#!/usr/bin/env python3
"""Where the control plane's CPU goes in the slice bursts.

Reads the profiles `RAYSHARE_SLICE_PROFILE=DIR cargo bench --bench bursts` writes
(DIR/<round>-<replicas>-<burst>.pb.gz, each over one burst of 256 pods and the 3 s
after its start, so the Events recorded a second after each admission are inside) and
prints, per burst and replica count, the control plane's CPU per pod in all and in the
parts of it a webhook adds.

    python3 tests/bench/slice-profile.py DIR
"""
import collections
import pathlib
import re
import subprocess
import sys

PODS = 256
BURSTS = ["floor-before", "floor-after", "call-only", "indexed"]
# (what, a function whose cumulative time is that part)
PARTS = [
    ("mutating webhooks (both passes)", r"mutating\.\(\*mutatingDispatcher\)\.Dispatch$"),
    ("  of which their matchConditions (CEL)", r"matchconditions\.\(\*matcher\)\.Match$"),
    ("  of which the calls themselves", r"mutatingDispatcher\)\.callAttrMutatingHook$"),
    ("ValidatingAdmissionPolicy (rayshare's own-objects)", r"policy/validating\.\(\*dispatcher\)\.Dispatch$"),
    ("storage writes (pods, Leases, Events)", r"registry\.\(\*Store\)\.create$"),
    ("garbage collection", r"runtime\.gcBgMarkWorker$"),
]


def seconds(text):
    value = float(re.match(r"[0-9.]+", text).group())
    return value / 1000 if text.endswith("ms") else value


def top(files):
    """(total seconds, {function: cumulative seconds}) of the merged profiles."""
    out = subprocess.run(
        ["go", "tool", "pprof", "-top", "-cum", "-nodecount=100000", *map(str, files)],
        capture_output=True, text=True, check=True,
    ).stdout
    total = seconds(re.search(r"Total samples = ([0-9.]+m?s)", out).group(1))
    cum = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and re.fullmatch(r"[0-9.]+m?s", cols[3]):
            cum[" ".join(cols[5:])] = seconds(cols[3])
    return total, cum


def main():
    directory = pathlib.Path(sys.argv[1])
    found = collections.defaultdict(list)
    for f in sorted(directory.glob("*.pb.gz")):
        _round, replicas, burst = f.name[: -len(".pb.gz")].split("-", 2)
        found[(replicas, burst)].append(f)
    for replicas in sorted({r for r, _ in found}):
        print(f"\n{replicas} replica(s): control plane CPU per pod, ms "
              f"({len(found[(replicas, 'indexed')])} bursts of each kind)\n")
        print("| part | " + " | ".join(BURSTS) + " |")
        print("|---|" + "---:|" * len(BURSTS))
        tops = {b: top(found[(replicas, b)]) for b in BURSTS if found[(replicas, b)]}
        per_pod = lambda b, s: 1000 * s / PODS / len(found[(replicas, b)])
        print("| **all** | " + " | ".join(
            f"**{per_pod(b, tops[b][0]):.2f}**" for b in BURSTS if b in tops) + " |")
        for what, pattern in PARTS:
            cells = []
            for b in BURSTS:
                if b not in tops:
                    continue
                s = sum(v for k, v in tops[b][1].items() if re.search(pattern, k))
                cells.append(f"{per_pod(b, s):.2f}")
            print(f"| {what} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
