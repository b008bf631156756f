/* The graph index with the PQ storage (plugin/graph/graph_index.c) on the CPU (device -1): train / add / search
 * life cycle with FAISS's conventions, state kept across failed calls, set_data with an outside
 * graph, and the GRFTBANG record (round trip, truncation, corruption). Real data: sift5k.
 * Where a GPU is visible, the same object on the GPU in both memory modes against the CPU
 * reference over the same graph and codes (the gpu-label test_gpu_bang goes deeper). */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft/io.h"
#include "graft_faiss_c.h"
#include "testutil.h"

#define HDR 152 /* bytes of a version-4 GRFTGRPH header */

static graft_gindex_params cpu_params(graft_metric metric, int M) {
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.storage = GRAFT_STORAGE_PQ;
    p.device = -1;
    p.metric = metric;
    p.pq.M = M;
    p.pq.kmeans = graft_faiss_kmeans;
    return p;
}

static graft_gindex* new_index(const graft_gindex_params* p, int64_t d) {
    graft_gindex* g = NULL;
    CHECK_OK(graft_gindex_new(d, p, &g));
    return g;
}

typedef struct results {
    float* D;
    int64_t* I;
} results;

static results search(const graft_gindex* g, const float* xq, int64_t nq, int64_t k,
                      const graft_bang_params* sp) {
    results r = {malloc(sizeof(float) * nq * k), malloc(sizeof(int64_t) * nq * k)};
    CHECK_OK(graft_gindex_search(g, nq, xq, k, sp, r.D, r.I, NULL));
    return r;
}
static void free_results(results* r) {
    free(r->D);
    free(r->I);
}
static int same_results(results a, results b, int64_t n) {
    return !memcmp(a.D, b.D, sizeof(float) * n) && !memcmp(a.I, b.I, sizeof(int64_t) * n);
}

