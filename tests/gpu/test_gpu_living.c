/* The living graph index on the GPU against the CPU reference (label gpu; docs/adding-and-
 * removing.md):
 *   - one insertion round (gpu/graph_insert.cu) from the same candidates (the CPU walk's and the
 *     round's own k-NN, graft_insert_candidates_cpu): every row equal to
 *     graft_graph_insert_round_cpu's, bit for bit (the distances are graft_vec_dist's, the orders
 *     the CPU's), on sift5k (L2, R = 64 and 32), normalized sift5k (inner product) and Fashion-
 *     MNIST, with and without tombstones;
 *   - whole inserts (the GPU walk's candidates): at least 97% of the rows equal to the CPU's (the
 *     walks sum floats in other orders, which swaps near-ties), recall@10 within 0.01;
 *   - the index on GPU 0, every storage and placement (FP32, FP16, SQ8, PQ in-memory and
 *     out-of-core): built on 90%, ten 1% adds inserted (on the GPU where the graph is there),
 *     recall@10 within 0.01 of a fresh GPU build; a random 10% removed, no removed vector in any
 *     result, recall within 0.02 of a fresh build over the rest (on the path the cost model picks,
 *     exact on the GPU at this size, and on the walk through the tombstones), the record read back
 *     onto the GPU searching the same bit for bit; 50% removed and consolidated, the same; the
 *     device capacity grown by doubling; the same operations on a CPU index alike (compared on the
 *     walk once vectors are removed);
 *   - searches on the GPU while inserts, removals and a consolidation run: every result one
 *     state's (tests/unit/test_living.c's check).
 * GRAFT_TEST_QUICK=1 (for compute-sanitizer, whose racecheck runs ~100x slower): sift5k only, one
 * round with and without tombstones, whole inserts, the FP32 index; no searches during writes.
 * Needs a CUDA device (SKIPPED otherwise). Run on the device: scripts/device/run.sh tests (all
 * gpu tests) or `ctest --test-dir build -R test_gpu_living --output-on-failure`. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft_faiss_c.h"
#include "living_states.h"
#include "testutil.h"

typedef struct data {
    const char* name;
    const float *xb, *xq;
    int64_t nb, nq, d;
    graft_metric metric;
    int L; /* the beam of the recall bounds */
} data;

static float dist(const data* t, const float* a, const float* b) {
    double s = 0;
    for (int64_t j = 0; j < t->d; j++)
        s += t->metric == GRAFT_METRIC_L2 ? ((double)a[j] - b[j]) * ((double)a[j] - b[j]) : (double)a[j] * b[j];
    return (float)s;
}

/* ---- the algorithm: GPU rounds and inserts against the CPU's --------------------------------- */

