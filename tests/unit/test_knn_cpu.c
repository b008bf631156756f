/* CPU reference for exact k-NN and the flat index on the CPU: real data, edge cases, bad input. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "graft/flat.h"
#include "testutil.h"

/* Naive oracle independent of the heap code: full sort of (distance, id) in double. */
typedef struct { double v; int64_t id; } pair;
static int cmp_pair(const void* a, const void* b) {
    const pair *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}
static void naive_knn(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d, int64_t k,
                      int l2, float* D, int64_t* I) {
    pair* p = malloc(sizeof(pair) * (size_t)(nb ? nb : 1));
    for (int64_t q = 0; q < nq; q++) {
        for (int64_t i = 0; i < nb; i++) {
            double s = 0;
            for (int64_t j = 0; j < d; j++) {
                double a = xq[q * d + j], b = xb[i * d + j];
                s += l2 ? (a - b) * (a - b) : a * b;
            }
            p[i].v = l2 ? s : -s;
            p[i].id = i;
        }
        qsort(p, (size_t)nb, sizeof(pair), cmp_pair);
        for (int64_t j = 0; j < k; j++) {
            D[q * k + j] = j < nb ? (float)(l2 ? p[j].v : -p[j].v) : (l2 ? FLT_MAX : -FLT_MAX);
            I[q * k + j] = j < nb ? p[j].id : -1;
        }
    }
    free(p);
}

static void check_same(const float* D, const int64_t* I, const float* D2, const int64_t* I2,
                       int64_t n, const char* what) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += I[i] != I2[i] || D[i] != D2[i];
    CHECK(bad == 0, "%s: %lld of %lld entries differ", what, (long long)bad, (long long)n);
}

static void test_sift5k(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    const int64_t k = 100;
    float* D = malloc(sizeof(float) * s.nq * k);
    int64_t* I = malloc(sizeof(int64_t) * s.nq * k);
    CHECK_OK(graft_knn_cpu(s.xb, s.nb, s.xq, s.nq, s.d, k, GRAFT_METRIC_L2, -1, D, I));
    /* The ground truth was computed in float64 with ties to the smaller id; SIFT values are
     * integers, so double sums are exact and all 100 neighbours must match. */
    int64_t diff = 0;
    for (int64_t q = 0; q < s.nq; q++)
        for (int64_t j = 0; j < k; j++) diff += I[q * k + j] != s.gt[q * s.gt_k + j];
    CHECK(diff == 0, "sift5k top-100 differs from ground truth in %lld places", (long long)diff);
    CHECK(graft_test_recall(I, k, s.gt, s.gt_k, s.nq, 10) == 1.0, "recall@10 != 1");

    /* The flat index on the CPU gives the same, added in two pieces. */
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    p.device = -1;
    graft_flat* f = NULL;
    CHECK_OK(graft_flat_new(s.d, &p, &f));
    CHECK_OK(graft_flat_add(f, 1000, s.xb));
    CHECK_OK(graft_flat_add(f, s.nb - 1000, s.xb + 1000 * s.d));
    CHECK(graft_flat_ntotal(f) == s.nb, "ntotal");
    float* D2 = malloc(sizeof(float) * s.nq * k);
    int64_t* I2 = malloc(sizeof(int64_t) * s.nq * k);
    CHECK_OK(graft_flat_search(f, s.nq, s.xq, k, D2, I2));
    check_same(D, I, D2, I2, s.nq * k, "flat vs knn_cpu");
    float rec[128];
    CHECK_OK(graft_flat_reconstruct(f, 4321, rec));
    CHECK(memcmp(rec, s.xb + 4321 * s.d, sizeof(float) * s.d) == 0, "reconstruct");
    CHECK_ERR(graft_flat_reconstruct(f, s.nb, rec), GRAFT_EINVAL);

    /* k-NN graph: self excluded, same as searching and dropping self. */
    const int64_t kg = 5, ng = 300;
    graft_flat* g = NULL;
    CHECK_OK(graft_flat_new(s.d, &p, &g));
    CHECK_OK(graft_flat_add(g, ng, s.xb));
    float* Dg = malloc(sizeof(float) * ng * kg);
    int64_t* Ig = malloc(sizeof(int64_t) * ng * kg);
    CHECK_OK(graft_flat_knn_graph(g, kg, Dg, Ig));
    float* Ds = malloc(sizeof(float) * ng * (kg + 1));
    int64_t* Is = malloc(sizeof(int64_t) * ng * (kg + 1));
    CHECK_OK(graft_flat_search(g, ng, s.xb, kg + 1, Ds, Is));
    int64_t bad = 0;
    for (int64_t i = 0; i < ng; i++) {
        int64_t j2 = 0;
        for (int64_t j = 0; j < kg + 1 && j2 < kg; j++) {
            if (Is[i * (kg + 1) + j] == i) continue;
            bad += Is[i * (kg + 1) + j] != Ig[i * kg + j2];
            j2++;
        }
        for (int64_t j = 0; j < kg; j++) bad += Ig[i * kg + j] == i;
    }
    CHECK(bad == 0, "knn graph differs from search-minus-self in %lld places", (long long)bad);
    free(Dg); free(Ig); free(Ds); free(Is);
    graft_flat_free(g);
    graft_flat_free(f);
    free(D); free(I); free(D2); free(I2);
    graft_test_free_sift(&s);
}

