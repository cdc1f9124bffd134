#!/usr/bin/env python3
"""The built kernels keep their software prefetches, at every level the run-time choice can take.

A prefetch has no visible effect, so a compiler may drop it as dead code; GCC 12 did so for
every _mm_prefetch behind a run-time switch (kernels/cpu/prefetch.h), silently, and 4K decode
lost a fifth of its speed. This reads the kernels library's disassembly and checks that each
object that streams K/V or weights holds prefetchnta, prefetcht0 and prefetcht1.
    prefetch_emitted_test.py path/to/libkvserve_kernels.a
"""
import re
import subprocess
import sys

STREAMING_OBJECTS = ['attention_dots.cc.o', 'attention_dots_avx512.cc.o', 'quant_dot.cc.o', 'quant_dot_avx512.cc.o',
                     'quant_dot_tile_avx2.cc.o', 'quant_dot_tile_avx512.cc.o']
LEVELS = ['prefetchnta', 'prefetcht0', 'prefetcht1']


def main():
    text = subprocess.run(['objdump', '-d', sys.argv[1]], capture_output=True, text=True, check=True).stdout
    found = {}
    obj = None
    for line in text.splitlines():
        m = re.match(r'^(\S+\.o):\s+file format', line)
        if m:
            obj = m.group(1)
            found[obj] = set()
            continue
        for level in LEVELS:
            if obj and re.search(r'\s%s\s' % level, line):
                found[obj].add(level)
    failures = []
    for name in STREAMING_OBJECTS:
        if name not in found:
            failures.append(f'{name}: not in the library')
            continue
        missing = [level for level in LEVELS if level not in found[name]]
        if missing:
            failures.append(f'{name}: no {", ".join(missing)}')
    for f in failures:
        print('FAIL', f)
    if not failures:
        print('ok:', ', '.join(f'{n} {sorted(found[n])}' for n in STREAMING_OBJECTS))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
