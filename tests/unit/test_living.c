/* The living graph index on the CPU references (graft/graph_index.h, "A living index";
 * docs/adding-and-removing.md), on sift5k and Fashion-MNIST:
 *   - inserts: built on 90%, the other 10% in ten 1% adds, recall@10 at the same L within 0.01 of
 *     a fresh build over all of it; the inserted graph well-formed, every inserted vector found;
 *   - removals: a random 10% removed (tombstones), no removed vector in any result, every id
 *     renumbered as IndexFlat's, recall against exact search over the rest within 0.02 of a fresh
 *     build over the rest; then 50% removed and consolidated, the same bounds;
 *   - the policy (insert, rebuild, auto, the background rebuild) and its report; tombstones and
 *     insert state through a record; bad arguments;
 *   - searches concurrent with adds, removals and consolidations: every result is the answer of
 *     one state the index went through (the ids, and the distances they carry, of that state),
 *     never a mix.
 * The insertion and consolidation algorithms themselves (graft_graph_insert_cpu, ..._round_cpu,
 * graft_graph_consolidate_cpu) on plain graphs too. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft/io.h"
#include "living_states.h"
#include "testutil.h"

typedef struct data {
    const char* name;
    const float* xb;
    const float* xq;
    int64_t nb, nq, d;
    int L; /* the beam the recall bounds are checked at: below saturation */
} data;

static graft_gindex* new_index(int64_t d) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(d, &p, &g));
    return g;
}

static void set_living(graft_gindex* g, int policy, double rebuild_share, double consolidate_share,
                       int background) {
    graft_living_params l = graft_gindex_get_params(g).living;
    l.policy = policy;
    l.rebuild_share = rebuild_share;
    l.consolidate_share = consolidate_share;
    l.background = background;
    CHECK_OK(graft_gindex_set_living_params(g, &l));
}

static graft_living_report report_of(const graft_gindex* g) {
    graft_living_report r;
    CHECK_OK(graft_gindex_living_report(g, &r));
    return r;
}

/* recall@10 of the index at beam L against truth (nq x 10), ids mapped through `row` (id -> row of
 * the data; NULL: the identity). */
static double recall_at(const graft_gindex* g, const data* t, int L, const int32_t* truth,
                        const int32_t* row) {
    graft_search_params sp = graft_gindex_get_params(g).search;
    sp.L = L;
    float* D = malloc(sizeof(float) * t->nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * t->nq * 10);
    CHECK_OK(graft_gindex_search(g, t->nq, t->xq, 10, &sp, D, I, NULL));
    for (int64_t i = 0; i < t->nq * 10 && row; i++)
        if (I[i] >= 0) I[i] = row[I[i]];
    const double r = graft_test_recall(I, 10, truth, 10, t->nq, 10);
    free(D);
    free(I);
    return r;
}

/* A fresh index over the rows rows[0..n), built. */
static graft_gindex* fresh_over(const data* t, const int32_t* rows, int64_t n) {
    graft_gindex* f = new_index(t->d);
    float* x = living_rows(t->xb, t->d, rows, n);
    CHECK_OK(graft_gindex_add(f, n, x));
    CHECK_OK(graft_gindex_build(f));
    free(x);
    return f;
}

static float l2(const float* a, const float* b, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += ((double)a[j] - b[j]) * ((double)a[j] - b[j]);
    return (float)s;
}

/* Every result of the index is (id, distance) of its state `row` (id -> data row, n ids): the id
 * in range and the distance its row's. Returns the mismatches. */
static int64_t bad_results(const data* t, const float* xq, int64_t nq, const float* D, const int64_t* I,
                           int64_t k, const int32_t* row, int64_t n) {
    int64_t bad = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int64_t j = 0; j < k; j++) {
            const int64_t id = I[q * k + j];
            if (id == -1) continue;
            if (id < 0 || id >= n) {
                bad++;
                continue;
            }
            const float want = l2(xq + q * t->d, t->xb + (int64_t)row[id] * t->d, t->d);
            bad += fabsf(D[q * k + j] - want) > 1e-4f * fmaxf(want, 1.0f);
        }
    return bad;
}

