/* mpi_bench: an index across MPI ranks against one process (issue 49), run by mpirun on every
 * rank (the device/run.sh job mpi on the GPU machine, docs/mpi.md):
 *
 *   mpirun -np 2 mpi_bench BASE QUERY [--index "MPI,GraftGraph,gpu=local"]
 *          [--compare "GraftGraph,gpus=0-1"] [--L 32,48,64,96,128] [--batch 10000] [--k 10]
 *          [--chunks 1,0] [--calls 5] [--records FILE.jsonl]
 *
 * Every rank reads BASE and QUERY (any file graft/dataset.h reads), builds --index (the add and
 * the first search, which builds every rank's graph, timed), then at each L searches the whole
 * query set in batches, --calls times (median wall time on rank 0: QPS); recall@k against the
 * exact k-NN (GraftFlat on rank 0). The search's phases on rank 0 (local search, the wait for the
 * slowest rank, the merge across ranks) are the scaling model's measured inputs (docs/mpi.md).
 * --chunks: the index's merge_chunks at each L, one row each, in the same run (1: the merge
 * unpipelined, 0: the automatic rule, N: N chunks); the row says the chunks a batch used and the
 * call's time, of which the phases overlap once the chunks pipeline.
 * Then rank 0 alone builds --compare (one process, e.g. the same GPUs as shards) and measures it
 * the same way, while the other ranks wait. A table on rank 0, and JSON records (DESIGN.md's
 * fields, bench "mpi") appended to --records: run_id, commit and device from GRAFT_RUN_ID,
 * GRAFT_COMMIT, GRAFT_DEVICE. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "graft/dataset.h"
#include "graft_mpi_c.h"

#define MAX_L 32

static int rank, ranks;

static void die(const char* what) {
    fprintf(stderr, "mpi_bench (rank %d): %s: %s\n", rank, what, faiss_get_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static float* load(const char* path, int64_t* n, int64_t* d) {
    float* x = NULL;
    if (graft_dataset_read_f32(path, 0, -1, &x, n, d) != GRAFT_OK) {
        fprintf(stderr, "mpi_bench: %s\n", graft_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return x;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

typedef struct measure {
    double qps, recall, local_s, wait_s, merge_s, total_s; /* phases: summed over a call's batches */
    double chunks;                                          /* a batch's chunks (the last batch's) */
} measure;

/* The whole query set in batches, `calls` times after one warm-up call; rank 0's median. */
static measure run(FaissIndex* index, int is_mpi, const float* xq, int64_t nq, int64_t d, int64_t k,
                   int64_t batch, int calls, const idx_t* truth, MPI_Comm comm) {
    float* D = malloc(sizeof(float) * nq * k);
    idx_t* I = malloc(sizeof(idx_t) * nq * k);
    double secs[64], phase[64][4];
    measure m = {0};
    for (int c = -1; c < calls; c++) {
        double ph[4] = {0, 0, 0, 0};
        MPI_Barrier(comm);
        const double t0 = MPI_Wtime();
        for (int64_t q = 0; q < nq; q += batch) {
            const int64_t n = nq - q < batch ? nq - q : batch;
            if (faiss_Index_search(index, n, xq + q * d, k, D + q * k, I + q * k)) die("search");
            if (is_mpi) {
                double v;
                faiss_graft_get_param(index, "last_local_s", &v), ph[0] += v;
                faiss_graft_get_param(index, "last_wait_s", &v), ph[1] += v;
                faiss_graft_get_param(index, "last_merge_s", &v), ph[2] += v;
                faiss_graft_get_param(index, "last_total_s", &v), ph[3] += v;
                if (q == 0) faiss_graft_get_param(index, "last_chunks", &m.chunks);
            }
        }
        if (c < 0) continue;
        secs[c] = MPI_Wtime() - t0;
        memcpy(phase[c], ph, sizeof ph);
    }
    double sorted[64];
    memcpy(sorted, secs, sizeof(double) * calls);
    qsort(sorted, calls, sizeof(double), cmp_double);
    const double med = sorted[calls / 2];
    m.qps = nq / med;
    for (int c = 0; c < calls; c++)
        if (secs[c] == med)
            m.local_s = phase[c][0], m.wait_s = phase[c][1], m.merge_s = phase[c][2], m.total_s = phase[c][3];
    int64_t hits = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < k; j++)
                if (I[q * k + i] >= 0 && I[q * k + i] == truth[q * k + j]) hits++;
    m.recall = (double)hits / (double)(nq * k);
    free(D);
    free(I);
    return m;
}

