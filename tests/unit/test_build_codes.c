/* Graph builds from a storage's codes (issue 48), the host side (label unit): the index's
 * build_from parameter (its values, its errors, PQ's refusal, state unchanged on a refusal), the
 * checks of what a build reads, the entry point of the decoded codes (a row at a time) against
 * graft_graph_entry_point over the decoded array, and the CPU index's graph from its codes against
 * RNN-Descent run on the decoded vectors (deterministic: equal row for row), and the pieces build
 * from codes against the pieces over the decoded vectors. The GPU build from codes is
 * tests/gpu/test_gpu_grnnd.c's. */
#include <math.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft/storage.h"
#include "graph/build.h"
#include "testutil.h"

static void test_params(void) {
    graft_grnnd_params gp;
    graft_grnnd_params_defaults(&gp);
    CHECK(gp.build_from == GRAFT_BUILD_FROM_FP32, "default build_from %d", gp.build_from);
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.storage = GRAFT_STORAGE_SQ8;
    graft_gindex* g = NULL;
    p.build.build_from = 2;
    CHECK_ERR(graft_gindex_new(16, &p, &g), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "build_from = 2") != NULL, "message: %s", graft_last_error());
    CHECK(g == NULL, "a refused index was made");
    p.build.build_from = GRAFT_BUILD_FROM_CODES;
    CHECK_OK(graft_gindex_new(16, &p, &g));
    if (g) {
        CHECK(graft_gindex_get_params(g).build.build_from == GRAFT_BUILD_FROM_CODES, "build_from kept");
        graft_grnnd_params b = graft_gindex_get_params(g).build;
        b.build_from = -1;
        CHECK_ERR(graft_gindex_set_build_params(g, &b), GRAFT_EINVAL);
        CHECK(strstr(graft_last_error(), "build_from") != NULL, "message: %s", graft_last_error());
        CHECK(graft_gindex_get_params(g).build.build_from == GRAFT_BUILD_FROM_CODES,
              "a refused build_from changed the index's: %d", graft_gindex_get_params(g).build.build_from);
        b.build_from = GRAFT_BUILD_FROM_FP32;
        CHECK_OK(graft_gindex_set_build_params(g, &b));
        CHECK(graft_gindex_get_params(g).build.build_from == GRAFT_BUILD_FROM_FP32, "build_from set to fp32");
    }
    graft_gindex_free(g);
    /* PQ: refused at creation and when set later, the index unchanged. */
    g = NULL;
    p.storage = GRAFT_STORAGE_PQ;
    CHECK_ERR(graft_gindex_new(16, &p, &g), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "PQ") != NULL, "message: %s", graft_last_error());
    p.build.build_from = GRAFT_BUILD_FROM_FP32;
    CHECK_OK(graft_gindex_new(16, &p, &g));
    if (g) {
        graft_grnnd_params b = graft_gindex_get_params(g).build;
        b.build_from = GRAFT_BUILD_FROM_CODES;
        b.base.T1 = 7;
        CHECK_ERR(graft_gindex_set_build_params(g, &b), GRAFT_EINVAL);
        const graft_grnnd_params now = graft_gindex_get_params(g).build;
        CHECK(now.build_from == GRAFT_BUILD_FROM_FP32 && now.base.T1 != 7, "a refused set changed the PQ "
              "index: build_from %d T1 %d", now.build_from, now.base.T1);
    }
    graft_gindex_free(g);
    /* FP32 storage takes either value: it builds from its vectors. */
    g = NULL;
    p.storage = GRAFT_STORAGE_FP32;
    p.build.build_from = GRAFT_BUILD_FROM_CODES;
    CHECK_OK(graft_gindex_new(16, &p, &g));
    graft_gindex_free(g);
}

