/* How many OpenMP threads a pass over `bytes` of memory should fork: one a MiB (~100 us of a
 * core's scan), at most the caller's. A call's small passes (the check of a 1k-vector add, 512 KB)
 * then run on the calling thread: a fork-join of every core costs more than such a pass, and on
 * a host whose cores are busy it waits for the slowest thread to be scheduled. Use as
 * `#pragma omp parallel for num_threads(t) if (t > 1)`. */
#ifndef GRAFT_CORE_THREADS_H
#define GRAFT_CORE_THREADS_H

#include <omp.h>
#include <stdint.h>

static inline int graft_threads_for(int64_t bytes) {
    const int64_t want = 1 + bytes / (1 << 20);
    const int most = omp_get_max_threads();
    return want < most ? (int)want : most;
}

#endif
