#!/bin/bash
# mutate.sh — asks again, cheaply, whether the tests fail when the code is wrong. Each break of
# tests/mutations.txt (a file, an exact anchor text in it, its replacement, the ctest tests that
# must then fail) is applied alone, the build brought up to date, its tests run, and the file put
# back (always: on error and on Ctrl-C too). One line per break:
#   CAUGHT  every named test failed
#   MISSED  a named test passed (or was skipped) with the code broken: that test is too weak
#   STALE   the anchor is not in the file exactly once (the code moved): update the list
#   BROKEN  the broken code did not build (a bad replacement)
# and exit status 1 when any break was not CAUGHT. Run on demand, never in CI (a build per break).
#
#   tests/mutate.sh [--build DIR] [--only PATTERN] [--list FILE]   run the breaks (DIR: ./build-mutate)
#   tests/mutate.sh --check [--build DIR] [--list FILE]            check the list only: every anchor
#       once in its file, every named test known to ctest in DIR, every record complete (CTest's
#       mutation_list_is_well_formed runs this)
#
# The list's records are separated by blank lines; a line is `key: value` (`#` starts a comment):
#   break:    what the break does, in one line
#   file:     the file, from the repository's root
#   anchor:   the exact text to replace; `anchor+:` lines continue it on the next line
#   replace:  its replacement; `replace+:` lines continue it (an empty `replace:` deletes it)
#   tests:    the ctest tests that must fail, separated by spaces
set -u
cd "$(dirname "$0")/.."
root=$PWD
list=tests/mutations.txt
build=build-mutate
mode=run
only=""
while [ $# -gt 0 ]; do
    case $1 in
        --check) mode=check ;;
        --build) build=$2; shift ;;
        --only) only=$2; shift ;;
        --list) list=$2; shift ;;
        *) echo "usage: $0 [--check] [--build DIR] [--only PATTERN] [--list FILE]" >&2; exit 2 ;;
    esac
    shift
done
py=$(command -v python3) || { echo "mutate.sh: python3 is needed" >&2; exit 2; }

# The list as NUL-separated fields, five per record: break, file, anchor, replace, tests;
# an incomplete record is an error naming its line.
parse() {
    "$py" - "$list" <<'PY'
import sys
recs, cur, line0 = [], {}, 1
def close(n):
    global cur
    if cur:
        miss = [k for k in ("break", "file", "anchor", "replace", "tests") if k not in cur]
        if miss:
            sys.exit("%s:%d: record lacks %s" % (sys.argv[1], cur["_line"], ", ".join(miss)))
        recs.append(cur)
    cur = {}
for n, raw in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    line = raw.rstrip("\n")
    if not line.strip():
        close(n)
        continue
    if line.startswith("#"):
        continue
    key, sep, val = line.partition(":")
    if not sep:
        sys.exit("%s:%d: not `key: value`" % (sys.argv[1], n))
    val = val[1:] if val.startswith(" ") else val
    cur.setdefault("_line", n)
    if key in ("anchor+", "replace+"):
        k = key[:-1]
        if k not in cur:
            sys.exit("%s:%d: %s before %s" % (sys.argv[1], n, key, k))
        cur[k] += "\n" + val
    elif key in ("break", "file", "anchor", "replace", "tests"):
        if key in cur:
            sys.exit("%s:%d: a second %s in one record" % (sys.argv[1], n, key))
        cur[key] = val
    else:
        sys.exit("%s:%d: unknown key %s" % (sys.argv[1], n, key))
close(0)
out = sys.stdout.buffer
for r in recs:
    for k in ("break", "file", "anchor", "replace", "tests"):
        out.write(r[k].encode() + b"\0")
PY
}

# anchor_count FILE ANCHOR: how many times ANCHOR occurs in FILE
anchor_count() {
    "$py" -c 'import sys; print(open(sys.argv[1], encoding="utf-8").read().count(sys.argv[2]))' "$1" "$2"
}

# apply FILE ANCHOR REPLACEMENT: the one occurrence replaced
apply() {
    "$py" -c '
import sys
p, a, r = sys.argv[1:4]
s = open(p, encoding="utf-8").read()
open(p, "w", encoding="utf-8").write(s.replace(a, r, 1))' "$1" "$2" "$3"
}

