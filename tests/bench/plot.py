"""Latency against offered load from target/bench/results.json (tests/bench/run.sh)."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KINDS = ["pod-unchanged", "pod-podgroup", "worker-pod", "rayjob-cached"]
COLORS = dict(zip(KINDS, ["tab:blue", "tab:green", "tab:orange", "tab:red"]))


def series(runs, server, kind, proto, field):
    pts = sorted(
        (r["offered_rps"], r[field] / 1000.0)
        for r in runs
        if r["server"] == server and r["kind"] == kind and r["protocol"] == proto and r[field] > 0
    )
    return [p[0] for p in pts], [p[1] for p in pts]


def main(src, dst):
    with open(src) as f:
        results = json.load(f)
    runs = results["latency"]
    protos = ["h2", "http/1.1"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), sharey=True)
    for ax, proto in zip(axes, protos):
        for kind in KINDS:
            x, y = series(runs, "rayshare", kind, proto, "p99_us")
            ax.plot(x, y, "o-", color=COLORS[kind], label=f"rayshare {kind} p99")
            x, y = series(runs, "rayshare", kind, proto, "p50_us")
            ax.plot(x, y, ".:", color=COLORS[kind], alpha=0.7, label=f"rayshare {kind} p50")
            x, y = series(runs, "floor", kind, proto, "p99_us")
            ax.plot(x, y, "x--", color=COLORS[kind], alpha=0.45, label=f"floor ({kind} body) p99")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(2.0, color="grey", lw=0.8, ls="--")
        yaxis = ax.get_yaxis_transform()
        ax.text(0.99, 1.0, "1 ms: Pod p99 target at 2,000 req/s", transform=yaxis, ha="right", va="top", fontsize=7, color="grey")
        ax.text(0.99, 2.0, "2 ms: RayJob p99 target at 500 req/s", transform=yaxis, ha="right", va="bottom", fontsize=7, color="grey")
        ax.set_yscale("log")
        ax.set_xlabel("offered load (req/s, open loop)")
        ax.set_title(f"{proto}, server on one core")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("latency (ms, from each request's due time)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    m = results.get("machine", {})
    fig.suptitle(
        f"rayshare admission latency vs offered load: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs"
        + (" (QUICK RUN)" if results.get("quick") else ""),
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.14, 1, 0.95))
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
