/* Soak: a bounded randomized run (GRAFT_SOAK_SECONDS, default 100) over graft's indexes through
 * faiss_c. Each case draws an index type (GraftFlat, GraftGraphR, GraftGraphR,PQ<M>; bare or under
 * IDMap2), a metric (L2, or inner product on normalized vectors), d, n, k (past ntotal at times),
 * the search beam, a selector or none, from a printed seed, on real data (sift5k base rows cut to
 * d dimensions). It checks every result:
 *  - well formed: labels -1 only after the found ones, each a stored id (inside the selector's
 *    range), none twice, distances in order and equal to the true distance of that id;
 *  - exact where it must be: GraftFlat equals the exact k-NN (rank by rank, distances within
 *    1e-4 relative); graph indexes without a selector reach recall@k >= 0.7 (per case of at least
 *    60 results, ties with the exact k-th counting as hits; graph + PQ where L >= 2k; the soak
 *    prints the lowest); smaller cases' results pooled, >= 0.9 over the run;
 *  - I/O: the index written and read back searches bit for bit like the original;
 *  - GPU (where one is visible): the index is built on GPU 0, its record read back onto the CPU
 *    reference, and both search the same graph: ids agree >= 0.99 (exactly for GraftFlat up to
 *    ties; the GPU's Bloom filters and visited hashes may differ in rare cases for the graphs).
 * A failing case prints its seed: GRAFT_SOAK_SEED=<seed> GRAFT_SOAK_SECONDS=0 replays it alone. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <time.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "faiss_testutil.h"
#include "graft/flat.h"
#include "graft_faiss_c.h"

static graft_test_sift S;

typedef struct rng { uint64_t s; } rng;
static uint64_t next(rng* r) {
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return r->s;
}
static int pick(rng* r, int lo, int hi) { return lo + (int)(next(r) % (uint64_t)(hi - lo + 1)); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

typedef struct soak_case {
    uint64_t seed;
    char desc[128];
    int kind, idmap, ip, d, n, nq, k, L, sel, lo, hi;
    float *x, *q;
} soak_case;

static int failures_before;
static double min_recall = 1.0, min_coarse_recall = 1.0; /* held to 0.7 / printed only */
/* Graph cases of under kMinResults results (nq x k) are pooled: their recall is held to
 * kSmallPoolFloor over the whole run once they are ten times that many (run_case says why). */
enum { kMinResults = 60 };
static const double kSmallPoolFloor = 0.9;
static double small_hits, small_results;
static long n_cases, n_gpu_cases, n_roundtrips, n_results;

static idx_t id_of(const soak_case* c, int64_t row) { return c->idmap ? 10 * row + 7 : row; }
static int64_t row_of(const soak_case* c, idx_t id) { return c->idmap ? (id - 7) / 10 : id; }

static float dist(const soak_case* c, const float* a, const float* b) {
    double s = 0;
    for (int i = 0; i < c->d; i++) s += c->ip ? (double)a[i] * b[i] : ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return (float)s;
}

static FaissIndex* build(soak_case* c, const char* where) {
    char desc[160];
    snprintf(desc, sizeof desc, "%s%s", c->desc, where);
    FaissIndex* idx = NULL;
    FAISS_OK(faiss_graft_index_factory(&idx, c->d, desc, c->ip ? METRIC_INNER_PRODUCT : METRIC_L2));
    if (!idx) return NULL;
    if (c->kind == 2) FAISS_OK(faiss_Index_train(idx, c->n, c->x));
    if (c->idmap) {
        idx_t* ids = malloc(sizeof(idx_t) * c->n);
        for (int i = 0; i < c->n; i++) ids[i] = id_of(c, i);
        FAISS_OK(faiss_Index_add_with_ids(idx, c->n, c->x, ids));
        free(ids);
    } else {
        FAISS_OK(faiss_Index_add(idx, c->n, c->x));
    }
    if (c->kind > 0) FAISS_OK(faiss_graft_set_param(idx, "L", c->L));
    return idx;
}

static int search(const soak_case* c, const FaissIndex* idx, float* D, idx_t* I) {
    FaissIDSelectorRange* r = NULL;
    if (c->sel) faiss_IDSelectorRange_new(&r, id_of(c, c->lo), id_of(c, c->hi));
    int rc = c->sel ? faiss_graft_search_with_selector(idx, c->nq, c->q, c->k, (FaissIDSelector*)r, D, I)
                    : faiss_Index_search(idx, c->nq, c->q, c->k, D, I);
    CHECK(rc == 0, "seed %llu %s: search: %s", (unsigned long long)c->seed, c->desc, faiss_get_last_error());
    if (r) faiss_IDSelector_free((FaissIDSelector*)r);
    return rc;
}

