#!/usr/bin/env bash
# Builds one tool into bin/ with one line of progress instead of pages of
# `go: downloading`: what is built, which of how many, roughly how long it
# takes; the build's own output goes to a log whose path is printed, and its
# tail is shown when the build fails.
#
#   hack/build-tool.sh NAME VERSION INDEX ESTIMATE -- COMMAND...
#
# INDEX says where the tool is in TOOLS_ORDER ("2 of 9"); ESTIMATE is the
# time measured on 2 cores (docs: README "The two commands").
set -euo pipefail
name=$1 version=$2 index=$3 estimate=$4
shift 4
[ "${1:-}" = "--" ] && shift
logdir=${TOOL_LOG_DIR:?TOOL_LOG_DIR is set by the Makefile}
mkdir -p "$logdir"
log="$logdir/$name.log"
# Two makes (.ci/run's streams) may want the same tool at once: one builds
# it, the other waits for it and then uses it, so no binary in bin/ is
# written while another make runs it. STAMP is the make target the build
# stands for (the Makefile passes it).
exec 9>"$logdir/$name.lock"
if ! flock -n 9; then
  echo "waiting for another make to build $name $version"
  flock 9
fi
if [ -n "${STAMP:-}" ] && [ -e "$STAMP" ]; then
  echo "  $name $version was built by another make meanwhile"
  exit 0
fi
echo "building $name $version ($index, $estimate on 2 cores; cached in bin/ after this; log: $log)"
start=$(date +%s)
if ! "$@" >"$log" 2>&1; then
  echo "building $name failed after $(( $(date +%s) - start ))s; the last lines of $log:" >&2
  tail -n 25 "$log" | sed 's/^/  | /' >&2
  exit 1
fi
echo "  $name built in $(( $(date +%s) - start ))s"
# Still holding the lock: a make waiting for it sees the tool built.
if [ -n "${STAMP:-}" ]; then touch "$STAMP"; fi
