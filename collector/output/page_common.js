/*
 * page_common.js — what the scripts of ranksnap's pages share (report.html's report_page.js and
 * the diff page's diff_page.js): sizes, changes and shares written as the text reports write them
 * (PyTorch's format_size), a site with its path, and DOM elements built from text. Each page puts
 * it before its own script, which reads it as window.RSPage. The build embeds it as
 * rs_report_html_common_js (cmake/embed_text.cmake), without this comment; `node --check` checks
 * its syntax (tests/html). Its text must never contain "</script" (tests/unit/test_report_page.c).
 */
window.RSPage = (function () {
  'use strict';
  function fmtBytes(b) {
    if (b === null || b === undefined) return '-';
    var a = Math.abs(b), s = b < 0 ? '-' : '';
    if (a <= 1024) return s + a + ' bytes';
    if (a <= 1048576) return s + (a / 1024).toFixed(2) + ' KiB';
    if (a <= 1073741824) return s + (a / 1048576).toFixed(2) + ' MiB';
    return s + (a / 1073741824).toFixed(2) + ' GiB';
  }
  function fmtSigned(b) { return (b > 0 ? '+' : b < 0 ? '-' : '\u00b1') + fmtBytes(Math.abs(b)); }
  function fmtPct(p) { var a = Math.abs(p); return (a >= 10 ? a.toFixed(0) : a.toFixed(1)) + '%'; }
  /* a file as the text report shows it: its path inside an installed package, else its name */
  function base(path) {
    var m = /(?:site|dist)-packages[\/\\](.+)$/.exec(path);
    if (m) return m[1];
    var i = Math.max(path.lastIndexOf('/'), path.lastIndexOf('\\'));
    return i >= 0 ? path.slice(i + 1) : path;
  }
  function siteText(f, file, line) {
    if (!file || file === '??') return f;
    return f + ' (' + base(file) + (line > 0 ? ':' + line : '') + ')';
  }
  /* a site of report.json with its path (outermost frame first), as the text report writes it */
  // bytes the rank held when its range began carry the step they were held since before
  function heldText(s) {
    return s.held_since_before_step === undefined ? '' : ', held since before step ' + s.held_since_before_step;
  }
  function pathText(s) {
    if (!s.path || !s.path.length) return siteText(s.function, s.file, s.line) + heldText(s);
    return s.path.map(function (p) { return siteText(p.function, p.file, p.line); }).join(' \u2192 ') + heldText(s);
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (ch) { return '&#' + ch.charCodeAt(0) + ';'; });
  }
  return { fmtBytes: fmtBytes, fmtSigned: fmtSigned, fmtPct: fmtPct, base: base, siteText: siteText,
    heldText: heldText, pathText: pathText, el: el, esc: esc };
})();
