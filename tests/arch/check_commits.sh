#!/bin/sh
# check_commits.sh [REPO] — refuses a commit subject over 72 characters (CONTRIBUTING.md).
#
# It checks the commits after BASE, the last commit of the history before the rule (whose long
# subjects stay: history is not rewritten). In a shallow clone that does not reach BASE it checks
# every commit the clone has, which are then all after BASE (a clone of a newer branch that lacks
# BASE altogether is treated the same way). RANKSNAP_COMMITS_BASE names another base, e.g. a
# branch's merge base, to check only the commits a change adds.
set -eu
repo=${1:-$(dirname "$0")/../..}
base=${RANKSNAP_COMMITS_BASE:-c0524ef19e9c98f4a9060fdc8dc9547b442c6d8b}
max=72
cd "$repo"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "check_commits: $PWD is not a git clone; nothing to check"
  exit 0
fi
if git cat-file -e "$base^{commit}" 2>/dev/null; then
  range="$base..HEAD"
else
  echo "check_commits: base $base is not in this clone (shallow?); checking every commit it has"
  range=HEAD
fi
# %x09 (a tab) between the id and the subject: a subject may hold any other character.
# Characters, not bytes: UTF-8 continuation bytes are not counted (mawk's length() counts bytes).
bad=$(git log --no-merges --format='%h%x09%s' "$range" | LC_ALL=C awk -F '\t' -v max="$max" '
  { s = substr($0, length($1) + 2); t = s; gsub(/[\200-\277]/, "", t) }
  length(t) > max { printf "  %s (%d characters): %s\n", $1, length(t), s }')
n=$(git rev-list --no-merges --count "$range")
if [ -n "$bad" ]; then
  echo "check_commits: subjects over $max characters (CONTRIBUTING.md: at most $max, a blank line, a body):"
  echo "$bad"
  exit 1
fi
echo "check_commits: $n commit(s) after the base, every subject at most $max characters"