/* The checks of what a build reads, and the sizes it counts. */
static void test_checks(const graft_test_sift* s) {
    const int64_t n = 300, d = s->d;
    graft_rnnd_params rp;
    graft_rnnd_params_defaults(&rp);
    graft_graph out = {.n = -7};
    graft_storage st;
    uint8_t* codes;
    float* dec;
    graft_test_encode(GRAFT_STORAGE_SQ8, s->xb, n, d, &st, &codes, &dec);
    graft_build_vectors v = {.st = &st, .codes = codes};
    CHECK(graft_build_reads_codes(&v) && graft_build_row_bytes(&v, d) == (size_t)d, "SQ8 reads d bytes");
    CHECK_OK(graft_check_build_vectors(&v, n, d, &rp, &out, "test"));
    CHECK_ERR(graft_check_build_vectors(&v, n, d + 1, &rp, &out, "test"), GRAFT_EINVAL);
    v.codes = NULL;
    CHECK_ERR(graft_check_build_vectors(&v, n, d, &rp, &out, "test"), GRAFT_EINVAL);
    graft_storage untrained;
    CHECK_OK(graft_storage_init(&untrained, GRAFT_STORAGE_SQ8, d));
    v = (graft_build_vectors){.st = &untrained, .codes = codes};
    CHECK_ERR(graft_check_build_vectors(&v, n, d, &rp, &out, "test"), GRAFT_EINVAL);
    /* No codes to read: the FP32 vectors, checked as every build checks them. */
    const graft_build_vectors fp32 = {.x = s->xb};
    CHECK(!graft_build_reads_codes(&fp32) && graft_build_row_bytes(&fp32, d) == (size_t)d * 4, "FP32 row");
    CHECK_OK(graft_check_build_vectors(&fp32, n, d, &rp, &out, "test"));
    CHECK_ERR(graft_check_build_vectors(&(graft_build_vectors){0}, n, d, &rp, &out, "test"), GRAFT_EINVAL);
    /* An FP16 code of Inf (a value past 65504) is refused, naming where it is. */
    float* x = malloc(sizeof(float) * 40 * 8);
    graft_test_random(x, 40 * 8, 5);
    x[3 * 8 + 2] = 1e5f;
    graft_storage h;
    uint8_t* hc;
    float* hd;
    graft_test_encode(GRAFT_STORAGE_FP16, x, 40, 8, &h, &hc, &hd);
    v = (graft_build_vectors){.st = &h, .codes = hc};
    CHECK(graft_build_row_bytes(&v, 8) == 16, "FP16 reads 2 d bytes");
    CHECK_ERR(graft_check_build_vectors(&v, 40, 8, &rp, &out, "test"), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "vector 3, dimension 2") != NULL, "message: %s", graft_last_error());
    CHECK(out.n == -7 && !out.nbrs, "a check touched the output");
    /* Without a device a build holds nothing; the code's bytes are what it counts. */
    graft_grnnd_params gp;
    graft_grnnd_params_defaults(&gp);
    if (!graft_gpu_available()) CHECK(graft_grnnd_max_vectors_of(128, &gp) == 0, "capacity without a device");
    CHECK(graft_grnnd_max_vectors_of(0, &gp) == 0, "capacity of empty rows");
    graft_storage_free(&h), graft_storage_free(&st), graft_storage_free(&untrained);
    free(x), free(hc), free(hd), free(codes), free(dec);
}

/* The entry point of the decoded codes equals graph.c's over the decoded array, at sizes under
 * and over its 64 blocks. */
static void test_entry_point(const graft_test_sift* s) {
    const int kinds[] = {GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};
    const int64_t ns[] = {1, 5, 63, 64, 1000, 4500};
    for (int k = 0; k < 2; k++) {
        graft_storage st;
        uint8_t* codes;
        float* dec;
        graft_test_encode(kinds[k], s->xb, s->nb, s->d, &st, &codes, &dec);
        for (int i = 0; i < 6; i++) {
            const graft_build_vectors v = {.st = &st, .codes = codes};
            const int64_t a = graft_graph_entry_point_of(&v, ns[i], s->d);
            const int64_t b = graft_graph_entry_point(dec, ns[i], s->d);
            CHECK(a == b, "%s n=%lld: entry %lld from the codes, %lld from the decoded vectors",
                  graft_storage_name(kinds[k]), (long long)ns[i], (long long)a, (long long)b);
        }
        const graft_build_vectors none = {.st = &st};
        CHECK(graft_graph_entry_point_of(&none, 10, s->d) == 0, "no codes: vertex 0");
        graft_storage_free(&st);
        free(codes), free(dec);
    }
}

/* The CPU index's graph from its codes is RNN-Descent's on the decoded vectors, row for row; with
 * build_from = fp32 it is the FP32 vectors' graph. Also the dispatch with codes alone (no FP32
 * vectors: what an index that keeps only codes will hand over). */
