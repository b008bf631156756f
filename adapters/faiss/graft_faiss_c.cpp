// C entry points of graft_faiss_c.h, in faiss_c's idiom (try { ... } CATCH_AND_HANDLE).
#include "graft_faiss_c.h"

#include <faiss/c_api/macros_impl.h>
#include <faiss/impl/FaissAssert.h>

#include "GraftIndexFlat.h"

extern "C" {

int faiss_GraftIndexFlat_new(FaissIndex** p_index, int d, FaissMetricType metric, int device) {
    try {
        FAISS_THROW_IF_NOT_MSG(p_index, "faiss_GraftIndexFlat_new: p_index is NULL");
        graft_flat_params p;
        graft_flat_params_defaults(&p);
        p.device = device;
        auto* index = new graft::GraftIndexFlat(d, static_cast<faiss::MetricType>(metric), &p);
        *p_index = reinterpret_cast<FaissIndex*>(index);
        return 0;
    }
    CATCH_AND_HANDLE
}

FaissIndex* faiss_GraftIndexFlat_cast(FaissIndex* index) {
    return reinterpret_cast<FaissIndex*>(
            dynamic_cast<graft::GraftIndexFlat*>(reinterpret_cast<faiss::Index*>(index)));
}

}  // extern "C"
