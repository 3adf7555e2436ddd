/*
 * report_page.js — the script of report.html: report_html.c writes it, after the style sheet
 * (report_page.css), around the data blob, after page_common.js (the helpers it shares with the
 * diff page). The build embeds it in the binary as
 * rs_report_html_js (cmake/embed_text.cmake), and `node --check` checks its syntax (tests/html).
 *
 * The script draws from the blob only: JSON.parse of #ranksnap-data, then canvas 2D drawing and
 * DOM building, no library and no request of any kind. What it draws (docs/FORMAT.md,
 * "report.html"): an overlay of every rank's allocated (solid) and reserved (dashed) bytes on
 * rank 0's clock, one small chart per rank on a shared scale, the recorded ranges shaded, step
 * boundaries, each rank's peak (a triangle) and the OOM (a red line); the sortable rank table;
 * for the selected rank its largest live blocks at its peak (or OOM) with their stacks and the
 * site-by-site difference against the reference rank; a tooltip with the time, step, levels and
 * the largest allocation in the bucket under the pointer.
 * Each bucket is drawn as a vertical stroke from its lowest to its highest level, and buckets
 * that fall into one pixel column are merged first, so the path has at most four points per
 * column whatever the history's length.
 * Once drawn it sets <body data-rendered="1" data-render-ms="..."> for the browser tests
 * (tests/html), and reads nothing but the page itself.
 * The page holds the script inline, so its text must never contain "</script" (the HTML parser
 * would end the element there; tests/unit/test_report_page.c checks). This comment is not
 * part of the page: the build leaves out a file's leading comment.
 */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('ranksnap-data').textContent);
  var R = D.report;
  var TL = {};
  D.timelines.forEach(function (t) { TL[t.rank] = t; });
  var SUM = {};
  R.ranks.forEach(function (s) { SUM[s.rank] = s; });
  var OOM = {};
  R.oom_ranks.forEach(function (o) { OOM[o.rank] = o; });
  var DIV = {};
  R.divergent_ranks.forEach(function (d) { DIV[d.rank] = d; });
  var REF = R.reference_rank;
  var ranks = R.ranks.map(function (s) { return s.rank; });
  var state = { sel: null, showAlloc: true, showRes: true, sort: { key: 'rank', dir: 1 } };
  var charts = [];

  /* ---- formatting (as the text report writes sizes: PyTorch's format_size): page_common.js ---- */
  var P = window.RSPage;
  var fmtBytes = P.fmtBytes, fmtSigned = P.fmtSigned, fmtPct = P.fmtPct, siteText = P.siteText,
    pathText = P.pathText, el = P.el, esc = P.esc;
  function fmtShort(b) {
    if (b >= 1073741824) return +(b / 1073741824).toFixed(1) + ' GiB';
    if (b >= 1048576) return +(b / 1048576).toFixed(1) + ' MiB';
    if (b >= 1024) return +(b / 1024).toFixed(1) + ' KiB';
    return b + ' B';
  }
  function fmtDur(us) {
    var a = Math.abs(us);
    if (a >= 60e6) return (us / 60e6).toFixed(2) + ' min';
    if (a >= 1e6) return (us / 1e6).toFixed(3) + ' s';
    if (a >= 1e3) return (us / 1e3).toFixed(a >= 1e5 ? 1 : 3) + ' ms';
    return Math.round(us) + ' \u00b5s';
  }
  /* a <details> whose summary is `text` and which opens onto stack `k` of timeline `tl` */
  function stackDetails(text, tl, k) {
    if (!tl || k === undefined || k === null || k < 0 || !tl.stacks[k]) return el('span', null, text);
    var det = el('details'), ol = el('ol', { class: 'frames' });
    det.appendChild(el('summary', null, text));
    tl.stacks[k].forEach(function (i) {
      var fr = tl.frames[i];
      ol.appendChild(el('li', null, fr[0] + (fr[1] && fr[1] !== '??' ? '  ' + fr[1] + (fr[2] > 0 ? ':' + fr[2] : '') : '')));
    });
    det.appendChild(ol);
    return det;
  }
  function rankClass(r) { return OOM[r] ? 'oom' : DIV[r] ? 'divergent' : ''; }
  function color(r) {
    var i = ranks.indexOf(r), n = Math.max(ranks.length, 1);
    if (OOM[r]) return '#c62828';
    if (DIV[r]) return '#d98200';
    return 'hsl(' + Math.round(200 + 140 * i / n) % 360 + ', 45%, ' + (42 + 18 * (i % 3) / 2) + '%)';
  }

  /* ---- timelines: buckets back to times and levels ---- */
  var tMin = Infinity, tMax = -Infinity;
  D.timelines.forEach(function (t) {
    /* bucket times are differences from the previous bucket's (kept relative to t.t0, which
       aligning the ranks moves), levels are in units of s.q bytes */
    function decode(s) {
      var acc = 0, n = s.t.length, tt = new Float64Array(n);
      for (var k = 0; k < n; k++) {
        acc += s.t[k];
        tt[k] = acc;
        s.lo[k] *= s.q; s.hi[k] *= s.q; s.la[k] *= s.q;
      }
      s.t = tt;
    }
    decode(t.a);
    decode(t.r);
    for (var j = 0; j < t.bs.length; j++) t.bs[j] *= t.bq;
    t.clock0 = t.t0;
    t.t1 = t.t0 + t.d;
    t.maxA = t.a0; t.maxR = t.r0;
    for (var k = 0; k < t.a.hi.length; k++) t.maxA = Math.max(t.maxA, t.a.hi[k]);
    for (k = 0; k < t.r.hi.length; k++) t.maxR = Math.max(t.maxR, t.r.hi[k]);
    t.maxA = Math.max(t.maxA, t.peak.b);
  });
  /* On rank 0's clock, or each rank from its first event: histories that never overlap (snapshots
     taken one after another, PyTorch pickles without a common clock) start aligned. */
  var clockStart = Infinity, latestStart = -Infinity, earliestEnd = Infinity;
  D.timelines.forEach(function (t) {
    clockStart = Math.min(clockStart, t.clock0);
    latestStart = Math.max(latestStart, t.clock0);
    earliestEnd = Math.min(earliestEnd, t.clock0 + t.d);
  });
  state.align = D.timelines.length > 1 && latestStart > earliestEnd;
  /* the time window every chart shows: all of it, or what a drag selected */
  var view = { min: 0, max: 1 };
  function timeBase() {
    tMin = Infinity; tMax = -Infinity;
    D.timelines.forEach(function (t) {
      t.t0 = state.align ? clockStart : t.clock0;
      t.t1 = t.t0 + t.d;
      tMin = Math.min(tMin, t.t0);
      tMax = Math.max(tMax, t.t1);
    });
    if (!isFinite(tMin)) { tMin = 0; tMax = 1; }
    if (tMax <= tMin) tMax = tMin + 1;
    view.min = tMin; view.max = tMax;
    document.body.setAttribute('data-aligned', state.align ? '1' : '0');
  }
  timeBase();
  var drag = null, dragged = false;

  /* the entry of series s of rank t at time tt: the last bucket at or before it */
  function at(t, s, tt) {
    var lo = 0, hi = s.t.length - 1, k = -1, rel = tt - t.t0;
    while (lo <= hi) { var m = (lo + hi) >> 1; if (s.t[m] <= rel) { k = m; lo = m + 1; } else hi = m - 1; }
    return k;
  }
  function stepAt(t, tt) {
    var s = -1;
    for (var k = 0; k < t.stt.length && t.t0 + t.stt[k] <= tt; k++) s = t.stn[k];
    return s;
  }

  /* ---- drawing ---- */
  function niceStep(range, n) {
    var raw = range / Math.max(n, 1), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function niceBytes(max, n) {
    var units = [1, 1024, 1048576, 1073741824, 1099511627776], u = 1;
    for (var i = 0; i < units.length; i++) if (max / units[i] >= 1) u = units[i];
    return niceStep(max / u, n) * u;
  }

  function Chart(wrap, opts) {
    this.wrap = wrap;
    this.opts = opts;
    this.canvas = el('canvas');
    this.cross = el('div', { class: 'cross' });
    this.band = el('div', { class: 'band' });
    wrap.appendChild(this.canvas);
    wrap.appendChild(this.cross);
    wrap.appendChild(this.band);
    var self = this;
    this.canvas.addEventListener('mousemove', function (ev) { hover(self, ev); });
    this.canvas.addEventListener('mouseleave', function () { unhover(); });
    this.canvas.addEventListener('mousedown', function (ev) {
      var rect = self.canvas.getBoundingClientRect();
      drag = { c: self, x0: ev.clientX - rect.left, x1: ev.clientX - rect.left };
      dragged = false;
      ev.preventDefault();
    });
    this.canvas.addEventListener('dblclick', function () { zoom(tMin, tMax); });
    charts.push(this);
  }
  Chart.prototype.layout = function () {
    var w = Math.max(this.wrap.clientWidth, 200), h = this.opts.height, dpr = window.devicePixelRatio || 1;
    this.w = w; this.h = h;
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.canvas.style.height = h + 'px';
    var ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.pad = this.opts.small ? { l: 44, r: 6, t: 6, b: 16 } : { l: 70, r: 14, t: 18, b: 26 };
    return ctx;
  };
  Chart.prototype.x = function (tt) { return this.pad.l + (tt - view.min) / (view.max - view.min) * (this.w - this.pad.l - this.pad.r); };
  Chart.prototype.tAt = function (px) { return view.min + (px - this.pad.l) / (this.w - this.pad.l - this.pad.r) * (view.max - view.min); };
  /* data is drawn inside the plot area only: a zoomed window cuts the lines at its edges */
  Chart.prototype.clip = function (ctx) {
    ctx.save();
    ctx.beginPath();
    ctx.rect(this.pad.l, 0, this.w - this.pad.l - this.pad.r, this.h);
    ctx.clip();
  };

  function zoom(a, b) {
    view.min = Math.max(tMin, Math.min(a, b));
    view.max = Math.min(tMax, Math.max(a, b));
    if (view.max - view.min < 1) view.max = view.min + 1;
    var z = document.getElementById('zoom');
    if (z) z.textContent = view.min > tMin || view.max < tMax ? 'showing +' + fmtDur(view.min - tMin) + ' to +' + fmtDur(view.max - tMin) + ' (double-click to see all)' : 'drag across a chart to zoom';
    document.body.setAttribute('data-zoomed', view.min > tMin || view.max < tMax ? '1' : '0');
    drawAll();
  }
  window.addEventListener('mousemove', function (ev) {
    if (!drag) return;
    var rect = drag.c.canvas.getBoundingClientRect();
    drag.x1 = Math.max(drag.c.pad.l, Math.min(drag.c.w - drag.c.pad.r, ev.clientX - rect.left));
    if (Math.abs(drag.x1 - drag.x0) > 4) dragged = true;
    var b = drag.c.band;
    b.style.left = Math.min(drag.x0, drag.x1) + 'px';
    b.style.width = Math.abs(drag.x1 - drag.x0) + 'px';
    b.style.display = dragged ? 'block' : 'none';
  });
  window.addEventListener('mouseup', function () {
    if (!drag) return;
    var d = drag;
    drag = null;
    d.c.band.style.display = 'none';
    if (dragged) zoom(d.c.tAt(d.x0), d.c.tAt(d.x1));
    else if (d.c.opts.rank !== undefined) select(d.c.opts.rank);
  });
  Chart.prototype.y = function (v) { return this.h - this.pad.b - v / this.ymax * (this.h - this.pad.t - this.pad.b); };

  /* One level as a step line through each pixel column's lowest and highest value: buckets that
     fall in one column are merged, so the path has at most ~4 points per column. */
  function tracePath(ctx, c, t, s, start) {
    var prev = start, col = null, lo = 0, hi = 0, last = 0;
    ctx.moveTo(c.x(t.t0), c.y(start));
    function flush() {
      if (col === null) return;
      ctx.lineTo(col, c.y(prev)); ctx.lineTo(col, c.y(lo)); ctx.lineTo(col, c.y(hi)); ctx.lineTo(col, c.y(last));
      prev = last;
    }
    for (var k = 0; k < s.t.length; k++) {
      var px = Math.round(c.x(t.t0 + s.t[k]) * 2) / 2;
      if (px !== col) { flush(); col = px; lo = Math.min(prev, s.lo[k]); hi = Math.max(prev, s.hi[k]); }
      else { lo = Math.min(lo, s.lo[k]); hi = Math.max(hi, s.hi[k]); }
      last = s.la[k];
    }
    flush();
    ctx.lineTo(c.x(t.t1), c.y(prev));
  }

  function drawAxes(ctx, c) {
    var p = c.pad, small = c.opts.small;
    ctx.font = (small ? 10 : 11) + 'px system-ui, sans-serif';
    ctx.fillStyle = '#5b6475';
    ctx.strokeStyle = '#e6e9ef';
    ctx.lineWidth = 1;
    var ys = niceBytes(c.ymax, small ? 2 : 5);
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    for (var v = 0; v <= c.ymax * 1.0001; v += ys) {
      var yy = Math.round(c.y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(p.l, yy); ctx.lineTo(c.w - p.r, yy); ctx.stroke();
      ctx.fillText(fmtShort(v), p.l - 4, yy);
    }
    if (small) return;
    var xs = niceStep(view.max - view.min, Math.max(2, Math.floor((c.w - p.l - p.r) / 110)));
    ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    for (var tt = Math.ceil((view.min - tMin) / xs) * xs; tt <= view.max - tMin; tt += xs) {
      var xx = Math.round(c.x(tMin + tt)) + 0.5;
      ctx.beginPath(); ctx.moveTo(xx, c.h - p.b); ctx.lineTo(xx, c.h - p.b + 4); ctx.stroke();
      ctx.fillText('+' + fmtDur(tt), xx, c.h - p.b + 6);
    }
  }

  function drawRanges(ctx, c, t) {
    if (!t) return;
    ctx.fillStyle = 'rgba(31, 95, 191, 0.07)';
    t.rg.forEach(function (g) {
      var x0 = c.x(t.t0 + g[0]), x1 = c.x(t.t0 + g[1]);
      ctx.fillRect(x0, c.pad.t, Math.max(x1 - x0, 1), c.h - c.pad.t - c.pad.b);
    });
  }

  function drawSteps(ctx, c, t) {
    if (!t) return;
    ctx.strokeStyle = 'rgba(60, 70, 90, 0.28)';
    ctx.fillStyle = '#5b6475';
    ctx.lineWidth = 1;
    ctx.setLineDash([2, 3]);
    ctx.font = '10px system-ui, sans-serif';
    ctx.textAlign = 'left'; ctx.textBaseline = 'top';
    var lastLabel = -1e9, lastLine = -1e9;
    for (var k = 0; k < t.stt.length; k++) {
      var xx = Math.round(c.x(t.t0 + t.stt[k])) + 0.5;
      /* thousands of steps would grey the chart out: one boundary per 4 pixels at most (zoom in
         for the others) */
      if (xx - lastLine < 4) continue;
      lastLine = xx;
      ctx.beginPath(); ctx.moveTo(xx, c.pad.t); ctx.lineTo(xx, c.h - c.pad.b); ctx.stroke();
      if (!c.opts.small && xx - lastLabel > 44 && xx >= c.pad.l && xx < c.w - c.pad.r - 40) { ctx.fillText('step ' + t.stn[k], xx + 3, 3); lastLabel = xx; }
    }
    ctx.setLineDash([]);
  }

  function drawPeak(ctx, c, t, label) {
    var px = c.x(t.t0 + t.peak.t), py = c.y(t.peak.b);
    ctx.fillStyle = color(t.rank);
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.moveTo(px, py - 8); ctx.lineTo(px - 5, py - 1); ctx.lineTo(px + 5, py - 1); ctx.closePath();
    ctx.fill(); ctx.stroke();
    if (label) {
      ctx.fillStyle = '#1d2330'; ctx.font = '10px system-ui, sans-serif';
      ctx.textAlign = px + 8 + ctx.measureText(label).width > c.w - c.pad.r ? 'right' : 'left'; ctx.textBaseline = 'bottom';
      ctx.fillText(label, px + (ctx.textAlign === 'right' ? -6 : 6), py - 2);
    }
  }

  function drawOom(ctx, c, t, label) {
    var o = t.oom, known = o.t !== null, xx = Math.round(c.x(t.t0 + (known ? o.t : t.d))) + 0.5;
    ctx.strokeStyle = '#c62828'; ctx.lineWidth = 2; ctx.setLineDash(known ? [] : [4, 3]);
    ctx.beginPath(); ctx.moveTo(xx, c.pad.t); ctx.lineTo(xx, c.h - c.pad.b); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = '#c62828'; ctx.font = 'bold ' + (c.opts.small ? 10 : 11) + 'px system-ui, sans-serif';
    var text = label + (known ? '' : ' (time unknown)');
    ctx.textAlign = xx + 6 + ctx.measureText(text).width > c.w - c.pad.r ? 'right' : 'left'; ctx.textBaseline = 'top';
    ctx.fillText(text, xx + (ctx.textAlign === 'right' ? -4 : 4), c.pad.t + (c.opts.small ? 1 : 12));
  }

  function drawOverlay(c) {
    var ctx = c.layout(), shown = D.timelines;
    c.ymax = 1;
    shown.forEach(function (t) {
      if (state.showAlloc) c.ymax = Math.max(c.ymax, t.maxA);
      if (state.showRes) c.ymax = Math.max(c.ymax, t.maxR);
    });
    c.ymax *= 1.08;
    ctx.clearRect(0, 0, c.w, c.h);
    var refT = TL[REF] || shown[0];
    drawAxes(ctx, c);
    c.clip(ctx);
    drawRanges(ctx, c, refT);
    drawSteps(ctx, c, refT);
    /* the ranks with a verdict last, on top */
    var order = shown.slice().sort(function (a, b) { return (rankClass(a.rank) ? 1 : 0) - (rankClass(b.rank) ? 1 : 0); });
    order.forEach(function (t) {
      var hot = !!rankClass(t.rank) || t.rank === state.sel;
      ctx.strokeStyle = color(t.rank);
      ctx.globalAlpha = hot ? 1 : 0.75;
      if (state.showRes) {
        ctx.lineWidth = 1; ctx.setLineDash([5, 3]);
        ctx.beginPath(); tracePath(ctx, c, t, t.r, t.r0); ctx.stroke();
        ctx.setLineDash([]);
      }
      if (state.showAlloc) {
        ctx.lineWidth = hot ? 2.2 : 1.2;
        ctx.beginPath(); tracePath(ctx, c, t, t.a, t.a0); ctx.stroke();
      }
      ctx.globalAlpha = 1;
    });
    var marked = [];
    if (state.showAlloc) order.forEach(function (t) {
      drawPeak(ctx, c, t, rankClass(t.rank) || t.rank === REF ? 'rank ' + t.rank + ' peak ' + fmtShort(t.peak.b) : '');
      marked.push(t.rank);
    });
    var ooms = [];
    shown.forEach(function (t) { if (t.oom) { drawOom(ctx, c, t, 'OOM rank ' + t.rank); ooms.push(t.rank); } });
    ctx.restore();
    c.canvas.setAttribute('data-ranks-drawn', String(shown.length));
    c.canvas.setAttribute('data-peaks-marked', marked.join(','));
    c.canvas.setAttribute('data-oom-marked', ooms.join(','));
  }

  function drawMultiple(c) {
    var t = TL[c.opts.rank], ctx = c.layout();
    c.ymax = 1;
    D.timelines.forEach(function (u) { c.ymax = Math.max(c.ymax, u.maxA, u.maxR); });
    c.ymax *= 1.1;
    ctx.clearRect(0, 0, c.w, c.h);
    drawAxes(ctx, c);
    c.clip(ctx);
    drawRanges(ctx, c, t);
    drawSteps(ctx, c, t);
    var col = color(t.rank);
    ctx.beginPath(); tracePath(ctx, c, t, t.a, t.a0);
    ctx.lineTo(c.x(t.t1), c.y(0)); ctx.lineTo(c.x(t.t0), c.y(0)); ctx.closePath();
    ctx.globalAlpha = 0.22; ctx.fillStyle = col; ctx.fill(); ctx.globalAlpha = 1;
    ctx.strokeStyle = col; ctx.lineWidth = 1.3;
    ctx.beginPath(); tracePath(ctx, c, t, t.a, t.a0); ctx.stroke();
    ctx.strokeStyle = col; ctx.lineWidth = 1; ctx.setLineDash([4, 3]);
    ctx.beginPath(); tracePath(ctx, c, t, t.r, t.r0); ctx.stroke();
    ctx.setLineDash([]);
    drawPeak(ctx, c, t, '');
    c.wrap.parentNode.setAttribute('data-peak-marked', '1');
    if (t.oom) { drawOom(ctx, c, t, 'OOM'); c.wrap.parentNode.setAttribute('data-oom-marked', '1'); }
    ctx.restore();
  }

  function drawAll() {
    charts.forEach(function (c) { if (c.opts.overlay) drawOverlay(c); else drawMultiple(c); });
  }

  /* ---- hover: time, step, bytes and the allocation under the pointer ---- */
  var tip = document.getElementById('tip');
  /* `tol`: the time one pixel column stands for */
  function probe(t, tt, tol) {
    var ka = at(t, t.a, tt), kr = at(t, t.r, tt), rel = tt - t.t0;
    var res = {
      lo: ka >= 0 ? t.a.lo[ka] : t.a0, hi: ka >= 0 ? t.a.hi[ka] : t.a0, level: ka >= 0 ? t.a.la[ka] : t.a0,
      res: kr >= 0 ? t.r.la[kr] : t.r0, step: stepAt(t, tt), big: null
    };
    if (ka >= 0) {
      /* the largest allocation among the buckets under the pointer (within 3 pixel columns) */
      var best = -1;
      for (var k = ka; k >= 0 && rel - t.a.t[k] <= 3 * tol; k--) if (t.bs[k] > 0 && (best < 0 || t.bs[k] > t.bs[best])) best = k;
      for (k = ka + 1; k < t.a.t.length && t.a.t[k] - rel <= 3 * tol; k++) if (t.bs[k] > 0 && (best < 0 || t.bs[k] > t.bs[best])) best = k;
      if (best >= 0) res.big = { size: t.bs[best], site: t.bw[best] >= 0 ? t.sn[t.bw[best]] : '(unknown site)' };
      /* the bucket's range only when it lies under the pointer, not the one before a gap */
      var next = ka + 1 < t.a.t.length ? t.a.t[ka + 1] : t.d;
      if (next - t.a.t[ka] > tol && rel - t.a.t[ka] > tol) res.lo = res.hi = res.level;
    }
    return res;
  }
  function hover(c, ev) {
    var rect = c.canvas.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
    var tt = c.tAt(px), tol = (view.max - view.min) / Math.max(1, c.w - c.pad.l - c.pad.r);
    if (tt < view.min || tt > view.max) { unhover(); return; }
    charts.forEach(function (o) {
      o.cross.style.left = o.x(tt) + 'px';
      o.cross.style.display = 'block';
    });
    var t = null, pr = null;
    if (c.opts.overlay) {
      var bestD = Infinity;
      D.timelines.forEach(function (u) {
        if (tt < u.t0 || tt > u.t1) return;
        var p = probe(u, tt, tol), dy = Math.abs(c.y(state.showAlloc ? p.level : p.res) - py);
        if (dy < bestD) { bestD = dy; t = u; pr = p; }
      });
    } else {
      t = TL[c.opts.rank];
      if (tt >= t.t0 && tt <= t.t1) pr = probe(t, tt, tol);
    }
    var lines = ['<b>+' + fmtDur(tt - tMin) + '</b>'];
    if (t && pr) {
      lines.push('rank ' + t.rank + (pr.step >= 0 ? ' \u00b7 step ' + pr.step : ''));
      lines.push('allocated ' + fmtBytes(pr.level) + (pr.hi !== pr.lo ? ' (' + fmtBytes(pr.lo) + ' \u2013 ' + fmtBytes(pr.hi) + ' here)' : ''));
      lines.push('reserved ' + fmtBytes(pr.res));
      if (pr.big) lines.push('allocation: <b>' + esc(fmtBytes(pr.big.size)) + '</b> at ' + esc(pr.big.site));
    }
    tip.innerHTML = lines.join('<br>');
    tip.style.display = 'block';
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = ev.clientX - tip.offsetWidth - 14;
    if (y + tip.offsetHeight > window.innerHeight - 8) y = ev.clientY - tip.offsetHeight - 14;
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  function unhover() {
    tip.style.display = 'none';
    charts.forEach(function (o) { o.cross.style.display = 'none'; });
  }

  /* ---- the page ---- */
  function header() {
    var h = document.getElementById('head');
    var job = R.ranks.length ? R.ranks[0].job : '';
    h.appendChild(el('h1', null, 'ranksnap: ' + R.ranks.length + ' of ' + R.world_size + ' ranks' + (job ? ', job ' + job : '')));
    h.appendChild(el('div', { class: 'sub' }, (REF !== null ? 'reference rank ' + REF + ', median peak ' + fmtBytes(R.median_peak_allocated) + (R.compared_by ? ' (allocated plus private pools\u2019 free bytes)' : '') + '; ' : '') +
      'a rank diverges beyond ' + R.divergence_threshold_pct + '% (' + fmtBytes(R.divergence_threshold_bytes) + ') from the median'));
    var ul = el('ul', { class: 'verdicts' });
    R.oom_ranks.forEach(function (o) {
      var s = 'Rank ' + o.rank + ' ran out of memory' + (o.step >= 0 ? ' at step ' + o.step : '') + ': tried to allocate ' + fmtBytes(o.requested) +
        ' with ' + fmtBytes(o.device_free) + ' free' + (o.device_total ? ' of ' + fmtBytes(o.device_total) : '') +
        ' (allocated ' + fmtBytes(o.allocated) + ', reserved ' + fmtBytes(o.reserved) + (o.memory_limit ? ', limit ' + fmtBytes(o.memory_limit) : '') +
        '), at ' + pathText(o.stack);
      var li = el('li', { class: 'oom' }, s);
      ul.appendChild(li);
    });
    R.divergent_ranks.forEach(function (d) {
      var b = d.by_pools;
      var s = b ? 'Rank ' + d.rank + ': ' + fmtSigned(b.pools_at_peak - b.reference_pools_at_peak) + (b.graph ? ' in CUDA graph pools (' : ' in private memory pools (') +
        fmtBytes(b.pools_at_peak) + ' vs ' + fmtBytes(b.reference_pools_at_peak) + ' on the reference), allocated ' +
        (b.peak_allocated === b.reference_peak_allocated ? 'equal (' + fmtBytes(b.peak_allocated) + ')' : fmtSigned(b.peak_allocated - b.reference_peak_allocated)) +
        '; compared by peak allocated plus the pools\u2019 free bytes (' + fmtBytes(d.peak_allocated) + ' vs ' + fmtBytes(d.reference_peak) + ')' : null;
      if (!b) s = 'Rank ' + d.rank + ' peaks ' + fmtPct(d.divergence_pct) + (d.divergence_pct >= 0 ? ' above' : ' below') + ' the median (' +
        fmtBytes(d.peak_allocated) + ' vs ' + fmtBytes(d.reference_peak) + ')' +
        (d.pattern === 'growth'
          ? ', growing ' + fmtSigned(Math.round(d.growth_bytes_per_step) * (d.divergence_pct >= 0 ? 1 : -1)) + ' per step since step ' + d.first_divergent_step +
            (d.exhaust_step !== null ? '; at that rate it reaches its ' + fmtBytes(d.capacity) + ' at step ' + d.exhaust_step : '')
          : (d.first_divergent_step !== null ? ' from step ' + d.first_divergent_step : '') + ', a constant offset');
      if (d.sites.length) s += ': ' + d.sites.slice(0, 3).map(function (x) { return fmtSigned(x.bytes_delta) + ' at ' + pathText(x); }).join(', ');
      ul.appendChild(el('li', { class: 'divergent' }, s));
    });
    if (R.missing_ranks.length) ul.appendChild(el('li', null, 'Missing (no snapshot): rank' + (R.missing_ranks.length > 1 ? 's ' : ' ') + R.missing_ranks.join(', ')));
    if (R.no_data_ranks.length) ul.appendChild(el('li', null, 'No data (recorded nothing; left out of the median): rank' + (R.no_data_ranks.length > 1 ? 's ' : ' ') + R.no_data_ranks.join(', ')));
    R.notes.forEach(function (n) { ul.appendChild(el('li', null, n)); });
    if (!R.oom_ranks.length && !R.divergent_ranks.length) ul.appendChild(el('li', { class: 'ok' }, 'No rank ran out of memory and no rank\u2019s peak diverges from the median.'));
    h.appendChild(ul);
  }

  function timelines() {
    var sec = document.getElementById('timelines');
    if (!D.timelines.length) {
      sec.appendChild(el('p', { class: 'empty' }, 'No rank\u2019s history was at hand: the timelines need the full snapshots.'));
      return;
    }
    var ctl = el('div', { class: 'controls' });
    [['showAlloc', 'allocated (solid)'], ['showRes', 'reserved (dashed)']].forEach(function (p) {
      var lab = el('label'), cb = el('input', { type: 'checkbox' });
      cb.checked = state[p[0]];
      cb.addEventListener('change', function () { state[p[0]] = cb.checked; drawAll(); });
      lab.appendChild(cb); lab.appendChild(document.createTextNode(' ' + p[1]));
      ctl.appendChild(lab);
    });
    var alab = el('label'), acb = el('input', { type: 'checkbox', id: 'align' });
    acb.checked = state.align;
    acb.addEventListener('change', function () { state.align = acb.checked; timeBase(); zoom(tMin, tMax); });
    alab.appendChild(acb); alab.appendChild(document.createTextNode(' align the ranks\u2019 first events'));
    ctl.appendChild(alab);
    ctl.appendChild(el('span', null, 'time: rank 0\u2019s clock from ' + new Date(clockStart / 1000).toISOString().replace('T', ' ').replace('Z', ' UTC') +
      ' unless aligned; shaded: recorded steps; \u25b2 peak; red line: OOM'));
    ctl.appendChild(el('span', { id: 'zoom' }, 'drag across a chart to zoom'));
    sec.appendChild(ctl);
    var leg = el('div', { class: 'legend', id: 'legend' });
    D.timelines.forEach(function (t) {
      var s = el('span', { 'data-rank': t.rank }), i = el('i');
      i.style.background = color(t.rank);
      s.appendChild(i); s.appendChild(document.createTextNode('rank ' + t.rank));
      s.addEventListener('click', function () { select(t.rank); });
      leg.appendChild(s);
    });
    sec.appendChild(leg);
    var wrap = el('div', { class: 'chart', id: 'overlay' });
    sec.appendChild(wrap);
    new Chart(wrap, { overlay: true, height: 320 });
    sec.appendChild(el('p', { class: 'sub' }, 'The curves replay the recorded events (sizes as requested, rounded to the allocator\u2019s 512-byte minimum), ' +
      'drawn from each rank\u2019s lowest and highest level per time bucket; the table gives the allocator\u2019s own totals, which can be a little higher ' +
      '(a block larger than asked for) or cover memory allocated before recording began.'));

    var grid = document.getElementById('multiples');
    ranks.concat(R.missing_ranks).sort(function (a, b) { return a - b; }).forEach(function (r) {
      var fig = el('figure', { 'data-rank': r, class: rankClass(r) });
      var cap = el('figcaption');
      var left = el('span'), b = el('b', { class: rankClass(r) }, 'rank ' + r);
      left.appendChild(b);
      if (r === REF) left.appendChild(el('span', { class: 'tag reference' }, 'reference'));
      if (OOM[r]) left.appendChild(el('span', { class: 'tag oom' }, 'OOM'));
      if (DIV[r]) left.appendChild(el('span', { class: 'tag divergent' }, (DIV[r].divergence_pct >= 0 ? '+' : '-') + fmtPct(DIV[r].divergence_pct)));
      cap.appendChild(left);
      var s = SUM[r];
      cap.appendChild(el('span', { class: 'sub' }, s ? 'peak ' + fmtBytes(s.peak_allocated) + (s.peak_step >= 0 ? ' @ step ' + s.peak_step : '') : 'missing'));
      fig.appendChild(cap);
      if (TL[r]) {
        var w = el('div', { class: 'chart' });
        fig.appendChild(w);
        new Chart(w, { small: true, height: 96, rank: r });
        fig.addEventListener('click', function () { select(r); });
      } else {
        fig.classList.add('none');
        fig.appendChild(el('p', { class: 'empty' }, s ? 'no history at hand (summary only)' : 'no snapshot from this rank'));
      }
      grid.appendChild(fig);
    });
  }

  var columns = [
    { key: 'rank', label: 'rank', v: function (s) { return s.rank; } },
    { key: 'host', label: 'host', l: true, v: function (s) { return s.host || ''; } },
    { key: 'peak_allocated', label: 'peak allocated', v: function (s) { return s.peak_allocated; }, f: fmtBytes },
    { key: 'peak_reserved', label: 'peak reserved', v: function (s) { return s.peak_reserved; }, f: fmtBytes },
    { key: 'fragmentation', label: 'fragmentation', v: function (s) { return s.fragmentation; }, f: fmtBytes },
    /* a device's whole use, when the rank's own was not known, is not the rank's: n/a (the text says why) */
    { key: 'outside_peak', label: 'outside allocator', v: function (s) { return s.outside_of === 'device' ? -1 : s.outside_peak; },
      f: function (v) { return v < 0 ? 'n/a' : fmtBytes(v); } },
    { key: 'peak_step', label: 'peak step', v: function (s) { return s.peak_step; }, f: function (v) { return v >= 0 ? String(v) : '-'; } },
    { key: 'oom', label: 'OOM', v: function (s) { return s.oom ? 1 : 0; }, f: function (v) { return v ? 'yes' : 'no'; } },
    { key: 'vs', label: 'vs median', v: function (s) { var held = s.peak_allocated + (R.compared_by ? s.pools_free_at_peak || 0 : 0); return R.median_peak_allocated ? (held - R.median_peak_allocated) / R.median_peak_allocated * 100 : 0; },
      f: function (v) { return (v > 0 ? '+' : v < 0 ? '-' : '') + fmtPct(v); } },
    { key: 'verdict', label: 'verdict', l: true, v: function (s) { return OOM[s.rank] ? 'OOM' : DIV[s.rank] ? 'divergent' : s.rank === REF ? 'reference' : R.no_data_ranks.indexOf(s.rank) >= 0 ? 'no data' : s.recovered ? 'recovered' : s.complete ? '' : 'incomplete'; } }
  ];
  /* private pools (CUDA graphs'): reserved by design, shown apart from fragmentation, where a rank has one */
  if (R.ranks.some(function (s) { return s.pools_at_peak; })) {
    columns.splice(5, 0, { key: 'pools_at_peak', label: 'private pools', v: function (s) { return s.pools_at_peak || 0; }, f: fmtBytes,
      title: function (s) { return s.largest_pool ? s.largest_pool.function + ' (' + s.largest_pool.file + ':' + s.largest_pool.line + ')' : ''; } });
  }
  /* ranks grouped into roles: a role column, and the table in role order (ranks of a role together) */
  if (R.roles) {
    var ROLE = {};
    R.roles.forEach(function (x, k) { ROLE[x.role] = k; });
    columns.splice(1, 0, { key: 'role', label: 'role', l: true, v: function (s) { return s.role || ''; } });
    state.sort = { key: 'role', dir: 1 };
    columns[1].cmp = function (a, b) { return (ROLE[a.role] === undefined ? -1 : ROLE[a.role]) - (ROLE[b.role] === undefined ? -1 : ROLE[b.role]); };
  }

  function table() {
    var tbl = document.getElementById('ranks');
    var tr = el('tr');
    columns.forEach(function (c) {
      var th = el('th', { class: 'sortable' + (c.l ? ' l' : ''), 'data-key': c.key, scope: 'col' }, c.label);
      th.addEventListener('click', function () {
        state.sort = { key: c.key, dir: state.sort.key === c.key ? -state.sort.dir : (c.key === 'rank' || c.l ? 1 : -1) };
        fillTable();
      });
      tr.appendChild(th);
    });
    var thead = el('thead');
    thead.appendChild(tr);
    tbl.appendChild(thead);
    tbl.appendChild(el('tbody'));
    fillTable();
  }
  function fillTable() {
    var tbl = document.getElementById('ranks'), tb = tbl.tBodies[0], col = null;
    columns.forEach(function (c) { if (c.key === state.sort.key) col = c; });
    Array.prototype.forEach.call(tbl.tHead.rows[0].cells, function (th) {
      if (th.getAttribute('data-key') === state.sort.key) th.setAttribute('aria-sort', state.sort.dir > 0 ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    });
    var rows = R.ranks.slice().sort(function (a, b) {
      if (col.cmp) return col.cmp(a, b) * state.sort.dir || a.rank - b.rank;
      var x = col.v(a), y = col.v(b);
      var d = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return d * state.sort.dir || a.rank - b.rank;
    });
    tb.textContent = '';
    rows.forEach(function (s) {
      var cls = rankClass(s.rank);
      var tr = el('tr', { 'data-rank': s.rank, class: cls + (s.rank === state.sel ? ' sel' : '') });
      columns.forEach(function (c) {
        var v = c.v(s), td = el('td', { class: c.l ? 'l' : '' }, c.f ? c.f(v) : String(v));
        if (c.title && c.title(s)) td.setAttribute('title', c.title(s));
        if (c.key === 'verdict' && v) { td.textContent = ''; td.appendChild(el('span', { class: 'tag ' + (cls || (s.rank === REF ? 'reference' : '')) }, v)); }
        tr.appendChild(td);
      });
      tr.addEventListener('click', function () { select(s.rank); });
      tb.appendChild(tr);
    });
    R.missing_ranks.forEach(function (r) {
      var tr = el('tr', { 'data-rank': r, class: 'missing' });
      tr.appendChild(el('td', null, String(r)));
      tr.appendChild(el('td', { class: 'l', colspan: String(columns.length - 1) }, 'missing: no snapshot'));
      tb.appendChild(tr);
    });
  }

  /* ---- the selected rank ---- */
  function siteKey(f, file, line) { return f + '\u0000' + file + '\u0000' + line; }

  function detail() {
    var box = document.getElementById('detail');
    box.textContent = '';
    var r = state.sel;
    if (r === null) return;
    var t = TL[r], s = SUM[r];
    var title = 'Rank ' + r;
    if (OOM[r]) title += ': ran out of memory';
    else if (DIV[r]) title += ': peaks ' + fmtPct(DIV[r].divergence_pct) + (DIV[r].divergence_pct >= 0 ? ' above' : ' below') + ' the median';
    else if (r === REF) title += ': the reference rank';
    box.appendChild(el('h2', null, title));
    if (!t) {
      box.appendChild(el('p', { class: 'empty' }, s ? 'Only this rank\u2019s summary was at hand: no history, so no allocations to list.' : 'No snapshot from this rank.'));
      return;
    }
    var grid = el('div', { class: 'detail' });
    var left = el('div'), right = el('div');
    grid.appendChild(left); grid.appendChild(right);
    box.appendChild(grid);

    var when = (t.mom.oom ? 'at its OOM' : 'at its peak') + (t.mom.oom ? (t.oom.s >= 0 ? ' (step ' + t.oom.s + ')' : '') : (t.peak.s >= 0 ? ' (step ' + t.peak.s + ', ' + fmtBytes(t.peak.b) + ')' : '')) +
      ', +' + fmtDur(t.t0 + t.mom.t - tMin);
    left.appendChild(el('h3', null, 'Largest live allocations ' + when));
    if (!t.live.length) left.appendChild(el('p', { class: 'empty' }, 'No live allocation at that moment.'));
    else {
      var tbl = el('table', { id: 'live' }), hr = el('tr');
      ['size', 'address', 'site and stack'].forEach(function (h, i) { hr.appendChild(el('th', { class: i === 2 ? 'l' : '' }, h)); });
      var th = el('thead'); th.appendChild(hr); tbl.appendChild(th);
      var tb = el('tbody'), SHOWN = 10;
      t.live.forEach(function (b, n) {
        var tr = el('tr', n >= SHOWN ? { class: 'more', hidden: '' } : null);
        tr.appendChild(el('td', null, fmtBytes(b[1])));
        tr.appendChild(el('td', null, '0x' + b[0]));
        var td = el('td', { class: 'l wrap' }), site = b[3] >= 0 ? t.sn[b[3]] : '(no stack)';
        if (b[2] < 0) td.appendChild(el('span', { class: 'empty' }, site === '(no stack)' ? 'no stack recorded' : site));
        else {
          /* the site as the reports name it (sites.c), the whole stack under it */
          td.appendChild(stackDetails(site, t, b[2]));
        }
        tr.appendChild(td);
        tb.appendChild(tr);
      });
      if (t.live.length > SHOWN) {
        var mr = el('tr'), mt = el('td', { class: 'l', colspan: '3' }), btn = el('button', { type: 'button' }, 'show ' + (t.live.length - SHOWN) + ' more');
        btn.addEventListener('click', function () {
          Array.prototype.forEach.call(tb.querySelectorAll('tr.more'), function (x) { x.hidden = false; });
          mr.hidden = true;
        });
        mt.appendChild(btn); mr.appendChild(mt); tb.appendChild(mr);
      }
      tbl.appendChild(tb);
      left.appendChild(tbl);
    }

    /* site by site against the reference, as compare.c matches them: function + file + line */
    var refT = TL[REF];
    if (r === REF) {
      right.appendChild(el('h3', null, 'Live bytes by site (this is the reference rank)'));
    } else {
      right.appendChild(el('h3', null, 'Difference by site against the reference rank ' + REF));
    }
    var rows = [];
    if (r !== REF && refT) {
      var m = {};
      t.sites.forEach(function (x) { m[siteKey(x[0], x[1], x[2])] = { f: x[0], file: x[1], line: x[2], a: x[3], b: 0, p: x[5], tl: t, k: x[6] }; });
      refT.sites.forEach(function (x) {
        var k = siteKey(x[0], x[1], x[2]);
        if (!m[k]) m[k] = { f: x[0], file: x[1], line: x[2], a: 0, b: 0, p: x[5], tl: refT, k: x[6] };
        m[k].b = x[3];
      });
      rows = Object.keys(m).map(function (k) { var o = m[k]; o.d = o.a - o.b; return o; })
        .filter(function (o) { return o.d !== 0; })
        .sort(function (x, y) { return Math.abs(y.d) - Math.abs(x.d); });
    } else if (r !== REF && DIV[r]) {
      rows = DIV[r].sites.map(function (x) { return { f: x.function, file: x.file, line: x.line, a: null, b: null, d: x.bytes_delta, p: pathText(x) }; });
    } else {
      rows = t.sites.map(function (x) { return { f: x[0], file: x[1], line: x[2], a: x[3], b: null, d: null, p: x[5], tl: t, k: x[6] }; });
    }
    if (!rows.length) {
      right.appendChild(el('p', { class: 'empty' }, r === REF ? 'No live bytes at that moment.' : 'The same live bytes at every site as the reference.'));
    } else {
      var st = el('table', { id: 'sitediff' }), h2 = el('tr');
      ['site', 'this rank', 'reference', 'difference'].forEach(function (h, i) { h2.appendChild(el('th', { class: i === 0 ? 'l' : '' }, h)); });
      var sh = el('thead'); sh.appendChild(h2); st.appendChild(sh);
      var sb = el('tbody'), maxd = 1;
      rows.forEach(function (o) { if (o.d !== null) maxd = Math.max(maxd, Math.abs(o.d)); });
      rows.slice(0, 25).forEach(function (o) {
        var tr = el('tr');
        /* the site's path, opening onto the whole stack it was taken from */
        var sc = el('td', { class: 'l wrap' });
        sc.appendChild(stackDetails(o.p || siteText(o.f, o.file, o.line), o.tl, o.k));
        tr.appendChild(sc);
        tr.appendChild(el('td', null, o.a === null ? '' : fmtBytes(o.a)));
        tr.appendChild(el('td', null, o.b === null ? '' : fmtBytes(o.b)));
        var td = el('td', { class: o.d > 0 ? 'pos' : o.d < 0 ? 'neg' : '' });
        if (o.d !== null) {
          var bar = el('span', { class: 'bar ' + (o.d > 0 ? 'pos' : 'neg') });
          bar.style.width = Math.max(2, Math.round(60 * Math.abs(o.d) / maxd)) + 'px';
          td.appendChild(document.createTextNode(fmtSigned(o.d) + ' '));
          td.appendChild(bar);
        }
        tr.appendChild(td);
        sb.appendChild(tr);
      });
      st.appendChild(sb);
      right.appendChild(st);
      if (rows.length > 25) right.appendChild(el('p', { class: 'sub' }, 'and ' + (rows.length - 25) + ' more sites'));
    }
  }

  function select(r) {
    state.sel = r;
    document.body.setAttribute('data-selected', String(r));
    Array.prototype.forEach.call(document.querySelectorAll('[data-rank]'), function (e) {
      e.classList.toggle('sel', Number(e.getAttribute('data-rank')) === r);
    });
    detail();
    charts.forEach(function (c) { if (c.opts.overlay) drawOverlay(c); });
  }

  header();
  timelines();
  table();
  var text = document.getElementById('text');
  if (text) text.textContent = D.text;
  drawAll();
  var first = R.oom_ranks.length ? R.oom_ranks[0].rank : R.divergent_ranks.length ? R.divergent_ranks[0].rank : REF;
  if (first !== null && first !== undefined) select(first);
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 100);
  });
  document.body.setAttribute('data-render-ms', String(Math.round(performance.now())));
  document.body.setAttribute('data-rendered', '1');
})();
