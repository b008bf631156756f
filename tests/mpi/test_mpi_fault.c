/* A rank that stops answering or dies (issue 49), run by tests/mpi/fault.sh under mpirun:
 *   stall: rank 1 sleeps through a search (a stopped process, a hung GPU): the other ranks must
 *          get a FAISS error within the index's timeout (2 s here), and every later call at once;
 *   stall4: the same with the search pipelined in 4 chunks (merge_chunks): the other ranks'
 *          chunk searches run on ahead on their worker while the agreement waits, and must end
 *          with the same error, not a hang;
 *   die:   rank 1 is killed (SIGKILL) before a search: the others get an error within the
 *          timeout, or the MPI runtime ends the job; either way nothing hangs (fault.sh times it).
 * Each rank prints "EVENT <name> <unix time> ..." lines that fault.sh reads. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "graft_mpi_c.h"

static double unix_s(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char* mode = argc > 1 ? argv[1] : "stall";
    enum { d = 16, nb = 1000, nq = 8, k = 5 };
    float* xb = malloc(sizeof(float) * nb * d);
    for (int i = 0; i < nb * d; i++) xb[i] = (float)((i * 7919) % 1000) / 1000.0f;
    FaissIndex* index = NULL;
    if (faiss_graft_index_factory(&index, d, "MPI,timeout=2,GraftFlat,cpu", METRIC_L2)) {
        fprintf(stderr, "rank %d: factory: %s\n", rank, faiss_get_last_error());
        return 2;
    }
    if (!strcmp(mode, "stall4") && faiss_graft_set_param(index, "merge_chunks", 4)) {
        fprintf(stderr, "rank %d: merge_chunks: %s\n", rank, faiss_get_last_error());
        return 2;
    }
    float D[nq * k];
    idx_t I[nq * k];
    int rc = faiss_Index_add(index, nb, xb) || faiss_Index_search(index, nq, xb, k, D, I);
    printf("EVENT ready %.3f rank %d rc %d\n", unix_s(), rank, rc);
    fflush(stdout);
    if (rank == 1) {
        if (!strcmp(mode, "die")) {
            printf("EVENT died %.3f rank 1\n", unix_s());
            fflush(stdout);
            raise(SIGKILL);
        }
        sleep(8);  /* stall: away for four timeouts */
    }
    const double t0 = unix_s();
    rc = faiss_Index_search(index, nq, xb, k, D, I);
    const double t1 = unix_s();
    printf("EVENT error %.3f rank %d rc %d after %.2f s: %s\n", t1, rank, rc, t1 - t0,
           rc ? faiss_get_last_error() : "(none)");
    rc = faiss_Index_search(index, nq, xb, k, D, I);
    printf("EVENT again %.3f rank %d rc %d after %.3f s: %s\n", unix_s(), rank, rc, unix_s() - t1,
           rc ? faiss_get_last_error() : "(none)");
    fflush(stdout);
    /* The communicator is unusable: end the job, as docs/mpi.md tells a program to. */
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 0;
}