static void test_life_cycle(const graft_test_sift* s) {
    graft_gindex_params p = cpu_params(GRAFT_METRIC_L2, 32);
    graft_gindex* g = new_index(&p, s->d);
    if (!g) return;
    CHECK(!graft_gindex_is_trained(g) && graft_gindex_pq(g) == NULL, "new index is untrained");
    CHECK_ERR(graft_gindex_add(g, 10, s->xb), GRAFT_ESTATE);
    CHECK(strstr(graft_last_error(), "train") != NULL, "message: %s", graft_last_error());
    /* A search on an empty index gives FAISS's -1 labels, trained or not. */
    results e = search(g, s->xq, 2, 5, NULL);
    CHECK(e.I[0] == -1 && e.I[9] == -1 && e.D[4] == FLT_MAX, "empty index results");
    free_results(&e);
    CHECK_ERR(graft_gindex_train(g, 100, s->xb), GRAFT_EINVAL); /* too few points */
    CHECK(!graft_gindex_is_trained(g), "a failed training trained the index");
    CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    CHECK(graft_gindex_is_trained(g) && graft_gindex_pq(g)->M == 32, "trained, M = 32");
    const int64_t first = 4 * s->nb / 9; /* 2000 at full size */
    CHECK_OK(graft_gindex_add(g, first, s->xb));
    CHECK_OK(graft_gindex_add(g, s->nb - first, s->xb + first * s->d));
    /* Adds append and encode; the first search builds one graph over everything. */
    CHECK(graft_gindex_ntotal(g) == s->nb && graft_gindex_graph(g) == NULL &&
              graft_gindex_build_pieces(g) == -1 && graft_gindex_build_seconds(g) == 0,
          "two adds: build pending");
    CHECK_ERR(graft_gindex_train(g, s->nb, s->xb), GRAFT_ESTATE); /* codes would go stale */
    results r = search(g, s->xq, s->nq, 10, NULL);
    CHECK(graft_gindex_graph(g) && graft_gindex_graph(g)->n == s->nb && graft_gindex_build_pieces(g) == 0 &&
              graft_gindex_build_seconds(g) > 0,
          "the search built the graph over both adds");
    graft_pieces_report rep;
    CHECK_OK(graft_gindex_build_report(g, &rep));
    CHECK(rep.pieces == 0 && rep.largest_piece == s->nb && rep.build_seconds == graft_gindex_build_seconds(g),
          "build report: pieces %d largest %lld build %g s", rep.pieces, (long long)rep.largest_piece,
          rep.build_seconds);
    CHECK_ERR(graft_gindex_build_report(g, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_build(NULL), GRAFT_EINVAL);
    const double built_s = graft_gindex_build_seconds(g);
    CHECK_OK(graft_gindex_build(g)); /* nothing pending: no work */
    CHECK(graft_gindex_build_seconds(g) == built_s, "graft_gindex_build rebuilt an up-to-date graph");
    {   /* One build over two adds is the build over one add of the same vectors (CPU: deterministic). */
        graft_gindex* one = new_index(&p, s->d);
        if (one) {
            CHECK_OK(graft_gindex_train(one, s->nb, s->xb));
            CHECK_OK(graft_gindex_add(one, s->nb, s->xb));
            CHECK_OK(graft_gindex_build(one));
            const graft_graph *a = graft_gindex_graph(g), *b = graft_gindex_graph(one);
            CHECK(a && b && a->R == b->R && a->entry == b->entry &&
                      !memcmp(a->nbrs, b->nbrs, sizeof(int32_t) * (size_t)(a->n * a->R)),
                  "two adds then a build != one add then a build");
            graft_gindex_free(one);
        }
    }
    double rec = graft_test_recall(r.I, 10, s->gt, s->gt_k, s->nq, 10);
    printf("CPU graph + PQ index (M=32, L=64): recall@10 %.4f\n", rec);
    CHECK(rec >= 0.95, "recall@10 %.4f", rec);
    /* The index's search is the CPU reference over its graph, codes and vectors. */
    const graft_graph* gr = graft_gindex_graph(g);
    results ref = {malloc(sizeof(float) * s->nq * 10), malloc(sizeof(int64_t) * s->nq * 10)};
    CHECK_OK(graft_bang_search_cpu(gr, graft_gindex_pq(g), graft_gindex_codes(g),
                                   graft_gindex_vectors(g), s->d, GRAFT_METRIC_L2, s->xq, s->nq, 10,
                                   NULL, ref.D, ref.I));
    CHECK(same_results(r, ref, s->nq * 10), "index search != graft_bang_search_cpu");
    free_results(&ref);
    /* k > L widens L; k > ntotal pads with -1 (on a small index). */
    results wide = search(g, s->xq, 3, 100, NULL);
    CHECK(wide.I[99] >= 0, "k = 100 > L = 64 not widened");
    free_results(&wide);

    /* Failed calls keep the state. */
    float* bad = malloc(sizeof(float) * s->d);
    memcpy(bad, s->xq, sizeof(float) * s->d);
    bad[7] = NAN;
    CHECK_ERR(graft_gindex_add(g, 1, bad), GRAFT_EINVAL);
    int64_t I1[10];
    float D1[10];
    CHECK_ERR(graft_gindex_search(g, 1, bad, 10, NULL, D1, I1, NULL), GRAFT_EINVAL);
    graft_bang_params sp = graft_gindex_get_params(g).search;
    sp.rerank = -1;
    CHECK_ERR(graft_gindex_set_search_params(g, &sp), GRAFT_EINVAL);
    sp = graft_gindex_get_params(g).search;
    sp.L = 2000;
    CHECK_ERR(graft_gindex_set_search_params(g, &sp), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 1, s->xq, 0, NULL, D1, I1, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_search(g, 1, s->xq, 2000, NULL, D1, I1, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_mode(g, (graft_bang_mode)7, 0), GRAFT_EINVAL);
    results r2 = search(g, s->xq, s->nq, 10, NULL);
    CHECK(graft_gindex_ntotal(g) == s->nb && same_results(r, r2, s->nq * 10),
          "results changed after failed calls");
    free_results(&r2);
    free(bad);

    /* Reset keeps the codebooks (FAISS's reset), so adding again needs no training. */
    CHECK_OK(graft_gindex_reset(g));
    CHECK(graft_gindex_ntotal(g) == 0 && graft_gindex_is_trained(g), "reset");
    CHECK_OK(graft_gindex_add(g, 500, s->xb));
    results small = search(g, s->xq, 4, 10, NULL);
    CHECK(small.I[0] >= 0 && small.I[0] < 500, "search after reset + add");
    free_results(&small);
    free_results(&r);
    graft_gindex_free(g);

    /* Bad creation parameters. */
    graft_gindex* none = NULL;
    p = cpu_params(GRAFT_METRIC_L2, 7);
    CHECK_ERR(graft_gindex_new(s->d, &p, &none), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "divide") != NULL, "message: %s", graft_last_error());
    p = cpu_params(GRAFT_METRIC_L2, 32);
    p.mode = (graft_bang_mode)5;
    CHECK_ERR(graft_gindex_new(s->d, &p, &none), GRAFT_EINVAL);
    p = cpu_params(GRAFT_METRIC_L2, 32);
    p.search.max_expand = 3;
    CHECK_ERR(graft_gindex_new(s->d, &p, &none), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_new(0, &p, &none), GRAFT_EINVAL);
    p = cpu_params(GRAFT_METRIC_L2, 32);
    p.pq.kmeans = NULL;
    CHECK_OK(graft_gindex_new(s->d, &p, &none));
    CHECK_ERR(graft_gindex_train(none, s->nb, s->xb), GRAFT_EINVAL); /* no k-means given */
    graft_gindex_free(none);
}

/* An outside graph (here the CPU builder's, written and read as a DiskANN Vamana file). */
static void test_set_data(const graft_test_sift* s) {
    graft_gindex_params p = cpu_params(GRAFT_METRIC_L2, 16);
    graft_gindex* g = new_index(&p, s->d);
    graft_rnnd_params rp;
    graft_rnnd_params_defaults(&rp);
    rp.R = 32;
    graft_graph gr = {0};
    CHECK_OK(graft_rnnd_build_cpu(s->xb, s->nb, s->d, &rp, &gr));
    CHECK_ERR(graft_gindex_set_data(g, s->nb, s->xb, &gr), GRAFT_ESTATE); /* untrained */
    CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    char path[] = "/tmp/graft_vamana_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    CHECK_OK(graft_vamana_write(path, &gr));
    graft_graph back = {0};
    CHECK_OK(graft_vamana_read(path, s->nb, &back));
    remove(path);
    CHECK(back.R == gr.R && back.entry == gr.entry &&
              !memcmp(back.nbrs, gr.nbrs, sizeof(int32_t) * gr.n * gr.R),
          "Vamana file round trip");
    CHECK_OK(graft_gindex_set_data(g, s->nb, s->xb, &back));
    results r = search(g, s->xq, s->nq, 10, NULL);
    double rec = graft_test_recall(r.I, 10, s->gt, s->gt_k, s->nq, 10);
    printf("CPU graph + PQ index over an outside R=32 graph (M=16): recall@10 %.4f\n", rec);
    CHECK(rec >= 0.9, "recall@10 %.4f", rec);
    back.nbrs[5] = (int32_t)s->nb; /* id out of range */
    CHECK_ERR(graft_gindex_set_data(g, s->nb, s->xb, &back), GRAFT_EINVAL);
    results r2 = search(g, s->xq, s->nq, 10, NULL);
    CHECK(same_results(r, r2, s->nq * 10), "a failed set_data changed the index");
    free_results(&r);
    free_results(&r2);
    graft_graph_free(&gr);
    graft_graph_free(&back);
    graft_gindex_free(g);
}

/* ---- the GRFTBANG record ---------------------------------------------------------------------- */

static unsigned char* record_of(const graft_gindex* g, size_t* len) {
    FILE* f = tmpfile();
    CHECK_OK(graft_gindex_write(g, f));
    return graft_test_bytes_of(f, len);
}

/* One record from f as an index on the CPU (graft_test_reader). */
static int read_record(FILE* f, void** out) {
    graft_gindex_params p = cpu_params(GRAFT_METRIC_L2, 0);
    graft_gindex* g = NULL;
    int rc = graft_gindex_read(f, &p, &g);
    if (rc == GRAFT_OK) *out = g;
    return rc;
}

/* Reads `len` bytes of b as an index on the CPU into *out; returns its status. */
static int read_bytes(const unsigned char* b, size_t len, graft_gindex** out) {
    FILE* f = tmpfile();
    if (len) fwrite(b, 1, len, f);
    rewind(f);
    void* g = *out;
    int rc = read_record(f, &g);
    *out = g;
    fclose(f);
    return rc;
}

static void expect_format(const unsigned char* b, size_t len, const char* what, const char* needle) {
    graft_test_expect_format(read_record, b, len, what, needle);
}

/* A copy of b with an n-byte field at off set to v; the checksum recomputed when `resum`. */
static void with_field(const unsigned char* b, size_t len, size_t off, uint64_t v, int n, int resum,
                       const char* what, const char* needle) {
    graft_test_with_field(read_record, b, len, off, v, n, resum, what, needle);
}

static void test_io(const graft_test_sift* s) {
    const int64_t n = 1000, nq = 50, d = s->d;
    for (int l2 = 0; l2 <= 1; l2++) {
        graft_gindex_params p = cpu_params(l2 ? GRAFT_METRIC_L2 : GRAFT_METRIC_INNER_PRODUCT, 16);
        p.search.L = 40;
        p.search.rerank = 30;
        graft_gindex* g = new_index(&p, d);
        /* Untrained: header only; trained and empty: header + codebooks. */
        size_t len;
        unsigned char* b = record_of(g, &len);
        CHECK(len == HDR + 8, "untrained record length %zu", len);
        graft_gindex* r = NULL;
        CHECK_OK(read_bytes(b, len, &r));
        CHECK(r && !graft_gindex_is_trained(r) && graft_gindex_get_params(r).search.L == 40 &&
                  graft_gindex_get_params(r).pq.M == 16,
              "untrained round trip (M kept)");
        graft_gindex_free(r);
        free(b);
        CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
        CHECK_OK(graft_gindex_add(g, n, s->xb));
        CHECK(graft_gindex_graph(g) == NULL, "build pending before the write");
        b = record_of(g, &len); /* the write builds the pending graph */
        CHECK(graft_gindex_graph(g) != NULL, "the write built no graph");
        const int R = graft_gindex_graph(g)->R;
        CHECK(len == HDR + 256 * (size_t)d * 4 + (size_t)n * 16 + (size_t)n * d * 4 + (size_t)n * R * 4 + 8,
              "record length %zu", len);
        CHECK_OK(read_bytes(b, len, &r));
        if (!r) return;
        graft_gindex_params pr = graft_gindex_get_params(r);
        CHECK(graft_gindex_ntotal(r) == n && graft_gindex_metric(r) == graft_gindex_metric(g) &&
                  graft_gindex_pq(r)->M == 16 && pr.search.L == 40 && pr.search.rerank == 30,
              "read: shape, metric, M, search defaults");
        CHECK(!memcmp(graft_gindex_codes(r), graft_gindex_codes(g), (size_t)n * 16) &&
                  !memcmp(graft_gindex_pq(r)->centroids, graft_gindex_pq(g)->centroids, 256 * d * 4),
              "read: bitwise-equal codes and codebooks");
        results ra = search(g, s->xq, nq, 10, NULL), rb = search(r, s->xq, nq, 10, NULL);
        CHECK(same_results(ra, rb, nq * 10), "read: same search results");
        free_results(&ra);
        free_results(&rb);
        size_t len2;
        unsigned char* b2 = record_of(r, &len2);
        CHECK(len2 == len && !memcmp(b, b2, len), "write(read(record)) == record");
        free(b2);
        graft_gindex_free(r);
        free(b);
        graft_gindex_free(g);
    }

    printf("damaged records\n");
    const int64_t m = 300;
    graft_gindex_params p = cpu_params(GRAFT_METRIC_L2, 16);
    graft_gindex* g = new_index(&p, d);
    CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    CHECK_OK(graft_gindex_add(g, m, s->xb));
    CHECK_OK(graft_gindex_build(g));
    const int R = graft_gindex_graph(g)->R;
    size_t len;
    unsigned char* b = record_of(g, &len);
    /* GRFTGRPH version 3 with the PQ storage (graft/graph_index.h) */
    const size_t codes_at = HDR + 256 * (size_t)d * 4, x_at = codes_at + (size_t)m * 16,
                 graph_at = x_at + (size_t)m * d * 4;
    CHECK(!memcmp(b, "GRFTGRPH", 8) && b[8] == 4 && b[64] == GRAFT_STORAGE_PQ && b[80] == 16,
          "a PQ index writes a GRFTGRPH version-4 record with storage PQ, M = 16");
    expect_format(b, 0, "empty", "empty");
    const size_t cuts[] = {7, 40, 87, 88, 103, 104, 151, HDR, codes_at + 3, x_at + 100, graph_at + 7, len - 8, len - 1};
    char what[64];
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(what, sizeof what, "truncated at byte %zu", cuts[i]);
        expect_format(b, cuts[i], what, "truncated");
    }
    unsigned char* c = malloc(len);
    memcpy(c, b, len);
    c[codes_at + 77] ^= 0x10;
    expect_format(c, len, "bit flipped in the codes", "checksum");
    memcpy(c, b, len);
    c[3] = 'X';
    expect_format(c, len, "wrong magic", "not a graft");
    free(c);
    with_field(b, len, 8, 6, 4, 0, "format version 6", "newer graft");
    with_field(b, len, 8, 2, 4, 0, "PQ in a version-2 record", "storage kind");
    with_field(b, len, 16, 0, 8, 0, "d = 0", "dimension");
    with_field(b, len, 32, 3, 4, 0, "metric 3", "metric");
    with_field(b, len, 36, 0, 4, 0, "R = 0", "degree");
    with_field(b, len, 40, (uint64_t)m, 8, 0, "entry = n", "entry");
    with_field(b, len, 80, 7, 4, 0, "M = 7", "divide");
    with_field(b, len, 80, 0, 4, 0, "M = 0", "divide");
    with_field(b, len, 68, 0, 4, 0, "untrained with vectors", "untrained");
    with_field(b, len, 68, 2, 4, 0, "trained flag 2", "trained flag");
    with_field(b, len, 84, 9, 4, 0, "mode 9", "mode");
    with_field(b, len, 48, 0, 4, 0, "L = 0", "L=0");
    with_field(b, len, 88, 3, 4, 0, "max_expand 3", "max_expand");
    with_field(b, len, 92, 40, 4, 0, "bloom_log2 40", "bloom_log2");
    with_field(b, len, graph_at + 4 * ((size_t)R * 9 + 1), (uint32_t)m, 4, 1, "id = n, valid checksum",
               "row 9");
    with_field(b, len, x_at + 4 * 130, 0x7fc00000u, 4, 1, "NaN vector, valid checksum", "row 1");
    with_field(b, len, HDR + 4 * 9, 0x7f800000u, 4, 1, "Inf centroid, valid checksum", "row");
    free(b);
    graft_gindex_free(g);
}

