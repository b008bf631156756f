/* Filtered search on the GPU equals the CPU's (graft/graph.h, "Filtered search"): the same graph
 * index (GraftGraph) and graph + PQ index (in-memory and out-of-core), written by a CPU index and
 * read onto the GPU, searched with random filters of 50% .. 0.01% of sift5k's ids on each path
 * (exact forced, walk forced, the cost model's choice). Both give min(k, passing) results of
 * passing ids only; the exact path's ids equal the CPU's (ties at float rounding aside) with
 * distances within float rounding; the walk's agree as the unfiltered GPU searches do
 * (test_gpu_search, test_gpu_bang) and recall as well against the exact filtered answer.
 * GRAFT_TEST_QUICK=1: 50 queries (for compute-sanitizer). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft/graph_index.h"
#include "graft_faiss_c.h"
#include "testutil.h"

#define K 10
static const double kSel[] = {0.5, 0.1, 0.01, 0.001, 0.0001};

typedef struct out {
    float* D;
    int64_t* I;
    graft_filter_report rep;
} out;

/* Random filter of round(s n) ids (at least one). */
static uint8_t* random_filter(int64_t n, double s, uint64_t seed, int64_t* passing) {
    uint8_t* a = calloc((size_t)(n + 7) / 8, 1);
    int64_t m = (int64_t)llround(s * (double)n);
    if (m < 1) m = 1;
    int64_t set = 0;
    while (set < m) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        const int64_t i = (int64_t)(seed % (uint64_t)n);
        if (!(a[i >> 3] >> (i & 7) & 1)) a[i >> 3] |= (uint8_t)(1u << (i & 7)), set++;
    }
    *passing = m;
    return a;
}

static void check_form(const out* o, int64_t nq, const uint8_t* allowed, int64_t passing, const char* what) {
    const int64_t need = passing < K ? passing : K;
    int64_t bad = 0, short_rows = 0;
    for (int64_t q = 0; q < nq; q++) {
        int64_t found = 0;
        for (int j = 0; j < K; j++) {
            const int64_t id = o->I[q * K + j];
            if (id < 0) continue;
            found++;
            if (!(allowed[id >> 3] >> (id & 7) & 1)) bad++;
        }
        short_rows += found < need;
    }
    CHECK(short_rows == 0 && bad == 0, "%s: %lld short rows, %lld ids not passing", what,
          (long long)short_rows, (long long)bad);
}

/* Ids equal, position by position, and the largest relative distance difference. */
static double agreement(const out* a, const out* b, int64_t nq, double* maxrel) {
    int64_t same = 0;
    *maxrel = 0;
    for (int64_t i = 0; i < nq * K; i++) {
        same += a->I[i] == b->I[i];
        if (a->I[i] >= 0 && a->I[i] == b->I[i]) {
            const double r = fabs((double)a->D[i] - b->D[i]) / fmax(1.0, fabs((double)a->D[i]));
            if (r > *maxrel) *maxrel = r;
        }
    }
    return (double)same / (double)(nq * K);
}

static double recall(const out* o, const out* truth, int64_t nq) {
    int64_t hit = 0, want = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int j = 0; j < K; j++) {
            const int64_t t = truth->I[q * K + j];
            if (t < 0) continue;
            want++;
            for (int i = 0; i < K; i++) hit += o->I[q * K + i] == t;
        }
    return want ? (double)hit / (double)want : 1.0;
}

typedef int (*search_fn)(const void* index, const graft_test_sift* s, const uint8_t* allowed,
                         double exact_below, out* o);

static int gsearch(const void* index, const graft_test_sift* s, const uint8_t* allowed, double eb, out* o) {
    graft_search_params p = graft_gindex_get_params(index).search;
    p.mode = GRAFT_SEARCH_SINGLE; /* the walks are compared with the CPU's: the single walk */
    p.allowed = allowed;
    p.filter_exact_below = eb;
    graft_search_report r;
    int rc = graft_gindex_search(index, s->nq, s->xq, K, &p, o->D, o->I, &r);
    o->rep = r.filter;
    return rc;
}

static int bsearch_(const void* index, const graft_test_sift* s, const uint8_t* allowed, double eb, out* o) {
    graft_bang_params p = graft_gindex_get_params(index).search;
    p.allowed = allowed;
    p.filter_exact_below = eb;
    graft_bang_report r;
    int rc = graft_gindex_search(index, s->nq, s->xq, K, &p, o->D, o->I, &r);
    o->rep = r.filter;
    return rc;
}

static out new_out(int64_t nq) {
    out o = {malloc(sizeof(float) * nq * K), malloc(sizeof(int64_t) * nq * K), {0}};
    return o;
}