/* Random shapes against the naive oracle, both metrics, including k > nb. */
static void test_random_shapes(void) {
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {7, 50, 1, 3}, {5, 100, 3, 100}, {20, 333, 33, 17},
                                 {3, 64, 130, 200}, {1, 1000, 4, 1000}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int64_t nq = shapes[t][0], nb = shapes[t][1], d = shapes[t][2], k = shapes[t][3];
        float* xb = malloc(sizeof(float) * nb * d);
        float* xq = malloc(sizeof(float) * nq * d);
        graft_test_random(xb, (size_t)(nb * d), 11 + t);
        graft_test_random(xq, (size_t)(nq * d), 101 + t);
        for (int m = 0; m < 2; m++) {
            graft_metric metric = m ? GRAFT_METRIC_INNER_PRODUCT : GRAFT_METRIC_L2;
            float *D = malloc(sizeof(float) * nq * k), *Dn = malloc(sizeof(float) * nq * k);
            int64_t *I = malloc(sizeof(int64_t) * nq * k), *In = malloc(sizeof(int64_t) * nq * k);
            CHECK_OK(graft_knn_cpu(xb, nb, xq, nq, d, k, metric, -1, D, I));
            naive_knn(xb, nb, xq, nq, d, k, metric == GRAFT_METRIC_L2, Dn, In);
            char what[96];
            snprintf(what, sizeof what, "nq=%lld nb=%lld d=%lld k=%lld metric=%d", (long long)nq,
                     (long long)nb, (long long)d, (long long)k, (int)metric);
            check_same(D, I, Dn, In, nq * k, what);
            free(D); free(Dn); free(I); free(In);
        }
        free(xb);
        free(xq);
    }
}

static void test_edge_cases(void) {
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    p.device = -1;
    graft_flat* f = NULL;
    CHECK_OK(graft_flat_new(4, &p, &f));
    float q[4] = {0, 0, 0, 0}, D[8];
    int64_t I[8];
    /* Empty index: like FAISS's IndexFlat, every slot is missing. */
    CHECK_OK(graft_flat_search(f, 1, q, 2, D, I));
    CHECK(I[0] == -1 && I[1] == -1 && D[0] == FLT_MAX, "empty index must give -1 / FLT_MAX");
    /* Duplicates: equal distances go to the smaller id. */
    float x[5 * 4] = {1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1};
    CHECK_OK(graft_flat_add(f, 5, x));
    CHECK_OK(graft_flat_search(f, 1, q, 8, D, I));
    int64_t want[8] = {4, 0, 2, 3, 1, -1, -1, -1};
    for (int j = 0; j < 8; j++) CHECK(I[j] == want[j], "rank %d: got %lld want %lld", j, (long long)I[j], (long long)want[j]);
    CHECK(D[0] == 1.f && D[1] == 4.f && D[4] == 16.f && D[5] == FLT_MAX, "distances");
    /* Bad input: clear errors, state unchanged. */
    float bad[4] = {1, NAN, 0, 0};
    CHECK_ERR(graft_flat_add(f, 1, bad), GRAFT_EINVAL);
    bad[1] = INFINITY;
    CHECK_ERR(graft_flat_add(f, 1, bad), GRAFT_EINVAL);
    CHECK(graft_flat_ntotal(f) == 5, "a failed add changed ntotal");
    CHECK_ERR(graft_flat_search(f, 1, bad, 1, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_search(f, 1, q, 0, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_search(f, 1, q, -3, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_search(f, 1, NULL, 1, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_search(f, 1, q, 1, NULL, I), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_search(NULL, 1, q, 1, D, I), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_add(f, -1, x), GRAFT_EINVAL);
    CHECK_ERR(graft_flat_knn_graph(f, 0, D, I), GRAFT_EINVAL);
    graft_flat* g = NULL;
    CHECK_ERR(graft_flat_new(0, &p, &g), GRAFT_EINVAL);
    CHECK(g == NULL, "failed new wrote *out");
    p.metric = (graft_metric)7;
    CHECK_ERR(graft_flat_new(4, &p, &g), GRAFT_EINVAL);
    CHECK_ERR(graft_knn_cpu(x, 5, q, 1, 4, 1, (graft_metric)7, -1, D, I), GRAFT_EINVAL);
    CHECK_OK(graft_flat_reset(f));
    CHECK(graft_flat_ntotal(f) == 0, "reset");
    graft_flat_free(f);
}

int main(void) {
    test_sift5k();
    test_random_shapes();
    test_edge_cases();
    return graft_test_finish("test_knn_cpu");
}
