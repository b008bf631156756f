/* GPU out of memory: the allocation fault injector (graft_gpu_fault_inject, gpu/device_alloc.cu)
 * fails the Nth cudaMalloc / cudaHostAlloc / cublasCreate of an operation, for every N the
 * operation makes, for add (into a built graph index: the GPU insert, docs/adding-and-removing.md),
 * build, search and filtered search (a selector of 10% of the ids: the
 * filtered search's exact path, graft/graph.h) of each index type (GraftFlat, GraftFlat on the
 * certified FP16 path with its device codes, GraftGraph,
 * GraftGraph,PQ in-memory and out-of-core, whose pinned host buffers are cudaHostAlloc'd). Each
 * failure must be a clean error naming the shortage; afterwards the index still holds and finds
 * its previous contents (ntotal unchanged, searches equal to those before, bit for bit), and once
 * it is freed the device's free memory (cudaMemGetInfo) is what it was before it was made. */
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "faiss_testutil.h"
#include "graft_faiss_c.h"
#include "graft_gpu.h"

enum { NA = 2000, NB = 1000, NQ = 50, K = 10, OP_ADD = 0, OP_BUILD = 1, OP_SEARCH = 2, OP_FILTERED = 3 };
static graft_test_sift S;
static const char* const kOp[] = {"add", "build", "search", "filtered search"};
static long points, tolerated;

/* desc: a factory string, optionally followed by ";exact_path=N" for a flat index. */
static FaissIndex* prepare(const char* desc, float* D, idx_t* I, int op) {
    FaissIndex* idx = NULL;
    const char* path = strstr(desc, ";exact_path=");
    char factory[64];
    snprintf(factory, sizeof factory, "%.*s", path ? (int)(path - desc) : (int)strlen(desc), desc);
    FAISS_OK(faiss_graft_index_factory(&idx, (int)S.d, factory, METRIC_L2));
    if (!idx) exit(1);
    if (path) FAISS_OK(faiss_graft_set_param(idx, "exact_path", atof(path + strlen(";exact_path="))));
    if (strstr(desc, "PQ")) FAISS_OK(faiss_Index_train(idx, NA, S.xb));
    FAISS_OK(faiss_Index_add(idx, NA, S.xb));
    FAISS_OK(faiss_Index_search(idx, NQ, S.xq, K, D, I)); /* a graph index builds here */
    if (op == OP_BUILD) { /* an add that leaves the graph to the next search: the build pending */
        FAISS_OK(faiss_graft_set_param(idx, "add_policy", 2));
        FAISS_OK(faiss_Index_add(idx, NB, S.xb + (size_t)NA * S.d));
    }
    return idx;
}

static int run_op(FaissIndex* idx, int op, float* D, idx_t* I) {
    if (op == OP_ADD) return faiss_Index_add(idx, NB, S.xb + (size_t)NA * S.d);
    if (op == OP_FILTERED) {
        FaissIDSelectorRange* r = NULL;
        FAISS_OK(faiss_IDSelectorRange_new(&r, 100, 100 + NA / 10));
        int rc = faiss_graft_search_with_selector(idx, NQ, S.xq, K, (const FaissIDSelector*)r, D, I);
        faiss_IDSelector_free((FaissIDSelector*)r);
        return rc;
    }
    return faiss_Index_search(idx, NQ, S.xq, K, D, I); /* OP_BUILD: the search builds first */
}

static void walk(const char* desc, int op) {
    float D0[NQ * K], D[NQ * K];
    idx_t I0[NQ * K], I[NQ * K];
    /* A clean run: warms up lazily loaded kernels and the cuBLAS library, counts allocations. */
    FaissIndex* idx = prepare(desc, D0, I0, op);
    graft_gpu_fault_inject(0);
    FAISS_OK(run_op(idx, op, D, I));
    long long count = graft_gpu_fault_count();
    idx_t ntotal_ok = faiss_Index_ntotal(idx);
    faiss_Index_free(idx);
    for (long long n = 1; n <= count; n++) {
        size_t free0 = 0, free1 = 0;
        CHECK_OK(graft_gpu_mem_free(0, &free0));
        idx = prepare(desc, D0, I0, op);
        idx_t before = faiss_Index_ntotal(idx);
        graft_gpu_fault_inject(n);
        int rc = run_op(idx, op, D, I);
        graft_gpu_fault_inject(0);
        points++;
        if (rc == 0) {
            tolerated++; /* an optional buffer (GRNND's counters) may fail without harm */
            CHECK(faiss_Index_ntotal(idx) == ntotal_ok, "%s %s #%lld: ntotal", desc, kOp[op], n);
        } else {
            const char* m = faiss_get_last_error();
            CHECK(m && (strstr(m, "out of memory") || strstr(m, "ALLOC_FAILED")),
                  "%s %s, allocation %lld of %lld failed: the error does not name it: %s", desc,
                  kOp[op], n, count, m ? m : "(null)");
            CHECK(faiss_Index_ntotal(idx) == before, "%s %s #%lld: ntotal %lld, was %lld", desc,
                  kOp[op], n, (long long)faiss_Index_ntotal(idx), (long long)before);
            if (op != OP_BUILD) { /* the previous contents, found as before */
                FAISS_OK(faiss_Index_search(idx, NQ, S.xq, K, D, I));
                CHECK(!memcmp(D, D0, sizeof D) && !memcmp(I, I0, sizeof I),
                      "%s %s #%lld: searches differ after the failure", desc, kOp[op], n);
            } else { /* the pending build runs at the next search */
                FAISS_OK(faiss_Index_search(idx, NQ, S.xq, K, D, I));
                for (int i = 0; i < NQ * K; i++)
                    CHECK(I[i] >= -1 && I[i] < NA + NB, "%s build #%lld: label %lld", desc, n,
                          (long long)I[i]);
            }
        }
        faiss_Index_free(idx);
        CHECK_OK(graft_gpu_mem_free(0, &free1));
        CHECK(free1 == free0, "%s %s, allocation %lld failed: %lld bytes of GPU memory leaked",
              desc, kOp[op], n, (long long)free0 - (long long)free1);
    }
    printf("%-34s %-6s %lld allocation points, each failed once\n", desc, kOp[op], count);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_load_sift5k(&S);
    static const char* const idx[] = {"GraftFlat,gpu=0", "GraftFlat,gpu=0;exact_path=4", "GraftGraph32,gpu=0",
                                      "GraftGraph32,PQ16,gpu=0,inmem", "GraftGraph32,PQ16,gpu=0,ooc"};
    for (int i = 0; i < (int)(sizeof idx / sizeof idx[0]); i++)
        for (int op = 0; op < 4; op++)
            if ((op != OP_BUILD || strstr(idx[i], "Graph")) && /* a flat index builds nothing */
                (op != OP_FILTERED || strstr(idx[i], "Graph")))
                walk(idx[i], op);
    printf("%ld allocation failures injected (%ld tolerated without an error)\n", points, tolerated);
    graft_test_free_sift(&S);
    return graft_test_finish("test_gpu_oom");
}
