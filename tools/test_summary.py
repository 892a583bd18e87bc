#!/usr/bin/env python3
"""Counts test cases from Bazel's JUnit XML files and prints one closing line.

Bazel's own summary counts targets and shows GTEST_SKIP as PASSED; this counts
each test case and reports skips separately, with their reasons. A target that
failed without writing XML (crash, timeout, build failure) counts as one
failure. A SKIPPED target (one this build leaves out: the CUDA tests of a
CPU-only build) counts as one skip with SKIP_REASON. A line whose label is not
a Bazel label ("cpu-only:<check>", "layering:<check>": checks tools/test.sh
runs itself) counts as one case.
Usage: test_summary.py TESTLOGS_DIR TARGET_STATUS_FILE [SKIP_REASON]
"""
import collections
import os
import sys
import xml.etree.ElementTree as ET


def skip_message(case):
    """GTEST_SKIP's message (first line), or "" when it gave none."""
    node = case.find("skipped")
    text = (node.get("message") or node.text or "") if node is not None else ""
    text = text.strip().splitlines()[-1] if text.strip() else ""
    # gtest prefixes "file:line" and "Skipped" before the streamed message.
    return text.split("Skipped", 1)[-1].strip() or "skipped"


def count_xml(path, skip_reasons):
    passed = failed = skipped = 0
    names = []
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            names.append(case.get("classname", "") + "." + case.get("name", ""))
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            skipped += 1
            skip_reasons[skip_message(case)] += 1
        else:
            passed += 1
    return passed, failed, skipped, names


def main():
    logs, status_file = sys.argv[1], sys.argv[2]
    target_skip_reason = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else "not built in this configuration"
    total_p = total_f = total_s = 0
    failed_names = []
    skip_reasons = collections.Counter()
    # target_status lines: "<label> <STATUS>" written by tools/test.sh.
    with open(status_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue
            label, status = parts
            if not label.startswith("//"):
                if status == "PASSED":
                    total_p += 1
                else:
                    total_f += 1
                    failed_names.append(label)
                continue
            if status == "SKIPPED":
                total_s += 1
                skip_reasons[target_skip_reason] += 1
                continue
            rel = label.lstrip("/").replace(":", "/")
            xml = os.path.join(logs, rel, "test.xml")
            counted = False
            if status in ("PASSED", "FAILED", "FLAKY") and os.path.exists(xml):
                try:
                    p, fl, s, names = count_xml(xml, skip_reasons)
                    counted = (p + fl + s) > 0
                except ET.ParseError:
                    counted = False
                if counted:
                    if status != "PASSED" and fl == 0:
                        fl = 1  # the binary failed outside any test case
                        names = [label + " (exited non-zero)"]
                    total_p, total_f, total_s = total_p + p, total_f + fl, total_s + s
                    failed_names += names
            if not counted:
                if status == "PASSED":
                    total_p += 1
                else:
                    total_f += 1
                    failed_names.append(f"{label} ({status})")
    for reason, n in sorted(skip_reasons.items(), key=lambda kv: -kv[1]):
        print(f"skipped: {n} ({reason})")
    for n in failed_names:
        print(f"FAILED: {n}")
    line = f"{total_p} passed, {total_f} failed"
    if total_s:
        line += f", {total_s} skipped"
    print(line)
    return 1 if total_f else 0


if __name__ == "__main__":
    sys.exit(main())
