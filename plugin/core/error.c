#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* One message buffer per thread, as faiss_c keeps its last exception in a thread_local. */
static _Thread_local char last_error[1024];

int graft_fail(int status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

const char* graft_last_error(void) { return last_error; }

void graft_clear_error(void) { last_error[0] = '\0'; }

const char* graft_status_name(int status) {
    switch (status) {
    case GRAFT_OK: return "GRAFT_OK";
    case GRAFT_EINVAL: return "GRAFT_EINVAL";
    case GRAFT_EIO: return "GRAFT_EIO";
    case GRAFT_EFORMAT: return "GRAFT_EFORMAT";
    case GRAFT_ENOMEM: return "GRAFT_ENOMEM";
    case GRAFT_EGPU_NOMEM: return "GRAFT_EGPU_NOMEM";
    case GRAFT_ECUDA: return "GRAFT_ECUDA";
    case GRAFT_ENODEVICE: return "GRAFT_ENODEVICE";
    case GRAFT_EUNSUPPORTED: return "GRAFT_EUNSUPPORTED";
    case GRAFT_ESTATE: return "GRAFT_ESTATE";
    case GRAFT_EINTERNAL: return "GRAFT_EINTERNAL";
    default: return "GRAFT_E?";
    }
}
