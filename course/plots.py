"""Charts for notebooks and ``bench --plot``: timings on a GPU, the compiler's view without one."""

from __future__ import annotations

import matplotlib.pyplot as plt


def bench_chart(result, path=None):
    """Bars of each version's share of the measured peak, labelled with time and speedup."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = [r.version for r in result.rows]
    pct = [r.pct_peak for r in result.rows]
    bars = ax.barh(names, pct, color=["#bbbbbb"] + ["#3b7dd8"] * (len(names) - 1))
    for bar, r in zip(bars, result.rows):
        ax.text(bar.get_width() + 1, bar.get_y() + bar.get_height() / 2,
                f"{r.ms * 1e3:.0f} us, {r.speedup:.2f}x", va="center", fontsize=8)
    unit = "GB/s" if result.bound == "memory" else "TFLOP/s"
    ax.set_xlabel(f"% of {result.peak_name} ({result.peak_value:.0f} {unit})")
    ax.set_xlim(0, max(110, max(pct) * 1.25))
    ax.invert_yaxis()
    ax.set_title(f"{result.day} on {result.device}")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def compiler_chart(reports: dict, path=None, title: str = "what the compiler did"):
    """Per kernel: registers, and counts of memory-space instructions (from course.compiler)."""
    families = ["ld.shared", "st.shared", "ld.const", "ld.local", "st.local", "shfl.sync", "bar.sync", "atom"]
    labels = list(reports)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw={"width_ratios": [1, 2]})
    ax1.barh(labels, [reports[k].registers for k in labels], color="#3b7dd8")
    ax1.set_xlabel("registers per thread")
    ax1.invert_yaxis()
    width = 0.8 / len(labels)
    for i, k in enumerate(labels):
        xs = [j + i * width for j in range(len(families))]
        ax2.bar(xs, [reports[k].count(f) for f in families], width=width, label=k)
    ax2.set_xticks([j + 0.4 - width / 2 for j in range(len(families))], families, rotation=30, fontsize=8)
    ax2.set_ylabel("instructions in PTX")
    ax2.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def traffic_chart(measured: list, path=None, title: str = "memory traffic, counted in the simulator"):
    """Per version: sectors per global load and store request, and wavefronts per shared request
    (course.traffic.measure_day's result). The dashed lines are the ideal: 4 sectors for a warp of
    float32, 1 wavefront."""
    names = [m.version for m in measured]
    panels = [("sectors per load request", [m.total.sectors_per_load for m in measured], 4),
              ("sectors per store request", [m.total.sectors_per_store for m in measured], 4),
              ("wavefronts per shared request", [m.total.wavefronts_per_request for m in measured], 1)]
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
    for ax, (label, values, ideal) in zip(axes, panels):
        bars = ax.bar(names, values, color="#3b7dd8")
        ax.axhline(ideal, color="#888", linestyle="--", linewidth=1)
        for bar, v in zip(bars, values):
            ax.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
        ax.set_title(label, fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig
