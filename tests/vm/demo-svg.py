#!/usr/bin/env python3
# `make demo`'s picture: who ran when on each SMT sibling, from the co-run recorder's records
# (examples/corun.rs) the demo's guest wrote. One band per phase, one lane per sibling, a bar
# wherever the probe on that sibling ran, coloured by its group; where both lanes have a bar at
# the same instant, the two siblings ran at once.
#
#   demo-svg.py OUT.svg TITLE[@FROM_MS+LEN_MS]:GROUP_A=REC_A,GROUP_B=REC_B ...
#
# @FROM_MS+LEN_MS draws only that window of the run (from FROM_MS after its start, LEN_MS long),
# to see single runs.
#
# Standard library only; nothing of this goes into the hook's binary.
"""Draws the demo's co-run records as an SVG."""

import html
import sys

WIDTH = 960
LEFT = 150
LANE = 26
GAP = 6
BAND_TOP = 46
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def read(path):
    with open(path) as f:
        header = f.readline().split()
        fields = dict(kv.split("=", 1) for kv in header[1:])
        spans = [tuple(map(int, line.split())) for line in f if line.strip()]
    return fields, spans


def overlap(a, b):
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def main():
    out, phases = sys.argv[1], sys.argv[2:]
    groups = {}
    bands = []
    for phase in phases:
        title, sides = phase.split(":", 1)
        window = None
        if "@" in title:
            title, w = title.rsplit("@", 1)
            frm, length = (int(v) * 1_000_000 for v in w.split("+"))
            window = (frm, length)
        lanes = []
        for side in sides.split(","):
            group, path = side.split("=", 1)
            fields, spans = read(path)
            groups.setdefault(group, COLOURS[len(groups) % len(COLOURS)])
            lanes.append((group, fields, spans))
        bands.append((title, lanes, window))
    height = BAND_TOP + len(bands) * (2 * LANE + GAP + 64) + 40
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        '<text x="10" y="24" font-size="16" font-weight="bold">Who ran when on the two SMT siblings of one core</text>',
    ]
    y = BAND_TOP
    for title, lanes, window in bands:
        start = min(int(f["start_ns"]) for _, f, _ in lanes)
        end = max(int(f["end_ns"]) for _, f, _ in lanes)
        if window:
            start, end = start + window[0], start + window[0] + window[1]
            lanes = [(g, f, [(max(s, start), min(e, end)) for s, e in spans if e > start and s < end]) for g, f, spans in lanes]
        scale = (WIDTH - LEFT - 20) / max(end - start, 1)
        both = overlap(lanes[0][2], lanes[1][2])
        ran = [sum(e - s for s, e in spans) for _, _, spans in lanes]
        share = both / max(min(ran), 1)
        svg.append(
            f'<text x="10" y="{y + 14}" font-weight="bold">{html.escape(title)}: both ran at once '
            f"{share * 100:.2f}% of the time ({both / 1e9:.3f} s of {min(ran) / 1e9:.3f} s)</text>"
        )
        y += 22
        for lane, (group, fields, spans) in enumerate(lanes):
            top = y + lane * (LANE + GAP)
            svg.append(f'<text x="10" y="{top + 17}">cpu{fields["cpu"]}: {html.escape(group)}</text>')
            svg.append(f'<rect x="{LEFT}" y="{top}" width="{WIDTH - LEFT - 20}" height="{LANE}" fill="#eeeeee"/>')
            # Spans closer than a pixel are drawn as one bar.
            merged = []
            for s, e in spans:
                if merged and (s - merged[-1][1]) * scale < 1:
                    merged[-1][1] = e
                else:
                    merged.append([s, e])
            for s, e in merged:
                x = LEFT + (s - start) * scale
                w = max((e - s) * scale, 0.5)
                svg.append(f'<rect x="{x:.1f}" y="{top}" width="{w:.1f}" height="{LANE}" fill="{groups[group]}"/>')
        y += 2 * (LANE + GAP)
        first = window[0] / 1e9 if window else 0.0
        svg.append(f'<text x="{LEFT}" y="{y + 10}" fill="#555">{first:.2f} s</text>')
        svg.append(
            f'<text x="{WIDTH - 20}" y="{y + 10}" fill="#555" text-anchor="end">{first + (end - start) / 1e9:.2f} s</text>'
        )
        y += 42
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
