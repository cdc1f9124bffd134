# How kvserve's OpenMP threads wait at barriers, as scripts/run.sh starts it (sourced; POSIX sh).
# deploy/Containerfile sets the same GOMP_SPINCOUNT for the image (tests/scripts/openmp_defaults_test.py
# checks the two agree).
#
# libgomp's default spins ~300,000 times at a barrier before it sleeps (~9 ms on a Zen 4 core,
# longer than a scheduler slice): on cores shared with other busy processes a waiting thread
# burns its share while the thread it waits for is not running. OMP_WAIT_POLICY=passive sleeps
# at once, but on dedicated cores every op's barrier then pays a wake-up (decode 2.4x slower
# on a quiet 2-vCPU VM). 30,000 spins (~0.9 ms there) covers a step's barriers and its short
# serial parts (sampling, delivery) and stays below a scheduler slice (~3 ms); 10,000 did as
# well except with 32 requests served to a client on the same cores (~6% slower). Figures:
# docs/PERF.md, 2026-12-03 (seventeenth session).
# A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept as given.
if [ -z "${OMP_WAIT_POLICY:-}" ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then
  export GOMP_SPINCOUNT=30000
fi