/* ---- inserts --------------------------------------------------------------------------------- */

static void test_inserts(const data* t) {
    const int64_t n0 = t->nb * 9 / 10, step = t->nb / 100;
    graft_gindex* g = new_index(t->d);
    CHECK_OK(graft_gindex_add(g, n0, t->xb));
    CHECK_OK(graft_gindex_build(g));
    CHECK(report_of(g).builds == 1 && report_of(g).last_add == GRAFT_ADD_REBUILD,
          "%s: the first add is built by the build", t->name);
    int64_t n = n0;
    for (int a = 0; a < 10; a++) {
        const int64_t m = a == 9 ? t->nb - n : step;
        CHECK_OK(graft_gindex_add(g, m, t->xb + n * t->d));
        n += m;
        const graft_living_report r = report_of(g);
        CHECK(r.last_add == GRAFT_ADD_INSERT && r.since_build == n - n0 && r.builds == 1 &&
              graft_gindex_graph(g) && graft_gindex_graph(g)->n == n,
              "%s: add %d inserted (last_add %d, since_build %lld, builds %lld)", t->name, a,
              r.last_add, (long long)r.since_build, (long long)r.builds);
    }
    const graft_living_report r = report_of(g);
    CHECK(r.inserted == t->nb - n0 && r.insert_batches == 10 && r.tombstones == 0 && !r.rebuilding,
          "%s: report: inserted %lld in %lld batches", t->name, (long long)r.inserted,
          (long long)r.insert_batches);
    const graft_graph* gr = graft_gindex_graph(g);
    graft_test_check_graph(gr, t->nb, gr->R, t->xb, t->d, 1, "inserted graph");
    CHECK(graft_test_reachable(gr) > 0.999, "%s: reachable %.4f", t->name, graft_test_reachable(gr));

    /* Against a fresh build over everything, at the same beams. */
    graft_gindex* f = new_index(t->d);
    CHECK_OK(graft_gindex_add(f, t->nb, t->xb));
    CHECK_OK(graft_gindex_build(f));
    int32_t* gt = graft_test_exact_topk(t->xb, t->nb, t->xq, t->nq, t->d, GRAFT_METRIC_L2, 10);
    const int Ls[] = {t->L, 64};
    for (int i = 0; i < 2; i++) {
        const double ri = recall_at(g, t, Ls[i], gt, NULL), rf = recall_at(f, t, Ls[i], gt, NULL);
        printf("%s: ten 1%% inserts into 90%%: recall@10 %.4f at L=%d, fresh build %.4f\n", t->name, ri,
               Ls[i], rf);
        CHECK(ri >= rf - 0.01, "%s: inserted recall %.4f < fresh %.4f - 0.01 at L=%d", t->name, ri, rf, Ls[i]);
    }
    /* Every inserted vector finds itself. */
    const int64_t ni = t->nb - n0;
    float* D = malloc(sizeof(float) * ni);
    int64_t* I = malloc(sizeof(int64_t) * ni);
    CHECK_OK(graft_gindex_search(g, ni, t->xb + n0 * t->d, 1, NULL, D, I, NULL));
    int64_t self = 0;
    for (int64_t i = 0; i < ni; i++) self += I[i] == n0 + i || D[i] == 0.0f;
    CHECK(self >= ni * 99 / 100, "%s: %lld of %lld inserted vectors find themselves", t->name,
          (long long)self, (long long)ni);
    free(D);
    free(I);
    free(gt);
    graft_gindex_free(f);
    graft_gindex_free(g);
}

/* ---- removals -------------------------------------------------------------------------------- */

/* Removes `count` ids drawn from `rows` (the index's id -> row map of `n` ids), deterministic
 * under seed; rows keeps the remaining ones in order. Returns the new n. */
