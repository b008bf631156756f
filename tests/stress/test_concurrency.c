/* The concurrency contract of graft's indexes (docs/reliability.md, "Threads"), under load: 16
 * threads on one index of each type (GraftFlat, GraftGraph, GraftGraph,PQ), on the CPU reference
 * and, where a GPU is visible, on GPU 0.
 *
 * Phase 1, search vs search: an index built once; 16 threads search it at the same time and every
 * result must equal, bit for bit, the single-threaded search of the same queries.
 * Phase 2, everything at once, for GRAFT_STRESS_SECONDS (default 4) per index: 1 thread cycles
 * reset / add block A / add block B, 2 threads set search parameters, 9 threads search, 4 search
 * with an IDSelectorRange. Adds append in order, so id i always means sift5k base row i: every
 * returned label must be -1 or a row of A + B (a selector's: inside its range), and its distance
 * must be the true distance from the query to that row, whatever the index held at that moment.
 * A torn state (a freed vector buffer, a stale filter, a half-written parameter struct) shows
 * up as a wrong pair, a failed call or a sanitizer report (the asan suite runs this test).
 * Phase 3, the living graph indexes (docs/adding-and-removing.md): one built index; 1 thread
 * inserts blocks of 100 rows after A and removes them again (the last ids go, so that no other id
 * is renumbered), consolidating now and then, 1 thread sets the add policy and L, 12 threads
 * search: every result is a row at its true distance, whatever state the writes had reached. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "faiss_testutil.h"
#include "graft_faiss_c.h"

enum { NQ1 = 100, THREADS = 16, NA = 1500, NB = 1500, NQ = 20, K = 10, SEL_LO = 200, SEL_HI = 1200 };

static graft_test_sift S;
static atomic_int bad;            /* failures seen in worker threads (CHECK is not thread-safe) */
static atomic_long searches, mutations, adds;
static char first_error[512];
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char* fmt, const char* a, double x, double y) {
    if (atomic_fetch_add(&bad, 1) == 0) {
        pthread_mutex_lock(&err_lock);
        snprintf(first_error, sizeof first_error, fmt, a, x, y);
        pthread_mutex_unlock(&err_lock);
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static float l2(const float* a, const float* b) {
    double s = 0;
    for (int i = 0; i < S.d; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return (float)s;
}

typedef struct job {
    const char* desc;
    FaissIndex* index;
    int role;          /* 0 search, 1 search with selector, 2 set params, 3 add/reset,
                          4 insert / remove / consolidate (phase 3) */
    int seed;
    double until;
    int graph;         /* the index has a search beam "L" */
} job;

/* Every (label, distance) pair must be a real row of A + B at its true distance. */
static void check_results(const job* j, const float* q, const float* D, const idx_t* I, int sel) {
    for (int r = 0; r < NQ; r++)
        for (int c = 0; c < K; c++) {
            idx_t id = I[r * K + c];
            if (id == -1) continue;
            if (id < 0 || id >= NA + NB || (sel && (id < SEL_LO || id >= SEL_HI))) {
                fail("%s: label %.0f out of range (selector %.0f)", j->desc, (double)id, sel);
                return;
            }
            float want = l2(q + (size_t)r * S.d, S.xb + (size_t)id * S.d), got = D[r * K + c];
            if (fabsf(got - want) > 1e-3f * fmaxf(want, 1.0f) + 1.0f) {
                fail("%s: distance %g, true distance %g", j->desc, got, want);
                return;
            }
        }
}

static void* worker(void* arg) {
    job* j = arg;
    unsigned s = (unsigned)j->seed;
    float D[NQ * K];
    idx_t I[NQ * K];
    FaissIDSelectorRange* range = NULL;
    if (j->role == 1) faiss_IDSelectorRange_new(&range, SEL_LO, SEL_HI);
    while (now() < j->until && atomic_load(&bad) == 0) {
        s = s * 1103515245u + 12345u;
        const float* q = S.xq + (size_t)((s >> 8) % (S.nq - NQ)) * S.d;
        int rc = 0;
        switch (j->role) {
        case 0:
            rc = faiss_Index_search(j->index, NQ, q, K, D, I);
            if (rc == 0) check_results(j, q, D, I, 0);
            atomic_fetch_add(&searches, 1);
            break;
        case 1:
            rc = faiss_graft_search_with_selector(j->index, NQ, q, K, (FaissIDSelector*)range, D, I);
            if (rc == 0) check_results(j, q, D, I, 1);
            atomic_fetch_add(&searches, 1);
            break;
        case 2:
            rc = j->graph ? faiss_graft_set_param(j->index, "L", 16 + 16 * ((s >> 4) % 4))
                          : faiss_graft_set_param(j->index, "device_budget_mb", 64 + (s >> 4) % 64);
            if (rc == 0 && j->graph == 2) /* phase 3: insert, or rebuild at the next search */
                rc = faiss_graft_set_param(j->index, "add_policy", (s >> 6) % 8 == 0 ? 2 : 0);
            atomic_fetch_add(&mutations, 1);
            break;
        case 3: {
            int step = (int)((s >> 4) % 3);
            if (step == 0) rc = faiss_Index_reset(j->index);
            /* Adds append A then B in order, so id i stays base row i. */
            idx_t n = faiss_Index_ntotal(j->index);
            if (step == 1 && n == 0) rc = faiss_Index_add(j->index, NA, S.xb);
            if (step == 2 && n == NA) rc = faiss_Index_add(j->index, NB, S.xb + (size_t)NA * S.d);
            atomic_fetch_add(&adds, 1);
            break;
        }
        case 4: {
            /* Rows NA .. NA + 100 in, then out again (the last ids: nothing else renumbers). */
            idx_t n = faiss_Index_ntotal(j->index);
            if (n == NA) {
                rc = faiss_Index_add(j->index, 100, S.xb + (size_t)NA * S.d);
            } else {
                FaissIDSelectorRange* tail = NULL;
                size_t removed = 0;
                rc = faiss_IDSelectorRange_new(&tail, NA, n);
                if (rc == 0) rc = faiss_Index_remove_ids(j->index, (FaissIDSelector*)tail, &removed);
                if (rc == 0 && ((s >> 4) % 4) == 0) rc = faiss_graft_consolidate(j->index);
                faiss_IDSelector_free((FaissIDSelector*)tail);
            }
            atomic_fetch_add(&adds, 1);
            break;
        }
        }
        if (rc != 0) fail("%s: call failed: %s%.0f%.0f", faiss_get_last_error(), 0, 0);
    }
    if (range) faiss_IDSelector_free((FaissIDSelector*)range);
    return NULL;
}

static FaissIndex* make(const char* desc, int n) {
    FaissIndex* idx = NULL;
    FAISS_OK(faiss_graft_index_factory(&idx, (int)S.d, desc, METRIC_L2));
    if (!idx) exit(1);
    if (strstr(desc, "PQ")) FAISS_OK(faiss_Index_train(idx, 2000, S.xb));
    if (n) FAISS_OK(faiss_Index_add(idx, n, S.xb));
    return idx;
}

/* Phase 1: 16 threads search one built index; all equal the single-threaded answer. */
typedef struct same_job {
    FaissIndex* index;
    const float* D0;
    const idx_t* I0;
    int rounds;
} same_job;

static void* same_worker(void* arg) {
    same_job* j = arg;
    float* D = malloc(sizeof(float) * NQ1 * K);
    idx_t* I = malloc(sizeof(idx_t) * NQ1 * K);
    for (int r = 0; r < j->rounds && atomic_load(&bad) == 0; r++) {
        if (faiss_Index_search(j->index, NQ1, S.xq, K, D, I) != 0)
            fail("search vs search: %s%.0f%.0f", faiss_get_last_error(), 0, 0);
        else if (memcmp(I, j->I0, sizeof(idx_t) * NQ1 * K) || memcmp(D, j->D0, sizeof(float) * NQ1 * K))
            fail("search vs search: results differ from the single-threaded search%s%.0f%.0f", "", 0, 0);
        atomic_fetch_add(&searches, 1);
    }
    free(D), free(I);
    return NULL;
}

static void run(const char* desc, int graph, double seconds) {
    atomic_store(&searches, 0), atomic_store(&mutations, 0), atomic_store(&adds, 0);
    /* Phase 1. */
    FaissIndex* fixed = make(desc, NA + NB);
    float* D0 = malloc(sizeof(float) * NQ1 * K);
    idx_t* I0 = malloc(sizeof(idx_t) * NQ1 * K);
    FAISS_OK(faiss_Index_search(fixed, NQ1, S.xq, K, D0, I0));
    pthread_t t[THREADS];
    same_job sj = {fixed, D0, I0, 2};
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, same_worker, &sj);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    long phase1 = atomic_load(&searches);
    faiss_Index_free(fixed), free(D0), free(I0);

    /* Phase 2. */
    FaissIndex* idx = make(desc, NA);
    job jobs[THREADS];
    double until = now() + seconds;
    for (int i = 0; i < THREADS; i++) {
        int role = i == 0 ? 3 : i <= 2 ? 2 : i <= 6 ? 1 : 0;
        jobs[i] = (job){desc, idx, role, 7919 * (i + 1), until, graph};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("%-28s %d threads: %ld searches of one built index equal to single-threaded; mixed "
           "for %.0f s: %ld searches, %ld set_params, %ld add/reset steps\n",
           desc, THREADS, phase1, seconds, atomic_load(&searches), atomic_load(&mutations),
           atomic_load(&adds));
    CHECK(atomic_load(&bad) == 0, "%s: %d failures, first: %s", desc, atomic_load(&bad), first_error);
    CHECK(atomic_load(&searches) > 0 && atomic_load(&mutations) > 0 && atomic_load(&adds) > 0,
          "%s: a role never ran", desc);
    atomic_store(&bad, 0);
    faiss_Index_free(idx);
    if (!graph) return;

    /* Phase 3: inserts, removals and consolidations while 12 threads search. */
    atomic_store(&searches, 0), atomic_store(&mutations, 0), atomic_store(&adds, 0);
    idx = make(desc, NA);
    float D[K];
    idx_t I[K];
    FAISS_OK(faiss_Index_search(idx, 1, S.xq, K, D, I)); /* built: the adds insert */
    until = now() + seconds;
    for (int i = 0; i < THREADS; i++) {
        int role = i == 0 ? 4 : i == 1 ? 2 : i <= 4 ? 1 : 0;
        jobs[i] = (job){desc, idx, role, 7919 * (i + 1), until, 2};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    double inserted = 0, removed = 0, consolidations = 0;
    faiss_graft_get_param(idx, "inserted", &inserted);
    faiss_graft_get_param(idx, "removed", &removed);
    faiss_graft_get_param(idx, "consolidations", &consolidations);
    printf("%-28s living, %.0f s: %ld searches, %ld insert/remove steps (%.0f inserted, %.0f "
           "removed, %.0f consolidations), %ld set_params\n", desc, seconds, atomic_load(&searches),
           atomic_load(&adds), inserted, removed, consolidations, atomic_load(&mutations));
    CHECK(atomic_load(&bad) == 0, "%s living: %d failures, first: %s", desc, atomic_load(&bad), first_error);
    CHECK(atomic_load(&searches) > 0 && atomic_load(&adds) > 1, "%s living: a role never ran", desc);
    atomic_store(&bad, 0);
    faiss_Index_free(idx);
}

int main(void) {
    const char* env = getenv("GRAFT_STRESS_SECONDS");
    double seconds = env ? atof(env) : 4.0;
    graft_test_load_sift5k(&S);
    static const char* const cpu[] = {"GraftFlat,cpu", "GraftGraph32,cpu", "GraftGraph32,PQ16,cpu"};
    static const char* const gpu[] = {"GraftFlat,gpu=0", "GraftGraph32,gpu=0", "GraftGraph32,PQ16,gpu=0"};
    for (int i = 0; i < 3; i++) run(cpu[i], i > 0, seconds);
    if (graft_gpu_available())
        for (int i = 0; i < 3; i++) run(gpu[i], i > 0, seconds);
    else
        printf("no CUDA device: the GPU indexes were not stressed\n");
    graft_test_free_sift(&S);
    return graft_test_finish("test_concurrency");
}
