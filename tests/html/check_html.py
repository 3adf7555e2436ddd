#!/usr/bin/env python3
"""check_html.py - report.html checked statically and in a real browser (tests/html).

    check_html.py PAGE [--static-only] [--ranks N] [--drawn R,R...] [--divergent R] [--oom R]
                       [--window W,H] [--out PREFIX] [--max-bytes B] [--max-render-ms MS]
                       [--expect-error TEXT]

1. Self-contained: no "http://" or "https://" anywhere, every src/href/action/poster/srcset
   value is a data: URL or a #fragment, CSS url() and @import likewise, no <link>, <iframe>,
   <object>, <embed>, <base>, and the scripts make no request (fetch, XMLHttpRequest,
   WebSocket, EventSource, sendBeacon, import()). Never skipped: it needs no browser.
2. Debian's chromium, headless with a fresh profile and every background-networking feature off,
   loads the page from a file: URL. --dump-dom must show <body data-rendered="1"> and no
   data-errors attribute (the page's window.onerror writes script errors there); the ranks drawn
   (all N of --ranks, or just those of --drawn, e.g. when the gather brought only some),
   the peaks and OOMs marked and the highlighted rows must be those expected; --max-render-ms
   bounds data-render-ms, the page's own navigation-start-to-drawn time.
3. --screenshot at --window: the PNG must be that size and not blank, and show the OOM red
   (#c62828) when an OOM rank is expected, the divergent orange (#d98200) when a divergent one is.
4. --interact: a copy of the page with INTERACT appended plays a person's session (sort by each
   column, select each rank, hover the charts, drag to zoom, double-click back, flip the
   checkboxes, show every live block) and records what it saw in data-interactions; it must end
   without a script error, with the flagged rank first when sorted by peak, a tooltip naming
   the allocated bytes and, somewhere along the time axis, an allocation with its site, and the
   zoom on and off again, and the selected rank's tables (largest live allocations, difference
   by site), every stack opened, no wider than their column.
Exit status 0 pass, 1 fail, 77 skipped (no chromium; the static check still ran).
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

SKIP = 77

# Runs after the page's own script (appended before </body>); events are dispatched, so nothing
# needs to be on screen.
INTERACT = """<script>
(function () {
  var out = [];
  function ev(target, type, x, y) {
    target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true }));
  }
  var ths = Array.prototype.slice.call(document.querySelectorAll('#ranks th'));
  var pa = ths.filter(function (th) { return th.getAttribute('data-key') === 'peak_allocated'; })[0];
  pa.click();
  out.push('sorted-first=' + document.querySelector('#ranks tbody tr').getAttribute('data-rank'));
  pa.click();
  out.push('sorted-asc-first=' + document.querySelector('#ranks tbody tr').getAttribute('data-rank'));
  ths.forEach(function (th) { th.click(); th.click(); });
  Array.prototype.forEach.call(document.querySelectorAll('#ranks tbody tr[data-rank]'), function (tr) { tr.click(); });
  var cv = document.querySelector('#overlay canvas'), r = cv.getBoundingClientRect();
  var tip = document.getElementById('tip'), alloc = 0;
  /* every pixel column at three heights: some column holds an allocation */
  for (var i = 0; i <= r.width; i++)
    for (var k = 1; k <= 3; k++) {
      ev(cv, 'mousemove', r.left + i, r.top + r.height * k / 4);
      if (/allocation: \d.* at /.test(tip.textContent)) alloc = 1;
    }
  out.push('allocation-shown=' + alloc);
  ev(cv, 'mousemove', r.left + r.width / 2, r.top + r.height / 2);
  out.push('tip=' + (tip.style.display === 'block' && /allocated/.test(tip.textContent) ? 1 : 0));
  ev(cv, 'mouseleave', 0, 0);
  ev(cv, 'mousedown', r.left + r.width * 0.3, r.top + 40);
  ev(window, 'mousemove', r.left + r.width * 0.7, r.top + 40);
  ev(window, 'mouseup', r.left + r.width * 0.7, r.top + 40);
  out.push('zoomed=' + document.body.getAttribute('data-zoomed'));
  for (i = 0; i <= 10; i++) ev(cv, 'mousemove', r.left + r.width * i / 10, r.top + r.height / 2);
  ev(cv, 'dblclick', r.left + 10, r.top + 10);
  out.push('unzoomed=' + document.body.getAttribute('data-zoomed'));
  Array.prototype.forEach.call(document.querySelectorAll('.controls input'), function (cb) { cb.click(); cb.click(); });
  Array.prototype.forEach.call(document.querySelectorAll('.multiples canvas'), function (c) {
    var q = c.getBoundingClientRect();
    ev(c, 'mousemove', q.left + q.width / 2, q.top + q.height / 2);
    ev(c, 'mousedown', q.left + q.width / 2, q.top + q.height / 2);
    ev(window, 'mouseup', q.left + q.width / 2, q.top + q.height / 2);
  });
  var more = document.querySelector('#live button');
  if (more) more.click();
  out.push('hidden-live=' + document.querySelectorAll('#live tr.more[hidden]').length);
  window.dispatchEvent(new Event('resize'));
  /* the selected rank's tables fit their column of the page: the pixels they run past it */
  ['live', 'sitediff'].forEach(function (id) {
    var t = document.getElementById(id);
    if (!t) return;
    Array.prototype.forEach.call(t.querySelectorAll('details'), function (d) { d.open = true; });
    var over = Math.max(0, Math.round(t.getBoundingClientRect().right - t.parentNode.getBoundingClientRect().right),
                        t.scrollWidth - t.parentNode.clientWidth);
    out.push(id + '-overflow=' + over);
  });
  document.body.setAttribute('data-interactions', out.join(' '));
})();
</script>
"""
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
                  "--mute-audio", "--no-default-browser-check"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def static_check(text):
    if re.search(r"https?://", text, re.I):
        m = re.search(r".{0,60}https?://.{0,60}", text, re.I)
        fail("the page names a URL: " + m.group(0))
    for m in re.finditer(r"\b(src|href|action|poster|srcset|xlink:href)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", text, re.I):
        v = m.group(2).strip("\"'")
        if not (v.startswith("data:") or v.startswith("#")):
            fail("%s=%s points outside the page" % (m.group(1), v))
    for m in re.finditer(r"url\(\s*([^)]*)\)", text, re.I):
        v = m.group(1).strip("\"' ")
        if not (v.startswith("data:") or v.startswith("#")):
            fail("url(%s) points outside the page" % v)
    for pat in (r"@import", r"<link\b", r"<iframe\b", r"<object\b", r"<embed\b", r"<base\b",
                r"\bfetch\s*\(", r"XMLHttpRequest", r"WebSocket", r"EventSource", r"sendBeacon",
                r"\bimport\s*\("):
        if re.search(pat, text, re.I):
            fail("the page uses %s" % pat)
    print("static: self-contained (%d bytes, no URL, no external reference)" % len(text.encode()))


def find_chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run_chromium(chromium, args, page, timeout=90):
    with tempfile.TemporaryDirectory(prefix="ranksnap-chromium-") as prof:
        cmd = [chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + prof] + args + ["file://" + os.path.abspath(page)]
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        wall = time.monotonic() - t0
    if p.returncode != 0:
        fail("chromium exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout.decode(errors="replace"), wall


def attrs(tag):
    return dict((m.group(1), m.group(2)) for m in re.finditer(r'([\w-]+)="([^"]*)"', tag))


def first_tag(dom, name):
    m = re.search(r"<%s\b[^>]*>" % name, dom)
    return attrs(m.group(0)) if m else None


def png_pixels(path):
    """(width, height, rows of RGBA/RGB bytes) of an 8-bit, non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        return w, h, None
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, (rows, bpp)