static void round_equal(const data* t, int R, int with_dead) {
    const int64_t n0 = t->nb * 9 / 10, m = graft_insert_round_size(n0) < t->nb - n0 ? graft_insert_round_size(n0)
                                                                                  : t->nb - n0;
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    p.R = R;
    p.metric = t->metric;
    graft_graph a;
    CHECK_OK(graft_rnnd_build_cpu(t->xb, n0, t->d, &p, &a));
    a.nbrs = realloc(a.nbrs, sizeof(int32_t) * (n0 + m) * R);
    graft_graph b = a;
    b.nbrs = malloc(sizeof(int32_t) * (n0 + m) * R);
    memcpy(b.nbrs, a.nbrs, sizeof(int32_t) * n0 * R);
    uint8_t* dead = NULL;
    if (with_dead) { /* every 5th vertex removed */
        dead = calloc((size_t)(n0 + m + 7) / 8, 1);
        for (int64_t v = 0; v < n0; v += 5) dead[v >> 3] |= (uint8_t)(1u << (v & 7));
    }
    /* the CPU's candidates, for both: the walk's and the round's own k-NN (new ids) */
    const int L = graft_insert_default_L(R), C = L + R;
    int64_t* I = malloc(sizeof(int64_t) * m * C);
    uint8_t* live = NULL;
    if (dead) {
        live = malloc((size_t)(n0 + m + 7) / 8);
        for (int64_t i = 0; i < (n0 + m + 7) / 8; i++) live[i] = (uint8_t)~dead[i];
    }
    CHECK_OK(graft_insert_candidates_cpu(&a, t->xb, t->d, t->metric, m, live, L, I));
    graft_insert_report rc = {0}, rg = {0};
    CHECK_OK(graft_graph_insert_round_cpu(&a, t->xb, t->d, t->metric, m, dead, I, C, &rc));
    CHECK_OK(graft_graph_insert_round_gpu(&b, t->xb, t->d, t->metric, m, dead, I, C, 0, &rg));
    int64_t same = 0;
    for (int64_t v = 0; v < n0 + m; v++) same += !memcmp(a.nbrs + v * R, b.nbrs + v * R, sizeof(int32_t) * R);
    printf("  %-22s R=%-3d %s one round of %lld: %lld of %lld rows equal; offers %lld/%lld, re-pruned "
           "%lld/%lld, linked %lld/%lld\n", t->name, R, with_dead ? "tombstones" : "          ",
           (long long)m, (long long)same, (long long)(n0 + m), (long long)rc.reverse_edges,
           (long long)rg.reverse_edges, (long long)rc.repruned, (long long)rg.repruned,
           (long long)rc.forced, (long long)rg.forced);
    CHECK(same == n0 + m && rc.reverse_edges == rg.reverse_edges && rc.repruned == rg.repruned &&
              rc.forced == rg.forced,
          "%s R=%d: the GPU round differs from the CPU's (%lld of %lld rows equal)", t->name, R,
          (long long)same, (long long)(n0 + m));
    free(I), free(live), free(dead);
    graft_graph_free(&a);
    graft_graph_free(&b);
}

static double graph_recall(const data* t, const graft_graph* g, const int32_t* gt, int L) {
    float* D = malloc(sizeof(float) * t->nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * t->nq * 10);
    CHECK_OK(graft_graph_search_cpu(g, t->xb, t->d, t->metric, t->xq, t->nq, 10, L, D, I));
    const double r = graft_test_recall(I, 10, gt, 10, t->nq, 10);
    free(D), free(I);
    return r;
}

static void inserts_close(const data* t, const int32_t* gt) {
    const int64_t n0 = t->nb * 9 / 10, m = t->nb - n0;
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    p.metric = t->metric;
    graft_graph a;
    CHECK_OK(graft_rnnd_build_cpu(t->xb, n0, t->d, &p, &a));
    a.nbrs = realloc(a.nbrs, sizeof(int32_t) * t->nb * p.R);
    graft_graph b = a;
    b.nbrs = malloc(sizeof(int32_t) * t->nb * p.R);
    memcpy(b.nbrs, a.nbrs, sizeof(int32_t) * n0 * p.R);
    CHECK_OK(graft_graph_insert_cpu(&a, t->xb, t->d, t->metric, m, NULL, 0, NULL));
    CHECK_OK(graft_graph_insert_gpu(&b, t->xb, t->d, t->metric, m, NULL, 0, 0, NULL));
    graft_test_check_graph(&b, t->nb, p.R, t->xb, t->d, t->metric == GRAFT_METRIC_L2, "GPU-inserted graph");
    int64_t same = 0;
    for (int64_t v = 0; v < t->nb; v++) same += !memcmp(a.nbrs + v * p.R, b.nbrs + v * p.R, sizeof(int32_t) * p.R);
    const double ra = graph_recall(t, &a, gt, t->L), rb = graph_recall(t, &b, gt, t->L);
    printf("  %-22s inserts of 10%%: %.4f of the rows equal the CPU's; recall@10 at L=%d cpu %.4f gpu %.4f\n",
           t->name, (double)same / t->nb, t->L, ra, rb);
    CHECK(same >= 0.97 * t->nb, "%s: only %lld of %lld rows equal the CPU's", t->name, (long long)same,
          (long long)t->nb);
    CHECK(fabs(ra - rb) <= 0.01, "%s: GPU-inserted recall %.4f vs CPU %.4f", t->name, rb, ra);
    graft_graph_free(&a);
    graft_graph_free(&b);
}

/* ---- the index ------------------------------------------------------------------------------- */