static void test_cpu_index(const graft_test_sift* s) {
    const int64_t n = graft_test_quick() ? 800 : 2000, d = s->d;
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.device = -1;
    p.storage = GRAFT_STORAGE_SQ8;
    p.build.build_from = GRAFT_BUILD_FROM_CODES;
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(d, &p, &g));
    if (!g) return;
    CHECK_OK(graft_gindex_train(g, n, s->xb));
    CHECK_OK(graft_gindex_add(g, n, s->xb));
    CHECK_OK(graft_gindex_build(g));
    float* dec = malloc(sizeof(float) * n * d);
    graft_storage_decode(graft_gindex_storage(g), n, graft_gindex_codes(g), dec);
    graft_graph ref = {0}, plain = {0};
    CHECK_OK(graft_rnnd_build_cpu(dec, n, d, &p.build.base, &ref));
    CHECK_OK(graft_rnnd_build_cpu(s->xb, n, d, &p.build.base, &plain));
    const graft_graph* built = graft_gindex_graph(g);
    CHECK(built && ref.nbrs && built->entry == ref.entry &&
          memcmp(built->nbrs, ref.nbrs, sizeof(int32_t) * n * ref.R) == 0,
          "the SQ8 index's graph from its codes differs from RNN-Descent's on the decoded vectors");
    /* The dispatch given the codes alone. */
    graft_build_vectors v = {.st = graft_gindex_storage(g), .codes = graft_gindex_codes(g)};
    graft_graph alone = {0};
    double secs;
    graft_pieces_report rep;
    CHECK_OK(graft_index_build_graph(0, &v, n, d, &p.build, &alone, &secs, &rep));
    CHECK(alone.nbrs && rep.pieces == 0 && memcmp(alone.nbrs, ref.nbrs, sizeof(int32_t) * n * ref.R) == 0,
          "a build from the codes alone differs from RNN-Descent's on the decoded vectors");
    graft_graph_free(&alone);
    /* build_from = fp32: the vectors' own graph (rebuilt by the next build: reset and add again). */
    graft_grnnd_params b = graft_gindex_get_params(g).build;
    b.build_from = GRAFT_BUILD_FROM_FP32;
    CHECK_OK(graft_gindex_set_build_params(g, &b));
    CHECK_OK(graft_gindex_reset(g));
    CHECK_OK(graft_gindex_add(g, n, s->xb));
    CHECK_OK(graft_gindex_build(g));
    built = graft_gindex_graph(g);
    CHECK(built && plain.nbrs && memcmp(built->nbrs, plain.nbrs, sizeof(int32_t) * n * plain.R) == 0,
          "the SQ8 index's graph with build_from = fp32 differs from the FP32 vectors' graph");
    int64_t same = 0;
    for (int64_t i = 0; ref.nbrs && plain.nbrs && i < n * ref.R; i++) same += ref.nbrs[i] == plain.nbrs[i];
    printf("SQ8 sift %lld: the codes' graph shares %.4f of its slots with the FP32 vectors' graph\n",
           (long long)n, (double)same / (double)(n * ref.R));
    graft_graph_free(&ref), graft_graph_free(&plain);
    free(dec);
    graft_gindex_free(g);
}

/* The pieces build from codes (graft_graph_build_pieces_from, the CPU builder: no GPU here) is the
 * pieces build over the decoded vectors, row for row: the partition, the merge, the entry point and
 * the orphans' links read the codes a row at a time, the same floats. (GRNND's pieces from codes:
 * tests/gpu/test_gpu_grnnd.c.) */
static void test_pieces(const graft_test_sift* s) {
    const int64_t n = graft_test_quick() ? 1200 : 3000, d = s->d, piece_max = n / 3;
    const int kinds[] = {GRAFT_STORAGE_FP16, GRAFT_STORAGE_SQ8};
    graft_grnnd_params p;
    graft_grnnd_params_defaults(&p);
    for (int k = 0; k < 2; k++) {
        graft_storage st;
        uint8_t* codes;
        float* dec;
        graft_test_encode(kinds[k], s->xb, n, d, &st, &codes, &dec);
        const graft_build_vectors v = {.st = &st, .codes = codes};
        graft_graph a = {0}, b = {0};
        graft_pieces_report ra, rb;
        CHECK_OK(graft_graph_build_pieces_from(&v, n, d, &p, 0, piece_max, &a, &ra));
        CHECK_OK(graft_graph_build_pieces(dec, n, d, &p, 0, piece_max, &b, &rb));
        CHECK(a.nbrs && b.nbrs && ra.pieces > 2 && ra.pieces == rb.pieces && a.entry == b.entry &&
                  ra.linked == rb.linked && memcmp(a.nbrs, b.nbrs, sizeof(int32_t) * n * b.R) == 0,
              "%s: pieces from the codes (%d pieces, entry %lld) differ from pieces over the decoded "
              "vectors (%d, entry %lld)", graft_storage_name(kinds[k]), ra.pieces, (long long)a.entry,
              rb.pieces, (long long)b.entry);
        printf("%s sift %lld in pieces of <= %lld from the codes: %d pieces, equal to the decoded "
               "vectors' row for row\n", graft_storage_name(kinds[k]), (long long)n,
               (long long)piece_max, ra.pieces);
        graft_graph_free(&a), graft_graph_free(&b);
        /* Codes of another dimension: refused before any work, the output untouched. */
        graft_graph none = {0};
        CHECK_ERR(graft_graph_build_pieces_from(&v, n, d + 1, &p, 0, piece_max, &none, NULL), GRAFT_EINVAL);
        CHECK(none.nbrs == NULL, "a refused build wrote a graph");
        graft_storage_free(&st);
        free(codes), free(dec);
    }
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    test_params();
    test_checks(&s);
    test_entry_point(&s);
    test_cpu_index(&s);
    test_pieces(&s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_build_codes");
}
