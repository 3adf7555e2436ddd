#!/bin/sh
# check_page_source.sh — report.html's script and style sheet checked by real tools before any
# browser sees them: `node --check` parses report_page.js, check_css.js (CSSTree) validates
# report_page.css. Without node (or CSSTree) it prints SKIPPED and exits 77.
#
#   check_page_source.sh FILE.js|FILE.css               fails on a problem in FILE
#   check_page_source.sh --planted DIR FILE.js|FILE.css  shows that the check can fail: a copy of
#       FILE in DIR must pass, and the same copy with one planted error must be refused, naming it
set -u
here=$(dirname "$0")
planted=""
if [ "${1:-}" = "--planted" ]; then
  planted=$2
  shift 2
fi
file=$1

node=$(command -v node || command -v nodejs) || {
  echo "SKIPPED: no node to check $file with (Debian: apt-get install nodejs)"
  exit 77
}
# Debian's node packages live in /usr/share/nodejs, which a node from elsewhere (NodeSource)
# does not search.
NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
export NODE_PATH

# check FILE: runs the tool for FILE's kind; its output and exit status are the check's.
check() {
  case "$1" in
    *.js) "$node" --check "$1" 2>&1 ;;
    *.css) "$node" "$here/check_css.js" "$1" 2>&1 ;;
    *) echo "check_page_source.sh: $1: neither .js nor .css"; return 2 ;;
  esac
}

if [ -z "$planted" ]; then
  out=$(check "$file")
  rc=$?
  [ -n "$out" ] && echo "$out"
  [ $rc -eq 0 ] && echo "ok: $file"
  exit $rc
fi

mkdir -p "$planted" || exit 1
copy="$planted/$(basename "$file")"
cp "$file" "$copy" || exit 1
out=$(check "$copy")
rc=$?
if [ $rc -ne 0 ]; then
  # 77: the tool is missing; anything else: the unchanged copy already fails.
  echo "$out"
  exit $rc
fi
# One error of the kind each tool exists for: a function left unclosed; a misspelt property.
case "$file" in
  *.js) printf '\nfunction planted_error(a, b {\n' >> "$copy"; expect='SyntaxError' ;;
  *.css) printf '\n.planted-error { dispaly: flex; }\n' >> "$copy"; expect='dispaly' ;;
esac
out=$(check "$copy")
rc=$?
echo "$out"
if [ $rc -eq 0 ]; then
  echo "FAIL: the check passed $copy, which has a planted error"
  exit 1
fi
case "$out" in
  *"$expect"*) echo "ok: the planted error was refused ($expect)" ;;
  *) echo "FAIL: the check failed on $copy but did not name the planted error ($expect)"; exit 1 ;;
esac
