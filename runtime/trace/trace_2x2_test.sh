#!/usr/bin/env bash
# A CPU run of 2 "nodes" x 2 ranks (the real `hypertrain launch`, Gloo on
# 127.0.0.1) with trainer.profile traces steps 3..4; `hypertrain trace merge`
# puts the 4 files on one timeline, which is then checked here by an
# independent reader (Python): valid trace-event JSON, 4 ranks, properly
# nested spans per track, the host phases of every traced step, Gloo
# collectives of the world, shard and replica groups with their bytes, memory
# counters, and the world group's all-reduces overlapping across ranks. A run
# without trainer.profile writes no trace.
set -euo pipefail

BIN="${HYPERTRAIN_BIN:-$PWD/runtime/cmd/hypertrain}"
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
[ -x "$BIN" ] || { echo "FAIL: no hypertrain binary at $BIN" >&2; exit 1; }
CONFIG="$PWD/examples/tiny-cpu.yaml"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/trace_2x2.XXXXXX")"
fail() { echo "FAIL: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1

COMMON=(--config "$CONFIG" --set model.data.use_synthetic_data=true --set trainer.log_every_n_steps=1
        --set model.train_batch_size=2 --set model.max_context_width=32 --set model.num_hidden_layers=2
        --set trainer.max_steps=5 --set trainer.backend=cpu --set model.sharding_strategy=hybrid_shard)

port=$((20000 + (RANDOM % 20000)))
exp="$TMP/exp"
for node in 0 1; do
  env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=2 NODE_RANK=$node HYPERTRAIN_JOB_NAME=trace2x2 \
    HT_GLOO_HOSTNAME=127.0.0.1 HT_RENDEZVOUS_TIMEOUT_S=60 \
    "$BIN" launch --nproc-per-node 2 --grace-period-s 2 -- train "${COMMON[@]}" \
    --set exp_manager.exp_dir="$exp" --set trainer.profile.start_step=2 --set trainer.profile.num_steps=2 \
    > "$TMP/node$node.log" 2>&1 &
  eval "LAUNCHER$node=$!"
done
for node in 0 1; do
  pid_var="LAUNCHER$node"
  wait "${!pid_var}" || { cat "$TMP/node0.log" "$TMP/node1.log"; fail "node $node exited $?"; }
done
cat "$TMP/node0.log"
grep -q "trace: .*trace-rank0.json.gz" "$TMP/node0.log" || fail "rank 0 did not log its trace file"

traces="$exp/traces"
for r in 0 1 2 3; do [ -s "$traces/trace-rank$r.json.gz" ] || fail "no trace of rank $r in $traces"; done

"$BIN" trace merge -o "$TMP/merged.json.gz" "$traces" > "$TMP/merge.out" || { cat "$TMP/merge.out"; fail "merge"; }
cat "$TMP/merge.out"
grep -q "merged 4 ranks" "$TMP/merge.out" || fail "merge did not report 4 ranks"
"$BIN" trace check "$TMP/merged.json.gz" | grep -q ": ok" || fail "trace check"

python3 - "$TMP/merged.json.gz" <<'PY'
import collections, gzip, json, sys
doc = json.load(gzip.open(sys.argv[1]))
ev = doc["traceEvents"]
assert isinstance(ev, list) and ev, "no events"
procs, tracks = {}, {}
for e in ev:
    assert {"ph", "name", "pid"} <= e.keys(), e
    if e["ph"] == "M":
        if e["name"] == "process_name": procs[e["pid"]] = e["args"]["name"]
        if e["name"] == "thread_name": tracks[(e["pid"], e["tid"])] = e["args"]["name"]
        continue
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    if e["ph"] == "X": assert e["dur"] >= 0, e
    if e["ph"] == "C": assert all(isinstance(v, (int, float)) for v in e["args"].values()), e
assert sorted(procs) == [0, 1, 2, 3], procs
assert "node 1" in procs[3], procs

# Spans on one track nest (Perfetto drops the rest).
by_track = collections.defaultdict(list)
for e in ev:
    if e["ph"] == "X":
        assert (e["pid"], e["tid"]) in tracks, ("unnamed track", e)
        by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
for key, spans in by_track.items():
    spans.sort(key=lambda s: (s[0], -s[1]))
    stack = []
    for b, en, name in spans:
        while stack and stack[-1][1] <= b + 1e-3: stack.pop()
        assert not stack or en <= stack[-1][1] + 1e-3, ("overlap on", tracks[key], name, stack[-1])
        stack.append((b, en, name))

for pid in range(4):
    host = [e for e in ev if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "host"]
    names = collections.Counter(e["name"] for e in host)
    assert names["step"] == 2, (pid, names)               # steps 3 and 4 only
    steps = sorted(e["args"]["step"] for e in host if e["name"] == "step")
    assert steps == [3, 4], steps
    for phase in ("data", "forward", "backward", "finish_gradients", "optimizer"):
        assert names[phase] >= 2, (pid, phase, names)
    assert names["fwd layers.0"] == 2 and names["bwd layers.1"] == 2, names
    coll = [e for e in ev if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "collective"]
    groups = {tracks[(pid, e["tid"])] for e in coll}
    assert any(g.startswith("gloo shard") for g in groups), groups
    assert any(g.startswith("gloo replica") for g in groups), groups
    assert "gloo world" in groups, groups
    assert all(e["args"]["bytes"] > 0 for e in coll), "collectives without bytes"
    ops = {e["name"] for e in coll}
    assert {"all_gather", "reduce_scatter", "all_reduce"} <= ops, ops
    assert any(e["ph"] == "C" and e["pid"] == pid for e in ev), "no memory counter"

# One timeline: the world group's all-reduce #k overlaps on every rank.
world = collections.defaultdict(dict)
for e in ev:
    if e["ph"] == "X" and e["cat"] == "collective" and e["args"].get("group") == "world":
        world[e["args"]["seq"]][e["pid"]] = (e["ts"], e["ts"] + e["dur"])
common = [s for s, r in world.items() if len(r) == 4]
assert common, "no world collective seen by all ranks"
for s in common:
    spans = world[s].values()
    assert max(b for b, _ in spans) <= min(en for _, en in spans) + 2000, ("not overlapping", s, world[s])
print("merged trace ok:", len(ev), "events,", len(common), "world collectives aligned")
PY

# The docs' timeline picture of step 3: every rank's host and Gloo tracks.
python3 "$PWD/tools/trace_svg.py" "$TMP/merged.json.gz" -o "$TMP/step3.svg" --from-step 3 --steps 1 \
  --title "CPU 2x2, step 3" | tee "$TMP/svg.out"
python3 - "$TMP/step3.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
labels = [t.text or "" for t in root.iter(ns + "text")]
boxes = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
for rank in range(4):
    assert any(l.startswith(f"rank {rank} ") and l.endswith("/ host") for l in labels), (rank, labels[:20])
assert any("/ gloo world" in l for l in labels), labels
step3 = [b for b in boxes if b.find(ns + "title").text.startswith("step ") and '"step": 3' in b.find(ns + "title").text]
assert len(step3) == 4, ("one box of step 3 per rank", len(step3))
assert len(boxes) > 50, len(boxes)
print("svg ok:", len(boxes), "boxes")
PY

# Off: no trace, no traces directory.
"$BIN" train "${COMMON[@]}" --set trainer.max_steps=2 --set exp_manager.exp_dir="$TMP/off" > "$TMP/off.log" 2>&1 \
  || { cat "$TMP/off.log"; fail "untraced run"; }
[ ! -e "$TMP/off/traces" ] || fail "a run without trainer.profile wrote traces"
echo PASS
