/* Dataset readers: real sift5k files, round trips through every format, and every way a file can
 * be broken (each must fail with the right code and a message naming the file and offset). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "graft/dataset.h"
#include "testutil.h"

#define FMNIST_T10K "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

/* CHECK_ERR plus: the message mentions `sub` (the path, an offset). */
#define CHECK_ERR_MSG(expr, status, sub)                                                  \
    do {                                                                                  \
        CHECK_ERR(expr, status);                                                          \
        CHECK(strstr(graft_last_error(), (sub)) != NULL, "%s: message \"%s\" lacks \"%s\"", \
              #expr, graft_last_error(), (sub));                                          \
    } while (0)

/* Declares `char var[]` holding dir/name. */
#define TPATH(var, dir, name)      \
    char var[512];                 \
    snprintf(var, sizeof var, "%s/%s", dir, name)

static void write_bytes(const char* path, const void* p, size_t len) {
    FILE* f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, len, f) == len, "cannot write %s", path);
    if (f)
        fclose(f);
}

static unsigned char* slurp(const char* path, size_t* len) {
    FILE* f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f)
        exit(1);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char* p = malloc(*len + 1);
    CHECK(fread(p, 1, *len, f) == *len, "short read of %s", path);
    fclose(f);
    return p;
}

static void test_sift(void) {
    const char* base = graft_test_data_path("sift5k/sift5k_base.fvecs");
    char base_path[4096];
    snprintf(base_path, sizeof base_path, "%s", base);
    int64_t n, d;
    graft_dtype dt;
    CHECK_OK(graft_dataset_info(base_path, &n, &d, &dt));
    CHECK(n == 4500 && d == 128 && dt == GRAFT_DTYPE_F32, "base info %lld x %lld dtype %d",
          (long long)n, (long long)d, (int)dt);
    CHECK_OK(graft_dataset_info(graft_test_data_path("sift5k/sift5k_query.fvecs"), &n, &d, &dt));
    CHECK(n == 500 && d == 128 && dt == GRAFT_DTYPE_F32, "query info %lld x %lld", (long long)n,
          (long long)d);
    CHECK_OK(graft_dataset_info(graft_test_data_path("sift5k/sift5k_groundtruth.ivecs"), &n, &d, &dt));
    CHECK(n == 500 && d == 100 && dt == GRAFT_DTYPE_I32, "gt info %lld x %lld", (long long)n,
          (long long)d);

    graft_dataset all = {0}, part = {0}, tail = {0}, empty = {0};
    CHECK_OK(graft_dataset_read(base_path, 0, -1, &all));
    CHECK(all.n == 4500 && all.d == 128 && all.dtype == GRAFT_DTYPE_F32, "full read shape");
    if (all.data) {
        const float* x = all.data;
        int ok = 1;
        double sum = 0;
        for (size_t i = 0; i < 4500 * 128; i++) {
            ok &= x[i] >= 0 && x[i] <= 255 && x[i] == (float)(int)x[i];
            sum += x[i];
        }
        CHECK(ok, "SIFT values must be integers in 0..255");
        CHECK(sum > 0, "SIFT base is all zeros");
    }
    CHECK_OK(graft_dataset_read(base_path, 1000, 100, &part));
    CHECK(part.n == 100 && part.d == 128, "range read shape %lld", (long long)part.n);
    if (all.data && part.data)
        CHECK(memcmp(part.data, (float*)all.data + 1000 * 128, 100 * 128 * sizeof(float)) == 0,
              "range [1000,1100) differs from the full read");
    CHECK_OK(graft_dataset_read(base_path, 4400, -1, &tail));
    CHECK(tail.n == 100, "tail read has %lld rows", (long long)tail.n);
    if (all.data && tail.data)
        CHECK(memcmp(tail.data, (float*)all.data + 4400 * 128, 100 * 128 * sizeof(float)) == 0,
              "tail read differs from the full read");
    CHECK_OK(graft_dataset_read(base_path, 4500, 0, &empty));
    CHECK(empty.n == 0 && empty.d == 128, "empty read at the end");

    /* Reading past the end is an error, and the output stays as it was. */
    graft_dataset keep = {(void*)&keep, 7, 9, GRAFT_DTYPE_U8};
    CHECK_ERR_MSG(graft_dataset_read(base_path, 4500, 1, &keep), GRAFT_EINVAL, base_path);
    CHECK_ERR(graft_dataset_read(base_path, 4499, 2, &keep), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read(base_path, 4501, -1, &keep), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read(base_path, -1, 1, &keep), GRAFT_EINVAL);
    CHECK(keep.data == (void*)&keep && keep.n == 7 && keep.d == 9 && keep.dtype == GRAFT_DTYPE_U8,
          "failed read touched its output");

    /* Ground truth through the float conversion: ids are exact and point into the base. */
    graft_dataset gt = {0};
    float* gtf = NULL;
    CHECK_OK(graft_dataset_read(graft_test_data_path("sift5k/sift5k_groundtruth.ivecs"), 0, -1, &gt));
    CHECK_OK(graft_dataset_read_f32(graft_test_data_path("sift5k/sift5k_groundtruth.ivecs"), 0, -1,
                                    &gtf, &n, &d));
    CHECK(n == 500 && d == 100, "gt f32 shape");
    if (gt.data && gtf) {
        const int32_t* g = gt.data;
        int ok = 1;
        for (size_t i = 0; i < 500 * 100; i++)
            ok &= g[i] >= 0 && g[i] < 4500 && gtf[i] == (float)g[i];
        CHECK(ok, "ground truth ids out of range or converted wrongly");
    }
    free(gtf);
    graft_dataset_free(&gt);
    graft_dataset_free(&all);
    graft_dataset_free(&part);
    graft_dataset_free(&tail);
    graft_dataset_free(&empty);
    CHECK(all.data == NULL && all.n == 0, "graft_dataset_free must reset the struct");
    graft_dataset_free(NULL);
}

