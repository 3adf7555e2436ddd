/*
 * diff_page.js — the script of `ranksnap diff`'s page: diff_html.c writes it after the style sheet
 * (report_page.css), the data blob and page_common.js. The build embeds it as rs_diff_html_js
 * (cmake/embed_text.cmake), without this comment; `node --check` checks its syntax (tests/html).
 *
 * It draws from the blob only (the diff as `ranksnap diff --json` writes it, and its text): the
 * verdicts and the gate; every paired rank's peak before and after, side by side (a bar each,
 * the changed ones in orange, ranks of one run alone in grey); the roles and the ranks as
 * sortable tables; for the rank you click, its per-step peaks of both runs on one chart with the
 * step they part at, its measures before and after, and the sites that explain the change (added,
 * removed, grown, shrunk). Once drawn it sets <body data-rendered="1" data-render-ms="...">
 * for the browser tests (tests/html). The page holds the script inline, so its text must never
 * contain "</script".
 */
(function () {
  'use strict';
  var P = window.RSPage;
  var fmtBytes = P.fmtBytes, fmtSigned = P.fmtSigned, fmtPct = P.fmtPct, pathText = P.pathText, el = P.el;
  var D = JSON.parse(document.getElementById('ranksnap-data').textContent);
  var R = D.diff;
  var RUNS = { before: {}, after: {} };
  ['before', 'after'].forEach(function (side) {
    R.runs[side].forEach(function (s) { RUNS[side][s.rank] = s; });
  });
  var state = { sel: null, sort: { key: 'after_rank', dir: 1 } };
  var tip = document.getElementById('tip');

  function pctText(p) {
    if (p === null || p === undefined) return 'from 0';
    return (p > 0 ? '+' : p < 0 ? '-' : '\u00b1') + fmtPct(p);
  }
  function changeText(bytes, pct) { return bytes ? fmtSigned(bytes) + ' (' + pctText(pct) + ')' : '\u00b1' + '0'; }
  function pairName(p) {
    return 'rank ' + p.after_rank + (p.before_rank !== p.after_rank ? ' (rank ' + p.before_rank + ' before)' : '');
  }
  function setupCanvas(cv, w, h) {
    var dpr = window.devicePixelRatio || 1;
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
    cv.style.height = h + 'px';
    var ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }
  function showTip(ev, html) {
    tip.innerHTML = html;
    tip.style.display = 'block';
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 480) + 'px';
    tip.style.top = (ev.clientY + 14) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }

  /* ---- the header: the pairing, what changed, the gate ---- */
  function whySentence(what, w, change) {
    var s = what;
    if (!w) return s;
    if (w.pattern === 'growth') s += ', growing ' + fmtSigned(Math.round(w.growth_bytes_per_step)) + ' per step since step ' + w.first_step + ' (a leak?)';
    else if (w.pattern === 'offset' && w.first_step !== null) s += ' from step ' + w.first_step + ', a constant offset';
    else if (w.pattern === null) s += ' (no step in common)';
    if (w.sites.length) s += ': ' + w.sites.slice(0, 3).map(function (x) { return fmtSigned(x.bytes_delta) + ' at ' + pathText(x) + ' (' + x.change + ')'; }).join(', ');
    if (change && w.unattributed_bytes && Math.abs(w.unattributed_bytes) >= Math.abs(change) / 100 && (w.unattributed_bytes < 0) === (change < 0))
      s += '; ' + fmtSigned(w.unattributed_bytes) + ' not attributed to these sites';
    return s;
  }
  function header() {
    var h = document.getElementById('head');
    h.appendChild(el('h1', null, 'ranksnap diff: ' + R.before.source + ' \u2192 ' + R.after.source));
    h.appendChild(el('div', { class: 'sub' }, R.before.ranks + ' of ' + R.before.world_size + ' ranks before, ' +
      R.after.ranks + ' of ' + R.after.world_size + ' after; a change is one beyond ' + R.threshold_pct + '% (and 1 MiB)'));
    h.appendChild(el('p', { class: 'sub', id: 'pairing' }, R.pairing));
    var ul = el('ul', { class: 'verdicts' });
    var gate = R.gate;
    document.body.setAttribute('data-gate', gate ? (gate.failed ? 'failed' : 'passed') : 'none');
    if (gate) gate.conditions.forEach(function (c) {
      var s = 'Gate ' + c.condition + ': ' + (c.exceeded ? 'exceeded by ' + c.hits.map(function (x) {
        return x.name + (c.measure === 'oom' ? '' : ' (' + (c.limit_is_pct ? pctText(x.value) : fmtBytes(x.value)) + ')');
      }).join(', ') : 'passed');
      ul.appendChild(el('li', { class: c.exceeded ? 'oom' : 'ok' }, s));
    });
    R.pairs.forEach(function (p) {
      if (p.after.oom && !p.before.oom) ul.appendChild(el('li', { class: 'oom' }, pairName(p) + ' ran out of memory after, not before'));
    });
    R.roles.forEach(function (g) {
      if (!g.why) return;
      var c = g.median_peak_change;
      ul.appendChild(el('li', { class: 'divergent' }, whySentence('Role ' + g.role + ': median peak ' + changeText(c.bytes, c.bytes_pct) +
        ' (' + fmtBytes(g.median_peak_before) + ' \u2192 ' + fmtBytes(g.median_peak_after) + ')', g.why, c.bytes)));
    });
    R.pairs.forEach(function (p) {
      if (!p.why) return;
      var c = p.change;
      ul.appendChild(el('li', { class: 'divergent' }, whySentence(pairName(p) + (p.role !== null ? ' (' + p.role + ')' : '') + ': peak ' +
        changeText(c.peak_allocated, c.peak_allocated_pct) + ' (' + fmtBytes(p.before.peak_allocated) + ' \u2192 ' + fmtBytes(p.after.peak_allocated) + ')', p.why, c.peak_allocated)));
    });
    if (R.parting_step !== null) ul.appendChild(el('li', null, 'The runs part at step ' + R.parting_step + '.'));
    ['before', 'after'].forEach(function (side) {
      var u = R[side].unpaired_ranks;
      if (u.length) ul.appendChild(el('li', null, 'Without a counterpart, ' + side + ': rank' + (u.length > 1 ? 's ' : ' ') + u.join(', ')));
    });
    R.notes.forEach(function (n) { ul.appendChild(el('li', null, n)); });
    if (!R.changed_ranks && !R.job.changed && !R.roles.some(function (g) { return g.changed; }))
      ul.appendChild(el('li', { class: 'ok' }, 'No rank or role changed beyond ' + R.threshold_pct + '% of its peak, reserved or outside memory.'));
    h.appendChild(ul);
  }

  /* ---- the overview: every pair's peak, before and after, side by side ---- */
  function overview() {
    var wrap = document.getElementById('overview');
    var items = R.pairs.map(function (p, i) { return { b: p.before.peak_allocated, a: p.after.peak_allocated, changed: p.changed, pair: i, label: pairName(p) }; });
    R.after.unpaired_ranks.forEach(function (r) { items.push({ b: null, a: RUNS.after[r].peak_allocated, changed: false, pair: -1, label: 'rank ' + r + ' (after only)' }); });
    R.before.unpaired_ranks.forEach(function (r) { items.push({ b: RUNS.before[r].peak_allocated, a: null, changed: false, pair: -1, label: 'rank ' + r + ' (before only)' }); });
    var legend = el('div', { class: 'legend' });
    [['#9aa3b2', 'before'], ['#1f5fbf', 'after'], ['#d98200', 'after, changed']].forEach(function (l) {
      var s = el('span'), i = el('i');
      i.style.background = l[0];
      s.appendChild(i);
      s.appendChild(document.createTextNode(l[1]));
      legend.appendChild(s);
    });
    wrap.appendChild(legend);
    var box = el('div', { class: 'chart' }), cv = el('canvas');
    box.appendChild(cv);
    wrap.appendChild(box);
    var W = Math.max(wrap.clientWidth || 900, 300), H = 190, L = 84, B = 18;
    var ctx = setupCanvas(cv, W, H);
    var max = 1;
    items.forEach(function (x) { max = Math.max(max, x.b || 0, x.a || 0); });
    var n = Math.max(items.length, 1), slot = (W - L - 8) / n, bw = Math.max(1, Math.min(14, slot / 2 - 1));
    ctx.fillStyle = '#5b6475';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'right';
    for (var k = 0; k <= 4; k++) {
      var y = H - B - (H - B - 8) * k / 4;
      ctx.fillText(fmtBytes(Math.round(max * k / 4)), L - 6, y + 4);
      ctx.strokeStyle = '#e4e8ef';
      ctx.beginPath();
      ctx.moveTo(L, y);
      ctx.lineTo(W - 4, y);
      ctx.stroke();
    }
    function bar(x, v, color) {
      if (v === null) return;
      var h = (H - B - 8) * v / max;
      ctx.fillStyle = color;
      ctx.fillRect(x, H - B - h, bw, h);
    }
    var changed = [], label = slot >= 22;
    ctx.textAlign = 'center';
    items.forEach(function (x, i) {
      var x0 = L + i * slot + (slot - 2 * bw - 1) / 2;
      bar(x0, x.b, '#9aa3b2');
      bar(x0 + bw + 1, x.a, x.pair < 0 ? '#c3c9d4' : x.changed ? '#d98200' : '#1f5fbf');
      if (x.changed) changed.push(R.pairs[x.pair].after_rank);
      if (label) {
        ctx.fillStyle = '#5b6475';
        ctx.fillText(x.label.replace(/^rank /, '').replace(/ \(.*$/, ''), L + (i + 0.5) * slot, H - 4);
      }
    });
    cv.setAttribute('data-pairs-drawn', String(R.pairs.length));
    cv.setAttribute('data-bars-drawn', String(items.length));
    cv.setAttribute('data-changed', changed.join(','));
    function at(ev) {
      var r = cv.getBoundingClientRect(), i = Math.floor((ev.clientX - r.left - L) / slot);
      return i >= 0 && i < items.length ? items[i] : null;
    }
    cv.addEventListener('mousemove', function (ev) {
      var x = at(ev);
      if (!x) return hideTip();
      showTip(ev, '<b>' + P.esc(x.label) + '</b><br>before ' + fmtBytes(x.b) + '<br>after ' + fmtBytes(x.a) +
        (x.a !== null && x.b !== null ? '<br>' + P.esc(changeText(x.a - x.b, x.b ? 100 * (x.a - x.b) / x.b : null)) : ''));
    });
    cv.addEventListener('mouseleave', hideTip);
    cv.addEventListener('click', function (ev) { var x = at(ev); if (x && x.pair >= 0) select(x.pair); });
  }

  /* ---- tables ---- */
  function roles() {
    var t = document.getElementById('roles');
    if (!R.roles.length) {
      document.getElementById('roles-section').querySelector('h2').textContent = 'The job';
    }
    var head = el('tr');
    ['role', 'ranks', 'median peak before', 'after', 'change', 'largest peak before', 'after', 'change', 'headroom after'].forEach(function (c, i) {
      head.appendChild(el('th', { class: i === 0 ? 'l' : '' }, c));
    });
    var thead = el('thead'), tbody = el('tbody');
    thead.appendChild(head);
    R.roles.concat([R.job]).forEach(function (g) {
      var tr = el('tr', { 'data-role': g.role, class: g.changed ? 'divergent' : '' });
      var mc = g.median_peak_change, c = g.change;
      [g.role === 'job' ? 'the job (all ranks)' : g.role, g.ranks_before + ' \u2192 ' + g.ranks_after, fmtBytes(g.median_peak_before), fmtBytes(g.median_peak_after),
        changeText(mc.bytes, mc.bytes_pct), fmtBytes(g.before.peak_allocated), fmtBytes(g.after.peak_allocated),
        changeText(c.peak_allocated, c.peak_allocated_pct), g.after.headroom === null ? '-' : fmtBytes(g.after.headroom)].forEach(function (v, i) {
        tr.appendChild(el('td', { class: i === 0 ? 'l' : '' }, v));
      });
      tbody.appendChild(tr);
    });
    t.appendChild(thead);
    t.appendChild(tbody);
  }

  var COLS = [
    ['after_rank', 'rank', function (p) { return p.after_rank; }, function (p) { return p.before_rank === p.after_rank ? String(p.after_rank) : p.before_rank + ' \u2192 ' + p.after_rank; }],
    ['role', 'role', function (p) { return p.role === null ? '' : p.role; }, function (p) { return p.role === null ? '' : p.role + (p.replica !== null ? ' #' + p.replica : ''); }],
    ['peak_before', 'peak before', function (p) { return p.before.peak_allocated; }, function (p) { return fmtBytes(p.before.peak_allocated); }],
    ['peak_after', 'peak after', function (p) { return p.after.peak_allocated; }, function (p) { return fmtBytes(p.after.peak_allocated); }],
    ['peak_change', 'change', function (p) { return p.change.peak_allocated; }, function (p) { return changeText(p.change.peak_allocated, p.change.peak_allocated_pct); }],
    ['reserved_change', 'reserved change', function (p) { return p.change.peak_reserved; }, function (p) { return p.change.peak_reserved ? fmtSigned(p.change.peak_reserved) : ''; }],
    ['outside_change', 'outside change', function (p) { return p.change.outside; }, function (p) { return p.change.outside ? fmtSigned(p.change.outside) : ''; }],
    ['frag_change', 'fragmentation change', function (p) { return p.change.fragmentation; }, function (p) { return p.change.fragmentation ? fmtSigned(p.change.fragmentation) : ''; }],
    ['headroom', 'headroom after', function (p) { return p.after.headroom === null ? -Infinity : p.after.headroom; }, function (p) { return p.after.headroom === null ? '-' : fmtBytes(p.after.headroom); }]
  ];
  function pairsTable() {
    var t = document.getElementById('pairs');
    var thead = el('thead'), tr = el('tr');
    COLS.forEach(function (c, i) {
      var th = el('th', { class: 'sortable' + (i < 2 ? ' l' : ''), 'data-key': c[0] }, c[1]);
      th.addEventListener('click', function () {
        state.sort = { key: c[0], dir: state.sort.key === c[0] ? -state.sort.dir : (i >= 2 ? -1 : 1) };
        fillPairs();
      });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    t.appendChild(thead);
    t.appendChild(el('tbody'));
    fillPairs();
  }
  function fillPairs() {
    var t = document.getElementById('pairs'), tbody = t.querySelector('tbody');
    var col = COLS.filter(function (c) { return c[0] === state.sort.key; })[0];
    var order = R.pairs.map(function (p, i) { return i; });
    order.sort(function (x, y) {
      var a = col[2](R.pairs[x]), b = col[2](R.pairs[y]);
      if (a < b) return -state.sort.dir;
      if (a > b) return state.sort.dir;
      return x - y;
    });
    Array.prototype.forEach.call(t.querySelectorAll('th'), function (th) {
      if (th.getAttribute('data-key') === state.sort.key) th.setAttribute('aria-sort', state.sort.dir > 0 ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    });
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    order.forEach(function (i) {
      var p = R.pairs[i];
      var cls = (p.after.oom ? 'oom' : p.changed ? 'divergent' : '') + (state.sel === i ? ' sel' : '');
      var row = el('tr', { 'data-pair': i, 'data-before': p.before_rank, 'data-after': p.after_rank, class: cls });
      COLS.forEach(function (c, k) { row.appendChild(el('td', { class: k < 2 ? 'l' : '' }, c[3](p))); });
      row.addEventListener('click', function () { select(i); });
      tbody.appendChild(row);
    });
  }

  /* ---- the selected pair: both runs' steps on one chart, its measures and sites ---- */
  function stepChart(wrap, p) {
    var sb = RUNS.before[p.before_rank], sa = RUNS.after[p.after_rank];
    var lines = [[sb ? sb.step_peaks : [], '#9aa3b2', [5, 4], 'before'], [sa ? sa.step_peaks : [], p.changed ? '#d98200' : '#1f5fbf', [], 'after']];
    var box = el('div', { class: 'chart' }), cv = el('canvas', { id: 'steps' });
    box.appendChild(cv);
    wrap.appendChild(box);
    var W = Math.max(wrap.clientWidth || 600, 280), H = 200, L = 84, B = 20;
    var ctx = setupCanvas(cv, W, H);
    var s0 = Infinity, s1 = -Infinity, max = 1, min = Infinity, drawn = 0;
    lines.forEach(function (l) {
      l[0].forEach(function (x) { s0 = Math.min(s0, x.step); s1 = Math.max(s1, x.step); max = Math.max(max, x.peak); min = Math.min(min, x.peak); });
    });
    if (s0 === Infinity) {
      wrap.appendChild(el('p', { class: 'empty' }, 'Neither run recorded steps for this rank.'));
      cv.setAttribute('data-lines', '0');
      return;
    }
    if (s1 === s0) s1 = s0 + 1;
    /* the levels' own range, so that a change of a few percent shows */
    var lo = Math.max(0, min - (max - min) * 0.25 - 1);
    function X(s) { return L + (W - L - 36) * (s - s0) / (s1 - s0); }
    function Y(v) { return H - B - (H - B - 8) * (v - lo) / (max - lo); }
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#5b6475';
    ctx.textAlign = 'right';
    for (var k = 0; k <= 4; k++) ctx.fillText(fmtBytes(Math.round(lo + (max - lo) * k / 4)), L - 6, Y(lo + (max - lo) * k / 4) + 4);
    ctx.textAlign = 'center';
    var every = Math.max(1, Math.ceil((s1 - s0) / 12));
    for (var s = s0; s <= s1; s += every) ctx.fillText('step ' + s, X(s), H - 5);
    var part = p.why && p.why.first_step !== null ? p.why.first_step : null;
    if (part !== null) {
      ctx.strokeStyle = '#c62828';
      ctx.setLineDash([2, 3]);
      ctx.beginPath();
      ctx.moveTo(X(part), 4);
      ctx.lineTo(X(part), H - B);
      ctx.stroke();
    }
    lines.forEach(function (l) {
      if (!l[0].length) return;
      ctx.strokeStyle = l[1];
      ctx.lineWidth = 2;
      ctx.setLineDash(l[2]);
      ctx.beginPath();
      l[0].forEach(function (x, i) { if (i) ctx.lineTo(X(x.step), Y(x.peak)); else ctx.moveTo(X(x.step), Y(x.peak)); });
      ctx.stroke();
      drawn++;
    });
    ctx.setLineDash([]);
    cv.setAttribute('data-lines', String(drawn));
    cv.setAttribute('data-part-step', part === null ? '' : String(part));
    cv.addEventListener('mousemove', function (ev) {
      var r = cv.getBoundingClientRect(), st = Math.round(s0 + (ev.clientX - r.left - L) / (W - L - 36) * (s1 - s0));
      function peakAt(arr) { for (var i = 0; i < arr.length; i++) if (arr[i].step === st) return arr[i].peak; return null; }
      var b = peakAt(lines[0][0]), a = peakAt(lines[1][0]);
      showTip(ev, '<b>step ' + st + '</b><br>before ' + fmtBytes(b) + '<br>after ' + fmtBytes(a) + (a !== null && b !== null ? '<br>' + fmtSigned(a - b) : ''));
    });
    cv.addEventListener('mouseleave', hideTip);
  }
  function detail() {
    var sec = document.getElementById('detail');
    while (sec.firstChild) sec.removeChild(sec.firstChild);
    if (state.sel === null) return;
    var p = R.pairs[state.sel];
    sec.appendChild(el('h2', null, pairName(p) + (p.role !== null ? ' (' + p.role + (p.replica !== null ? ', replica ' + p.replica : '') + ')' : '')));
    var grid = el('div', { class: 'detail' }), left = el('div'), right = el('div');
    grid.appendChild(left);
    grid.appendChild(right);
    sec.appendChild(grid);
    left.appendChild(el('h3', null, 'Peak by step: before (dashed), after (solid)'));
    stepChart(left, p);
    var m = el('table', { id: 'measures' }), mh = el('tr');
    ['', 'before', 'after', 'change'].forEach(function (c, i) { mh.appendChild(el('th', { class: i ? '' : 'l' }, c)); });
    var mhead = el('thead'), mbody = el('tbody');
    mhead.appendChild(mh);
    [['peak allocated', 'peak_allocated'], ['peak reserved', 'peak_reserved'], ['outside the allocator', 'outside'],
      ['fragmentation', 'fragmentation'], ['headroom', 'headroom']].forEach(function (row) {
      var b = p.before[row[1]], a = p.after[row[1]], tr = el('tr');
      var d = row[1] === 'headroom' ? p.change.headroom : p.change[row[1]];
      [row[0], fmtBytes(b), fmtBytes(a), d === null ? '-' : d ? fmtSigned(d) : '\u00b10'].forEach(function (v, i) { tr.appendChild(el('td', { class: i ? '' : 'l' }, v)); });
      mbody.appendChild(tr);
    });
    m.appendChild(mhead);
    m.appendChild(mbody);
    left.appendChild(el('h3', null, 'Measures'));
    left.appendChild(m);
    right.appendChild(el('h3', null, p.why ? 'Sites, after against before' + (p.why.sites_in_full ? '' : ' (top sites only)') :
      p.as_its_role ? 'Changed as its role did: see the role above' : 'Not changed beyond the threshold'));
    var w = p.why || (p.as_its_role && p.role !== null ? (R.roles.filter(function (g) { return g.role === p.role; })[0] || {}).why : null);
    if (!w) return;
    var t = el('table', { id: 'sites' }), h = el('tr');
    ['site', 'change', '', 'how'].forEach(function (c, i) { h.appendChild(el('th', { class: i === 0 ? 'l' : '' }, c)); });
    var th = el('thead'), tb = el('tbody');
    th.appendChild(h);
    var big = 1;
    w.sites.forEach(function (x) { big = Math.max(big, Math.abs(x.bytes_delta)); });
    w.sites.forEach(function (x) {
      var tr = el('tr', { 'data-change': x.change }), b = el('span', { class: 'bar ' + (x.bytes_delta >= 0 ? 'pos' : 'neg') });
      b.style.width = Math.max(2, Math.round(120 * Math.abs(x.bytes_delta) / big)) + 'px';
      tr.appendChild(el('td', { class: 'l wrap' }, pathText(x)));
      tr.appendChild(el('td', { class: x.bytes_delta >= 0 ? 'pos' : 'neg' }, fmtSigned(x.bytes_delta)));
      var bc = el('td', { class: 'l' });
      bc.appendChild(b);
      tr.appendChild(bc);
      tr.appendChild(el('td', null, x.change));
      tb.appendChild(tr);
    });
    t.appendChild(th);
    t.appendChild(tb);
    right.appendChild(t);
  }
  function select(i) {
    state.sel = i;
    document.body.setAttribute('data-selected', String(R.pairs[i].after_rank));
    fillPairs();
    detail();
  }

  header();
  overview();
  roles();
  pairsTable();
  document.getElementById('text').textContent = D.text;
  /* the rank explained first (the largest change) is shown at once */
  var first = -1;
  R.pairs.forEach(function (p, i) { if (first < 0 && p.why) first = i; });
  if (first < 0) R.pairs.forEach(function (p, i) { if (first < 0 && p.changed) first = i; });
  if (first >= 0) select(first);
  document.body.setAttribute('data-rendered', '1');
  var t0 = window.performance && performance.timing ? performance.timing.navigationStart : 0;
  if (t0) document.body.setAttribute('data-render-ms', String(Math.round(Date.now() - t0)));
})();