static void record(FILE* f, const char* run_id, const char* desc, const char* base, int64_t nb,
                   int64_t d, int64_t nq, int64_t k, int L, int64_t batch, int nranks, int merge_chunks,
                   double build_s, measure m) {
    const char* commit = getenv("GRAFT_COMMIT");
    const char* device = getenv("GRAFT_DEVICE");
    char date[32];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    char chunks[80] = "";  /* the index across ranks only: its merge_chunks and a batch's chunks */
    if (merge_chunks >= 0)
        snprintf(chunks, sizeof chunks, ", \"merge_chunks\": %d, \"chunks\": %.0f", merge_chunks, m.chunks);
    fprintf(f,
            "{\"run_id\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\", \"device\": \"%s\", "
            "\"bench\": \"mpi\", \"system\": \"graft\", \"family\": \"graph\", \"index\": \"%s\", "
            "\"dataset\": \"%s\", \"n\": %lld, \"d\": %lld, \"nq\": %lld, \"k\": %lld, \"metric\": \"L2\", "
            "\"params\": {\"L\": %d, \"batch\": %lld, \"ranks\": %d%s, \"local_s\": %.6f, "
            "\"wait_s\": %.6f, \"merge_s\": %.6f, \"total_s\": %.6f}, \"qps\": %.1f, \"recall\": %.5f, "
            "\"build_s\": %.3f}\n",
            run_id, date, commit ? commit : "unknown", device ? device : "unknown", desc, base,
            (long long)nb, (long long)d, (long long)nq, (long long)k, L, (long long)batch, nranks,
            chunks, m.local_s, m.wait_s, m.merge_s, m.total_s, m.qps, m.recall, build_s);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np R %s BASE QUERY [options] (see its header)\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *desc = "MPI,GraftGraph,gpu=local", *compare = NULL, *records = NULL;
    char Ls[256] = "32,48,64,96,128", chunk_list[256] = "1,0";
    int64_t batch = 10000, k = 10;
    int calls = 5;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--index")) desc = argv[i + 1];
        else if (!strcmp(argv[i], "--compare")) compare = argv[i + 1];
        else if (!strcmp(argv[i], "--L")) snprintf(Ls, sizeof Ls, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--k")) k = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunks")) snprintf(chunk_list, sizeof chunk_list, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--records")) records = argv[i + 1];
        else if (rank == 0) fprintf(stderr, "mpi_bench: unknown option %s\n", argv[i]);
    }
    if (calls < 1) calls = 1;
    if (calls > 64) calls = 64;
    int Lv[MAX_L], nL = 0;
    for (char* tok = strtok(Ls, ","); tok && nL < MAX_L; tok = strtok(NULL, ",")) Lv[nL++] = atoi(tok);
    int chunks_v[MAX_L], n_chunks = 0;
    for (char* tok = strtok(chunk_list, ","); tok && n_chunks < MAX_L; tok = strtok(NULL, ","))
        chunks_v[n_chunks++] = atoi(tok);
    if (n_chunks == 0) chunks_v[n_chunks++] = 0;
    int64_t nb, d, nq, dq;
    float* xb = load(argv[1], &nb, &d);
    float* xq = load(argv[2], &nq, &dq);
    if (dq != d) die("the queries' dimension differs from the base's");

    /* The exact k-NN on rank 0 (GPU 0 when one is visible). */
    idx_t* truth = malloc(sizeof(idx_t) * nq * k);
    if (rank == 0) {
        FaissIndex* flat = NULL;
        float* D = malloc(sizeof(float) * nq * k);
        if (faiss_graft_index_factory(&flat, (int)d, "GraftFlat", METRIC_L2) ||
            faiss_Index_add(flat, nb, xb) || faiss_Index_search(flat, nq, xq, k, D, truth))
            die("ground truth");
        faiss_Index_free(flat);
        free(D);
    }
    char run_id[64];
    snprintf(run_id, sizeof run_id, "%s", getenv("GRAFT_RUN_ID") ? getenv("GRAFT_RUN_ID") : "mpi-bench");
    FILE* rec = rank == 0 && records ? fopen(records, "a") : NULL;
    const char* base = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];

    for (int pass = 0; pass < (compare ? 2 : 1); pass++) {
        const int is_mpi = pass == 0;
        const char* what = is_mpi ? desc : compare;
        if (!is_mpi && rank != 0) {
            MPI_Barrier(MPI_COMM_WORLD); /* rank 0 measures the one-process index alone */
            break;
        }
        MPI_Comm comm = is_mpi ? MPI_COMM_WORLD : MPI_COMM_SELF;
        FaissIndex* index = NULL;
        MPI_Barrier(comm);
        const double t0 = MPI_Wtime();
        float D1[1024];
        idx_t I1[1024];
        if (faiss_graft_index_factory(&index, (int)d, what, METRIC_L2) || faiss_Index_add(index, nb, xb) ||
            faiss_Index_search(index, 1, xq, k, D1, I1))
            die(what);
        const double build_s = MPI_Wtime() - t0;
        if (rank == 0) {
            printf("%s on %d rank(s): built in %.2f s (add + the first search)\n", what, is_mpi ? ranks : 1, build_s);
            printf("  %5s %8s %6s %6s %12s %10s %10s %10s %10s\n", "L", "recall", "merge", "chunks", "QPS",
                   "local s", "wait s", "merge s", "call s");
        }
        for (int j = 0; j < nL; j++) {
            if (faiss_graft_set_param(index, "L", Lv[j])) die("set L");
            /* The one-process index has no merge to pipeline: one row a L. */
            for (int c = 0; c < (is_mpi ? n_chunks : 1); c++) {
                if (is_mpi && faiss_graft_set_param(index, "merge_chunks", chunks_v[c])) die("set merge_chunks");
                measure m = run(index, is_mpi, xq, nq, d, k, batch, calls, truth, comm);
                if (rank != 0) continue;
                char setting[16] = "-";
                if (is_mpi) snprintf(setting, sizeof setting, "%s", chunks_v[c] ? "" : "auto");
                if (is_mpi && chunks_v[c]) snprintf(setting, sizeof setting, "%d", chunks_v[c]);
                printf("  %5d %8.4f %6s %6.0f %12.0f %10.4f %10.4f %10.4f %10.4f\n", Lv[j], m.recall, setting,
                       is_mpi ? m.chunks : 1, m.qps, m.local_s, m.wait_s, m.merge_s, m.total_s);
                fflush(stdout);
                if (rec)
                    record(rec, run_id, what, base, nb, d, nq, k, Lv[j], batch, is_mpi ? ranks : 1,
                           is_mpi ? chunks_v[c] : -1, build_s, m);
            }
        }
        faiss_Index_free(index);
        if (!is_mpi) MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rec) fclose(rec);
    free(xb), free(xq), free(truth);
    MPI_Finalize();
    return 0;
}