static int64_t remove_random(graft_gindex* g, int32_t* rows, int64_t n, int64_t count, uint64_t seed) {
    uint8_t* pick = calloc((size_t)n, 1);
    int64_t* ids = malloc(sizeof(int64_t) * (count + 2));
    int64_t m = 0;
    uint64_t s = seed;
    while (m < count) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t id = (int64_t)((s >> 33) % (uint64_t)n);
        if (!pick[id]) pick[id] = 1, ids[m++] = id;
    }
    ids[m] = n + 5; /* out of range: ignored */
    ids[m + 1] = ids[0]; /* repeated: counted once */
    int64_t removed = -1;
    CHECK_OK(graft_gindex_remove_ids(g, m + 2, ids, &removed));
    CHECK(removed == count, "removed %lld of %lld", (long long)removed, (long long)count);
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++)
        if (!pick[i]) rows[j++] = rows[i];
    free(pick);
    free(ids);
    CHECK(graft_gindex_ntotal(g) == j, "ntotal %lld after removing %lld of %lld",
          (long long)graft_gindex_ntotal(g), (long long)count, (long long)n);
    return j;
}

/* The index (ids -> rows[0..n)) against exact search and a fresh build over the same rows. */
static void check_against_fresh(const graft_gindex* g, const data* t, const int32_t* rows, int64_t n,
                                const char* what) {
    int32_t* gt = living_truth(t->xb, t->d, rows, n, t->xq, t->nq, GRAFT_METRIC_L2);
    graft_gindex* f = fresh_over(t, rows, n);
    /* No removed vector, every id its row's: the distances say which vector an id is. */
    float* D = malloc(sizeof(float) * t->nq * 10);
    int64_t* I = malloc(sizeof(int64_t) * t->nq * 10);
    CHECK_OK(graft_gindex_search(g, t->nq, t->xq, 10, NULL, D, I, NULL));
    int64_t full = 0;
    for (int64_t i = 0; i < t->nq * 10; i++) full += I[i] >= 0;
    CHECK(bad_results(t, t->xq, t->nq, D, I, 10, rows, n) == 0 && full == t->nq * 10,
          "%s %s: results that are not the remaining vectors' (or not k of them)", t->name, what);
    free(D);
    free(I);
    int32_t* frow = malloc(sizeof(int32_t) * n);
    memcpy(frow, rows, sizeof(int32_t) * n);
    const int Ls[] = {t->L, 64};
    for (int i = 0; i < 2; i++) {
        const double rg = recall_at(g, t, Ls[i], gt, rows), rf = recall_at(f, t, Ls[i], gt, frow);
        printf("%s %s: recall@10 %.4f at L=%d, fresh build over the rest %.4f\n", t->name, what, rg,
               Ls[i], rf);
        CHECK(rg >= rf - 0.02, "%s %s: recall %.4f < fresh %.4f - 0.02 at L=%d", t->name, what, rg, rf,
              Ls[i]);
    }
    free(frow);
    free(gt);
    graft_gindex_free(f);
}

