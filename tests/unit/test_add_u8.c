/* graft_gindex_add_u8 (graft/graph_index.h, issue 48): uint8 rows added without widening them all
 * to FP32 on the host. Over sift5k (integers 0..255), for FP32, FP16, SQ8 (keep_fp32 = 1) and
 * FP16, SQ8 with keep_fp32 = 0 (the chunked path), one index fed by graft_gindex_add_u8 and one by
 * graft_gindex_add of the same rows as floats, in two adds (a build, then inserts): identical
 * vectors, codes and search results. A synthetic add past the 65,536-row chunk (codes only) gives
 * the same codes as the float add. The refused calls name graft_gindex_add_u8 and leave the index
 * as it was. */
#include <stdlib.h>
#include <string.h>

#include "graft/graph_index.h"
#include "testutil.h"

#define K 10

static graft_gindex* new_index(int64_t d, int kind, int keep, const float* xt, int64_t nt) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.storage = kind;
    p.keep_fp32 = keep;
    p.living.policy = GRAFT_ADD_INSERT; /* the second add inserts into the first add's graph */
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(d, &p, &g));
    if (g && kind == GRAFT_STORAGE_SQ8 && xt) CHECK_OK(graft_gindex_train(g, nt, xt)); /* xt NULL: untrained */
    return g;
}

static size_t code_bytes(graft_gindex* g) {
    const graft_storage* st = graft_gindex_storage(g);
    return (size_t)graft_gindex_ntotal(g) * graft_storage_code_size(st->kind, graft_gindex_d(g));
}

/* Same vectors, same codes. */
static void same_contents(const char* name, graft_gindex* a, graft_gindex* b) {
    const int64_t n = graft_gindex_ntotal(a), d = graft_gindex_d(a);
    CHECK(n == graft_gindex_ntotal(b), "%s: ntotal %lld vs %lld", name, (long long)n,
          (long long)graft_gindex_ntotal(b));
    const float* va = graft_gindex_vectors(a);
    const float* vb = graft_gindex_vectors(b);
    CHECK((va == NULL) == (vb == NULL), "%s: FP32 vectors held by one only", name);
    if (va && vb)
        CHECK(memcmp(va, vb, sizeof(float) * (size_t)(n * d)) == 0, "%s: vectors differ", name);
    const uint8_t* ca = graft_gindex_codes(a);
    const uint8_t* cb = graft_gindex_codes(b);
    CHECK((ca == NULL) == (cb == NULL), "%s: codes held by one only", name);
    if (ca && cb) CHECK(memcmp(ca, cb, code_bytes(a)) == 0, "%s: codes differ", name);
}

static void same_as_float(const graft_test_sift* s, const uint8_t* xu, int kind, int keep) {
    char name[64];
    snprintf(name, sizeof name, "%s keep_fp32 = %d", graft_storage_name(kind), keep);
    const int64_t d = s->d, n1 = s->nb * 4 / 5, n2 = s->nb - n1;
    graft_gindex* a = new_index(d, kind, keep, s->xb, s->nb);
    graft_gindex* b = new_index(d, kind, keep, s->xb, s->nb);
    if (!a || !b) return;
    float* D[2];
    int64_t* I[2];
    for (int i = 0; i < 2; i++) {
        D[i] = malloc(sizeof(float) * s->nq * K);
        I[i] = malloc(sizeof(int64_t) * s->nq * K);
    }
    CHECK_OK(graft_gindex_add_u8(a, n1, xu));
    CHECK_OK(graft_gindex_add(b, n1, s->xb));
    same_contents(name, a, b);
    CHECK_OK(graft_gindex_build(a));
    CHECK_OK(graft_gindex_build(b));
    CHECK_OK(graft_gindex_add_u8(a, n2, xu + n1 * d));
    CHECK_OK(graft_gindex_add(b, n2, s->xb + n1 * d));
    graft_living_report ra, rb;
    CHECK_OK(graft_gindex_living_report(a, &ra));
    CHECK_OK(graft_gindex_living_report(b, &rb));
    CHECK(ra.last_add == GRAFT_ADD_INSERT && rb.last_add == GRAFT_ADD_INSERT,
          "%s: the second add inserts in both", name);
    same_contents(name, a, b);
    graft_search_params sp = graft_gindex_get_params(a).search;
    CHECK_OK(graft_gindex_search(a, s->nq, s->xq, K, &sp, D[0], I[0], NULL));
    CHECK_OK(graft_gindex_search(b, s->nq, s->xq, K, &sp, D[1], I[1], NULL));
    CHECK(memcmp(I[0], I[1], sizeof(int64_t) * s->nq * K) == 0, "%s: search ids differ", name);
    CHECK(memcmp(D[0], D[1], sizeof(float) * s->nq * K) == 0, "%s: search distances differ", name);
    const double r = graft_test_recall(I[0], K, s->gt, s->gt_k, s->nq, K);
    printf("%-22s recall@10 %.4f\n", name, r);
    CHECK(r > 0.8, "%s: recall@10 %.4f", name, r);
    for (int i = 0; i < 2; i++) free(D[i]), free(I[i]);
    graft_gindex_free(a);
    graft_gindex_free(b);
}

