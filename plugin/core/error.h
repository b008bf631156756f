/* Internal: how plugin code raises errors. Not installed. */
#ifndef GRAFT_ERROR_INTERNAL_H
#define GRAFT_ERROR_INTERNAL_H

#include "graft/graft.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GRAFT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GRAFT_PRINTF(a, b)
#endif

/* Records "fmt..." as this thread's last error and returns status, so that callers write
 * `return graft_fail(GRAFT_EINVAL, "k must be > 0, got %d", k);`. */
int graft_fail(int status, const char* fmt, ...) GRAFT_PRINTF(2, 3);

/* Evaluates a status-returning expression and returns its status from the caller on failure;
 * the message set by the callee is kept. */
#define GRAFT_TRY(expr)                 \
    do {                                \
        int graft_try_rc_ = (expr);     \
        if (graft_try_rc_ != GRAFT_OK)  \
            return graft_try_rc_;       \
    } while (0)

/* Overflow-checked size product: returns 0 and sets *out, or 1 when a*b overflows size_t. */
static inline int graft_mul_overflow(size_t a, size_t b, size_t* out) {
    if (a != 0 && b > (size_t)-1 / a)
        return 1;
    *out = a * b;
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
