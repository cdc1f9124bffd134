// Included last in an AVX-512 kernel file, after every other header: the functions defined
// below it are compiled for AVX-512 F/BW/VL/DQ + VNNI, and only those. Why not -mavx512f on the
// whole file: inline functions and templates from shared headers (std::, fp16 helpers) would
// then also be emitted with AVX-512 code under their ordinary names, and the linker could keep
// that copy for the AVX2 callers too — an illegal instruction on a CPU without AVX-512. Code
// in such a file is reached only through the kernel table after CpuSupports(kAvx512).
#pragma once

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), \
                             apply_to = function)
#define KVSERVE_AVX512_END _Pragma("clang attribute pop")
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
// GCC 12's AVX-512 intrinsics fill their "undefined" operand from itself (`__m512 __Y = __Y`),
// which -O3 reports as (maybe-)uninitialized once inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define KVSERVE_AVX512_END
#endif