/* Distance t ranks no worse than the reference distance ref (up to float rounding). */
static int within(const soak_case* c, float t, float ref) {
    float tol = 1e-4f * fmaxf(fabsf(ref), 1.0f);
    return c->ip ? t >= ref - tol : t <= ref + tol;
}

/* Well-formed results; returns recall@k against the exact k-NN of the allowed rows. */
static double check(const soak_case* c, const float* D, const idx_t* I, const char* what) {
    int lo = c->sel ? c->lo : 0, hi = c->sel ? c->hi : c->n, allowed = hi - lo;
    float* ED = malloc(sizeof(float) * c->nq * c->k);
    int64_t* EI = malloc(sizeof(int64_t) * c->nq * c->k);
    graft_knn_cpu(c->x + (size_t)lo * c->d, allowed, c->q, c->nq, c->d, c->k,
                  c->ip ? GRAFT_METRIC_INNER_PRODUCT : GRAFT_METRIC_L2, -1, ED, EI);
    long hits = 0, bad = 0;
    for (int r = 0; r < c->nq && !bad; r++) {
        const float* q = c->q + (size_t)r * c->d;
        int found = 0;
        for (int j = 0; j < c->k; j++) {
            idx_t id = I[r * c->k + j];
            float dd = D[r * c->k + j];
            if (id == -1) continue;
            int64_t row = row_of(c, id);
            if (row < lo || row >= hi || id != id_of(c, row) || found != j) {
                CHECK(0, "seed %llu %s %s: query %d rank %d: label %lld (rows %d..%d, %d found before)",
                      (unsigned long long)c->seed, c->desc, what, r, j, (long long)id, lo, hi, found);
                bad = 1;
                break;
            }
            found++;
            float t = dist(c, q, c->x + (size_t)row * c->d);
            if (fabsf(dd - t) > 1e-3f * fmaxf(fabsf(t), 1.0f)) {
                CHECK(0, "seed %llu %s %s: query %d rank %d: distance %g, true %g",
                      (unsigned long long)c->seed, c->desc, what, r, j, dd, t);
                bad = 1;
                break;
            }
            if (j > 0 && (c->ip ? dd > D[r * c->k + j - 1] + 1e-4f : dd < D[r * c->k + j - 1] - 1e-4f)) {
                CHECK(0, "seed %llu %s %s: query %d: distances out of order at rank %d",
                      (unsigned long long)c->seed, c->desc, what, r, j);
                bad = 1;
                break;
            }
            for (int i = 0; i < j; i++)
                if (I[r * c->k + i] == id) {
                    CHECK(0, "seed %llu %s %s: query %d: label %lld twice", (unsigned long long)c->seed,
                          c->desc, what, r, (long long)id);
                    bad = 1;
                }
            /* A hit is a row as near as the exact k-th (ties with it count: a truncated, normalized
             * SIFT row repeats often, and any of the tied rows is a right answer). */
            int last = (c->k < allowed ? c->k : allowed) - 1;
            if (last >= 0 && within(c, t, ED[r * c->k + last])) hits++;
            if (c->kind == 0) { /* exact: rank by rank */
                float e = ED[r * c->k + j];
                if (fabsf(dd - e) > 1e-4f * fmaxf(fabsf(e), 1.0f) + 1e-3f) {
                    CHECK(0, "seed %llu %s %s: query %d rank %d: %g, exact %g",
                          (unsigned long long)c->seed, c->desc, what, r, j, dd, e);
                    bad = 1;
                }
            }
        }
        int want = c->k < allowed ? c->k : allowed;
        if (c->kind == 0 && found != want) {
            CHECK(0, "seed %llu %s %s: query %d: %d results, %d allowed rows", (unsigned long long)c->seed,
                  c->desc, what, r, found, allowed);
            bad = 1;
        }
    }
    int want = c->k < allowed ? c->k : allowed;
    double recall = want > 0 ? (double)hits / ((double)want * c->nq) : 1.0;
    free(ED), free(EI);
    n_results += (long)c->nq * c->k;
    return recall;
}

/* Writes idx and reads it back onto `device`. */
static FaissIndex* roundtrip(const soak_case* c, const FaissIndex* idx, int device) {
    char* buf = NULL;
    size_t len = 0;
    FILE* w = open_memstream(&buf, &len);
    FAISS_OK(faiss_graft_write_index(idx, w));
    fclose(w);
    FILE* r = fmemopen(buf, len, "rb");
    FaissIndex* back = NULL;
    int rc = faiss_graft_read_index_device(r, 0, device, &back);
    CHECK(rc == 0, "seed %llu %s: read back: %s", (unsigned long long)c->seed, c->desc, faiss_get_last_error());
    fclose(r);
    free(buf);
    n_roundtrips++;
    return back;
}

