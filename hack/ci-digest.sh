#!/usr/bin/env bash
# ci-digest.sh LOG...: the lines of the given logs that say why a phase
# failed: go test's FAIL lines, testify's error blocks (their first lines:
# where, what, which test, the message's first line, each cut to 400
# characters), panics, make's errors and the phases that ended non-zero. At
# most 150 lines, so that an output of which only the tail is kept still
# shows them (.ci/run prints it last).
set -euo pipefail
awk '
  /Error Trace:/ { n = 8 }
  n > 0 { print substr($0, 1, 400); n--; next }
  /--- FAIL|^(\[[A-Z]\] )?FAIL|panic:|make: \*\*\*|took [0-9]+s \(rc=[1-9]/ { print substr($0, 1, 400) }
' "$@" | tail -n 150