static const struct { const char* ext; graft_dtype dt; size_t elem; } kFormats[] = {
    {"fvecs", GRAFT_DTYPE_F32, 4}, {"ivecs", GRAFT_DTYPE_I32, 4}, {"bvecs", GRAFT_DTYPE_U8, 1},
    {"fbin", GRAFT_DTYPE_F32, 4},  {"ibin", GRAFT_DTYPE_I32, 4},  {"u8bin", GRAFT_DTYPE_U8, 1},
};

static void test_round_trip(const char* dir) {
    enum { N = 37, D = 13 };
    float f[N * D];
    int32_t i32[N * D];
    uint8_t u8[N * D];
    graft_test_random(f, N * D, 42);
    for (int i = 0; i < N * D; i++) {
        f[i] = f[i] * 200 - 100;
        i32[i] = i * 7919 - 1000000;
        u8[i] = (uint8_t)(i * 31);
    }
    for (size_t k = 0; k < sizeof kFormats / sizeof kFormats[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "rt.%s", kFormats[k].ext);
        TPATH(p, dir, name);
        const void* src = kFormats[k].dt == GRAFT_DTYPE_F32 ? (const void*)f
                        : kFormats[k].dt == GRAFT_DTYPE_I32 ? (const void*)i32 : (const void*)u8;
        size_t row = D * kFormats[k].elem;
        CHECK_OK(graft_dataset_write(p, src, N, D, kFormats[k].dt));
        int64_t n = 0, d = 0;
        graft_dtype dt;
        CHECK_OK(graft_dataset_info(p, &n, &d, &dt));
        CHECK(n == N && d == D && dt == kFormats[k].dt, "%s info %lld x %lld", name, (long long)n,
              (long long)d);
        graft_dataset ds = {0}, r = {0};
        CHECK_OK(graft_dataset_read(p, 0, -1, &ds));
        CHECK(ds.n == N && ds.d == D && ds.data && memcmp(ds.data, src, N * row) == 0,
              "%s round trip differs", name);
        CHECK_OK(graft_dataset_read(p, 5, 10, &r));
        CHECK(r.n == 10 && r.data && memcmp(r.data, (const char*)src + 5 * row, 10 * row) == 0,
              "%s range [5,15) differs", name);
        float* x = NULL;
        CHECK_OK(graft_dataset_read_f32(p, 3, -1, &x, &n, &d));
        CHECK(n == N - 3 && d == D, "%s f32 shape", name);
        int ok = x != NULL;
        for (int i = 0; ok && i < (N - 3) * D; i++) {
            int j = 3 * D + i;
            float want = kFormats[k].dt == GRAFT_DTYPE_F32 ? f[j]
                       : kFormats[k].dt == GRAFT_DTYPE_I32 ? (float)i32[j] : (float)u8[j];
            ok = x[i] == want;
        }
        CHECK(ok, "%s read_f32 converted wrongly", name);
        free(x);
        graft_dataset_free(&ds);
        graft_dataset_free(&r);

        /* The dtype must match the extension. */
        graft_dtype other = (graft_dtype)((kFormats[k].dt + 1) % 3);
        CHECK_ERR_MSG(graft_dataset_write(p, src, N, D, other), GRAFT_EINVAL, p);
        CHECK_ERR(graft_dataset_write(p, src, 0, D, kFormats[k].dt), GRAFT_EINVAL);
        CHECK_ERR(graft_dataset_write(p, src, N, 0, kFormats[k].dt), GRAFT_EINVAL);
        unlink(p);
    }
    TPATH(nodir, dir, "no/such/dir/x.fvecs");
    CHECK_ERR_MSG(graft_dataset_write(nodir, f, N, D, GRAFT_DTYPE_F32), GRAFT_EIO, nodir);
}

