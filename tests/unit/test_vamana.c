/* DiskANN Vamana graph files (plugin/io/vamana.c): a graph built by RNN-Descent on sift5k written and
 * read back (same rows, same search results), a hand-made file with frozen points (ids >= n
 * dropped, the start vertex remapped), broken files (truncated, counts above the max degree, file
 * sizes that do not match, too few or too many rows, missing), bad arguments; and a graph that
 * came in through such a file serving the graph + PQ index (graft_gindex_set_data). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft/graph_index.h"
#include "graft/graph.h"
#include "testutil.h"

static char dir[64];

static const char* path(const char* name) {
    static char buf[4][512];
    static int next;
    char* p = buf[next++ & 3];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static long file_size(const char* p) {
    FILE* f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static unsigned char* slurp(const char* p, long* len) {
    *len = file_size(p);
    unsigned char* b = malloc((size_t)(*len > 0 ? *len : 1));
    FILE* f = fopen(p, "rb");
    CHECK(f && fread(b, 1, (size_t)*len, f) == (size_t)*len, "reading %s", p);
    if (f) fclose(f);
    return b;
}

static void spill(const char* p, const unsigned char* b, long len) {
    FILE* f = fopen(p, "wb");
    CHECK(f && fwrite(b, 1, (size_t)len, f) == (size_t)len, "writing %s", p);
    if (f) fclose(f);
}

static void put_le(unsigned char* p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_le(const unsigned char* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A Vamana file from rows (counts[v] ids each, concatenated in ids), its size field computed
 * unless size_override; returns the file's length. */
static long make_file(const char* p, uint32_t max_degree, uint32_t start, uint64_t frozen, int rows,
                      const uint32_t* counts, const uint32_t* ids, uint64_t size_override) {
    size_t nids = 0;
    for (int v = 0; v < rows; v++) nids += counts[v];
    const long len = 24 + 4 * (long)(rows + nids);
    unsigned char* b = calloc(1, (size_t)len);
    put_le(b, size_override ? size_override : (uint64_t)len, 8);
    put_le(b + 8, max_degree, 4);
    put_le(b + 12, start, 4);
    put_le(b + 16, frozen, 8);
    unsigned char* q = b + 24;
    for (int v = 0, at = 0; v < rows; v++) {
        put_le(q, counts[v], 4);
        q += 4;
        for (uint32_t j = 0; j < counts[v]; j++, q += 4) put_le(q, ids[at++], 4);
    }
    spill(p, b, len);
    free(b);
    return len;
}