static void same(const soak_case* c, const float* D1, const idx_t* I1, const float* D2, const idx_t* I2,
                 const char* what) {
    size_t m = (size_t)c->nq * c->k;
    CHECK(!memcmp(I1, I2, m * sizeof(idx_t)) && !memcmp(D1, D2, m * sizeof(float)),
          "seed %llu %s: %s differs", (unsigned long long)c->seed, c->desc, what);
}

/* Ids of a also in b's row, or tied with b's last result (either is then a right answer). */
static double agreement(const soak_case* c, const float* Da, const idx_t* a, const float* Db, const idx_t* b) {
    long same = 0, total = 0;
    for (int r = 0; r < c->nq; r++) {
        int last = -1;
        for (int i = 0; i < c->k; i++)
            if (b[r * c->k + i] >= 0) last = i;
        for (int j = 0; j < c->k; j++) {
            idx_t id = a[r * c->k + j];
            if (id < 0) continue;
            total++;
            int hit = last >= 0 && fabsf(Da[r * c->k + j] - Db[r * c->k + last]) <=
                                       1e-4f * fmaxf(fabsf(Db[r * c->k + last]), 1.0f);
            for (int i = 0; i < c->k && !hit; i++) hit = b[r * c->k + i] == id;
            same += hit;
        }
    }
    return total ? (double)same / total : 1.0;
}

static void run_case(uint64_t seed, int gpu) {
    rng g = {seed * 2654435761u + 1};
    soak_case c = {.seed = seed};
    static const int dims[] = {8, 16, 32, 64, 128};
    c.kind = pick(&g, 0, 2);
    c.idmap = pick(&g, 0, 3) == 0;
    c.ip = pick(&g, 0, 1);
    c.d = dims[pick(&g, 0, 4)];
    c.n = c.kind == 2 ? pick(&g, 300, 2000) : pick(&g, 1, 2000);
    if (c.kind == 1 && c.n < 2) c.n = 2;
    c.nq = pick(&g, 1, 40);
    c.k = pick(&g, 0, 7) == 0 ? pick(&g, 1, c.n + 20) : pick(&g, 1, 32);
    if (c.k > 1024) c.k = 1024;
    c.L = pick(&g, 16, 160);
    c.sel = !c.idmap && pick(&g, 0, 3) == 0; /* FAISS 1.7.3's IndexIDMap refuses selectors */
    c.lo = pick(&g, 0, c.n - 1), c.hi = pick(&g, c.lo + 1, c.n);
    int R = pick(&g, 0, 1) ? 16 : 32, M = c.d / (c.d >= 32 ? 1 << pick(&g, 1, 3) : 2);
    const char* pre = c.idmap ? "IDMap2," : "";
    if (c.kind == 0) snprintf(c.desc, sizeof c.desc, "%sGraftFlat", pre);
    if (c.kind == 1) snprintf(c.desc, sizeof c.desc, "%sGraftGraph%d", pre, R);
    if (c.kind == 2) snprintf(c.desc, sizeof c.desc, "%sGraftGraph%d,PQ%d", pre, R, M);
    /* Data: sift5k rows from a random offset, cut to d dims; normalized for inner product. */
    int off = pick(&g, 0, (int)S.nb - c.n);
    c.x = malloc(sizeof(float) * c.n * c.d);
    c.q = malloc(sizeof(float) * c.nq * c.d);
    for (int i = 0; i < c.n; i++) memcpy(c.x + (size_t)i * c.d, S.xb + (size_t)(off + i) * S.d, sizeof(float) * c.d);
    int qoff = pick(&g, 0, (int)S.nq - c.nq);
    for (int i = 0; i < c.nq; i++) memcpy(c.q + (size_t)i * c.d, S.xq + (size_t)(qoff + i) * S.d, sizeof(float) * c.d);
    if (c.ip) graft_test_normalize(c.x, c.n, c.d), graft_test_normalize(c.q, c.nq, c.d);

    size_t m = (size_t)c.nq * c.k;
    float *D = malloc(m * sizeof(float)), *D2 = malloc(m * sizeof(float));
    idx_t *I = malloc(m * sizeof(idx_t)), *I2 = malloc(m * sizeof(idx_t));
    FaissIndex* idx = build(&c, gpu ? ",gpu=0" : ",cpu");
    if (idx && search(&c, idx, D, I) == 0) {
        double rec = check(&c, D, I, gpu ? "GPU" : "CPU");
        /* A narrow selector may hold rows the walk never meets; a beam of under 2k candidates
         * ranked by PQ codes misses some legitimately (GraftGraph16,PQ4 at d = 32, k = 18,
         * L = 28: recall 0.656 on the CPU reference and the GPU alike). The floor holds graph +
         * PQ to it for codes as fine as the index's default (M >= d / 4, 2 bits a dimension);
         * at 1 bit a dimension (M = d / 8) the CPU reference itself falls to 0.65-0.69 at
         * L = 2-5 k on inner product (seeds 1795594917, 1795595269), so those cases are held to
         * every other check (form, true distances, I/O, GPU = CPU) with their recall printed. */
        /* The floor is for a case's recall over at least kMinResults results: below that it is
         * one or two queries' draw from a long tail (seed 1795953784: one query, k = 6,
         * GraftGraph16 at L = 17 on inner product finds 3 of its 6, 0.905 over 100 queries of
         * that set; FAISS's HNSW8 finds 5 there), so those cases' results are pooled, and a pool of
         * 10 kMinResults or more is held to kSmallPoolFloor at the end. */
        const int fine_codes = c.kind == 2 && 4 * M >= c.d;
        const double results = (double)(c.k < c.n ? c.k : c.n) * c.nq;
        if (c.kind > 0 && !c.sel && (c.kind == 1 || (fine_codes && c.L >= 2 * c.k)) &&
            results < kMinResults) {
            small_hits += rec * results, small_results += results;
        } else if (c.kind > 0 && !c.sel && (c.kind == 1 || (fine_codes && c.L >= 2 * c.k))) {
            CHECK(rec >= 0.7, "seed %llu %s L=%d: recall@%d %.3f < 0.7", (unsigned long long)seed, c.desc,
                  c.L, c.k, rec);
            if (rec < min_recall) min_recall = rec;
        } else if (c.kind == 2 && !c.sel && c.L >= 2 * c.k && rec < min_coarse_recall) {
            min_coarse_recall = rec;
        }
        /* Reloaded on the same device: bit for bit. */
        FaissIndex* back = roundtrip(&c, idx, gpu ? 0 : -1);
        if (back && search(&c, back, D2, I2) == 0) same(&c, D, I, D2, I2, "the reloaded index's result");
        if (back) faiss_Index_free(back);
        if (gpu) { /* the same index on the CPU reference */
            FaissIndex* cpu = roundtrip(&c, idx, -1);
            /* A filtered search picks its path by a cost model of its device (graft/graph.h,
             * "Filtered search"): the CPU copy takes the GPU's threshold, so that both take the
             * same path and the comparison is of like with like. */
            double threshold;
            if (cpu && c.sel && c.kind > 0 && faiss_graft_get_param(idx, "filter_threshold", &threshold) == 0)
                faiss_graft_set_param(cpu, "filter_exact_below", threshold);
            if (cpu && search(&c, cpu, D2, I2) == 0) {
                check(&c, D2, I2, "CPU of GPU");
                double a = agreement(&c, D, I, D2, I2);
                CHECK(a >= 0.99, "seed %llu %s: GPU and CPU reference agree on %.4f of the ids",
                      (unsigned long long)seed, c.desc, a);
            }
            if (cpu) faiss_Index_free(cpu);
            n_gpu_cases++;
        }
    }
    if (idx) faiss_Index_free(idx);
    free(D), free(D2), free(I), free(I2), free(c.x), free(c.q);
    n_cases++;
    if (graft_test_failures != failures_before) {
        printf("FAILED case: GRAFT_SOAK_SEED=%llu GRAFT_SOAK_SECONDS=0 (%s, %s, d=%d n=%d nq=%d k=%d L=%d sel=%d)\n",
               (unsigned long long)seed, c.desc, c.ip ? "IP" : "L2", c.d, c.n, c.nq, c.k, c.L, c.sel);
        failures_before = graft_test_failures;
    }
}