/* The graph + PQ index's GRFTBANG version-1 record, written by the code before the unified graph
 * index (tests/fixtures/make_bindex_v1.c: 500 sift5k vectors, PQ16, CPU build, L = 32; that it
 * loads as the PQ storage and answers what that code answered is test_graph_storage's), damaged
 * as that code's reader was tested: the reader of the unified index refuses it the same way. */
static void test_bang_v1_fixture(const graft_test_sift* s) {
    printf("GRFTBANG version-1 fixture, damaged\n");
    enum { N = 500 };
    FILE* f = fopen(GRAFT_FIXTURES_DIR "/bindex_v1_sift500.grft", "rb");
    CHECK(f != NULL, "fixture in %s", GRAFT_FIXTURES_DIR);
    if (!f) return;
    size_t len;
    fseek(f, 0, SEEK_END);
    unsigned char* b = graft_test_bytes_of(f, &len); /* closes f */
    /* The old reader's checks, on the old layout. */
    const size_t x_at = 88 + 256 * (size_t)s->d * 4 + (size_t)N * 16;
    const size_t cuts[] = {7, 40, 87, 88, x_at + 100, len - 8, len - 1};
    char what[64];
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(what, sizeof what, "GRFTBANG truncated at byte %zu", cuts[i]);
        expect_format(b, cuts[i], what, "truncated");
    }
    with_field(b, len, 8, 2, 4, 0, "GRFTBANG format version 2", "newer graft");
    with_field(b, len, 12, 80, 4, 0, "GRFTBANG header size 80", "header size");
    with_field(b, len, 48, 7, 4, 0, "GRFTBANG M = 7", "divide");
    with_field(b, len, 80, 0, 4, 0, "GRFTBANG untrained with vectors", "untrained");
    with_field(b, len, 80, 2, 4, 0, "GRFTBANG trained flag 2", "trained flag");
    with_field(b, len, 52, 9, 4, 0, "GRFTBANG mode 9", "mode");
    with_field(b, len, 64, 3, 4, 0, "GRFTBANG max_expand 3", "max_expand");
    with_field(b, len, 68, 40, 4, 0, "GRFTBANG bloom_log2 40", "bloom_log2");
    with_field(b, len, x_at + 4 * 130, 0x7fc00000u, 4, 1, "GRFTBANG NaN vector, valid checksum", "row 1");
    with_field(b, len, 88 + 4 * 9, 0x7f800000u, 4, 1, "GRFTBANG Inf centroid, valid checksum", "row");
    free(b);
}

