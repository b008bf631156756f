#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "graft/dataset.h"
#include "graft/io.h"

int graft_test_failures = 0;

int graft_test_finish(const char* name) {
    if (graft_test_failures == 0) {
        printf("%s: all checks passed\n", name);
        return 0;
    }
    printf("%s: %d checks failed\n", name, graft_test_failures);
    return 1;
}

void graft_test_temp_dir(char* dir, size_t cap, const char* name) {
    snprintf(dir, cap, "%s/graft_%s_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

int graft_test_remove_dir(const char* dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) == 0) return 0;
    fprintf(stderr, "could not remove %s\n", dir);
    return -1;
}

const char* graft_test_data_dir(void) {
    const char* env = getenv("GRAFT_DATA_DIR");
    return (env && env[0]) ? env : GRAFT_DATA_DIR_DEFAULT;
}

const char* graft_test_data_path(const char* rel) {
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", graft_test_data_dir(), rel);
    return buf;
}

static void* load_or_die(const char* rel, int64_t* n, int64_t* d, graft_dtype want) {
    graft_dataset ds;
    const char* path = graft_test_data_path(rel);
    if (graft_dataset_read(path, 0, -1, &ds) != GRAFT_OK || ds.dtype != want) {
        fprintf(stderr, "cannot load real test data %s: %s\n(set GRAFT_DATA_DIR to the folder "
                        "holding sift5k/)\n", path, graft_last_error());
        exit(1);
    }
    *n = ds.n;
    *d = ds.d;
    return ds.data;
}

void graft_test_load_sift5k(graft_test_sift* s) {
    int64_t d2;
    s->xb = load_or_die("sift5k/sift5k_base.fvecs", &s->nb, &s->d, GRAFT_DTYPE_F32);
    s->xq = load_or_die("sift5k/sift5k_query.fvecs", &s->nq, &d2, GRAFT_DTYPE_F32);
    int64_t ngt;
    s->gt = load_or_die("sift5k/sift5k_groundtruth.ivecs", &ngt, &s->gt_k, GRAFT_DTYPE_I32);
    if (d2 != s->d || ngt != s->nq) {
        fprintf(stderr, "sift5k files disagree on shape\n");
        exit(1);
    }
}