/* expr must fail with `status` and a message containing `needle`; *g must stay untouched. */
#define FAILS_WITH(expr, status, needle, g)                                                       \
    do {                                                                                          \
        graft_graph before_ = *(g);                                                               \
        graft_clear_error();                                                                      \
        int rc_ = (expr);                                                                         \
        CHECK(rc_ == (status) && strstr(graft_last_error(), needle),                             \
              "%s -> %s (%s), expected %s naming '%s'", #expr, graft_status_name(rc_),           \
              graft_last_error(), graft_status_name(status), needle);                            \
        CHECK(!memcmp(&before_, (g), sizeof before_), "%s changed its output on failure", #expr); \
    } while (0)

/* ---- round trip -------------------------------------------------------------------------------- */

static graft_test_sift s;
static graft_graph built; /* RNN-Descent on sift5k, default parameters */

static void test_roundtrip(void) {
    printf("round trip\n");
    CHECK_OK(graft_vamana_write(path("sift5k.vamana"), &built));
    long len = file_size(path("sift5k.vamana"));
    int64_t edges = 0;
    int maxdeg = 0;
    for (int64_t v = 0; v < built.n; v++) {
        int c = 0;
        for (int j = 0; j < built.R; j++) c += built.nbrs[v * built.R + j] >= 0;
        edges += c;
        if (c > maxdeg) maxdeg = c;
    }
    CHECK(len == 24 + 4 * (built.n + edges), "file of %ld bytes for %lld rows and %lld edges", len,
          (long long)built.n, (long long)edges);
    unsigned char* b = slurp(path("sift5k.vamana"), &len);
    CHECK(get_le(b, 8) == (uint64_t)len && get_le(b + 8, 4) == (uint64_t)maxdeg &&
          get_le(b + 12, 4) == (uint64_t)built.entry && get_le(b + 16, 8) == 0,
          "header: size %llu, max degree %llu, start %llu, frozen %llu", (unsigned long long)get_le(b, 8),
          (unsigned long long)get_le(b + 8, 4), (unsigned long long)get_le(b + 12, 4),
          (unsigned long long)get_le(b + 16, 8));
    free(b);

    graft_graph g = {0};
    CHECK_OK(graft_vamana_read(path("sift5k.vamana"), s.nb, &g));
    CHECK(g.n == s.nb && g.R == maxdeg && g.entry == built.entry, "read back: n %lld R %d entry %lld",
          (long long)g.n, g.R, (long long)g.entry);
    int64_t diff = 0;
    for (int64_t v = 0; v < g.n && g.nbrs; v++)
        for (int j = 0; j < built.R; j++)
            diff += (j < g.R ? g.nbrs[v * g.R + j] : -1) != built.nbrs[v * built.R + j];
    CHECK(diff == 0, "%lld slots differ after the round trip", (long long)diff);
    printf("  %lld rows, %lld edges, max degree %d (graph R %d), %ld bytes\n", (long long)g.n,
           (long long)edges, maxdeg, built.R, len);

    /* The same search on both. */
    const int k = 10;
    float* D0 = malloc(sizeof(float) * s.nq * k);
    float* D1 = malloc(sizeof(float) * s.nq * k);
    int64_t* I0 = malloc(sizeof(int64_t) * s.nq * k);
    int64_t* I1 = malloc(sizeof(int64_t) * s.nq * k);
    CHECK_OK(graft_graph_search_cpu(&built, s.xb, s.d, GRAFT_METRIC_L2, s.xq, s.nq, k, 64, D0, I0));
    CHECK_OK(graft_graph_search_cpu(&g, s.xb, s.d, GRAFT_METRIC_L2, s.xq, s.nq, k, 64, D1, I1));
    CHECK(!memcmp(D0, D1, sizeof(float) * s.nq * k) && !memcmp(I0, I1, sizeof(int64_t) * s.nq * k),
          "search results differ after the round trip");
    free(D0); free(D1); free(I0); free(I1);

    /* Written again from what was read: the same bytes. */
    CHECK_OK(graft_vamana_write(path("again.vamana"), &g));
    long l0, l1;
    unsigned char* b0 = slurp(path("sift5k.vamana"), &l0);
    unsigned char* b1 = slurp(path("again.vamana"), &l1);
    CHECK(l0 == l1 && !memcmp(b0, b1, (size_t)l0), "rewritten file differs");
    free(b0);
    free(b1);
    graft_graph_free(&g);
}

/* ---- frozen points ----------------------------------------------------------------------------- */

static void test_frozen(void) {
    printf("frozen points\n");
    /* 4 vectors, 2 frozen points (rows 4 and 5); start = 5, a frozen point whose first neighbour
     * below n is 3. */
    const uint32_t counts[6] = {3, 2, 1, 0, 2, 3};
    const uint32_t ids[] = {1, 4, 2, /**/ 0, 5, /**/ 3, /**/ /**/ 2, 0, /**/ 4, 3, 1};
    make_file(path("frozen.vamana"), 3, 5, 2, 6, counts, ids, 0);
    graft_graph g = {0};
    CHECK_OK(graft_vamana_read(path("frozen.vamana"), 4, &g));
    const int32_t want[4][3] = {{1, 2, -1}, {0, -1, -1}, {3, -1, -1}, {-1, -1, -1}};
    CHECK(g.n == 4 && g.R == 3 && g.entry == 3 && g.nbrs && !memcmp(g.nbrs, want, sizeof want),
          "frozen: n %lld R %d entry %lld", (long long)g.n, g.R, (long long)g.entry);
    graft_graph_free(&g);

    /* start below n: kept as it is. */
    make_file(path("frozen1.vamana"), 3, 2, 2, 6, counts, ids, 0);
    CHECK_OK(graft_vamana_read(path("frozen1.vamana"), 4, &g));
    CHECK(g.entry == 2, "start 2 read as entry %lld", (long long)g.entry);
    graft_graph_free(&g);

    /* A frozen start with no neighbour among the vectors: no entry point. */
    const uint32_t counts2[6] = {3, 2, 1, 0, 2, 1};
    const uint32_t ids2[] = {1, 4, 2, 0, 5, 3, 2, 0, 4};
    make_file(path("frozen2.vamana"), 3, 5, 2, 6, counts2, ids2, 0);
    FAILS_WITH(graft_vamana_read(path("frozen2.vamana"), 4, &g), GRAFT_EFORMAT, "no entry point", &g);

    /* A graph without edges: one column of -1. */
    const uint32_t zero[3] = {0, 0, 0};
    make_file(path("edgeless.vamana"), 0, 1, 0, 3, zero, ids, 0);
    CHECK_OK(graft_vamana_read(path("edgeless.vamana"), 3, &g));
    CHECK(g.R == 1 && g.entry == 1 && g.nbrs && g.nbrs[0] == -1 && g.nbrs[2] == -1, "edgeless graph");
    graft_graph_free(&g);
}

/* ---- broken files and bad arguments ------------------------------------------------------------ */

static void test_errors(void) {
    printf("broken files\n");
    graft_graph g;
    memset(&g, 0x5a, sizeof g); /* must survive every failure */
    long len;
    unsigned char* good = slurp(path("sift5k.vamana"), &len);
    unsigned char* b = malloc((size_t)len + 16);
    char needle[96];

    /* Truncated anywhere: named with the byte where the file ends. */
    const long cuts[] = {0, 7, 23, 24, 25, 1000, len / 2, len - 4, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spill(path("cut.vamana"), good, cuts[i]);
        if (cuts[i] == 0)
            snprintf(needle, sizeof needle, "empty file");
        else if (cuts[i] < 24)
            snprintf(needle, sizeof needle, "ends at byte %ld, in the header", cuts[i]);
        else
            snprintf(needle, sizeof needle, "truncated: the file ends at byte %ld", cuts[i]);
        FAILS_WITH(graft_vamana_read(path("cut.vamana"), s.nb, &g), GRAFT_EFORMAT, needle, &g);
        if (i == 6) printf("  truncated at byte %ld -> %s\n", cuts[i], graft_last_error());
    }

    /* Truncated with its size field patched to match: after a whole row, rows are missing; in
     * the middle of one, that row runs past the end. */
    long half = 24;
    for (int64_t v = 0; v < s.nb / 2; v++) half += 4 * (1 + (long)get_le(good + half, 4));
    memcpy(b, good, (size_t)len);
    put_le(b, (uint64_t)half, 8);
    spill(path("short.vamana"), b, half);
    snprintf(needle, sizeof needle, "the file holds %lld rows, but n = %lld", (long long)(s.nb / 2), (long long)s.nb);
    FAILS_WITH(graft_vamana_read(path("short.vamana"), s.nb, &g), GRAFT_EFORMAT, needle, &g);
    FAILS_WITH(graft_vamana_read(path("short.vamana"), s.nb, &g), GRAFT_EFORMAT, "fewer rows than n", &g);
    printf("  half the rows, size field patched -> %s\n", graft_last_error());
    put_le(b, (uint64_t)half + 8, 8);
    spill(path("short.vamana"), b, half + 8);
    snprintf(needle, sizeof needle, "row %lld (byte %ld)", (long long)(s.nb / 2), half);
    FAILS_WITH(graft_vamana_read(path("short.vamana"), s.nb, &g), GRAFT_EFORMAT, needle, &g);
    FAILS_WITH(graft_vamana_read(path("short.vamana"), s.nb, &g), GRAFT_EFORMAT, "runs past", &g);

    /* The size field disagrees with the file. */
    memcpy(b, good, (size_t)len);
    put_le(b, (uint64_t)len + 4, 8);
    spill(path("size.vamana"), b, len);
    FAILS_WITH(graft_vamana_read(path("size.vamana"), s.nb, &g), GRAFT_EFORMAT, "header's file size", &g);
    memcpy(b, good, (size_t)len);
    memset(b + len, 0, 8);
    spill(path("trailing.vamana"), b, len + 8);
    FAILS_WITH(graft_vamana_read(path("trailing.vamana"), s.nb, &g), GRAFT_EFORMAT, "8 bytes after", &g);
    memcpy(b, good, (size_t)len);
    put_le(b, 12, 8);
    spill(path("tiny.vamana"), b, len);
    FAILS_WITH(graft_vamana_read(path("tiny.vamana"), s.nb, &g), GRAFT_EFORMAT, "smaller than the header", &g);

    /* A row count above the max degree: the row and its byte named. */
    memcpy(b, good, (size_t)len);
    const uint32_t c0 = (uint32_t)get_le(good + 24, 4);
    const long row1 = 24 + 4 * (1 + (long)c0);
    put_le(b + row1, get_le(good + 8, 4) + 1, 4);
    spill(path("count.vamana"), b, len);
    snprintf(needle, sizeof needle, "row 1 (byte %ld) holds %llu neighbours, above the header's max degree",
             row1, (unsigned long long)get_le(good + 8, 4) + 1);
    FAILS_WITH(graft_vamana_read(path("count.vamana"), s.nb, &g), GRAFT_EFORMAT, needle, &g);
    printf("  count above the max degree -> %s\n", graft_last_error());

    /* A max degree no row of the file could hold, a start vertex beyond the rows, an id beyond. */
    memcpy(b, good, (size_t)len);
    put_le(b + 8, 0xfffffff0u, 4);
    spill(path("maxdeg.vamana"), b, len);
    FAILS_WITH(graft_vamana_read(path("maxdeg.vamana"), s.nb, &g), GRAFT_EFORMAT, "max degree", &g);
    memcpy(b, good, (size_t)len);
    put_le(b + 12, (uint64_t)s.nb, 4);
    spill(path("start.vamana"), b, len);
    FAILS_WITH(graft_vamana_read(path("start.vamana"), s.nb, &g), GRAFT_EFORMAT, "start vertex", &g);
    memcpy(b, good, (size_t)len);
    put_le(b + 28, (uint64_t)s.nb + 7, 4); /* row 0's first id */
    spill(path("id.vamana"), b, len);
    FAILS_WITH(graft_vamana_read(path("id.vamana"), s.nb, &g), GRAFT_EFORMAT, "holds id", &g);
    memcpy(b, good, (size_t)len);
    put_le(b + 16, (uint64_t)1 << 60, 8); /* frozen points */
    spill(path("frozen.vamana"), b, len);
    FAILS_WITH(graft_vamana_read(path("frozen.vamana"), s.nb, &g), GRAFT_EFORMAT, "cannot hold", &g);

    /* n that is not the file's: too large (fewer rows than n), too small (rows left over). */
    FAILS_WITH(graft_vamana_read(path("sift5k.vamana"), s.nb + 1, &g), GRAFT_EFORMAT, "fewer rows than n", &g);
    graft_clear_error();
    int rc = graft_vamana_read(path("sift5k.vamana"), s.nb - 1, &g);
    CHECK(rc == GRAFT_EFORMAT && strstr(graft_last_error(), "is n the vector count"),
          "n one short -> %s: %s", graft_status_name(rc), graft_last_error());

    /* Missing file, a directory, bad arguments. */
    FAILS_WITH(graft_vamana_read(path("missing.vamana"), s.nb, &g), GRAFT_EIO, "missing.vamana", &g);
    FAILS_WITH(graft_vamana_read(dir, s.nb, &g), GRAFT_EIO, dir, &g);
    FAILS_WITH(graft_vamana_read(NULL, s.nb, &g), GRAFT_EINVAL, "NULL", &g);
    CHECK_ERR(graft_vamana_read(path("sift5k.vamana"), s.nb, NULL), GRAFT_EINVAL);
    FAILS_WITH(graft_vamana_read(path("sift5k.vamana"), 0, &g), GRAFT_EINVAL, "n = 0", &g);
    FAILS_WITH(graft_vamana_read(path("sift5k.vamana"), (int64_t)1 << 31, &g), GRAFT_EINVAL, "2^31", &g);

    printf("bad writes\n");
    CHECK_ERR(graft_vamana_write(NULL, &built), GRAFT_EINVAL);
    CHECK_ERR(graft_vamana_write(path("x.vamana"), NULL), GRAFT_EINVAL);
    int32_t rows[6] = {1, -1, 0, 3, -1, -1};
    graft_graph bad = {3, 2, rows, 0};
    graft_clear_error();
    rc = graft_vamana_write(path("bad.vamana"), &bad);
    CHECK(rc == GRAFT_EINVAL && strstr(graft_last_error(), "row 1") && file_size(path("bad.vamana")) < 0,
          "id 3 in a 3-row graph -> %s: %s", graft_status_name(rc), graft_last_error());
    bad.entry = 3;
    CHECK_ERR(graft_vamana_write(path("bad.vamana"), &bad), GRAFT_EINVAL);
    graft_clear_error();
    rc = graft_vamana_write(path("no/such/dir.vamana"), &built);
    CHECK(rc == GRAFT_EIO && strstr(graft_last_error(), "no/such/dir.vamana"), "unwritable path -> %s: %s",
          graft_status_name(rc), graft_last_error());
    free(b);
    free(good);
}

/* ---- an outside graph serving the graph + PQ index ---------------------------------------------- */

/* Lloyd's k-means, 6 iterations from k evenly spaced points: codebooks good enough for the check
 * (graft has no k-means of its own; the FAISS adapter passes FAISS's). */
static int lloyd(void* ctx, int64_t d, int64_t n, int64_t k, const float* x, float* c) {
    (void)ctx;
    int* a = malloc(sizeof(int) * (size_t)n);
    double* sum = malloc(sizeof(double) * (size_t)(k * d));
    int64_t* cnt = malloc(sizeof(int64_t) * (size_t)k);
    for (int64_t j = 0; j < k; j++) memcpy(c + j * d, x + (j * n / k) * d, sizeof(float) * (size_t)d);
    for (int it = 0; it < 6; it++) {
        for (int64_t i = 0; i < n; i++) {
            float best = FLT_MAX;
            for (int64_t j = 0; j < k; j++) {
                float s2 = 0;
                for (int64_t t = 0; t < d; t++) s2 += (x[i * d + t] - c[j * d + t]) * (x[i * d + t] - c[j * d + t]);
                if (s2 < best) best = s2, a[i] = (int)j;
            }
        }
        memset(sum, 0, sizeof(double) * (size_t)(k * d));
        memset(cnt, 0, sizeof(int64_t) * (size_t)k);
        for (int64_t i = 0; i < n; i++) {
            cnt[a[i]]++;
            for (int64_t t = 0; t < d; t++) sum[a[i] * d + t] += x[i * d + t];
        }
        for (int64_t j = 0; j < k; j++)
            for (int64_t t = 0; t < d && cnt[j]; t++) c[j * d + t] = (float)(sum[j * d + t] / cnt[j]);
    }
    free(a);
    free(sum);
    free(cnt);
    return GRAFT_OK;
}

static void test_bang_set_data(void) {
    printf("Vamana graph in the graph + PQ index\n");
    graft_graph g = {0};
    CHECK_OK(graft_vamana_read(path("sift5k.vamana"), s.nb, &g));
    if (!g.nbrs) return;
    graft_gindex_params p;
    graft_gindex_params_defaults(&p);
    p.storage = GRAFT_STORAGE_PQ;
    p.device = -1;
    p.pq.M = 16;
    p.pq.kmeans = lloyd;
    graft_gindex* b = NULL;
    CHECK_OK(graft_gindex_new(s.d, &p, &b));
    if (!b) return;
    CHECK_ERR(graft_gindex_set_data(b, s.nb, s.xb, &g), GRAFT_ESTATE); /* untrained */
    CHECK_OK(graft_gindex_train(b, s.nb, s.xb));
    CHECK_OK(graft_gindex_set_data(b, s.nb, s.xb, &g));
    const graft_graph* in = graft_gindex_graph(b);
    CHECK(graft_gindex_ntotal(b) == s.nb && in && in->R == g.R && in->entry == g.entry &&
          !memcmp(in->nbrs, g.nbrs, sizeof(int32_t) * (size_t)(g.n * g.R)),
          "the index does not hold the Vamana graph");

    /* The index searches what graft_bang_search_cpu finds over the same graph and codes. */
    const int k = 10;
    float* D0 = malloc(sizeof(float) * s.nq * k);
    float* D1 = malloc(sizeof(float) * s.nq * k);
    int64_t* I0 = malloc(sizeof(int64_t) * s.nq * k);
    int64_t* I1 = malloc(sizeof(int64_t) * s.nq * k);
    CHECK_OK(graft_gindex_search(b, s.nq, s.xq, k, NULL, D0, I0, NULL));
    graft_bang_params sp = graft_gindex_get_params(b).search;
    CHECK_OK(graft_bang_search_cpu(&g, graft_gindex_pq(b), graft_gindex_codes(b), s.xb, s.d,
                                   GRAFT_METRIC_L2, s.xq, s.nq, k, &sp, D1, I1));
    CHECK(!memcmp(D0, D1, sizeof(float) * s.nq * k) && !memcmp(I0, I1, sizeof(int64_t) * s.nq * k),
          "graft_gindex_search differs from graft_bang_search_cpu over the same graph");
    /* Recall of PQ-guided search + exact re-rank over the imported graph, L = 64: measured 0.9866
     * (Lloyd codebooks, M = 16). */
    double r = graft_test_recall(I0, k, s.gt, s.gt_k, s.nq, k);
    printf("  recall@10 %.4f (L = %d, M = 16)\n", r, sp.L);
    CHECK(r >= 0.97, "recall@10 %.4f over the imported graph", r);
    free(D0); free(D1); free(I0); free(I1);

    /* An outside graph of the wrong size is refused, the index kept. */
    graft_graph small = {0};
    const uint32_t counts[3] = {1, 1, 1};
    const uint32_t ids[3] = {1, 2, 0};
    make_file(path("three.vamana"), 1, 0, 0, 3, counts, ids, 0);
    CHECK_OK(graft_vamana_read(path("three.vamana"), 3, &small));
    CHECK_ERR(graft_gindex_set_data(b, s.nb, s.xb, &small), GRAFT_EINVAL);
    CHECK(graft_gindex_ntotal(b) == s.nb, "a refused set_data changed the index");
    graft_graph_free(&small);
    graft_gindex_free(b);
    graft_graph_free(&g);
}

int main(void) {
    graft_test_temp_dir(dir, sizeof dir, "vamana");
    graft_test_load_sift5k(&s);
    graft_rnnd_params p;
    graft_rnnd_params_defaults(&p);
    CHECK_OK(graft_rnnd_build_cpu(s.xb, s.nb, s.d, &p, &built));
    if (built.nbrs) {
        test_roundtrip();
        test_frozen();
        test_errors();
        test_bang_set_data();
    }
    graft_graph_free(&built);
    graft_test_free_sift(&s);
    graft_test_remove_dir(dir);
    return graft_test_finish("test_vamana");
}
