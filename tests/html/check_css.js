/*
 * check_css.js — validates a style sheet with CSSTree (Debian: node-css-tree): every rule must
 * parse, and every declaration's property must exist and its value match the property's grammar
 * (the W3C/MDN definitions CSSTree carries). A browser drops what it cannot parse or match
 * without a word, so a typo in report_page.css would only show as a page that looks wrong.
 * Declarations whose value uses var() are not matched (CSSTree cannot); custom properties (--x)
 * take any value. Exits 0 when clean, 1 with one line per problem, 77 (skipped) without CSSTree.
 *
 *   node check_css.js FILE.css
 */
'use strict';
var fs = require('fs');
var csstree;
try {
  csstree = require('css-tree');
} catch (e) {
  console.log('SKIPPED: no css-tree for node (Debian: apt-get install node-css-tree)');
  process.exit(77);
}

var file = process.argv[2];
var problems = [];
var ast = csstree.parse(fs.readFileSync(file, 'utf8'), {
  positions: true,
  filename: file,
  onParseError: function (e) { problems.push(file + ':' + e.line + ': ' + e.formattedMessage); }
});
var unmatched = 0;
csstree.walk(ast, {
  visit: 'Declaration',
  enter: function (node) {
    if (node.property.indexOf('--') === 0) return;
    if (/var\(/i.test(csstree.generate(node.value))) {
      unmatched++;
      return;
    }
    var m = csstree.lexer.matchDeclaration(node);
    if (m.error) problems.push(file + ':' + node.loc.start.line + ': ' + node.property + ': ' + m.error.message);
  }
});
problems.forEach(function (p) { console.log(p); });
console.log(file + ': ' + (problems.length ? problems.length + ' problem(s)' : 'ok') + ' (' + unmatched +
            ' declarations with var() not matched)');
process.exit(problems.length ? 1 : 0);