/* Past one 65,536-row chunk with the codes the only copy: the same codes as the float add. */
static void chunked(void) {
    const int64_t n = 65536 + 4321, d = 8;
    uint8_t* xu = malloc((size_t)(n * d));
    float* xf = malloc(sizeof(float) * n * d);
    for (int64_t i = 0; i < n * d; i++) {
        xu[i] = (uint8_t)((i * 2654435761u) >> 13);
        xf[i] = (float)xu[i];
    }
    const int kinds[2] = {GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};
    for (int c = 0; c < 2; c++) {
        graft_gindex* a = new_index(d, kinds[c], 0, xf, n);
        graft_gindex* b = new_index(d, kinds[c], 0, xf, n);
        if (!a || !b) continue;
        CHECK_OK(graft_gindex_add_u8(a, n, xu));
        CHECK_OK(graft_gindex_add(b, n, xf));
        same_contents(kinds[c] == GRAFT_STORAGE_FP16 ? "chunked FP16" : "chunked SQ8", a, b);
        graft_gindex_free(a);
        graft_gindex_free(b);
    }
    free(xu), free(xf);
}

static void refusals(const graft_test_sift* s, const uint8_t* xu) {
    const int64_t d = s->d;
    graft_gindex* g = new_index(d, GRAFT_STORAGE_SQ8, 0, s->xb, s->nb);
    if (!g) return;
    CHECK_OK(graft_gindex_add_u8(g, 100, xu));
    uint8_t* before = malloc(code_bytes(g));
    memcpy(before, graft_gindex_codes(g), code_bytes(g));
    CHECK_ERR(graft_gindex_add_u8(NULL, 10, xu), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "graft_gindex_add_u8") != NULL, "message: %s", graft_last_error());
    CHECK_ERR(graft_gindex_add_u8(g, 10, NULL), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "graft_gindex_add_u8") != NULL, "message: %s", graft_last_error());
    CHECK_ERR(graft_gindex_add_u8(g, -1, xu), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "graft_gindex_add_u8") != NULL, "message: %s", graft_last_error());
    CHECK_OK(graft_gindex_add_u8(g, 0, NULL));
    CHECK(graft_gindex_ntotal(g) == 100, "refused adds: ntotal %lld", (long long)graft_gindex_ntotal(g));
    CHECK(memcmp(before, graft_gindex_codes(g), code_bytes(g)) == 0, "refused adds changed the codes");
    free(before);
    graft_gindex_free(g);
    /* An untrained SQ8 index: graft_gindex_add's GRAFT_ESTATE, nothing added. */
    graft_gindex* u = new_index(d, GRAFT_STORAGE_SQ8, 1, NULL, 0);
    if (!u) return;
    CHECK_ERR(graft_gindex_add_u8(u, 10, xu), GRAFT_ESTATE);
    CHECK(strstr(graft_last_error(), "graft_gindex_add_u8") != NULL, "message: %s", graft_last_error());
    CHECK(graft_gindex_ntotal(u) == 0, "untrained: ntotal %lld", (long long)graft_gindex_ntotal(u));
    graft_gindex_free(u);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    graft_test_sift_quick(&s, 2000, 200);
    const int64_t n = s.nb * s.d;
    uint8_t* xu = malloc((size_t)n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        xu[i] = (uint8_t)s.xb[i];
        bad += (float)xu[i] != s.xb[i];
    }
    CHECK(bad == 0, "sift5k: %lld values are not integers in [0, 255]", (long long)bad);
    same_as_float(&s, xu, GRAFT_STORAGE_FP32, 1);
    same_as_float(&s, xu, GRAFT_STORAGE_FP16, 1);
    same_as_float(&s, xu, GRAFT_STORAGE_SQ8, 1);
    same_as_float(&s, xu, GRAFT_STORAGE_FP16, 0);
    same_as_float(&s, xu, GRAFT_STORAGE_SQ8, 0);
    chunked();
    refusals(&s, xu);
    free(xu);
    graft_test_free_sift(&s);
    return graft_test_finish("test_add_u8");
}