static void test_removals(const data* t) {
    graft_gindex* g = new_index(t->d);
    set_living(g, GRAFT_ADD_AUTO, -1, 1.0, 1); /* consolidation only when called */
    CHECK_OK(graft_gindex_add(g, t->nb, t->xb));
    CHECK_OK(graft_gindex_build(g));
    int32_t* rows = malloc(sizeof(int32_t) * t->nb);
    for (int64_t i = 0; i < t->nb; i++) rows[i] = (int32_t)i;
    int64_t n = remove_random(g, rows, t->nb, t->nb / 10, 17);
    graft_living_report r = report_of(g);
    CHECK(r.tombstones == t->nb / 10 && r.removed == t->nb / 10 && graft_gindex_slots(g) == t->nb,
          "%s: 10%% removed as tombstones (%lld)", t->name, (long long)r.tombstones);
    float v[1024];
    CHECK_OK(graft_gindex_reconstruct(g, n - 1, v));
    CHECK(!memcmp(v, t->xb + (int64_t)rows[n - 1] * t->d, sizeof(float) * t->d),
          "%s: reconstruct of the renumbered last id", t->name);
    CHECK_ERR(graft_gindex_reconstruct(g, n, v), GRAFT_EINVAL);
    check_against_fresh(g, t, rows, n, "10% removed");

    /* A filter over the renumbered ids: only passing ids come back. */
    uint8_t* allowed = calloc((size_t)(n + 7) / 8, 1);
    for (int64_t i = 0; i < n; i += 3) allowed[i >> 3] |= (uint8_t)(1u << (i & 7));
    graft_search_params sp = graft_gindex_get_params(g).search;
    sp.allowed = allowed;
    sp.allowed_n = n;
    float D[40];
    int64_t I[40];
    CHECK_OK(graft_gindex_search(g, 4, t->xq, 10, &sp, D, I, NULL));
    int ok = bad_results(t, t->xq, 4, D, I, 10, rows, n) == 0;
    for (int i = 0; i < 40; i++) ok &= I[i] >= 0 && I[i] % 3 == 0;
    CHECK(ok, "%s: a filter over the ids after a removal", t->name);
    free(allowed);

    /* 50% in all, then consolidated. */
    n = remove_random(g, rows, n, t->nb / 2 - t->nb / 10, 29);
    check_against_fresh(g, t, rows, n, "50% removed");
    CHECK_OK(graft_gindex_consolidate(g));
    r = report_of(g);
    CHECK(r.tombstones == 0 && r.consolidations == 1 && graft_gindex_slots(g) == n &&
              graft_gindex_ntotal(g) == n,
          "%s: consolidated (tombstones %lld, slots %lld)", t->name, (long long)r.tombstones,
          (long long)graft_gindex_slots(g));
    const graft_graph* gr = graft_gindex_graph(g);
    float* xr = living_rows(t->xb, t->d, rows, n);
    CHECK(!memcmp(graft_gindex_vectors(g), xr, sizeof(float) * n * t->d), "%s: compacted vectors", t->name);
    graft_test_check_graph(gr, n, gr->R, xr, t->d, 1, "consolidated graph");
    printf("%s: consolidation %.3f s, reachable %.4f\n", t->name, r.consolidate_seconds,
           graft_test_reachable(gr));
    CHECK(graft_test_reachable(gr) > 0.99, "%s: consolidated graph reachable %.4f", t->name,
          graft_test_reachable(gr));
    free(xr);
    check_against_fresh(g, t, rows, n, "50% removed and consolidated");

    /* Adds after it insert into the consolidated graph; ids continue. */
    CHECK_OK(graft_gindex_add(g, 10, t->xb));
    CHECK(graft_gindex_ntotal(g) == n + 10 && report_of(g).last_add == GRAFT_ADD_INSERT,
          "%s: add after consolidation", t->name);
    CHECK_OK(graft_gindex_reconstruct(g, n + 3, v));
    CHECK(!memcmp(v, t->xb + 3 * t->d, sizeof(float) * t->d), "%s: ids continue", t->name);
    free(rows);
    graft_gindex_free(g);
}

/* ---- policy, records, arguments -------------------------------------------------------------- */