static graft_gindex* make(const data* t, int kind, int device, graft_bang_mode mode, double consolidate) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = device;
    p.metric = t->metric;
    p.storage = kind;
    p.mode = mode;
    p.pq.kmeans = graft_faiss_kmeans;
    p.living.consolidate_share = consolidate;
    p.search.L = t->L;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(t->d, &p, &g));
    if (g && kind != GRAFT_STORAGE_FP32) CHECK_OK(graft_gindex_train(g, t->nb, t->xb));
    return g;
}

static graft_living_report report_of(const graft_gindex* g) {
    graft_living_report r;
    CHECK_OK(graft_gindex_living_report(g, &r));
    return r;
}

/* The search parameters of recall_rows: the index's own (PATH_AUTO: the filtered search's cost
 * model picks the path for the tombstones), or the walk forced (PATH_WALK: filter_exact_below 0).
 * The cost model sends a GPU index of a few thousand vectors to the exact path at any share
 * removed (the GEMM over 5k vectors costs less than one walk) and a CPU index to the walk, so a
 * GPU index is compared with a CPU one on the walk, the path either takes at scale. */
enum { PATH_AUTO = 0, PATH_WALK = 1 };

/* recall@10 (ids mapped through row) and the labels that are not the state's (row, n). */
static double recall_rows(const graft_gindex* g, const data* t, const int32_t* gt, const int32_t* row,
                          int64_t n, int path, int64_t* wrong) {
    float* D = malloc(sizeof(float) * t->nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * t->nq * 10);
    graft_search_params sp = graft_gindex_get_params(g).search;
    sp.mode = GRAFT_SEARCH_SINGLE; /* the CPU index's walk (the GPU's auto mode may give more) */
    if (path == PATH_WALK) sp.filter_exact_below = 0;
    graft_search_report rep;
    CHECK_OK(graft_gindex_search(g, t->nq, t->xq, 10, &sp, D, I, &rep));
    CHECK(path != PATH_WALK || rep.filter.path != GRAFT_FILTER_EXACT,
          "%s: the walk was forced, the search took the exact path", t->name);
    *wrong = 0;
    for (int64_t i = 0; i < t->nq * 10; i++) {
        const int64_t id = I[i];
        if (id < 0 || id >= n) {
            (*wrong)++;
            continue;
        }
        I[i] = row[id];
        const float want = dist(t, t->xq + (i / 10) * t->d, t->xb + (int64_t)row[id] * t->d);
        *wrong += fabsf(D[i] - want) > 1e-3f * fmaxf(fabsf(want), 1.0f);
    }
    const double r = graft_test_recall(I, 10, gt, 10, t->nq, 10);
    free(D), free(I);
    return r;
}

static graft_gindex* fresh(const data* t, int kind, graft_bang_mode mode, const int32_t* row, int64_t n) {
    graft_gindex* f = make(t, kind, 0, mode, 0.25);
    float* x = living_rows(t->xb, t->d, row, n);
    CHECK_OK(graft_gindex_add(f, n, x));
    CHECK_OK(graft_gindex_build(f));
    free(x);
    return f;
}

static void check_state(const data* t, int kind, graft_bang_mode mode, graft_gindex* g, const int32_t* row,
                        int64_t n, int path, double slack, const char* what) {
    int32_t* gt = living_truth(t->xb, t->d, row, n, t->xq, t->nq, t->metric);
    graft_gindex* f = fresh(t, kind, mode, row, n);
    int32_t* id = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) id[i] = row[i];
    int64_t wrong, wrong_f;
    const double rg = recall_rows(g, t, gt, row, n, path, &wrong);
    const double rf = recall_rows(f, t, gt, id, n, PATH_AUTO, &wrong_f);
    printf("  %-22s %-5s %-11s %-30s %-4s recall@10 %.4f, fresh GPU build %.4f%s\n", t->name,
           graft_storage_name(kind), mode == GRAFT_BANG_OUT_OF_CORE ? "out-of-core" : "", what,
           path == PATH_WALK ? "walk" : "", rg, rf, wrong ? " WRONG LABELS" : "");
    CHECK(wrong == 0, "%s %s %s: %lld labels not the state's", t->name, graft_storage_name(kind), what,
          (long long)wrong);
    CHECK(rg >= rf - slack, "%s %s %s: recall %.4f < fresh %.4f - %.2f", t->name, graft_storage_name(kind),
          what, rg, rf, slack);
    free(id), free(gt);
    graft_gindex_free(f);
}

