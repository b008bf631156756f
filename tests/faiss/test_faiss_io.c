/* Index I/O through the real faiss_c, like a user: faiss_graft_write_index / read_index save and
 * load graft flat indexes (bit-exact round trips, deterministic bytes), IndexIDMap/IDMap2 over
 * them, and stock FAISS indexes (IndexFlatL2, HNSW32); every broken file fails with a readable
 * message and no crash or leak. Built on the CPU (device -1); where a GPU is visible, graft
 * records are also read back onto device 0. */
#define _POSIX_C_SOURCE 200809L /* popen */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>

#include "graft/flat.h"
#include "graft/io.h"
#include "graft_faiss_c.h"
#include "faiss_testutil.h"

#define K 10
static char dir[64];
static char sentinel_obj;
#define SENTINEL ((FaissIndex*)&sentinel_obj)

static const char* path(char* buf, const char* name) {
    snprintf(buf, 512, "%s/%s", dir, name);
    return buf;
}
static unsigned char* slurp(const char* p, size_t* len) {
    FILE* f = fopen(p, "rb");
    CHECK(f, "cannot open %s", p);
    if (!f) { *len = 0; return NULL; }
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char* b = malloc(*len + 1);
    CHECK(fread(b, 1, *len, f) == *len, "short read of %s", p);
    fclose(f);
    return b;
}
static void spit(const char* p, const void* b, size_t len) {
    FILE* f = fopen(p, "wb");
    CHECK(f && fwrite(b, 1, len, f) == len && fclose(f) == 0, "cannot write %s", p);
}
static void put_le(unsigned char* p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* idx searched with the sift queries gives exactly D0/I0 (bit-exact). */
static void same(const char* what, FaissIndex* idx, const graft_test_sift* s, const float* D0,
                 const idx_t* I0) {
    float* D = malloc(sizeof(float) * s->nq * K);
    idx_t* I = malloc(sizeof(idx_t) * s->nq * K);
    FAISS_OK(faiss_Index_search(idx, s->nq, s->xq, K, D, I));
    int ok = !memcmp(D, D0, sizeof(float) * s->nq * K) && !memcmp(I, I0, sizeof(idx_t) * s->nq * K);
    CHECK(ok, "%s: search results differ from the original's", what);
    printf("  %-46s %s\n", what, ok ? "bit-exact" : "DIFFERENT");
    free(D);
    free(I);
}
static void results(FaissIndex* idx, const graft_test_sift* s, float** D, idx_t** I) {
    *D = malloc(sizeof(float) * s->nq * K);
    *I = malloc(sizeof(idx_t) * s->nq * K);
    FAISS_OK(faiss_Index_search(idx, s->nq, s->xq, K, *D, *I));
}
static void same_shape(const char* what, FaissIndex* a, FaissIndex* b) {
    CHECK(a && b && faiss_Index_ntotal(a) == faiss_Index_ntotal(b) &&
              faiss_Index_d(a) == faiss_Index_d(b) && faiss_Index_metric_type(a) == faiss_Index_metric_type(b),
          "%s: ntotal/d/metric not preserved", what);
}

/* ---- graft flat index round trips ------------------------------------------------------------- */

static void test_graft_roundtrip(const graft_test_sift* s, FaissMetricType metric, const char* tag) {
    printf("graft flat %s round trip\n", tag);
    char p1[512], p2[512], p3[512], name[64];
    FaissIndex *g = NULL, *r = NULL;
    FAISS_OK(faiss_GraftIndexFlat_new(&g, (int)s->d, metric, -1));
    FAISS_OK(faiss_Index_add(g, s->nb, s->xb));
    float* D0; idx_t* I0;
    results(g, s, &D0, &I0);

    snprintf(name, sizeof name, "%s_fname.gft", tag);
    FAISS_OK(faiss_graft_write_index_fname(g, path(p1, name)));
    snprintf(name, sizeof name, "%s_file.gft", tag);
    FILE* f = fopen(path(p2, name), "wb");
    FAISS_OK(faiss_graft_write_index(g, f));
    fclose(f);
    size_t n1, n2, n3;
    unsigned char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
    CHECK(n1 == 36 + (size_t)s->nb * s->d * 4 + 8, "%s: file holds %zu bytes", tag, n1);
    CHECK(n1 == n2 && !memcmp(b1, b2, n1), "%s: the fname and FILE* writes differ", tag);
    CHECK(!memcmp(b1, "GRFTFLAT", 8), "%s: magic", tag);

    f = fopen(p2, "rb"); /* FILE*, onto the CPU: the stream is left right after the record */
    FAISS_OK(faiss_graft_read_index_device(f, 0, -1, &r));
    CHECK(fgetc(f) == EOF, "%s: the reader left bytes of the record", tag);
    fclose(f);
    same_shape(tag, g, r);
    CHECK(faiss_GraftIndexFlat_cast(r) != NULL, "%s: not read back as a graft index", tag);
    same("read (FILE*, CPU)", r, s, D0, I0);
    snprintf(name, sizeof name, "%s_again.gft", tag); /* writing what was read gives the same bytes */
    FAISS_OK(faiss_graft_write_index_fname(r, path(p3, name)));
    unsigned char* b3 = slurp(p3, &n3);
    CHECK(n3 == n1 && !memcmp(b1, b3, n1), "%s: second write differs", tag);
    faiss_Index_free(r);
    r = NULL;

    char cmd[600]; /* a pipe: not seekable, the magic goes back through ungetc */
    snprintf(cmd, sizeof cmd, "cat '%s'", p1);
    FILE* pf = popen(cmd, "r");
    FAISS_OK(faiss_graft_read_index_device(pf, 0, -1, &r));
    pclose(pf);
    if (r) same("read (pipe, CPU)", r, s, D0, I0);
    faiss_Index_free(r);
    r = NULL;

    FAISS_OK(faiss_graft_read_index_fname(p1, 0, &r)); /* automatic device */
    same_shape(tag, g, r);
    if (!graft_gpu_available()) {
        same("read (fname, automatic device = CPU)", r, s, D0, I0);
    } else { /* on GPU 0: exactly what an index built there answers */
        FaissIndex *gg = NULL, *r0 = NULL;
        FAISS_OK(faiss_GraftIndexFlat_new(&gg, (int)s->d, metric, 0));
        FAISS_OK(faiss_Index_add(gg, s->nb, s->xb));
        float* Dg; idx_t* Ig;
        results(gg, s, &Dg, &Ig);
        same("read (fname, automatic device = GPU 0)", r, s, Dg, Ig);
        f = fopen(p2, "rb");
        FAISS_OK(faiss_graft_read_index_device(f, 0, 0, &r0));
        fclose(f);
        same("read (FILE*, GPU 0)", r0, s, Dg, Ig);
        FAISS_OK(faiss_graft_write_index_fname(r0, p3)); /* a GPU index writes the same bytes */
        free(b3);
        b3 = slurp(p3, &n3);
        CHECK(n3 == n1 && !memcmp(b1, b3, n1), "%s: GPU index writes different bytes", tag);
        faiss_Index_free(r0);
        faiss_Index_free(gg);
        free(Dg); free(Ig);
    }
    faiss_Index_free(r);
    same("original, after all that", g, s, D0, I0);
    faiss_Index_free(g);
    free(b1); free(b2); free(b3); free(D0); free(I0);
}

/* An empty index, and two records back to back in one stream (graft, then FAISS). */
static void test_empty_and_concatenated(void) {
    printf("empty index; two records in one stream\n");
    char p[512];
    FaissIndex *g = NULL, *fl = NULL, *r1 = NULL, *r2 = NULL;
    FAISS_OK(faiss_GraftIndexFlat_new(&g, 7, METRIC_INNER_PRODUCT, -1));
    FAISS_OK(faiss_IndexFlatL2_new_with((FaissIndexFlatL2**)&fl, 5));
    float x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    FAISS_OK(faiss_Index_add(fl, 2, x));
    FILE* f = fopen(path(p, "two.bin"), "w+b");
    FAISS_OK(faiss_graft_write_index(g, f));
    FAISS_OK(faiss_graft_write_index(fl, f));
    rewind(f);
    FAISS_OK(faiss_graft_read_index_device(f, 0, -1, &r1));
    FAISS_OK(faiss_graft_read_index(f, 0, &r2));
    CHECK(fgetc(f) == EOF, "bytes left after two records");
    fclose(f);
    same_shape("empty graft", g, r1);
    same_shape("FAISS flat after graft", fl, r2);
    float D[3];
    idx_t I[3];
    if (r1) {
        FAISS_OK(faiss_Index_search(r1, 1, x, 3, D, I));
        CHECK(I[0] == -1 && I[2] == -1, "empty index found something");
    }
    if (r2) {
        FAISS_OK(faiss_Index_search(r2, 1, x + 5, 2, D, I));
        CHECK(I[0] == 1 && I[1] == 0 && D[0] == 0.0f, "FAISS flat read after a graft record: wrong results");
    }
    faiss_Index_free(r1); faiss_Index_free(r2); faiss_Index_free(g); faiss_Index_free(fl);
}

/* ---- stock FAISS indexes go through faiss::write_index / read_index --------------------------- */

static void test_faiss_native(const graft_test_sift* s) {
    printf("stock FAISS indexes\n");
    const char* keys[2] = {"Flat", "HNSW32"};
    for (int t = 0; t < 2; t++) {
        char p1[512], p2[512], name[64];
        FaissIndex *x = NULL, *r = NULL;
        FAISS_OK(faiss_index_factory(&x, (int)s->d, keys[t], METRIC_L2));
        FAISS_OK(faiss_Index_add(x, s->nb, s->xb));
        float* D0; idx_t* I0;
        results(x, s, &D0, &I0);
        snprintf(name, sizeof name, "%s.faiss", keys[t]);
        FILE* f = fopen(path(p1, name), "wb");
        FAISS_OK(faiss_graft_write_index(x, f));
        fclose(f);
        snprintf(name, sizeof name, "%s_stock.faiss", keys[t]); /* same bytes as FAISS's own writer */
        FAISS_OK(faiss_write_index_fname(x, path(p2, name)));
        size_t n1, n2;
        unsigned char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
        CHECK(n1 == n2 && !memcmp(b1, b2, n1), "%s: bytes differ from faiss_write_index's", keys[t]);
        f = fopen(p1, "rb");
        FAISS_OK(faiss_graft_read_index(f, 0, &r));
        fclose(f);
        same_shape(keys[t], x, r);
        CHECK(r && faiss_GraftIndexFlat_cast(r) == NULL, "%s read back as a graft index", keys[t]);
        char what[64];
        snprintf(what, sizeof what, "%s (FILE*)", keys[t]);
        if (r) same(what, r, s, D0, I0);
        faiss_Index_free(r);
        r = NULL;
        FAISS_OK(faiss_graft_write_index_fname(x, p1));
        FAISS_OK(faiss_graft_read_index_fname(p1, 0, &r));
        snprintf(what, sizeof what, "%s (fname)", keys[t]);
        if (r) same(what, r, s, D0, I0);
        faiss_Index_free(r);
        faiss_Index_free(x);
        free(b1); free(b2); free(D0); free(I0);
    }
}

/* ---- IndexIDMap / IndexIDMap2 over graft: the GRFTIDMP record --------------------------------- */

static void test_idmap(const graft_test_sift* s, unsigned char** rec, size_t* rec_len) {
    printf("IndexIDMap / IndexIDMap2 over graft\n");
    idx_t* ids = malloc(sizeof(idx_t) * s->nb);
    for (int64_t i = 0; i < s->nb; i++) ids[i] = 1000000 + 7 * i;
    for (int two = 0; two < 2; two++) {
        char p[512];
        FaissIndex *g = NULL, *m = NULL, *r = NULL;
        FAISS_OK(faiss_GraftIndexFlat_new(&g, (int)s->d, METRIC_L2, -1));
        if (two) FAISS_OK(faiss_IndexIDMap2_new((FaissIndexIDMap2**)&m, g));
        else FAISS_OK(faiss_IndexIDMap_new((FaissIndexIDMap**)&m, g));
        FAISS_OK(faiss_Index_add_with_ids(m, s->nb, s->xb, ids));
        float* D0; idx_t* I0;
        results(m, s, &D0, &I0);
        FAISS_OK(faiss_graft_write_index_fname(m, path(p, two ? "idmap2.gft" : "idmap.gft")));
        FILE* f = fopen(p, "rb");
        FAISS_OK(faiss_graft_read_index_device(f, 0, -1, &r));
        fclose(f);
        same_shape("IDMap", m, r);
        if (r) {
            FaissIndex* inner = two ? faiss_IndexIDMap2_sub_index((FaissIndexIDMap2*)r)
                                    : faiss_IndexIDMap_sub_index((FaissIndexIDMap*)r);
            CHECK(faiss_GraftIndexFlat_cast(inner) != NULL, "inner index is not graft");
            same(two ? "IndexIDMap2 over graft" : "IndexIDMap over graft", r, s, D0, I0);
        }
        if (r && two) { /* IndexIDMap2 reconstructs by user id: the reverse map was rebuilt */
            float v[128];
            FAISS_OK(faiss_Index_reconstruct(r, ids[4321], v));
            CHECK(!memcmp(v, s->xb + 4321 * s->d, sizeof v), "IDMap2 reconstruct after read");
            *rec = slurp(p, rec_len);
        }
        faiss_Index_free(r);
        faiss_Index_free(m);
        faiss_Index_free(g);
        free(D0); free(I0);
    }
    /* IDMap over a stock FAISS index stays FAISS's business ("IxMp"). */
    char p[512];
    FaissIndex *fl = NULL, *m = NULL, *r = NULL;
    FAISS_OK(faiss_IndexFlatL2_new_with((FaissIndexFlatL2**)&fl, s->d));
    FAISS_OK(faiss_IndexIDMap_new((FaissIndexIDMap**)&m, fl));
    FAISS_OK(faiss_Index_add_with_ids(m, s->nb, s->xb, ids));
    float* D0; idx_t* I0;
    results(m, s, &D0, &I0);
    FAISS_OK(faiss_graft_write_index_fname(m, path(p, "idmap_flat.faiss")));
    FAISS_OK(faiss_graft_read_index_fname(p, 0, &r));
    if (r) same("IndexIDMap over IndexFlatL2", r, s, D0, I0);
    faiss_Index_free(r); faiss_Index_free(m); faiss_Index_free(fl);
    free(D0); free(I0); free(ids);
}

/* ---- errors ------------------------------------------------------------------------------------ */

/* rc must be non-zero with a message containing `needle`; *out untouched. */
static void expect_fail(const char* what, int rc, FaissIndex* out, const char* needle, int show) {
    const char* m = rc ? faiss_get_last_error() : NULL;
    CHECK(rc != 0 && m && strstr(m, needle), "%s: rc %d, message \"%s\", expected one containing \"%s\"",
          what, rc, m ? m : "", needle);
    CHECK(out == SENTINEL, "%s: *p_out changed", what);
    if (rc == 0 && out && out != SENTINEL) faiss_Index_free(out);
    if (show) printf("  %-30s -> %s\n", what, m ? m : "(no error)");
}

/* The bytes b (len) as a file: fname and FILE* readers both refuse them with `needle`. */
static void bad_file(const char* what, const unsigned char* b, size_t len, const char* needle) {
    char p[512];
    spit(path(p, "bad.gft"), b, len);
    FaissIndex* out = SENTINEL;
    expect_fail(what, faiss_graft_read_index_fname(p, 0, &out), out, needle, 1);
    FILE* f = fopen(p, "rb");
    out = SENTINEL;
    expect_fail(what, faiss_graft_read_index(f, 0, &out), out, needle, 0);
    fclose(f);
}

static void with_field(const unsigned char* b, size_t len, size_t off, uint64_t v, int n, const char* what,
                       const char* needle) {
    unsigned char* c = malloc(len);
    memcpy(c, b, len);
    put_le(c + off, v, n);
    bad_file(what, c, len, needle);
    free(c);
}

static void test_errors(const graft_test_sift* s, const unsigned char* idmap_rec, size_t idmap_len) {
    printf("errors\n");
    char p[512], q[512], what[64];
    FaissIndex* g = NULL;
    FAISS_OK(faiss_GraftIndexFlat_new(&g, (int)s->d, METRIC_L2, -1));
    FAISS_OK(faiss_Index_add(g, 50, s->xb));
    float* D0; idx_t* I0;
    results(g, s, &D0, &I0);
    FAISS_OK(faiss_graft_write_index_fname(g, path(q, "small.gft")));
    size_t len;
    unsigned char* b = slurp(q, &len);

    FaissIndex* out = SENTINEL;
    expect_fail("missing file", faiss_graft_read_index_fname(path(p, "missing.gft"), 0, &out), out,
                "cannot open", 1);
    bad_file("empty file", b, 0, "empty");
    size_t cuts[] = {4, 8, 12, 20, 30, 36, 37, 36 + 512 * 10 + 3, len - 8, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(what, sizeof what, "truncated at byte %zu", cuts[i]);
        bad_file(what, b, cuts[i], "truncated");
    }
    spit(p, b, len - 100); /* a pipe cannot be measured: the reader finds the end in the vectors */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cat '%s'", p);
    FILE* pf = popen(cmd, "r");
    out = SENTINEL;
    expect_fail("truncated, through a pipe", faiss_graft_read_index(pf, 0, &out), out, "in the vectors", 1);
    pclose(pf);
    unsigned char* c = malloc(len);
    memcpy(c, b, len);
    c[36 + 1234] ^= 0x40;
    bad_file("one bit flipped in the vectors", c, len, "checksum");
    memcpy(c, b, len);
    c[len - 3] ^= 1;
    bad_file("one bit flipped in the checksum", c, len, "checksum");
    memcpy(c, b, len);
    c[7] = 'X';
    bad_file("wrong magic (FAISS reader)", c, len, "not recognized");
    spit(p, c, len); /* graft's own reader names it */
    FILE* f = fopen(p, "rb");
    graft_flat* fl = NULL;
    CHECK_ERR(graft_flat_read(f, NULL, &fl), GRAFT_EFORMAT);
    CHECK(strstr(graft_last_error(), "not a graft flat index"), "graft_flat_read: %s", graft_last_error());
    printf("  %-30s -> %s\n", "wrong magic (graft reader)", graft_last_error());
    fclose(f);
    free(c);
    with_field(b, len, 8, 99, 4, "format version 99", "newer graft, format version 99");
    with_field(b, len, 8, 0, 4, "format version 0", "format version 0");
    with_field(b, len, 12, 8, 4, "header size 8", "header size");
    with_field(b, len, 16, 0, 8, "d = 0", "dimension");
    with_field(b, len, 16, (uint64_t)-3, 8, "d = -3", "dimension");
    with_field(b, len, 16, 1u << 21, 8, "d = 2^21", "dimension");
    with_field(b, len, 24, (uint64_t)-1, 8, "ntotal = -1", "ntotal");
    with_field(b, len, 24, 1000000000000ull, 8, "ntotal = 10^12", "truncated");
    with_field(b, len, 24, 1ull << 62, 8, "ntotal = 2^62", "overflow");
    with_field(b, len, 32, 5, 4, "metric 5", "metric");
    /* the id-map record */
    with_field(idmap_rec, idmap_len, 8, 2, 4, "id map: version 2", "format version 2");
    with_field(idmap_rec, idmap_len, 40, 12345, 8, "id map: one id changed", "checksum");
    bad_file("id map: truncated in the ids", idmap_rec, 100, "truncated");
    bad_file("id map: no flat record after it", idmap_rec, 24 + 8 * (size_t)s->nb + 8, "empty");

    /* NULL arguments */
    f = fopen(q, "rb");
    out = SENTINEL;
    expect_fail("read: f NULL", faiss_graft_read_index(NULL, 0, &out), out, "NULL", 1);
    expect_fail("read: p_out NULL", faiss_graft_read_index(f, 0, NULL), SENTINEL, "NULL", 1);
    expect_fail("read: device -7", faiss_graft_read_index_device(f, 0, -7, &out), out, "device", 1);
    expect_fail("read_fname: fname NULL", faiss_graft_read_index_fname(NULL, 0, &out), out, "NULL", 1);
    expect_fail("read_fname: p_out NULL", faiss_graft_read_index_fname(q, 0, NULL), SENTINEL, "NULL", 1);
    expect_fail("write: index NULL", faiss_graft_write_index(NULL, f), SENTINEL, "NULL", 1);
    /* write errors */
    expect_fail("write: read-only stream", faiss_graft_write_index(g, f), SENTINEL, "write failed", 1);
    fclose(f);
    expect_fail("write: f NULL", faiss_graft_write_index(g, NULL), SENTINEL, "NULL", 1);
    expect_fail("write_fname: index NULL", faiss_graft_write_index_fname(NULL, q), SENTINEL, "NULL", 1);
    expect_fail("write_fname: fname NULL", faiss_graft_write_index_fname(g, NULL), SENTINEL, "NULL", 1);
    expect_fail("write_fname: no such directory",
                faiss_graft_write_index_fname(g, path(p, "no/such/dir.gft")), SENTINEL, "cannot open", 1);
    if (access("/dev/full", W_OK) == 0)
        expect_fail("write_fname: /dev/full", faiss_graft_write_index_fname(g, "/dev/full"), SENTINEL,
                    "No space", 1);
    size_t len2;
    unsigned char* b2 = slurp(q, &len2);
    CHECK(len2 == len && !memcmp(b, b2, len), "a failed call touched the good file");
    same("original survives every error", g, s, D0, I0);
    faiss_Index_free(g);
    free(b); free(b2); free(D0); free(I0);
}

int main(void) {
    graft_test_temp_dir(dir, sizeof dir, "io");
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    printf("GPU: %s\n", graft_gpu_available() ? "visible, graft records also read onto device 0" : "none");
    test_graft_roundtrip(&s, METRIC_L2, "L2");
    test_graft_roundtrip(&s, METRIC_INNER_PRODUCT, "IP");
    test_empty_and_concatenated();
    test_faiss_native(&s);
    unsigned char* rec = NULL;
    size_t rec_len = 0;
    test_idmap(&s, &rec, &rec_len);
    if (rec) test_errors(&s, rec, rec_len);
    free(rec);
    graft_test_free_sift(&s);
    CHECK(graft_test_remove_dir(dir) == 0, "cannot remove %s", dir);
    return graft_test_finish("test_faiss_io");
}
