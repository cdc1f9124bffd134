#!/usr/bin/env bash
# expect.sh ok|fail REGEX -- COMMAND...: runs COMMAND; "fail" wants exit status 1 (an error,
# not a crash: signals give >128) and REGEX in stderr; "ok" wants status 0 and REGEX in stdout.
set -u
mode=$1 regex=$2; shift 3
out=$(mktemp) err=$(mktemp); trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"; rc=$?
want=0; stream=$out
[ "$mode" = fail ] && { want=1; stream=$err; }
if [ "$rc" -ne "$want" ]; then
  echo "exit status $rc, wanted $want"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1
fi
if ! grep -Eq -- "$regex" "$stream"; then
  echo "output does not match /$regex/"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1
fi
echo "ok: $(head -c 300 "$stream")"