static void test_policy(const data* t) {
    const int64_t n0 = 2000;
    graft_gindex* g = new_index(t->d);
    CHECK(graft_gindex_rebuild_share(0) > 0.05 && graft_gindex_rebuild_share(0) <= 0.5 &&
          report_of(g).rebuild_share == graft_gindex_rebuild_share(0), "the cost model's share");
    CHECK_OK(graft_gindex_add(g, n0, t->xb));
    CHECK_OK(graft_gindex_build(g));
    /* REBUILD: the graph waits for the next search. */
    set_living(g, GRAFT_ADD_REBUILD, -1, 0.25, 1);
    CHECK_OK(graft_gindex_add(g, 10, t->xb + n0 * t->d));
    CHECK(graft_gindex_graph(g) == NULL && report_of(g).last_add == GRAFT_ADD_REBUILD, "REBUILD defers");
    CHECK_OK(graft_gindex_build(g));
    CHECK(report_of(g).builds == 2 && report_of(g).since_build == 0, "REBUILD: built again");
    /* INSERT: even a batch as large as the index. */
    set_living(g, GRAFT_ADD_INSERT, -1, 0.25, 1);
    CHECK_OK(graft_gindex_add(g, 1500, t->xb + (n0 + 10) * t->d));
    CHECK(report_of(g).last_add == GRAFT_ADD_INSERT && report_of(g).since_build == 1500, "INSERT inserts");
    /* AUTO: a batch over the share defers; small ones insert until the inserted share passes it,
     * then the graph is rebuilt in the background (searches go on meanwhile). */
    set_living(g, GRAFT_ADD_AUTO, 0.2, 0.25, 1);
    CHECK_OK(graft_gindex_reset(g));
    CHECK_OK(graft_gindex_add(g, n0, t->xb));
    CHECK_OK(graft_gindex_build(g));
    CHECK_OK(graft_gindex_add(g, 1000, t->xb + n0 * t->d)); /* 1000 / 3000 > 0.2 */
    CHECK(report_of(g).last_add == GRAFT_ADD_REBUILD && graft_gindex_graph(g) == NULL, "AUTO: a large batch defers");
    CHECK_OK(graft_gindex_build(g));
    const int64_t builds = report_of(g).builds;
    int64_t n = n0 + 1000;
    for (int a = 0; a < 4; a++, n += 200) CHECK_OK(graft_gindex_add(g, 200, t->xb + n * t->d));
    /* 800 inserted into 3800: past 0.2 at the fourth add, which started a rebuild */
    CHECK_OK(graft_gindex_build(g)); /* waits for it */
    graft_living_report r = report_of(g);
    printf("%s: AUTO at share 0.2: %lld builds, %lld in the background, since_build %lld\n", t->name,
           (long long)r.builds, (long long)r.background_builds, (long long)r.since_build);
    CHECK(r.background_builds == 1 && r.builds == builds + 1 && r.since_build == 0 && !r.rebuilding &&
              r.inserted >= 800,
          "AUTO: one background rebuild (builds %lld, background %lld, since_build %lld)",
          (long long)r.builds, (long long)r.background_builds, (long long)r.since_build);
    CHECK(graft_gindex_graph(g) && graft_gindex_graph(g)->n == n, "the rebuilt graph holds every vector");
    /* Without background: the graph is left to the next search. */
    set_living(g, GRAFT_ADD_AUTO, 0.05, 0.25, 0);
    CHECK_OK(graft_gindex_add(g, 150, t->xb + n * t->d)); /* 150 of 3950: inserted */
    CHECK(graft_gindex_graph(g) != NULL, "AUTO without background: inserted under the share");
    CHECK_OK(graft_gindex_add(g, 150, t->xb + (n + 150) * t->d)); /* 300 of 4100 inserted */
    CHECK(graft_gindex_graph(g) == NULL, "AUTO without background: pending past the share");

    /* Consolidation past consolidate_share, by the removal itself. */
    set_living(g, GRAFT_ADD_AUTO, -1, 0.1, 1);
    CHECK_OK(graft_gindex_build(g));
    const int64_t held = graft_gindex_ntotal(g);
    int64_t ids[600];
    for (int i = 0; i < 600; i++) ids[i] = i * 5;
    int64_t removed = 0;
    CHECK_OK(graft_gindex_remove_ids(g, 300, ids, &removed));
    CHECK(removed == 300 && report_of(g).tombstones == 300, "under consolidate_share: tombstones");
    CHECK_OK(graft_gindex_remove_ids(g, 300, ids + 300, &removed));
    r = report_of(g);
    CHECK(r.tombstones == 0 && r.consolidations == 1 && graft_gindex_ntotal(g) == held - 600,
          "past consolidate_share: consolidated (tombstones %lld)", (long long)r.tombstones);

    /* Bad arguments, and a removal on a pending index (compacts at once). */
    graft_living_params l = graft_gindex_get_params(g).living;
    l.policy = 5;
    CHECK_ERR(graft_gindex_set_living_params(g, &l), GRAFT_EINVAL);
    l = graft_gindex_get_params(g).living;
    l.rebuild_share = 1.5;
    CHECK_ERR(graft_gindex_set_living_params(g, &l), GRAFT_EINVAL);
    l = graft_gindex_get_params(g).living;
    l.insert_L = 2000;
    CHECK_ERR(graft_gindex_set_living_params(g, &l), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_remove_ids(g, 3, NULL, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_remove_ids(g, -1, ids, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_remove_ids(NULL, 0, ids, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_consolidate(NULL), GRAFT_EINVAL);
    CHECK_OK(graft_gindex_remove_ids(g, 0, NULL, &removed));
    CHECK(removed == 0, "nothing removed");
    set_living(g, GRAFT_ADD_REBUILD, -1, 0.25, 1);
    CHECK_OK(graft_gindex_add(g, 5, t->xb));
    CHECK_OK(graft_gindex_remove_ids(g, 2, ids, &removed));
    CHECK(removed == 2 && graft_gindex_slots(g) == graft_gindex_ntotal(g), "a pending index compacts at once");
    graft_gindex_free(g);

    /* Every vector removed: empty answers; the record holds an empty index. */
    g = new_index(t->d);
    set_living(g, GRAFT_ADD_AUTO, -1, 1.0, 1);
    CHECK_OK(graft_gindex_add(g, 100, t->xb));
    CHECK_OK(graft_gindex_build(g));
    for (int i = 0; i < 100; i++) ids[i] = i;
    CHECK_OK(graft_gindex_remove_ids(g, 100, ids, &removed));
    float D[10];
    int64_t I[10];
    CHECK_OK(graft_gindex_search(g, 1, t->xq, 10, NULL, D, I, NULL));
    CHECK(removed == 100 && graft_gindex_ntotal(g) == 0 && I[0] == -1 && D[0] == FLT_MAX, "all removed");
    CHECK_OK(graft_gindex_add(g, 50, t->xb)); /* the graph went with the last vector: pending */
    CHECK_OK(graft_gindex_search(g, 1, t->xq, 10, NULL, D, I, NULL));
    CHECK(graft_gindex_ntotal(g) == 50 && I[0] >= 0 && I[0] < 50, "adds after every vector went");
    graft_gindex_free(g);
}

static int read_record(FILE* f, void** out) {
    return graft_gindex_read(f, NULL, (graft_gindex**)out);
}

static void test_record(const data* t) {
    graft_gindex* g = new_index(t->d);
    set_living(g, GRAFT_ADD_INSERT, 0.3, 0.9, 0);
    CHECK_OK(graft_gindex_add(g, 1000, t->xb));
    CHECK_OK(graft_gindex_build(g));
    CHECK_OK(graft_gindex_add(g, 100, t->xb + 1000 * t->d));
    int64_t ids[50];
    for (int i = 0; i < 50; i++) ids[i] = 3 + i * 17;
    CHECK_OK(graft_gindex_remove_ids(g, 50, ids, NULL));
    graft_gindex* r = living_reread(g); /* onto g's device: the CPU, where g's CPU walks */
    if (!r) return;
    const graft_living_report a = report_of(r);
    const graft_living_params lp = graft_gindex_get_params(r).living;
    CHECK(graft_gindex_ntotal(r) == 1050 && graft_gindex_slots(r) == 1100 && a.tombstones == 50 &&
              a.since_build == 100 && lp.policy == GRAFT_ADD_INSERT && lp.rebuild_share == 0.3 &&
              lp.consolidate_share == 0.9 && lp.background == 0,
          "record: tombstones, inserts since the build and the living parameters read back");
    float D1[200], D2[200];
    int64_t I1[200], I2[200];
    CHECK_OK(graft_gindex_search(g, 20, t->xq, 10, NULL, D1, I1, NULL));
    CHECK_OK(graft_gindex_search(r, 20, t->xq, 10, NULL, D2, I2, NULL));
    CHECK(!memcmp(I1, I2, sizeof I1) && !memcmp(D1, D2, sizeof D1), "record: the same results");
    /* A bitmap that does not count its tombstones is refused. */
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(r, f));
    size_t len;
    unsigned char* b = graft_test_bytes_of(f, &len);
    const size_t bitmap_at = len - 8 - (1100 + 7) / 8;
    /* one tombstone more or fewer than the header says, checksum recomputed */
    graft_test_with_field(read_record, b, len, bitmap_at, (uint64_t)(b[bitmap_at] ^ 0x01), 1, 1,
                          "a bitmap that does not count its tombstones", "tombstone bitmap");
    free(b);
    graft_gindex_free(r);
    graft_gindex_free(g);
}

/* ---- the algorithms on plain graphs ---------------------------------------------------------- */

static void test_algorithms(const data* t) {
    const int64_t n0 = 1500, m = 300;
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    p.R = 32;
    graft_graph g;
    CHECK_OK(graft_rnnd_build_cpu(t->xb, n0, t->d, &p, &g));
    int32_t* room = realloc(g.nbrs, sizeof(int32_t) * (n0 + m) * p.R);
    g.nbrs = room;
    graft_graph h = g;
    h.nbrs = malloc(sizeof(int32_t) * (n0 + m) * p.R);
    memcpy(h.nbrs, g.nbrs, sizeof(int32_t) * n0 * p.R);
    graft_insert_report rep;
    CHECK_OK(graft_graph_insert_cpu(&g, t->xb, t->d, GRAFT_METRIC_L2, m, NULL, 0, &rep));
    CHECK(g.n == n0 + m && rep.rounds == 2 && rep.reverse_edges > m, "insert: %d rounds, %lld offers",
          rep.rounds, (long long)rep.reverse_edges);
    graft_test_check_graph(&g, n0 + m, p.R, t->xb, t->d, 1, "graft_graph_insert_cpu");
    /* The same again, one round at a time with the walk's candidates given: the same rows (the
     * rounds are graft_graph_insert_cpu's). */
    for (int64_t done = 0; done < m;) {
        int64_t r = graft_insert_round_size(h.n);
        if (r > m - done) r = m - done;
        const int L = graft_insert_default_L(p.R), C = L + p.R;
        int64_t* I = malloc(sizeof(int64_t) * r * C);
        CHECK_OK(graft_insert_candidates_cpu(&h, t->xb, t->d, GRAFT_METRIC_L2, r, NULL, L, I));
        CHECK_OK(graft_graph_insert_round_cpu(&h, t->xb, t->d, GRAFT_METRIC_L2, r, NULL, I, C, NULL));
        free(I);
        done += r;
    }
    CHECK(!memcmp(h.nbrs, g.nbrs, sizeof(int32_t) * (n0 + m) * p.R), "rounds by hand = graft_graph_insert_cpu");
    graft_graph_free(&h);
    /* Threads do not change it. */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    graft_graph one = {n0, p.R, malloc(sizeof(int32_t) * (n0 + m) * p.R), g.entry};
    CHECK_OK(graft_rnnd_build_cpu(t->xb, n0, t->d, &p, &h)); /* the same build again */
    memcpy(one.nbrs, h.nbrs, sizeof(int32_t) * n0 * p.R);
    graft_graph_free(&h);
    CHECK_OK(graft_graph_insert_cpu(&one, t->xb, t->d, GRAFT_METRIC_L2, m, NULL, 0, NULL));
    omp_set_num_threads(threads);
    CHECK(!memcmp(one.nbrs, g.nbrs, sizeof(int32_t) * (n0 + m) * p.R), "insert: independent of the threads");
    graft_graph_free(&one);

    /* Consolidation: every third vertex removed. */
    uint8_t* dead = calloc((size_t)(n0 + m + 7) / 8, 1);
    int64_t nd = 0;
    for (int64_t v = 0; v < n0 + m; v += 3, nd++) dead[v >> 3] |= (uint8_t)(1u << (v & 7));
    int64_t repaired = 0;
    CHECK_OK(graft_graph_consolidate_cpu(&g, t->xb, t->d, GRAFT_METRIC_L2, dead, &repaired));
    float* xr = malloc(sizeof(float) * (n0 + m) * t->d);
    int64_t j = 0;
    for (int64_t v = 0; v < n0 + m; v++)
        if (v % 3) memcpy(xr + j++ * t->d, t->xb + v * t->d, sizeof(float) * t->d);
    CHECK(g.n == n0 + m - nd && repaired > 0, "consolidate: %lld rows, %lld repaired", (long long)g.n,
          (long long)repaired);
    graft_test_check_graph(&g, g.n, p.R, xr, t->d, 1, "graft_graph_consolidate_cpu");
    free(xr);
    free(dead);
    graft_graph_free(&g);
    /* Arguments. */
    graft_graph none = {0};
    CHECK_ERR(graft_graph_insert_cpu(&none, t->xb, t->d, GRAFT_METRIC_L2, 1, NULL, 0, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_graph_consolidate_cpu(NULL, t->xb, t->d, GRAFT_METRIC_L2, NULL, NULL), GRAFT_EINVAL);
}

/* ---- searches during writes ------------------------------------------------------------------ */

static void test_concurrent(const data* t) {
    graft_gindex* g = new_index(t->d);
    set_living(g, GRAFT_ADD_AUTO, 0.15, 1.0, 1); /* inserts, and a background rebuild */
    const int64_t n0 = t->nb / 2;
    CHECK_OK(graft_gindex_add(g, n0, t->xb));
    CHECK_OK(graft_gindex_build(g));
    living_states c;
    living_start(&c, g, t->xb, t->nb, t->xq, t->nq, t->d, 1, n0);
    int64_t next_row = n0;
    /* Each state's map is written before the write that makes it starts. */
    for (int step = 0; step < 24 && c.k + 1 < LIVING_STATES; step++) {
        const int64_t n = c.n[c.k];
        if (step % 3 == 2 && n > 100) { /* remove 40 ids spread over the index */
            int64_t ids[40];
            for (int i = 0; i < 40; i++) ids[i] = (n / 40) * i + step % 7;
            living_removed(&c, t->nb, ids, 40);
            CHECK_OK(graft_gindex_remove_ids(g, 40, ids, NULL));
        } else if (step == 5) {
            living_next(&c, t->nb);
            CHECK_OK(graft_gindex_consolidate(g));
        } else { /* add 1% */
            const int64_t m = t->nb / 100;
            living_added(&c, t->nb, next_row, m);
            CHECK_OK(graft_gindex_add(g, m, t->xb + next_row * t->d));
            next_row += m;
        }
        living_published(&c);
    }
    CHECK_OK(graft_gindex_build(g)); /* a background rebuild installs meanwhile */
    const int64_t n_end = c.n[c.k];
    const int writes = c.k;
    const long searches = atomic_load(&c.searches), bad = living_stop(&c);
    const graft_living_report r = report_of(g);
    printf("%s: %ld searches during %d writes (%lld inserts, %lld removed, %lld background builds): "
           "%ld results not of one state\n", t->name, searches, writes, (long long)r.insert_batches,
           (long long)r.removed, (long long)r.background_builds, bad);
    CHECK(bad == 0 && searches > 0, "%s: %ld searches during writes returned results of no single state",
          t->name, bad);
    CHECK(graft_gindex_ntotal(g) == n_end, "%s: ntotal %lld after the writes, expected %lld", t->name,
          (long long)graft_gindex_ntotal(g), (long long)n_end);
    graft_gindex_free(g);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    /* GRAFT_TEST_QUICK (the sanitizer tree's run, testutil.h): the inserts, removals and concurrent
     * writes over sift5k's first 2000 vectors and 200 queries, and Fashion-MNIST's first 1000
     * images (d = 784 all the same) instead of 6000. Their bars are the fresh build's recall over
     * the same vectors and queries, and shares of the inserted and removed, so they do not move
     * with n. The policy, record and algorithm checks take fixed row counts of sift5k (up to
     * 4250), as at full size. */
    const int quick = graft_test_quick();
    const data sift = {quick ? "sift5k 2k" : "sift5k", s.xb, s.xq, quick ? 2000 : s.nb, quick ? 200 : s.nq,
                       s.d, 32};
    test_algorithms(&sift);
    test_inserts(&sift);
    test_removals(&sift);
    test_policy(&sift);
    test_record(&sift);
    test_concurrent(&sift);
    float *xb, *xq;
    int64_t nb, nq, d;
    if (graft_test_load_fmnist(quick ? 1000 : 6000, 300, &xb, &nb, &xq, &nq, &d) == 0) {
        const data fm = {quick ? "Fashion-MNIST 1k" : "Fashion-MNIST 6k", xb, xq, nb, nq, d, 16};
        test_inserts(&fm);
        test_removals(&fm);
        test_concurrent(&fm);
        free(xb);
        free(xq);
    }
    graft_test_free_sift(&s);
    return graft_test_finish("test_living");
}
