/* Checks for faiss_c calls in the faiss-label tests (on top of testutil.h). */
#ifndef GRAFT_FAISS_TESTUTIL_H
#define GRAFT_FAISS_TESTUTIL_H

#include <string.h>

#include <faiss/c_api/error_c.h>

#include "testutil.h"

/* expr (a faiss_c call) must return 0; the failure message names faiss's error. */
#define FAISS_OK(expr)                                                                   \
    do {                                                                                 \
        int rc_ = (expr);                                                                \
        CHECK(rc_ == 0, "%s -> %d: %s", #expr, rc_, rc_ ? faiss_get_last_error() : "");  \
    } while (0)

/* expr must fail (nonzero) with a message containing `needle`. */
#define FAISS_FAILS(expr, needle)                                                        \
    do {                                                                                 \
        int rc_ = (expr);                                                                \
        const char* m_ = rc_ ? faiss_get_last_error() : "";                              \
        CHECK(rc_ != 0 && m_ && strstr(m_, needle), "%s -> %d, expected an error naming '%s', got: %s", \
              #expr, rc_, needle, m_ ? m_ : "(null)");                                   \
    } while (0)

#endif
