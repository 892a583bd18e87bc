#!/usr/bin/env python3
"""Renders a step trace (hypertrain trace merge output, or one rank's file) as
an SVG timeline for the docs: one lane per track (process = rank, thread =
track, named by their metadata), complete events ("X") as boxes stacked by
nesting depth, counters left out. Standard library only.

  tools/trace_svg.py merged.json.gz -o docs/images/trace.svg \
      [--from-step N --steps K] [--ranks 0,1] [--width 1600] [--title TEXT]

--from-step/--steps keep the time range of those "step" spans (rank 0's host
track); without them the whole trace is drawn.
"""
import argparse
import gzip
import hashlib
import json
import sys
from xml.sax.saxutils import escape

ROW = 14          # height of one nesting level
LANE_GAP = 6
LABEL_W = 230     # left column with the track names
AXIS_H = 28


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def color(name):
    # Stable per name; the usual phases get fixed, readable colours.
    fixed = {"step": "#d0d0d0", "data": "#9ecae1", "forward_backward": "#c6dbef", "forward": "#a1d99b",
             "backward": "#fdae6b", "optimizer": "#bcbddc", "checkpoint": "#fc9272", "log": "#e0e0e0",
             "gemm": "#6baed6", "attention": "#fd8d3c", "other": "#bdbdbd"}
    key = name.split(" ")[0]
    if key in fixed:
        return fixed[key]
    h = int(hashlib.md5(key.encode()).hexdigest()[:6], 16)
    r, g, b = 120 + (h >> 16) % 120, 120 + (h >> 8) % 120, 120 + h % 120
    return "#%02x%02x%02x" % (r, g, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--from-step", type=int)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--ranks", help="comma-separated pids (ranks) to draw; default all")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--title", default="")
    a = ap.parse_args()

    events = load(a.trace)
    procs, tracks, spans = {}, {}, []
    for e in events:
        if e.get("ph") == "M":
            if e.get("name") == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            elif e.get("name") == "thread_name":
                tracks[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.append(e)
    if not spans:
        sys.exit("trace_svg: no complete (X) events in %s" % a.trace)
    keep = {int(r) for r in a.ranks.split(",")} if a.ranks else None
    if keep is not None:
        spans = [e for e in spans if e["pid"] in keep]

    t0, t1 = min(e["ts"] for e in spans), max(e["ts"] + e.get("dur", 0) for e in spans)
    if a.from_step is not None:
        steps = sorted((e for e in spans if e["name"] == "step" and "step" in e.get("args", {})),
                       key=lambda e: (e["pid"], e["ts"]))
        first_pid = min(e["pid"] for e in steps) if steps else None
        chosen = [e for e in steps if e["pid"] == first_pid and
                  a.from_step <= e["args"]["step"] < a.from_step + a.steps]
        if not chosen:
            sys.exit("trace_svg: no step %d in %s" % (a.from_step, a.trace))
        t0 = chosen[0]["ts"]
        t1 = chosen[-1]["ts"] + chosen[-1]["dur"]
        pad = (t1 - t0) * 0.01
        t0, t1 = t0 - pad, t1 + pad
        spans = [e for e in spans if e["ts"] + e.get("dur", 0) >= t0 and e["ts"] <= t1]

    # Depth per span: within a track, spans are properly nested (trace check).
    lanes = {}
    for e in sorted(spans, key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0))):
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    layout = []  # (key, [(event, depth)], depth count)
    for key in sorted(lanes):
        stack, placed = [], []
        for e in lanes[key]:
            end = e["ts"] + e.get("dur", 0)
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            placed.append((e, len(stack)))
            stack.append(end)
        layout.append((key, placed, 1 + max(d for _, d in placed)))

    plot_w = a.width - LABEL_W - 10
    scale = plot_w / max(t1 - t0, 1e-9)
    height = AXIS_H + sum(n * ROW + LANE_GAP for _, _, n in layout) + 10 + (20 if a.title else 0)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="10">' % (a.width, height),
           '<rect width="100%" height="100%" fill="white"/>']
    y = 0
    if a.title:
        out.append('<text x="4" y="14" font-size="13">%s</text>' % escape(a.title))
        y = 20
    # Time axis in ms from the window's start.
    span_ms = (t1 - t0) / 1000.0
    tick = 10 ** max(0, len(str(int(span_ms / 8))) - 1) if span_ms >= 8 else max(span_ms / 8, 0.001)
    for mult in (1, 2, 5, 10):
        if span_ms / (tick * mult) <= 10:
            tick *= mult
            break
    t = 0.0
    while t <= span_ms:
        x = LABEL_W + t * 1000.0 * scale
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (x, y + AXIS_H - 6, x, height))
        out.append('<text x="%.1f" y="%d" fill="#555">%g ms</text>' % (x + 2, y + AXIS_H - 10, round(t, 3)))
        t += tick
    y += AXIS_H
    for (pid, tid), placed, depth in layout:
        label = "%s / %s" % (procs.get(pid, "pid %s" % pid), tracks.get((pid, tid), "tid %s" % tid))
        out.append('<text x="4" y="%d">%s</text>' % (y + 10, escape(label[:40])))
        for e, d in placed:
            x0 = LABEL_W + max(e["ts"] - t0, 0) * scale
            x1 = LABEL_W + min(e["ts"] + e.get("dur", 0) - t0, t1 - t0) * scale
            w = max(x1 - x0, 0.5)
            ey = y + d * ROW
            tip = "%s %.3f ms %s" % (e["name"], e.get("dur", 0) / 1000.0,
                                      json.dumps(e.get("args", {}), sort_keys=True))
            out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="#666" '
                       'stroke-width="0.3"><title>%s</title></rect>'
                       % (x0, ey, w, ROW - 1, color(e["name"]), escape(tip)))
            if w > 6 * len(e["name"]) + 4:
                out.append('<text x="%.2f" y="%d">%s</text>' % (x0 + 2, ey + ROW - 4, escape(e["name"])))
        y += depth * ROW + LANE_GAP
        out.append('<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#ccc"/>' % (y - LANE_GAP / 2, a.width,
                                                                           y - LANE_GAP / 2))
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("trace_svg: %s (%d spans, %d tracks, %.3f ms)" % (a.out, sum(len(p) for _, p, _ in layout),
                                                          len(layout), span_ms))


if __name__ == "__main__":
    main()