def has_color(pix, rgb, tol=24):
    rows, bpp = pix
    r0, g0, b0 = rgb
    for row in rows:
        for x in range(0, len(row), bpp):
            if abs(row[x] - r0) <= tol and abs(row[x + 1] - g0) <= tol and abs(row[x + 2] - b0) <= tol:
                return True
    return False


def browser(page, out, window):
    """chromium, the prefix of what it writes and the window's size; None (said) without
    chromium."""
    chromium = find_chromium()
    if not chromium:
        print("SKIPPED: chromium not found (tests/setup-deps.sh installs Debian's chromium)")
        return None
    w, h = (int(x) for x in window.split(","))
    return chromium, out or os.path.splitext(page)[0], w, h


def interact(chromium, text, script, out, w, h):
    """The page with `script` appended (a person's session, which records what it saw in
    <body data-interactions="k=v ...">) run in chromium: what it saw, after no script error."""
    session = out + ".interact.html"
    with open(session, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", script + "</body>"))
    idom, _ = run_chromium(chromium, ["--window-size=%d,%d" % (w, h), "--dump-dom"], session)
    open(out + ".interact.dom.html", "w").write(idom)
    ih, ib = first_tag(idom, "html") or {}, first_tag(idom, "body") or {}
    ierr = ih.get("data-errors") or ib.get("data-errors")
    if ierr:
        fail("script errors while interacting: " + ierr)
    seen = dict(kv.split("=", 1) for kv in ib.get("data-interactions", "").split())
    if not seen:
        fail("the interaction script did not finish")
    return seen


def screenshot(chromium, page, out, w, h, colors):
    """chromium's screenshot of the page at w x h into OUT.png: that size, not blank, and showing
    each (name, rgb) of `colors`."""
    png = out + ".png"
    if os.path.exists(png):
        os.unlink(png)
    run_chromium(chromium, ["--window-size=%d,%d" % (w, h), "--screenshot=" + png], page)
    if not os.path.exists(png):
        fail("chromium wrote no screenshot")
    pw, ph, pix = png_pixels(png)
    psize = os.path.getsize(png)
    if (pw, ph) != (w, h):
        fail("the screenshot is %dx%d, expected %dx%d" % (pw, ph, w, h))
    # a blank page of this size compresses to a few KB; charts, tables and text are far more
    if psize < 20000:
        fail("the screenshot is %d bytes: blank?" % psize)
    for name, rgb in colors:
        if pix is not None and not has_color(pix, rgb):
            fail("no %s in the screenshot" % name)
    print("screenshot: %s, %dx%d, %d bytes" % (png, pw, ph, psize))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--drawn", help="the ranks with a timeline, when not all of --ranks")
    ap.add_argument("--divergent", type=int, action="append", default=[])
    ap.add_argument("--oom", type=int, action="append", default=[])
    ap.add_argument("--window", default="1280,1000")
    ap.add_argument("--out", help="prefix of the DOM dump and the screenshot")
    ap.add_argument("--max-bytes", type=lambda v: int(float(v)))
    ap.add_argument("--max-render-ms", type=int)
    ap.add_argument("--expect-error")
    ap.add_argument("--interact", action="store_true")
    ap.add_argument("--roles", help="the ranks table's rows, role by role: R,R;R,R (ranks grouped)")
    a = ap.parse_args()

    text = open(a.page, encoding="utf-8").read()
    size = os.path.getsize(a.page)
    if a.max_bytes and size >= a.max_bytes:
        fail("%s is %d bytes, the bound is %d" % (a.page, size, a.max_bytes))
    if not a.expect_error:
        static_check(text)
    if a.static_only:
        return 0
    b = browser(a.page, a.out, a.window)
    if not b:
        return SKIP
    chromium, out, w, h = b

    dom, wall = run_chromium(chromium, ["--window-size=%d,%d" % (w, h), "--dump-dom"], a.page)
    open(out + ".dom.html", "w").write(dom)
    html, body = first_tag(dom, "html") or {}, first_tag(dom, "body") or {}
    errors = html.get("data-errors") or body.get("data-errors")
    if a.expect_error:
        if not errors or a.expect_error not in errors:
            fail("the page's script error was not recorded (data-errors=%r)" % errors)
        print("the injected script error was seen: %s" % errors)
        return 0
    if errors:
        fail("script errors: " + errors)
    if body.get("data-rendered") != "1":
        fail("the page did not finish drawing (no data-rendered=\"1\" on <body>)")
    ms = int(body.get("data-render-ms", "-1"))
    print("chromium: drawn in %d ms (navigation start to data-rendered), %.2f s for the whole "
          "chromium --dump-dom run, page %d bytes" % (ms, wall, size))
    if a.max_render_ms and not 0 <= ms < a.max_render_ms:
        fail("drawn in %d ms, the bound is %d ms" % (ms, a.max_render_ms))

    overlay = None
    for m in re.finditer(r"<canvas\b[^>]*>", dom):
        t = attrs(m.group(0))
        if "data-ranks-drawn" in t:
            overlay = t
    if a.ranks is not None:
        drawn = sorted(int(x) for x in a.drawn.split(",")) if a.drawn else list(range(a.ranks))
        if not overlay or overlay["data-ranks-drawn"] != str(len(drawn)):
            fail("the overlay drew %s ranks, expected %d" % (overlay and overlay["data-ranks-drawn"], len(drawn)))
        peaks = sorted(int(x) for x in overlay["data-peaks-marked"].split(",") if x)
        if peaks != drawn:
            fail("peaks marked for ranks %s, expected %s" % (peaks, drawn))
        figs = re.findall(r"<figure\b[^>]*>", dom)
        if len(figs) != a.ranks:
            fail("%d small multiples, expected one per rank (%d)" % (len(figs), a.ranks))
        marked = sorted(int(attrs(f)["data-rank"]) for f in figs if 'data-peak-marked="1"' in f)
        if marked != drawn:
            fail("small multiples of ranks %s have a peak marker, expected %s" % (marked, drawn))
    ooms = sorted(int(x) for x in (overlay or {}).get("data-oom-marked", "").split(",") if x)
    if ooms != sorted(a.oom):
        fail("OOM marked on ranks %s, expected %s" % (ooms, sorted(a.oom)))
    for r in a.oom:
        if not re.search(r'<figure data-rank="%d" class="oom[^"]*"[^>]*data-oom-marked="1"' % r, dom):
            fail("rank %d's small multiple is not marked as the OOM rank" % r)
        if not re.search(r'<tr data-rank="%d" class="oom' % r, dom):
            fail("rank %d's table row is not highlighted as OOM" % r)
    if a.roles:
        want = [[int(x) for x in g.split(",")] for g in a.roles.split(";")]
        if 'data-key="role"' not in dom:
            fail("the ranks table has no role column")
        rows = [int(x) for x in re.findall(r'<tr data-rank="(\d+)"', dom)]
        if rows[:sum(len(g) for g in want)] != [r for g in want for r in sorted(g)]:
            fail("the ranks table's rows are %s, expected role by role %s" % (rows, want))
    for r in a.divergent:
        if not re.search(r'<tr data-rank="%d" class="divergent' % r, dom):
            fail("rank %d's table row is not highlighted as divergent" % r)
    sel = a.oom[0] if a.oom else a.divergent[0] if a.divergent else None
    if sel is not None:
        if body.get("data-selected") != str(sel):
            fail("rank %s is selected, expected %d" % (body.get("data-selected"), sel))
        if '<table id="live">' not in dom:
            fail("the selected rank's largest live allocations are not listed")
        if '<table id="sitediff">' not in dom:
            fail("the selected rank's site difference against the reference is not shown")
        # each site is its path, which opens onto the whole stack it was taken from
        diff = re.search(r'<table id="sitediff">.*?</table>', dom, re.S)
        if diff and not re.search(r'<td class="l wrap"><details><summary>[^<]*\([^()<]+\.[ch]:\d+\)[^<]*</summary>'
                                  r'<ol class="frames">(<li>[^<]+</li>){2,}</ol></details></td>', diff.group(0)):
            fail("the site difference's sites do not open onto their stacks: " + diff.group(0)[:600])
    print("dom: rendered, no script error, ranks=%s oom=%s divergent=%s as expected" % (a.ranks, ooms, a.divergent))

    if a.interact:
        seen = interact(chromium, text, INTERACT, out, w, h)
        flagged = (a.oom or a.divergent or [None])[0]
        if flagged is not None and seen.get("sorted-first") != str(flagged):
            fail("sorted by peak allocated, rank %s comes first, expected %d" % (seen.get("sorted-first"), flagged))
        if flagged is not None and seen.get("sorted-asc-first") == seen.get("sorted-first"):
            fail("a second click on the header did not reverse the order")
        want = {"tip": "1", "allocation-shown": "1", "zoomed": "1", "unzoomed": "0", "hidden-live": "0"}
        # a table wider than its column runs off the page's right edge (long paths, long names)
        want.update({k: "0" for k in ("live-overflow", "sitediff-overflow") if k in seen})
        for k, v in want.items():
            if seen.get(k) != v:
                fail("after interacting, %s=%s, expected %s (%s)" % (k, seen.get(k), v, seen))
        print("interaction: sort, select, hover, zoom, unzoom, toggles: %s" % " ".join("%s=%s" % kv for kv in sorted(seen.items())))

    colors = []
    if a.oom:
        colors.append(("OOM red", (0xc6, 0x28, 0x28)))
    if a.divergent:
        colors.append(("divergent orange", (0xd9, 0x82, 0x00)))
    screenshot(chromium, a.page, out, w, h, colors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
