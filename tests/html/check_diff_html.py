#!/usr/bin/env python3
"""check_diff_html.py - the page of `ranksnap diff` checked statically and in a real browser.

    check_diff_html.py PAGE --changed R,R... --gate failed|passed|none [--bars N] [--selected R]
                       [--interact] [--window W,H] [--out PREFIX]

1. Self-contained, as report.html must be (check_html.py's static check). Never skipped.
2. Debian's chromium, headless, loads it from a file: URL: <body data-rendered="1">, no
   data-errors; data-gate as expected; the overview draws --bars bars (one per paired rank and
   per rank of one run alone) and marks the changed ranks (after's numbers) in orange, and only
   those; their table rows are highlighted; rank --selected is shown (both runs' steps on one
   chart, its sites listed).
3. --interact: every column sorted both ways, every row clicked, the overview hovered; no script
   error, the largest change first when sorted by change, a tooltip naming before and after.
4. A screenshot at --window: that size, not blank, with the changed orange (#d98200).
Exit status 0 pass, 1 fail, 77 skipped (no chromium; the static check still ran).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_html import (SKIP, attrs, browser, fail, first_tag, interact, run_chromium,  # noqa: E402
                        screenshot, static_check)

INTERACT = """<script>
(function () {
  var out = [];
  var ths = Array.prototype.slice.call(document.querySelectorAll('#pairs th'));
  ths.forEach(function (th) { th.click(); th.click(); });
  var ch = ths.filter(function (th) { return th.getAttribute('data-key') === 'peak_change'; })[0];
  ch.click();
  if (ch.getAttribute('aria-sort') !== 'descending') ch.click();
  out.push('sorted-first=' + document.querySelector('#pairs tbody tr').getAttribute('data-after'));
  Array.prototype.forEach.call(document.querySelectorAll('#pairs tbody tr'), function (tr) { tr.click(); });
  out.push('selected=' + document.body.getAttribute('data-selected'));
  var cv = document.querySelector('#overview canvas'), r = cv.getBoundingClientRect(), tip = document.getElementById('tip'), seen = 0;
  for (var i = 0; i <= r.width; i += 2) {
    cv.dispatchEvent(new MouseEvent('mousemove', { clientX: r.left + i, clientY: r.top + r.height / 2, bubbles: true }));
    if (tip.style.display === 'block' && /before/.test(tip.textContent) && /after/.test(tip.textContent)) seen = 1;
  }
  out.push('tip=' + seen);
  document.body.setAttribute('data-interactions', out.join(' '));
})();
</script>"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--changed", default="")
    ap.add_argument("--gate", required=True)
    ap.add_argument("--bars", type=int)
    ap.add_argument("--selected", type=int)
    ap.add_argument("--interact", action="store_true")
    ap.add_argument("--window", default="1400,1100")
    ap.add_argument("--out")
    a = ap.parse_args()
    text = open(a.page, encoding="utf-8").read()
    static_check(text)
    b = browser(a.page, a.out, a.window)
    if not b:
        return SKIP
    chromium, out, w, h = b
    changed = sorted(int(x) for x in a.changed.split(",") if x)

    dom, wall = run_chromium(chromium, ["--window-size=%d,%d" % (w, h), "--dump-dom"], a.page)
    open(out + ".dom.html", "w").write(dom)
    html, body = first_tag(dom, "html") or {}, first_tag(dom, "body") or {}
    errors = html.get("data-errors") or body.get("data-errors")
    if errors:
        fail("script errors: " + errors)
    if body.get("data-rendered") != "1":
        fail("the page did not finish drawing (no data-rendered=\"1\" on <body>)")
    if body.get("data-gate") != a.gate:
        fail("the gate shows %r, expected %r" % (body.get("data-gate"), a.gate))
    ov = None
    for m in re.finditer(r"<canvas\b[^>]*>", dom):
        t = attrs(m.group(0))
        if "data-bars-drawn" in t:
            ov = t
    if not ov:
        fail("no overview chart")
    if a.bars is not None and ov["data-bars-drawn"] != str(a.bars):
        fail("the overview drew %s bars, expected %d" % (ov["data-bars-drawn"], a.bars))
    marked = sorted(int(x) for x in ov["data-changed"].split(",") if x)
    if marked != changed:
        fail("the overview marks ranks %s as changed, expected %s" % (marked, changed))
    rows = {int(t["data-after"]): t.get("class", "") for t in
            (attrs(m.group(0)) for m in re.finditer(r"<tr data-pair=[^>]*>", dom))}
    lit = sorted(r for r, c in rows.items() if "divergent" in c or "oom" in c)
    if lit != changed:
        fail("rows of ranks %s are highlighted, expected %s" % (lit, changed))
    if a.selected is not None:
        if body.get("data-selected") != str(a.selected):
            fail("rank %s is shown, expected %d" % (body.get("data-selected"), a.selected))
        m = re.search(r'<canvas id="steps"[^>]*>', dom)
        steps = attrs(m.group(0)) if m else {}
        if steps.get("data-lines") != "2":
            fail("the selected rank's steps chart drew %s lines, expected both runs'" % steps.get("data-lines"))
        if not re.search(r'<table id="sites">.*?<tr data-change="(added|grown|removed|shrunk)"', dom, re.S):
            fail("the selected rank's sites are not listed")
    print("dom: rendered, gate %s, changed %s, %s bars" % (a.gate, changed, ov["data-bars-drawn"]))

    if a.interact:
        seen = interact(chromium, text, INTERACT, out, w, h)
        if a.selected is not None and seen.get("sorted-first") != str(a.selected):
            fail("sorted by change, rank %s comes first, expected %d" % (seen.get("sorted-first"), a.selected))
        if seen.get("tip") != "1":
            fail("hovering the overview showed no tooltip with both runs: %s" % seen)
        print("interaction: %s" % " ".join("%s=%s" % kv for kv in sorted(seen.items())))

    screenshot(chromium, a.page, out, w, h, [("changed orange", (0xd9, 0x82, 0x00))] if changed else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