int graft_test_quick(void) {
    const char* q = getenv("GRAFT_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

void graft_test_sift_quick(graft_test_sift* s, int64_t nb, int64_t nq) {
    if (!graft_test_quick()) return;
    if (nb < s->nb) s->nb = nb;
    if (nq < s->nq) s->nq = nq;
    const int k = (int)(s->nb < 100 ? s->nb : 100);
    int32_t* gt = graft_test_exact_topk(s->xb, s->nb, s->xq, s->nq, s->d, GRAFT_METRIC_L2, k);
    if (!gt) {
        fprintf(stderr, "sift5k: exact truth of the quick set failed: %s\n", graft_last_error());
        exit(1);
    }
    free(s->gt);
    s->gt = gt;
    s->gt_k = k;
}

void graft_test_free_sift(graft_test_sift* s) {
    free(s->xb);
    free(s->xq);
    free(s->gt);
    memset(s, 0, sizeof *s);
}

double graft_test_recall(const int64_t* found, int64_t found_stride, const int32_t* truth,
                         int64_t truth_stride, int64_t nq, int k) {
    int64_t hits = 0;
    for (int64_t q = 0; q < nq; q++)
        for (int i = 0; i < k; i++) {
            int64_t id = found[q * found_stride + i];
            for (int j = 0; j < k; j++)
                if (truth[q * truth_stride + j] == id) {
                    hits++;
                    break;
                }
        }
    return (double)hits / ((double)nq * k);
}

void graft_test_random(float* x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

static uint64_t mix64(uint64_t x) {  /* splitmix64's finalizer */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Moves 1 to 4 distinct components of row x (hashed from h) by +-step, staying in 0..255. */
static void jitter_row(float* x, int64_t d, uint64_t h, int step) {
    const int m = 1 + (int)(h & 3) < d ? 1 + (int)(h & 3) : (int)d;
    int64_t moved[4];
    for (int e = 0; e < m; e++) {
        int64_t j;
        int again;
        do {
            h = mix64(h);
            j = (int64_t)(h % (uint64_t)d);
            again = 0;
            for (int f = 0; f < e; f++) again |= moved[f] == j;
        } while (again);
        moved[e] = j;
        const float delta = (float)((h >> 32) & 1 ? step : -step);
        x[j] += x[j] + delta < 0.f || x[j] + delta > 255.f ? -delta : delta;
    }
}

int64_t graft_test_duplicates(const float* seeds, int64_t nseeds, const float* real_q, int64_t nreal_q,
                              int64_t d, int64_t n, int64_t max_cluster, int64_t nq, float* xb, float* xq) {
    int64_t* seed_of = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    int64_t rows = 0;
    for (int64_t c = 0; c < nseeds && rows < n; c++) {
        int64_t j = 0;
        while (((int64_t)2 << j) - 1 <= c) j++;  /* c in [2^j - 1, 2^(j+1) - 1) */
        int64_t size = j < 62 ? max_cluster >> j : 0;
        if (size < 2) size = 1;
        for (int64_t i = 0; i < size && rows < n; i++, rows++) {
            float* x = xb + rows * d;
            for (int64_t t = 0; t < d; t++) x[t] = seeds[c * d + t];
            if (i % 2) jitter_row(x, d, mix64((uint64_t)rows), 1);
            seed_of[rows] = c;
        }
    }
    for (int64_t q = 0; q < nq; q++) {
        float* x = xq + q * d;
        if (q % 2 && nreal_q > 0) {
            for (int64_t t = 0; t < d; t++) x[t] = real_q[(q / 2 % nreal_q) * d + t];
            continue;
        }
        const uint64_t h = mix64((uint64_t)q ^ 0x5DEECE66Dull);
        const int64_t c = rows ? seed_of[h % (uint64_t)rows] : 0;
        for (int64_t t = 0; t < d; t++) x[t] = seeds[c * d + t];
        jitter_row(x, d, mix64(h), 1 + (int)((h >> 40) & 1));
    }
    free(seed_of);
    return rows;
}

void graft_test_check_graph(const graft_graph* g, int64_t n, int R, const float* x, int64_t d,
                            int l2, const char* what) {
    CHECK(g && g->nbrs && g->n == n && g->R == R, "%s: graph %lld x %d, expected %lld x %d", what,
          g ? (long long)g->n : -1LL, g ? g->R : -1, (long long)n, R);
    if (!g || !g->nbrs || g->n != n || g->R != R) return;
    int64_t bad_id = 0, self = 0, dup = 0, unsorted = 0;
    for (int64_t v = 0; v < n; v++) {
        const int32_t* row = g->nbrs + v * R;
        int padded = 0;
        double prev = -INFINITY;
        for (int j = 0; j < R; j++) {
            const int32_t u = row[j];
            if (u == -1) {
                padded = 1;
                continue;
            }
            if (padded || u < 0 || u >= n) {
                bad_id++;
                continue;
            }
            self += u == v;
            for (int i = 0; i < j; i++) dup += row[i] == u;
            if (!x) continue;
            double s = 0;
            for (int64_t k = 0; k < d; k++) {
                const double a = x[v * d + k], b = x[(int64_t)u * d + k];
                s += l2 ? (a - b) * (a - b) : -a * b;
            }
            unsorted += s < prev - 1e-5 * (fabs(prev) + 1);
            prev = s;
        }
    }
    CHECK(g->entry >= 0 && g->entry < n, "%s: entry %lld", what, (long long)g->entry);
    CHECK(bad_id == 0 && self == 0 && dup == 0 && unsorted == 0,
          "%s: %lld bad ids (out of range or after padding), %lld self loops, %lld duplicates, "
          "%lld out-of-order entries",
          what, (long long)bad_id, (long long)self, (long long)dup, (long long)unsorted);
}

double graft_test_reachable(const graft_graph* g) {
    double r = -1;
    CHECK_OK(graft_graph_stats(g, NULL, NULL, NULL, &r));
    return r;
}

int64_t graft_test_orphans(const graft_graph* g) {
    uint8_t* in = calloc((size_t)g->n, 1);
    for (int64_t i = 0; i < g->n * g->R; i++)
        if (g->nbrs[i] >= 0 && g->nbrs[i] < g->n) in[g->nbrs[i]] = 1;
    int64_t orphans = 0;
    for (int64_t v = 0; v < g->n; v++) orphans += !in[v] && v != g->entry;
    free(in);
    return orphans;
}

void graft_test_normalize(float* x, int64_t n, int64_t d) {
    for (int64_t i = 0; i < n; i++) {
        float* v = x + i * d;
        double n2 = 0;
        for (int64_t j = 0; j < d; j++) n2 += (double)v[j] * v[j];
        for (int64_t j = 0; j < d; j++) v[j] = (float)(v[j] / sqrt(n2 > 0 ? n2 : 1));
    }
}

int32_t* graft_test_exact_topk(const float* xb, int64_t nb, const float* xq, int64_t nq,
                               int64_t d, graft_metric m, int k) {
    float* D = malloc(sizeof(float) * nq * k);
    int64_t* I = malloc(sizeof(int64_t) * nq * k);
    int32_t* gt = malloc(sizeof(int32_t) * nq * k);
    CHECK_OK(graft_knn_cpu(xb, nb, xq, nq, d, k, m, -1, D, I));
    for (int64_t i = 0; i < nq * k; i++) gt[i] = (int32_t)I[i];
    free(D);
    free(I);
    return gt;
}

int graft_test_load_fmnist(int64_t max_base, int64_t max_query, float** xb, int64_t* nb,
                           float** xq, int64_t* nq, int64_t* d) {
    char base[1024], query[1024];
    const char* dirs[] = {graft_test_data_path("fashion-mnist"), "/usr/share/datasets/fashion-mnist"};
    int64_t d2 = 0;
    *xb = *xq = NULL;
    for (int i = 0; i < 2 && !*xb; i++) {
        snprintf(base, sizeof base, "%s/train-images-idx3-ubyte.gz", dirs[i]);
        snprintf(query, sizeof query, "%s/t10k-images-idx3-ubyte.gz", dirs[i]);
        if (graft_fmnist_read(base, max_base, xb, nb, d) != GRAFT_OK) *xb = NULL;
    }
    CHECK(*xb != NULL, "Fashion-MNIST not found (%s)", graft_last_error());
    if (!*xb) return -1;
    CHECK_OK(graft_fmnist_read(query, max_query, xq, nq, &d2));
    if (!*xq) {
        free(*xb);
        *xb = NULL;
        return -1;
    }
    return 0;
}

unsigned char* graft_test_bytes_of(FILE* f, size_t* len) {
    *len = (size_t)ftell(f);
    unsigned char* b = malloc(*len ? *len : 1);
    rewind(f);
    CHECK(fread(b, 1, *len, f) == *len, "re-reading the record");
    fclose(f);
    return b;
}

void graft_test_expect_format(graft_test_reader read, const unsigned char* b, size_t len,
                              const char* what, const char* needle) {
    void* out = &out; /* must stay untouched */
    void* const sentinel = out;
    FILE* f = tmpfile();
    if (len) fwrite(b, 1, len, f);
    rewind(f);
    int rc = read(f, &out);
    fclose(f);
    CHECK(rc == GRAFT_EFORMAT && strstr(graft_last_error(), needle),
          "%s: %s \"%s\", expected GRAFT_EFORMAT with \"%s\"", what, graft_status_name(rc),
          graft_last_error(), needle);
    CHECK(out == sentinel, "%s: *out changed", what);
    printf("  %-34s -> %s\n", what, graft_last_error());
}

void graft_test_with_field(graft_test_reader read, const unsigned char* b, size_t len, size_t off,
                           uint64_t v, int n, int resum, const char* what, const char* needle) {
    unsigned char* c = malloc(len);
    memcpy(c, b, len);
    for (int i = 0; i < n; i++) c[off + i] = (unsigned char)(v >> (8 * i));
    if (resum) {
        uint64_t h = graft_io_checksum(GRAFT_IO_CHECKSUM_INIT, c, len - 8);
        for (int i = 0; i < 8; i++) c[len - 8 + i] = (unsigned char)(h >> (8 * i));
    }
    graft_test_expect_format(read, c, len, what, needle);
    free(c);
}

void graft_test_encode(int kind, const float* x, int64_t n, int64_t d, graft_storage* st,
                       uint8_t** codes, float** dec) {
    CHECK_OK(graft_storage_init(st, kind, d));
    CHECK_OK(graft_storage_train(st, n, x));
    *codes = malloc((size_t)n * graft_storage_code_size(kind, d));
    *dec = malloc(sizeof(float) * n * d);
    graft_storage_encode(st, n, x, *codes);
    graft_storage_decode(st, n, *codes, *dec);
}
