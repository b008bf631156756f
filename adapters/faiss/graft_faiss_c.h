/* graft for FAISS's C API: constructors that hand graft indexes out as FaissIndex*.
 *
 * Everything else goes through the usual faiss_c calls (faiss_Index_add, faiss_Index_search,
 * faiss_Index_reset, faiss_Index_free, faiss_IndexIDMap_new, ...). Same conventions as faiss_c:
 * out-parameter first, int status back (0 on success, negative on error), the message in
 * faiss_get_last_error(). The returned index is owned by the caller (faiss_Index_free).
 */
#ifndef GRAFT_FAISS_C_H
#define GRAFT_FAISS_C_H

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/faiss_c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exact k-NN index (IndexFlat semantics) searched on the GPU: cuBLAS distance GEMM + quick
 * multi-select. device -1 searches with the CPU reference. Any k works (FAISS GPU stops at 2048). */
int faiss_GraftIndexFlat_new(FaissIndex** p_index, int d, FaissMetricType metric, int device);

/* Tells whether index is a graft flat index (NULL when not), like faiss_IndexFlat_cast. */
FaissIndex* faiss_GraftIndexFlat_cast(FaissIndex* index);

#ifdef __cplusplus
}
#endif
#endif