static void test_broken_files(const char* dir) {
    float x[3 * 4];
    graft_test_random(x, 12, 7);
    int64_t n = -1, d = -1;
    graft_dtype dt = GRAFT_DTYPE_U8;
    graft_dataset ds = {0};
    float* xf = NULL;

    TPATH(missing, dir, "missing.fvecs");
    CHECK_ERR_MSG(graft_dataset_info(missing, &n, &d, &dt), GRAFT_EIO, missing);
    CHECK_ERR_MSG(graft_dataset_read(missing, 0, -1, &ds), GRAFT_EIO, missing);
    CHECK_ERR(graft_dataset_read_f32(missing, 0, -1, &xf, &n, &d), GRAFT_EIO);

    /* TEXMEX: 3 rows of d=4 are 20 bytes each. */
    TPATH(fv, dir, "t.fvecs");
    CHECK_OK(graft_dataset_write(fv, x, 3, 4, GRAFT_DTYPE_F32));
    size_t len;
    unsigned char* good = slurp(fv, &len);
    CHECK(len == 60, "fvecs of 3x4 has %zu bytes", len);
    write_bytes(fv, good, 50); /* mid-row: the last row starts at 40 */
    CHECK_ERR_MSG(graft_dataset_info(fv, &n, &d, &dt), GRAFT_EFORMAT, "offset 40");
    CHECK_ERR_MSG(graft_dataset_read(fv, 0, 1, &ds), GRAFT_EFORMAT, fv);
    write_bytes(fv, good, 42); /* inside the third row's d field */
    CHECK_ERR_MSG(graft_dataset_read(fv, 0, -1, &ds), GRAFT_EFORMAT, "offset 40");
    write_bytes(fv, good, 2); /* inside the first d field */
    CHECK_ERR_MSG(graft_dataset_info(fv, &n, &d, &dt), GRAFT_EFORMAT, "offset 0");
    write_bytes(fv, good, 0);
    CHECK_ERR(graft_dataset_info(fv, &n, &d, &dt), GRAFT_EFORMAT);
    int32_t bad_d[] = {0, -4, 1 << 21, INT32_MIN};
    unsigned char buf[80];
    for (int i = 0; i < 4; i++) {
        memcpy(buf, good, 60);
        memcpy(buf, &bad_d[i], 4);
        write_bytes(fv, buf, 60);
        CHECK_ERR_MSG(graft_dataset_read(fv, 0, -1, &ds), GRAFT_EFORMAT, "offset 0");
    }
    /* Dimension changing mid-file, with the length still a multiple of the row size: only the
     * rows read are checked, and the bad row is named by its offset. */
    memcpy(buf, good, 60);
    int32_t five = 5;
    memcpy(buf + 20, &five, 4);
    write_bytes(fv, buf, 60);
    CHECK_OK(graft_dataset_info(fv, &n, &d, &dt));
    CHECK(n == 3 && d == 4, "info of the changing-d file");
    CHECK_ERR_MSG(graft_dataset_read(fv, 0, -1, &ds), GRAFT_EFORMAT, "offset 20");
    CHECK_ERR_MSG(graft_dataset_read(fv, 1, 1, &ds), GRAFT_EFORMAT, "offset 20");
    CHECK_ERR(graft_dataset_read_f32(fv, 0, -1, &xf, &n, &d), GRAFT_EFORMAT);
    CHECK_OK(graft_dataset_read(fv, 2, 1, &ds));
    CHECK(ds.n == 1 && ds.data && memcmp(ds.data, x + 8, 16) == 0, "row 2 of the changing-d file");
    graft_dataset_free(&ds);
    free(good);
    n = d = -1;
    dt = GRAFT_DTYPE_U8;

    /* .fbin: 8-byte header then 48 bytes. */
    TPATH(fb, dir, "t.fbin");
    CHECK_OK(graft_dataset_write(fb, x, 3, 4, GRAFT_DTYPE_F32));
    good = slurp(fb, &len);
    CHECK(len == 56, "fbin of 3x4 has %zu bytes", len);
    write_bytes(fb, good, 6); /* mid-header */
    CHECK_ERR_MSG(graft_dataset_info(fb, &n, &d, &dt), GRAFT_EFORMAT, "offset 6");
    write_bytes(fb, good, 50); /* mid-row */
    CHECK_ERR_MSG(graft_dataset_read(fb, 0, 1, &ds), GRAFT_EFORMAT, "offset 50");
    memcpy(buf, good, 56);
    memset(buf + 56, 0xAB, 5);
    write_bytes(fb, buf, 61); /* trailing bytes */
    CHECK_ERR_MSG(graft_dataset_read(fb, 0, -1, &ds), GRAFT_EFORMAT, "offset 56");
    CHECK_ERR_MSG(graft_dataset_info(fb, &n, &d, &dt), GRAFT_EFORMAT, fb);
    int32_t bad_hdr[][2] = {{0, 4}, {-3, 4}, {3, 0}, {3, -4}, {3, 1 << 21}, {INT32_MIN, 4}};
    for (int i = 0; i < 6; i++) {
        memcpy(buf, good, 56);
        memcpy(buf, bad_hdr[i], 8);
        write_bytes(fb, buf, 56);
        CHECK_ERR_MSG(graft_dataset_info(fb, &n, &d, &dt), GRAFT_EFORMAT,
                      bad_hdr[i][0] <= 0 ? "offset 0" : "offset 4");
    }
    /* A header whose n*d*4 is astronomically large (and overflows 32-bit sizes) must be refused
     * from the file length, not by trying to allocate it. */
    int32_t huge[][2] = {{INT32_MAX, 1 << 20}, {INT32_MAX, INT32_MAX}, {1 << 30, 1 << 20}};
    for (int i = 0; i < 3; i++) {
        memcpy(buf, good, 56);
        memcpy(buf, huge[i], 8);
        write_bytes(fb, buf, 56);
        CHECK_ERR_MSG(graft_dataset_read(fb, 0, -1, &ds), GRAFT_EFORMAT, fb);
        CHECK_ERR(graft_dataset_read_f32(fb, 0, 1, &xf, &n, &d), GRAFT_EFORMAT);
    }
    TPATH(u8b, dir, "t.u8bin");
    write_bytes(u8b, huge[0], 8);
    CHECK_ERR_MSG(graft_dataset_info(u8b, &n, &d, &dt), GRAFT_EFORMAT, "offset 8");
    unlink(u8b);
    CHECK(n == -1 && d == -1 && dt == GRAFT_DTYPE_U8 && ds.data == NULL && xf == NULL,
          "failed calls touched their outputs");

    /* Bad extensions and NULL arguments. */
    write_bytes(fb, good, 56);
    CHECK_OK(graft_dataset_info(fb, &n, &d, &dt));
    const char* bad_ext[] = {"x.txt", "fvecs", "x.fvecs.bak", "x.FVECS", ".bin", "x"};
    for (int i = 0; i < 6; i++) {
        TPATH(p, dir, bad_ext[i]);
        write_bytes(p, good, 56);
        CHECK_ERR_MSG(graft_dataset_info(p, &n, &d, &dt), GRAFT_EINVAL, p);
        CHECK_ERR(graft_dataset_read(p, 0, -1, &ds), GRAFT_EINVAL);
        CHECK_ERR(graft_dataset_write(p, x, 3, 4, GRAFT_DTYPE_F32), GRAFT_EINVAL);
        unlink(p);
    }
    CHECK_ERR(graft_dataset_info(NULL, &n, &d, &dt), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_info(fb, NULL, &d, &dt), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_info(fb, &n, NULL, &dt), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_info(fb, &n, &d, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read(NULL, 0, -1, &ds), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read(fb, 0, -1, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read_f32(NULL, 0, -1, &xf, &n, &d), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read_f32(fb, 0, -1, NULL, &n, &d), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read_f32(fb, 0, -1, &xf, NULL, &d), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read_f32(fb, 0, -1, &xf, &n, NULL), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_read_f32(fb, 2, 5, &xf, &n, &d), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_write(NULL, x, 3, 4, GRAFT_DTYPE_F32), GRAFT_EINVAL);
    CHECK_ERR(graft_dataset_write(fb, NULL, 3, 4, GRAFT_DTYPE_F32), GRAFT_EINVAL);
    CHECK_ERR(graft_fmnist_read(NULL, -1, &xf, &n, &d), GRAFT_EINVAL);
    CHECK_ERR(graft_fmnist_read(fb, -1, NULL, &n, &d), GRAFT_EINVAL);
    CHECK(ds.data == NULL && xf == NULL, "failed calls touched their outputs");
    free(good);
    unlink(fv);
    unlink(fb);
}

/* An IDX image file of n images of r x c pixels, with pixel value (i * 37) & 255. */
static size_t make_idx(unsigned char* buf, int n, int r, int c) {
    uint32_t h[4] = {0x803, (uint32_t)n, (uint32_t)r, (uint32_t)c};
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < 4; b++)
            buf[4 * i + b] = (unsigned char)(h[i] >> (24 - 8 * b));
    for (int i = 0; i < n * r * c; i++)
        buf[16 + i] = (unsigned char)(i * 37);
    return 16 + (size_t)n * r * c;
}

static void write_gz(const char* path, const void* p, size_t len) {
    gzFile g = gzopen(path, "wb");
    CHECK(g && gzwrite(g, p, (unsigned)len) == (int)len && gzclose(g) == Z_OK, "gzwrite %s", path);
}

static void test_fmnist_own(const char* dir) {
    unsigned char idx[16 + 5 * 6 * 7 + 8];
    size_t len = make_idx(idx, 5, 6, 7);
    TPATH(plain, dir, "img-idx3-ubyte");
    TPATH(gz, dir, "img-idx3-ubyte.gz");
    write_bytes(plain, idx, len);
    write_gz(gz, idx, len);
    const char* paths[2] = {plain, gz};
    for (int k = 0; k < 2; k++) {
        float* x = NULL;
        int64_t n = 0, d = 0;
        CHECK_OK(graft_fmnist_read(paths[k], -1, &x, &n, &d));
        CHECK(n == 5 && d == 42, "%s shape %lld x %lld", paths[k], (long long)n, (long long)d);
        int ok = x != NULL;
        for (int i = 0; ok && i < 5 * 42; i++)
            ok = x[i] == (float)(unsigned char)(i * 37);
        CHECK(ok, "%s pixels differ", paths[k]);
        free(x);
        x = NULL;
        CHECK_OK(graft_fmnist_read(paths[k], 2, &x, &n, &d));
        CHECK(n == 2 && d == 42 && x && x[83] == (float)(unsigned char)(83 * 37), "max_rows=2");
        free(x);
    }

    /* Broken files, each plain and gzip-compressed. */
    unsigned char bad[sizeof idx];
    struct { const char* what; size_t len; int byte; unsigned char val; const char* sub; } cases[] = {
        {"truncated pixels", len - 10, -1, 0, "offset"},
        {"truncated header", 10, -1, 0, "offset 10"},
        {"empty", 0, -1, 0, "offset 0"},
        {"bad magic", len, 2, 0x09, "offset 0"},
        {"zero images", len, 7, 0, "offset 4"},
        {"zero rows", len, 11, 0, "offset 8"},
        {"huge cols", len, 12, 0x7f, "offset 12"},
        {"extra bytes", len + 8, -1, 0, "extra"},
    };
    float* x = NULL;
    int64_t n = -1, d = -1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, idx, len);
        memset(bad + len, 0x55, 8);
        if (cases[i].byte >= 0)
            bad[cases[i].byte] = cases[i].val;
        write_bytes(plain, bad, cases[i].len);
        write_gz(gz, bad, cases[i].len);
        for (int k = 0; k < 2; k++) {
            CHECK_ERR_MSG(graft_fmnist_read(paths[k], -1, &x, &n, &d), GRAFT_EFORMAT, cases[i].sub);
            CHECK(strstr(graft_last_error(), paths[k]) != NULL, "%s (%s): message lacks the path",
                  cases[i].what, paths[k]);
        }
    }
    /* A gzip file cut short: the compressed stream ends before the pixels, or inside the trailer
     * (the CRC check is what catches that one). */
    write_gz(gz, idx, len);
    size_t glen;
    unsigned char* g = slurp(gz, &glen);
    size_t cuts[] = {glen / 2, glen - 4, 12};
    for (int i = 0; i < 3; i++) {
        write_bytes(gz, g, cuts[i]);
        CHECK_ERR_MSG(graft_fmnist_read(gz, -1, &x, &n, &d), GRAFT_EFORMAT, gz);
    }
    free(g);
    CHECK(x == NULL && n == -1 && d == -1, "failed graft_fmnist_read touched its outputs");
    TPATH(missing, dir, "missing-idx3-ubyte.gz");
    CHECK_ERR_MSG(graft_fmnist_read(missing, -1, &x, &n, &d), GRAFT_EIO, missing);
    unlink(plain);
    unlink(gz);
}