/* ---- the same object on a GPU, where one is visible ------------------------------------------ */

static void test_gpu(const graft_test_sift* s) {
    if (!graft_gpu_available()) {
        printf("GPU graph + PQ index: no GPU visible, skipped\n");
        return;
    }
    graft_gindex_params p = cpu_params(GRAFT_METRIC_L2, 32);
    p.device = 0;
    graft_gindex* g = new_index(&p, s->d);
    if (!g) return;
    CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    CHECK_OK(graft_gindex_add(g, s->nb, s->xb));
    CHECK(graft_gindex_mode(g) == GRAFT_BANG_IN_MEMORY && graft_gindex_gpu_bytes(g) == 0,
          "AUTO on a GPU with room: in-memory, after the build");
    CHECK_OK(graft_gindex_build(g));
    CHECK(graft_gindex_mode(g) == GRAFT_BANG_IN_MEMORY && graft_gindex_gpu_bytes(g) > 0 &&
              graft_gindex_build_pieces(g) == 1,
          "built on the GPU (pieces %d), in-memory", graft_gindex_build_pieces(g));
    /* The CPU reference over the index's own graph, codebooks and codes. */
    results rc = {malloc(sizeof(float) * s->nq * 10), malloc(sizeof(int64_t) * s->nq * 10)};
    CHECK_OK(graft_bang_search_cpu(graft_gindex_graph(g), graft_gindex_pq(g), graft_gindex_codes(g),
                                   graft_gindex_vectors(g), s->d, GRAFT_METRIC_L2, s->xq, s->nq, 10,
                                   NULL, rc.D, rc.I));
    const graft_bang_mode modes[] = {GRAFT_BANG_IN_MEMORY, GRAFT_BANG_OUT_OF_CORE};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(graft_gindex_set_mode(g, modes[i], 0));
        CHECK(graft_gindex_mode(g) == modes[i], "mode %d", (int)modes[i]);
        results rg = search(g, s->xq, s->nq, 10, NULL);
        int64_t same = 0;
        for (int64_t j = 0; j < s->nq * 10; j++) same += rg.I[j] == rc.I[j];
        double rec = graft_test_recall(rg.I, 10, s->gt, s->gt_k, s->nq, 10);
        printf("GPU graph + PQ index %s: recall@10 %.4f, %.4f of ids equal to the CPU's, %zu GPU bytes\n",
               i ? "out-of-core" : "in-memory", rec, (double)same / (s->nq * 10), graft_gindex_gpu_bytes(g));
        CHECK(same >= 0.97 * s->nq * 10, "GPU vs CPU: %lld equal ids", (long long)same);
        free_results(&rg);
    }
    /* A budget below the codes is refused and the index keeps its mode. */
    CHECK_ERR(graft_gindex_set_mode(g, GRAFT_BANG_OUT_OF_CORE, 1000), GRAFT_EGPU_NOMEM);
    CHECK(graft_gindex_mode(g) == GRAFT_BANG_OUT_OF_CORE, "mode kept after a failed set_mode");
    results after = search(g, s->xq, 5, 10, NULL);
    CHECK(after.I[0] >= 0, "search after a failed set_mode");
    free_results(&after);
    free_results(&rc);
    graft_gindex_free(g);

    /* While a build is pending set_mode only records; the search's upload then refuses a budget
     * below the codes and keeps the built graph, so fixing the budget needs no second build. */
    g = new_index(&p, s->d);
    if (!g) return;
    CHECK_OK(graft_gindex_train(g, s->nb, s->xb));
    CHECK_OK(graft_gindex_add(g, s->nb, s->xb));
    CHECK_OK(graft_gindex_set_mode(g, GRAFT_BANG_OUT_OF_CORE, 1000));
    int64_t I5[50];
    float D5[50];
    CHECK_ERR(graft_gindex_search(g, 5, s->xq, 10, NULL, D5, I5, NULL), GRAFT_EGPU_NOMEM);
    CHECK(strstr(graft_last_error(), "budget") != NULL, "message: %s", graft_last_error());
    const double built_s = graft_gindex_build_seconds(g);
    CHECK(graft_gindex_graph(g) != NULL && graft_gindex_gpu_bytes(g) == 0 && built_s > 0,
          "graph kept after a failed upload");
    CHECK_OK(graft_gindex_set_mode(g, GRAFT_BANG_OUT_OF_CORE, 0));
    CHECK(graft_gindex_mode(g) == GRAFT_BANG_OUT_OF_CORE && graft_gindex_gpu_bytes(g) > 0 &&
              graft_gindex_build_seconds(g) == built_s,
          "out-of-core after the budget was fixed, without a second build");
    CHECK_OK(graft_gindex_search(g, 5, s->xq, 10, NULL, D5, I5, NULL));
    CHECK(I5[0] >= 0, "search after the fixed budget");
    graft_gindex_free(g);
}

