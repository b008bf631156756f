/* Internal: argument checks shared by the index objects. */
#ifndef GRAFT_VALIDATE_H
#define GRAFT_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

/* GRAFT_EINVAL naming `what` and the first offending row when x (n x d) holds NaN or +-Inf. */
int graft_check_finite(const float* x, int64_t n, int64_t d, const char* what);

#endif