fields=()
while IFS= read -r -d '' f; do fields+=("$f"); done < <(parse) || true
parse > /dev/null || exit 2
n=$(( ${#fields[@]} / 5 ))
[ "$n" -gt 0 ] || { echo "mutate.sh: no breaks in $list" >&2; exit 2; }

if [ "$mode" = check ]; then
    # the names CTest's files declare (not `ctest -N`, which would empty the log of a ctest run
    # this check may be part of)
    known=$(find "$build" -name CTestTestfile.cmake -exec sed -n 's/^add_test(\[=\[\([^]]*\)\]=\].*/\1/p' {} +)
    [ -n "$known" ] || { echo "mutate.sh: no tests known to ctest in $build" >&2; exit 2; }
    # one Python for the whole list: a process per anchor took a minute on a loaded machine
    printf '%s\0' "${fields[@]}" | "$py" -c '
import sys
f = sys.stdin.buffer.read().decode().split("\0")[:-1]
known = set(sys.argv[1].split("\n"))
bad = 0
for i in range(0, len(f), 5):
    what, file, anchor, tests = f[i], f[i + 1], f[i + 2], f[i + 4]
    try:
        c = open(file, encoding="utf-8").read().count(anchor)
    except OSError:
        print("STALE   %s: no such file (%s)" % (file, what)); bad = 1; continue
    if c != 1:
        print("STALE   %s: anchor found %d times, not once (%s)" % (file, c, what)); bad = 1
    if not tests.split():
        print("BAD     %s: no test named (%s)" % (file, what)); bad = 1
    for t in tests.split():
        if t not in known:
            print("UNKNOWN %s: not a test of %s (%s)" % (t, sys.argv[2], what)); bad = 1
if not bad:
    print("mutate.sh: %d breaks, every anchor once in its file, every test known" % (len(f) // 5))
sys.exit(bad)' "$known" "$build"
    exit
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null || exit 2
fi
echo "mutate.sh: building $build first, unbroken"
cmake --build "$build" -j "$jobs" > "$build/mutate-build.log" 2>&1 ||
    { tail -20 "$build/mutate-build.log"; echo "mutate.sh: the unbroken tree does not build" >&2; exit 2; }

saved=""
backup=$(mktemp)
restore() {
    if [ -n "$saved" ]; then
        cp -p "$backup" "$root/$saved"
        # newer than the broken build: the next build recompiles it
        touch "$root/$saved"
        saved=""
    fi
}
trap 'restore; rm -f "$backup"' EXIT
trap 'restore; rm -f "$backup"; exit 130' INT TERM

missed=0
for ((i = 0; i < n; i++)); do
    what=${fields[5*i]} file=${fields[5*i+1]} anchor=${fields[5*i+2]} repl=${fields[5*i+3]}
    tests=${fields[5*i+4]}
    [ -n "$only" ] && ! printf '%s %s %s\n' "$what" "$file" "$tests" | grep -q -- "$only" && continue
    c=0
    [ -f "$file" ] && c=$(anchor_count "$file" "$anchor")
    if [ "$c" != 1 ]; then
        echo "STALE   $file ($what): anchor found $c times, not once"
        missed=1
        continue
    fi
    cp -p "$file" "$backup"
    saved=$file
    apply "$file" "$anchor" "$repl"
    if ! cmake --build "$build" -j "$jobs" > "$build/mutate-build.log" 2>&1; then
        restore
        echo "BROKEN  $file ($what): the broken code does not build, see $build/mutate-build.log"
        missed=1
        continue
    fi
    got=""
    for t in $tests; do
        # a test that passes, or is skipped, with the code broken has not caught it
        if ctest --test-dir "$build" -R "^${t}\$" --output-on-failure > "$build/mutate-$t.log" 2>&1; then
            if grep -q "(Skipped)" "$build/mutate-$t.log"; then got="$got $t(skipped)"; else got="$got $t"; fi
        fi
    done
    restore
    if [ -n "$got" ]; then
        echo "MISSED  $file ($what): passed with it:$got"
        missed=1
    else
        echo "CAUGHT  $file ($what): $tests"
    fi
done
echo "mutate.sh: bringing $build back to the unbroken tree"
cmake --build "$build" -j "$jobs" > "$build/mutate-build.log" 2>&1
exit "$missed"
