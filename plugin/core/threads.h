/* How many OpenMP threads a pass over `bytes` of memory should fork: one a MiB (~100 us of a
 * core's scan), at most the caller's. A call's small passes (the check of a 1k-vector add, 512 KB)
 * then run on the calling thread: a fork-join of every core costs more than such a pass, and on
 * a host whose cores are busy it waits for the slowest thread to be scheduled. Use as
 * `#pragma omp parallel for num_threads(t) if (t > 1)`. */
#ifndef GRAFT_CORE_THREADS_H
#define GRAFT_CORE_THREADS_H

#include <omp.h>
#include <stdint.h>
#include <string.h>

static inline int graft_threads_for(int64_t bytes) {
    const int64_t want = 1 + bytes / (1 << 20);
    const int most = omp_get_max_threads();
    return want < most ? (int)want : most;
}

/* memcpy on t threads, each a contiguous part of about bytes / t; on the calling thread when
 * t < 2 or inside a parallel region. The one parallel copy: graft_copy_rows (an add, t from
 * graft_threads_for) and graft_memcpy_wide (a search call's queries) choose only t. */
static inline void graft_memcpy_on(void* dst, const void* src, size_t bytes, int t) {
    if (t < 2 || omp_in_parallel()) {
        memcpy(dst, src, bytes);
        return;
    }
#pragma omp parallel num_threads(t)
    {
        const size_t n = (size_t)omp_get_num_threads(), per = (bytes / n + 63) & ~(size_t)63;
        const size_t a = (size_t)omp_get_thread_num() * per;
        if (a < bytes) memcpy((char*)dst + a, (const char*)src + a, per < bytes - a ? per : bytes - a);
    }
}

/* A search call's copy of its queries into pinned staging: on a few threads (one per 2 MiB)
 * whatever OMP_NUM_THREADS says, so that the host work of a call costs the same at any OpenMP
 * setting (only OMP_THREAD_LIMIT caps it). A 10k-query call at d = 784 copies 31 MB: on one core
 * (~10 GB/s, less beside busy hyperthreads) that copy is as long as the walk's kernels and sets
 * the call's pace; a few threads reach the host's memory bandwidth. Small copies (a batch of 1,
 * the 1.4-2.6 MB chunks of a 10k call at d = 128) stay on the calling thread. `most`: at most
 * that many threads (4 by default, graph_gpu.c). */
static inline void graft_memcpy_wide(void* dst, const void* src, size_t bytes, int most) {
    int t = (int)(bytes >> 21);
    if (t > most) t = most;
    if (t > omp_get_num_procs()) t = omp_get_num_procs();
    graft_memcpy_on(dst, src, bytes, t);
}

#endif