static int64_t remove_some(graft_gindex* g, int32_t* row, int64_t n, int64_t count, uint64_t seed) {
    uint8_t* pick = calloc((size_t)n, 1);
    int64_t* ids = malloc(sizeof(int64_t) * count);
    for (int64_t m = 0; m < count;) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t id = (int64_t)((seed >> 33) % (uint64_t)n);
        if (!pick[id]) pick[id] = 1, ids[m++] = id;
    }
    int64_t removed = 0;
    CHECK_OK(graft_gindex_remove_ids(g, count, ids, &removed));
    CHECK(removed == count, "removed %lld of %lld", (long long)removed, (long long)count);
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++)
        if (!pick[i]) row[j++] = row[i];
    free(pick), free(ids);
    return j;
}

/* The record of a GPU index after GPU inserts (its host graph downloaded for the write) and
 * removals, read back onto the same device: the same results bit for bit, on the path the cost
 * model picks and on the walk (the record carries the index's state: vectors, graph, entry,
 * tombstones, search defaults). */
static void record_same(const data* t, const graft_gindex* g) {
    graft_gindex* r = living_reread(g);
    if (!r) return;
    const graft_gindex_params gp = graft_gindex_get_params(g);
    const int64_t nk = t->nq * 10;
    float *D1 = malloc(sizeof(float) * nk), *D2 = malloc(sizeof(float) * nk);
    int64_t *I1 = malloc(sizeof(int64_t) * nk), *I2 = malloc(sizeof(int64_t) * nk);
    for (int path = PATH_AUTO; path <= PATH_WALK; path++) {
        graft_search_params sp = gp.search;
        sp.filter_exact_below = 0;
        CHECK_OK(graft_gindex_search(g, t->nq, t->xq, 10, path == PATH_WALK ? &sp : NULL, D1, I1, NULL));
        CHECK_OK(graft_gindex_search(r, t->nq, t->xq, 10, path == PATH_WALK ? &sp : NULL, D2, I2, NULL));
        CHECK(!memcmp(D1, D2, sizeof(float) * nk) && !memcmp(I1, I2, sizeof(int64_t) * nk),
              "%s %s%s: the record read back searches differently", t->name,
              graft_storage_name(gp.storage), path == PATH_WALK ? ", walk" : "");
    }
    free(D1), free(D2), free(I1), free(I2);
    graft_gindex_free(r);
}

