/* The duplicate-heavy set of the exact benchmark and GPU tests (graft_test_duplicates, grown from
 * sift5k): its recipe, and the CPU reference's tie order on it (equal vectors: smaller id first,
 * as FAISS's IndexFlat); graft_flat_get_exact_counts on a CPU index. */
#include <math.h>
#include <string.h>

#include "graft/flat.h"
#include "testutil.h"

/* Components where a and b differ, and the largest difference. */
static int64_t diff(const float* a, const float* b, int64_t d, float* maxd) {
    int64_t n = 0;
    *maxd = 0.f;
    for (int64_t j = 0; j < d; j++)
        if (a[j] != b[j]) {
            n++;
            *maxd = fmaxf(*maxd, fabsf(a[j] - b[j]));
        }
    return n;
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    const int64_t d = s.d, n = 20000, nq = 400, maxc = 1024;
    float* xb = malloc(sizeof(float) * (size_t)(n * d));
    float* xq = malloc(sizeof(float) * (size_t)(nq * d));
    float* xb2 = malloc(sizeof(float) * (size_t)(n * d));
    float* xq2 = malloc(sizeof(float) * (size_t)(nq * d));
    const int64_t rows = graft_test_duplicates(s.xb, s.nb, s.xq, s.nq, d, n, maxc, nq, xb, xq);
    /* 10 size classes of 1024 rows (clusters 0..1022), then one row a seed until the 4500 run out. */
    CHECK(rows == 10 * maxc + (s.nb - 1023), "rows %lld, want %lld", (long long)rows, (long long)(10 * maxc + s.nb - 1023));
    CHECK(graft_test_duplicates(s.xb, s.nb, s.xq, s.nq, d, n, maxc, nq, xb2, xq2) == rows &&
              !memcmp(xb, xb2, sizeof(float) * (size_t)(rows * d)) && !memcmp(xq, xq2, sizeof(float) * (size_t)(nq * d)),
          "the set is not deterministic");
    /* Every row: its seed, exact on even rows of a cluster, else 1..4 components moved by 1. */
    int64_t row = 0, bad = 0, exact = 0, range = 0;
    for (int64_t c = 0; row < rows; c++) {
        int64_t j = 0;
        while (((int64_t)2 << j) - 1 <= c) j++;
        const int64_t size = (maxc >> j) >= 2 ? maxc >> j : 1;
        for (int64_t i = 0; i < size && row < rows; i++, row++) {
            float m;
            const int64_t nd = diff(xb + row * d, s.xb + c * d, d, &m);
            exact += nd == 0;
            bad += i % 2 ? !(nd >= 1 && nd <= 4 && m == 1.f) : nd != 0;
            for (int64_t t = 0; t < d; t++) {
                const float v = xb[row * d + t];
                range += v < 0.f || v > 255.f || v != floorf(v);
            }
        }
    }
    CHECK(bad == 0 && range == 0, "%lld rows unlike their seed, %lld values outside 0..255 integers",
          (long long)bad, (long long)range);
    CHECK(exact == 10 * maxc / 2 + (s.nb - 1023), "%lld exact copies", (long long)exact);
    /* Queries: odd ones the real queries in order; even ones within 2 of some seed in 1..4 values. */
    int64_t qbad = 0;
    for (int64_t q = 0; q < nq; q++) {
        float m;
        if (q % 2) {
            qbad += memcmp(xq + q * d, s.xq + (q / 2) * d, sizeof(float) * (size_t)d) != 0;
            continue;
        }
        int near = 0;
        for (int64_t c = 0; c < s.nb && !near; c++) {
            const int64_t nd = diff(xq + q * d, s.xb + c * d, d, &m);
            near = nd <= 4 && m <= 2.f;
        }
        qbad += !near;
    }
    CHECK(qbad == 0, "%lld queries unlike the recipe", (long long)qbad);
    /* The reference's tie order: seed 0 itself finds its exact copies (rows 0, 2, 4, ... of the
     * first cluster) at distance 0, smaller ids first. */
    {
        const int64_t k = 10;
        float D[10];
        int64_t I[10];
        CHECK_OK(graft_knn_cpu(xb, rows, s.xb, 1, d, k, GRAFT_METRIC_L2, -1, D, I));
        for (int64_t j = 0; j < k; j++)
            CHECK(I[j] == 2 * j && D[j] == 0.f, "rank %lld: id %lld at %g, want id %lld at 0", (long long)j,
                  (long long)I[j], D[j], (long long)(2 * j));
    }
    /* The GPU paths' counts are zeros on a CPU index, and for no index. */
    {
        graft_flat_params p;
        graft_flat_params_defaults(&p);
        p.device = -1;
        graft_flat* f = NULL;
        CHECK_OK(graft_flat_new(d, &p, &f));
        CHECK_OK(graft_flat_add(f, rows, xb));
        float D[5 * 4];
        int64_t I[5 * 4];
        CHECK_OK(graft_flat_search(f, 4, xq, 5, D, I));
        graft_flat_exact_counts c;
        memset(&c, 0x55, sizeof c);
        graft_flat_get_exact_counts(f, &c);
        CHECK(c.queries == 0 && c.fp32_fallbacks == 0 && c.band_reranks == 0 && c.second_passes == 0,
              "CPU index counts %lld %lld %lld %lld", (long long)c.queries, (long long)c.fp32_fallbacks,
              (long long)c.band_reranks, (long long)c.second_passes);
        memset(&c, 0x55, sizeof c);
        graft_flat_get_exact_counts(NULL, &c);
        CHECK(c.queries == 0 && c.second_passes == 0, "no index: counts not zero");
        graft_flat_free(f);
    }
    free(xb);
    free(xq);
    free(xb2);
    free(xq2);
    graft_test_free_sift(&s);
    return graft_test_finish("test_duplicates");
}