int main(void) {
    const char* e = getenv("GRAFT_SOAK_SECONDS");
    double seconds = e ? atof(e) : 100;
    e = getenv("GRAFT_SOAK_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL);
    graft_test_load_sift5k(&S);
    int gpu = graft_gpu_available();
    printf("soak: first seed %llu, %.0f s, %s\n", (unsigned long long)seed, seconds,
           gpu ? "GPU 0 against the CPU reference" : "CPU reference (no CUDA device)");
    double end = now() + seconds;
    do {
        run_case(seed++, gpu);
    } while (now() < end && graft_test_failures < 20);
    const double pooled = small_results > 0 ? small_hits / small_results : 1.0;
    CHECK(small_results < 10 * kMinResults || pooled >= kSmallPoolFloor, "graph cases of under %d results: pooled recall %.3f < %.2f",
          kMinResults, pooled, kSmallPoolFloor);
    printf("soak: %ld cases (%ld on the GPU), %ld results checked, %ld I/O round trips, lowest "
           "graph recall %.3f (graph + PQ at 1 bit a dimension: %.3f; cases of under %d results "
           "pooled: %.3f over %.0f), %d failures\n",
           n_cases, n_gpu_cases, n_results, n_roundtrips, min_recall, min_coarse_recall,
           kMinResults, pooled, small_results, graft_test_failures);
    graft_test_free_sift(&S);
    return graft_test_finish("test_soak");
}