static void index_living(const data* t, int kind, graft_bang_mode mode) {
    graft_gindex* g = make(t, kind, 0, mode, 1.0);
    graft_gindex* c = make(t, kind, -1, mode, 1.0); /* the CPU index, the same operations */
    if (!g || !c) return;
    if (kind == GRAFT_STORAGE_PQ) CHECK_OK(graft_gindex_set_pq(c, graft_gindex_pq(g)));
    const int64_t n0 = t->nb * 9 / 10, step = t->nb / 100;
    CHECK_OK(graft_gindex_add(g, n0, t->xb));
    CHECK_OK(graft_gindex_add(c, n0, t->xb));
    CHECK_OK(graft_gindex_build(g));
    CHECK_OK(graft_gindex_build(c));
    const size_t bytes0 = graft_gindex_gpu_bytes(g);
    int64_t n = n0;
    for (int a = 0; a < 10; a++) {
        const int64_t m = a == 9 ? t->nb - n : step;
        CHECK_OK(graft_gindex_add(g, m, t->xb + n * t->d));
        CHECK_OK(graft_gindex_add(c, m, t->xb + n * t->d));
        n += m;
    }
    const graft_living_report r = report_of(g);
    const int gpu_walk = kind != GRAFT_STORAGE_PQ || mode != GRAFT_BANG_OUT_OF_CORE;
    CHECK(r.inserted == t->nb - n0 && r.on_gpu_inserts == gpu_walk && r.builds == 1,
          "%s %s: inserted %lld (on the GPU: %d), builds %lld", t->name, graft_storage_name(kind),
          (long long)r.inserted, r.on_gpu_inserts, (long long)r.builds);
    CHECK(graft_gindex_gpu_bytes(g) > bytes0, "%s %s: device bytes %zu after the inserts, %zu before",
          t->name, graft_storage_name(kind), graft_gindex_gpu_bytes(g), bytes0);
    const graft_graph* gr = graft_gindex_graph(g); /* downloaded from the device */
    CHECK(gr && gr->n == t->nb, "%s %s: the host graph after GPU inserts", t->name, graft_storage_name(kind));
    if (gr) graft_test_check_graph(gr, t->nb, gr->R, t->xb, t->d, t->metric == GRAFT_METRIC_L2, "index graph");
    int32_t* row = malloc(sizeof(int32_t) * t->nb);
    for (int64_t i = 0; i < t->nb; i++) row[i] = (int32_t)i;
    check_state(t, kind, mode, g, row, t->nb, PATH_AUTO, 0.01, "ten 1% inserts");
    int64_t w;
    int32_t* gt = living_truth(t->xb, t->d, row, t->nb, t->xq, t->nq, t->metric);
    const double rc = recall_rows(c, t, gt, row, t->nb, PATH_AUTO, &w);
    const double rg = recall_rows(g, t, gt, row, t->nb, PATH_AUTO, &w);
    CHECK(fabs(rc - rg) <= 0.01, "%s %s: GPU-inserted index %.4f vs the CPU's %.4f", t->name,
          graft_storage_name(kind), rg, rc);
    free(gt);
    int32_t* rowc = malloc(sizeof(int32_t) * t->nb);
    memcpy(rowc, row, sizeof(int32_t) * t->nb);
    n = remove_some(g, row, t->nb, t->nb / 10, 11);
    remove_some(c, rowc, t->nb, t->nb / 10, 11);
    /* The bound on the path the cost model picks (exact on the GPU at this size), and on
     * the walk through the tombstones (the path at scale). */
    check_state(t, kind, mode, g, row, n, PATH_AUTO, 0.02, "10% removed");
    check_state(t, kind, mode, g, row, n, PATH_WALK, 0.02, "10% removed");
    gt = living_truth(t->xb, t->d, row, n, t->xq, t->nq, t->metric);
    const double rc2 = recall_rows(c, t, gt, row, n, PATH_WALK, &w);
    const double rg2 = recall_rows(g, t, gt, row, n, PATH_WALK, &w);
    CHECK(fabs(rc2 - rg2) <= 0.01, "%s %s 10%% removed, walk: GPU index %.4f vs the CPU's %.4f", t->name,
          graft_storage_name(kind), rg2, rc2);
    free(gt);
    record_same(t, g);
    n = remove_some(g, row, n, t->nb / 2 - t->nb / 10, 13);
    CHECK_OK(graft_gindex_consolidate(g));
    CHECK(report_of(g).tombstones == 0 && graft_gindex_ntotal(g) == n, "%s %s: consolidated", t->name,
          graft_storage_name(kind));
    check_state(t, kind, mode, g, row, n, PATH_AUTO, 0.02, "50% removed, consolidated");
    CHECK_OK(graft_gindex_add(g, 10, t->xb)); /* inserts after a consolidation */
    free(row), free(rowc);
    graft_gindex_free(g);
    graft_gindex_free(c);
}

/* ---- searches during writes, on the GPU ------------------------------------------------------ */

