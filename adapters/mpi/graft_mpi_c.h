/* graft across MPI ranks for FAISS's C API (issue 49; docs/mpi.md). libgraft_mpi, CMake target
 * graft::mpi, built where CMake finds MPI. Same conventions as faiss_c: out-parameter first, int
 * status back (0 on success, negative on error), the message in faiss_get_last_error().
 *
 * SPMD: every rank of the communicator makes every call below and every faiss_Index_* call on
 * the index, in the same order, with the same arguments (the same batch to add, the same
 * queries). Each call is collective and ends within the index's "timeout" (seconds, default 600;
 * faiss_graft_set_param(index, "timeout", s)): bad input on one rank fails on every rank with the
 * same message, and a rank that died or stopped answering makes the others fail within the
 * timeout, after which the index is unusable. MPI must be initialized first (MPI_Init).
 *
 * Linking libgraft_mpi also teaches faiss_graft_index_factory the prefix "MPI," (on
 * MPI_COMM_WORLD), so that a pipeline switches by its string alone:
 *   "MPI,<local>"              one index across the ranks; every rank holds a <local> index
 *                              (any string faiss_graft_index_factory takes: "GraftGraph,cpu",
 *                              "GraftFlat,gpu=0", "GraftGraph,gpus=0-1", "Flat", ...)
 *   "MPI,timeout=S,<local>"    with a timeout of S seconds
 *   "gpu=local" in <local>     each rank's GPU is its place among its host's ranks, mod the
 *                              visible GPUs ("MPI,GraftGraph,gpu=local"; the CPU where none is)
 * Adds spread the batch over the ranks (rank r keeps rows [r n / R, (r + 1) n / R)), ids stay
 * global (add order, as one index numbers them); a search merges every rank's k best on every rank
 * (ties to the smaller id): the results of one process's IndexShards over the same parts. */
#ifndef GRAFT_MPI_C_H
#define GRAFT_MPI_C_H

#include <mpi.h>

#include "graft_faiss_c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Including this header makes a program need libgraft_mpi even when it calls nothing of it but
 * faiss_graft_index_factory("MPI,..."): the reference below keeps a linker that drops unused
 * libraries (--as-needed) from dropping it, and with it the "MPI," prefix it registers. */
extern const int faiss_graft_mpi_linked;
static const int* const faiss_graft_mpi_link_ __attribute__((used)) = &faiss_graft_mpi_linked;

/* faiss_graft_index_factory's "MPI,..." strings on the communicator comm (collective). */
int faiss_graft_mpi_index_factory(FaissIndex** p_index, int d, const char* description,
                                  FaissMetricType metric, MPI_Comm comm);

/* Tells whether index is an index across MPI ranks (NULL when not). */
FaissIndex* faiss_GraftIndexMPI_cast(FaissIndex* index);

/* Each rank adds its own n rows (n may differ between ranks, 0 too): data already spread over
 * the machines. Rank r's row i gets id ntotal + n_0 + ... + n_{r-1} + i. */
int faiss_graft_mpi_add_local(FaissIndex* index, idx_t n, const float* x);

/* Rank r writes its part to "<fname>.rank<r>" (docs/file-format.md); the reader loads it on as
 * many ranks as wrote it. placement: NULL or "" (as written), "cpu", "gpu=N", "gpu=local", as
 * faiss_graft_read_index_placed's. timeout: seconds, <= 0 for the default. */
int faiss_graft_mpi_write_index_fname(const FaissIndex* index, const char* fname);
int faiss_graft_mpi_read_index_fname(const char* fname, const char* placement, MPI_Comm comm,
                                     double timeout, FaissIndex** p_out);

#ifdef __cplusplus
}
#endif
#endif