/* Codebooks trained once and installed elsewhere (what sharded indexes do): the same codes as
 * the trained index's, bit for bit; refused for another M or d, NULL, or a non-empty index. */
static void test_set_pq(const graft_test_sift* s) {
    graft_gindex_params p = cpu_params(GRAFT_METRIC_L2, 16);
    graft_gindex* a = new_index(&p, s->d);
    graft_gindex* b = new_index(&p, s->d);
    graft_gindex_params p8 = cpu_params(GRAFT_METRIC_L2, 8);
    graft_gindex* c = new_index(&p8, s->d);
    if (!a || !b || !c) return;
    CHECK_OK(graft_gindex_train(a, s->nb, s->xb));
    CHECK_ERR(graft_gindex_set_pq(b, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_gindex_set_pq(c, graft_gindex_pq(a)), GRAFT_EINVAL); /* M = 8 vs 16 */
    CHECK(!graft_gindex_is_trained(c), "a refused set_pq trained the index");
    CHECK_OK(graft_gindex_set_pq(b, graft_gindex_pq(a)));
    CHECK(graft_gindex_is_trained(b) && graft_gindex_pq(b) != graft_gindex_pq(a) &&
              !memcmp(graft_gindex_pq(b)->centroids, graft_gindex_pq(a)->centroids,
                      sizeof(float) * 16 * GRAFT_PQ_KSUB * (s->d / 16)),
          "set_pq: a copy of the codebooks");
    CHECK_OK(graft_gindex_add(a, 1000, s->xb));
    CHECK_OK(graft_gindex_add(b, 1000, s->xb));
    CHECK(!memcmp(graft_gindex_codes(a), graft_gindex_codes(b), 1000 * 16), "installed codebooks code alike");
    CHECK_ERR(graft_gindex_set_pq(b, graft_gindex_pq(a)), GRAFT_ESTATE); /* its codes would go stale */
    CHECK(graft_gindex_ntotal(b) == 1000, "a refused set_pq changed the index");
    graft_gindex_free(a);
    graft_gindex_free(b);
    graft_gindex_free(c);
}

int main(void) {
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    /* GRAFT_TEST_QUICK (the sanitizer tree's run, testutil.h): sift5k's first 2000 vectors and 200
     * queries with their exact truth; the recall bars are set at full size, where a beam of L
     * covers less of the graph (harder), and still catch a corrupted graph or code. */
    graft_test_sift_quick(&s, 2000, 200);
    test_life_cycle(&s);
    test_set_pq(&s);
    test_set_data(&s);
    test_io(&s);
    test_bang_v1_fixture(&s);
    test_gpu(&s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_bang_index");
}