static void concurrent(const data* t) {
    graft_gindex* g = make(t, GRAFT_STORAGE_FP32, 0, GRAFT_BANG_AUTO, 1.0);
    const int64_t n0 = t->nb / 2;
    CHECK_OK(graft_gindex_add(g, n0, t->xb));
    CHECK_OK(graft_gindex_build(g));
    living_states c;
    living_start(&c, g, t->xb, t->nb, t->xq, t->nq, t->d, t->metric == GRAFT_METRIC_L2, n0);
    int64_t next = n0;
    for (int step = 0; step < 20 && c.k + 1 < LIVING_STATES; step++) {
        const int64_t n = c.n[c.k];
        if (step % 4 == 3) {
            int64_t ids[30];
            for (int i = 0; i < 30; i++) ids[i] = (n / 30) * i;
            living_removed(&c, t->nb, ids, 30);
            CHECK_OK(graft_gindex_remove_ids(g, 30, ids, NULL));
        } else if (step == 10) {
            living_next(&c, t->nb);
            CHECK_OK(graft_gindex_consolidate(g));
        } else {
            const int64_t m = t->nb / 50;
            living_added(&c, t->nb, next, m);
            CHECK_OK(graft_gindex_add(g, m, t->xb + next * t->d));
            next += m;
        }
        living_published(&c);
    }
    CHECK_OK(graft_gindex_build(g));
    const int writes = c.k;
    const long searches = atomic_load(&c.searches), bad = living_stop(&c);
    printf("  %-22s %ld GPU searches during %d writes: %ld results of no single state\n", t->name,
           searches, writes, bad);
    CHECK(bad == 0 && searches > 0, "%s: searches during writes", t->name);
    graft_gindex_free(g);
}

int main(void) {
    GRAFT_TEST_REQUIRE_GPU();
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    const data sift = {"sift5k", s.xb, s.xq, s.nb, s.nq, s.d, GRAFT_METRIC_L2, 32};
    float* xn = malloc(sizeof(float) * s.nb * s.d);
    float* qn = malloc(sizeof(float) * s.nq * s.d);
    memcpy(xn, s.xb, sizeof(float) * s.nb * s.d);
    memcpy(qn, s.xq, sizeof(float) * s.nq * s.d);
    graft_test_normalize(xn, s.nb, s.d);
    graft_test_normalize(qn, s.nq, s.d);
    const data cosine = {"sift5k normalized, IP", xn, qn, s.nb, s.nq, s.d, GRAFT_METRIC_INNER_PRODUCT, 32};
    float *fb, *fq;
    int64_t fnb, fnq, fd;
    const int quick = getenv("GRAFT_TEST_QUICK") != NULL;
    const int have_fm = !quick && graft_test_load_fmnist(10000, 300, &fb, &fnb, &fq, &fnq, &fd) == 0;
    const data fm = {"Fashion-MNIST 10k", fb, fq, fnb, fnq, fd, GRAFT_METRIC_L2, 16};

    printf("one round, GPU against CPU from the same candidates:\n");
    round_equal(&sift, 64, 0);
    round_equal(&sift, 64, 1);
    if (!quick) {
        round_equal(&sift, 32, 0);
        round_equal(&cosine, 64, 0);
    }
    if (have_fm) round_equal(&fm, 64, 1);

    printf("whole inserts, the GPU walk's candidates:\n");
    int32_t* gt = graft_test_exact_topk(s.xb, s.nb, s.xq, s.nq, s.d, GRAFT_METRIC_L2, 10);
    inserts_close(&sift, gt);
    free(gt);
    gt = graft_test_exact_topk(xn, s.nb, qn, s.nq, s.d, GRAFT_METRIC_INNER_PRODUCT, 10);
    if (!quick) inserts_close(&cosine, gt);
    free(gt);
    if (have_fm) {
        gt = graft_test_exact_topk(fb, fnb, fq, fnq, fd, GRAFT_METRIC_L2, 10);
        inserts_close(&fm, gt);
        free(gt);
    }

    printf("the index on GPU 0:\n");
    index_living(&sift, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO);
    if (!quick) {
        index_living(&sift, GRAFT_STORAGE_FP16, GRAFT_BANG_AUTO);
        index_living(&sift, GRAFT_STORAGE_SQ8, GRAFT_BANG_AUTO);
        index_living(&sift, GRAFT_STORAGE_PQ, GRAFT_BANG_IN_MEMORY);
        index_living(&sift, GRAFT_STORAGE_PQ, GRAFT_BANG_OUT_OF_CORE);
        index_living(&cosine, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO);
    }
    if (have_fm) index_living(&fm, GRAFT_STORAGE_FP32, GRAFT_BANG_AUTO);
    if (!quick) concurrent(&sift);
    if (have_fm) {
        concurrent(&fm);
        free(fb), free(fq);
    }
    free(xn), free(qn);
    graft_test_free_sift(&s);
    return graft_test_finish("test_gpu_living");
}