static void test_fmnist_debian(void) {
    if (access(FMNIST_T10K, R_OK) != 0) {
        printf("note: %s not found (install dataset-fashion-mnist); skipping the real "
               "Fashion-MNIST checks\n", FMNIST_T10K);
        return;
    }
    float* x = NULL;
    int64_t n = 0, d = 0;
    CHECK_OK(graft_fmnist_read(FMNIST_T10K, -1, &x, &n, &d));
    CHECK(n == 10000 && d == 784, "t10k shape %lld x %lld", (long long)n, (long long)d);
    if (!x || n != 10000 || d != 784)
        return;
    double sum = 0;
    int ok = 1, max = 0;
    for (size_t i = 0; i < 10000 * 784; i++) {
        ok &= x[i] >= 0 && x[i] <= 255 && x[i] == (float)(int)x[i];
        sum += x[i];
        if (x[i] > max)
            max = (int)x[i];
    }
    double mean = sum / (10000.0 * 784);
    CHECK(ok, "Fashion-MNIST pixels must be integers in 0..255");
    CHECK(mean > 50 && mean < 100, "mean pixel %.2f outside 50..100", mean);
    CHECK(max == 255, "max pixel %d, expected 255", max);
    /* The first image's border is background; some pixel in the middle is not. */
    CHECK(x[0] == 0 && x[27] == 0 && x[783] == 0, "corners of image 0 are not background");
    float* y = NULL;
    int64_t m = 0;
    CHECK_OK(graft_fmnist_read(FMNIST_T10K, 100, &y, &m, &d));
    CHECK(m == 100 && y && memcmp(x, y, 100 * 784 * sizeof(float)) == 0,
          "max_rows=100 differs from the full read");
    free(y);
    free(x);
}

int main(void) {
    char dir[] = "/tmp/graft-test-dataset-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_sift();
    test_round_trip(dir);
    test_broken_files(dir);
    test_fmnist_own(dir);
    test_fmnist_debian();
    CHECK(rmdir(dir) == 0, "temp dir %s not empty after the tests", dir);
    return graft_test_finish("test_dataset");
}