/* cpu and gpu: the same index contents on the two devices. */
static void compare(const char* name, const void* cpu, const void* gpu, search_fn search,
                    const graft_test_sift* s) {
    for (size_t t = 0; t < sizeof kSel / sizeof kSel[0]; t++) {
        int64_t passing;
        uint8_t* allowed = random_filter(s->nb, kSel[t], 77 + t, &passing);
        out truth = new_out(s->nq);
        CHECK_OK(search(cpu, s, allowed, 1.0, &truth)); /* the CPU's exact path */
        const double modes[] = {1.0, 0.0, -1.0};
        for (int m = 0; m < 3; m++) {
            out c = new_out(s->nq), g = new_out(s->nq);
            CHECK_OK(search(cpu, s, allowed, modes[m], &c));
            CHECK_OK(search(gpu, s, allowed, modes[m], &g));
            char what[128];
            snprintf(what, sizeof what, "%s s=%g %s", name, kSel[t],
                     m == 0 ? "exact" : m == 1 ? "walk" : "auto");
            check_form(&c, s->nq, allowed, passing, what);
            check_form(&g, s->nq, allowed, passing, what);
            double maxrel;
            const double same = agreement(&c, &g, s->nq, &maxrel);
            const double rc = recall(&c, &truth, s->nq), rg = recall(&g, &truth, s->nq);
            printf("  %-34s passing %5lld  gpu path %d L %4d redone %4lld threshold %.4f | equal ids %.4f "
                   "max rel diff %.1e | recall cpu %.4f gpu %.4f\n",
                   what, (long long)passing, g.rep.path, g.rep.L, (long long)g.rep.redone,
                   g.rep.exact_below, same, maxrel, rc, rg);
            CHECK(g.rep.passing == passing && c.rep.passing == passing, "%s: passing %lld / %lld", what,
                  (long long)g.rep.passing, (long long)c.rep.passing);
            CHECK(maxrel < 1e-4, "%s: distances differ by %.2e relative", what, maxrel);
            if (m == 0) CHECK(g.rep.path == GRAFT_FILTER_EXACT, "%s: path %d", what, g.rep.path);
            /* (auto: the GPU's cost model may go exact where the CPU's walks) */
            if (g.rep.path == GRAFT_FILTER_EXACT && c.rep.path == GRAFT_FILTER_EXACT) {
                CHECK(same >= 0.999, "%s: exact paths agree on only %.4f of the ids", what, same);
            } else {
                CHECK(same >= 0.97, "%s: walks agree on only %.4f of the ids", what, same);
                CHECK(rg >= rc - 0.01, "%s: GPU recall %.4f vs CPU %.4f", what, rg, rc);
            }
            if (m != 1 || kSel[t] >= 0.1) CHECK(rg >= 0.95, "%s: GPU recall %.4f", what, rg);
            free(c.D), free(c.I), free(g.D), free(g.I);
        }
        free(truth.D), free(truth.I), free(allowed);
    }
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    if (getenv("GRAFT_TEST_QUICK")) s.nq = 50; /* compute-sanitizer's run (the sanitize job) */

    printf("GraftGraph\n");
    graft_gindex_params gp;
    graft_gindex_params_defaults(&gp);
    gp.device = -1;
    graft_gindex *gc = NULL, *gg = NULL;
    CHECK_OK(graft_gindex_new(s.d, &gp, &gc));
    CHECK_OK(graft_gindex_add(gc, s.nb, s.xb));
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(gc, f));
    rewind(f);
    gp.device = 0;
    CHECK_OK(graft_gindex_read(f, &gp, &gg));
    fclose(f);
    if (gg) compare("GraftGraph", gc, gg, gsearch, &s);
    graft_gindex_free(gc);
    graft_gindex_free(gg);

    printf("GraftGraph,PQ16\n");
    graft_gindex_params bp;
    graft_gindex_params_defaults(&bp);
    bp.storage = GRAFT_STORAGE_PQ;
    bp.device = -1;
    bp.pq.M = 16;
    bp.pq.kmeans = graft_faiss_kmeans;
    graft_gindex *bc = NULL, *bg = NULL;
    CHECK_OK(graft_gindex_new(s.d, &bp, &bc));
    CHECK_OK(graft_gindex_train(bc, s.nb, s.xb));
    CHECK_OK(graft_gindex_add(bc, s.nb, s.xb));
    f = tmpfile();
    CHECK_OK(graft_gindex_write(bc, f));
    rewind(f);
    bp.device = 0;
    CHECK_OK(graft_gindex_read(f, &bp, &bg));
    fclose(f);
    if (bg) {
        CHECK_OK(graft_gindex_set_mode(bg, GRAFT_BANG_IN_MEMORY, 0));
        compare("GraftGraph,PQ16 in-memory", bc, bg, bsearch_, &s);
        CHECK_OK(graft_gindex_set_mode(bg, GRAFT_BANG_OUT_OF_CORE, 0));
        compare("GraftGraph,PQ16 out-of-core", bc, bg, bsearch_, &s);
    }
    graft_gindex_free(bc);
    graft_gindex_free(bg);
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_filter");
}
