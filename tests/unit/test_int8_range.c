/* The exact INT8 path's host side (exact/int8_range.h, graft/flat.h): which data qualifies, the
 * shift of its codes, and the integer algebra the GPU path ranks and reports with (checked here
 * against double-precision distances, which are exact for such data). The GPU path itself is
 * tests/gpu/test_gpu_exact_int8.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exact/int8_range.h"
#include "graft/flat.h"
#include "graft_gpu.h"
#include "testutil.h"

static graft_int8_range scan(const float* x, int64_t n, int64_t d) {
    graft_int8_range r;
    graft_int8_range_scan(x, n, d, &r);
    return r;
}

static void small_cases(void) {
    float a[8] = {0, 1, 2, 255, 7, 0, 100, 3};
    graft_int8_range r = scan(a, 2, 4);
    CHECK(r.ok && r.min == 0 && r.max == 255, "uint8 values: ok %d min %g max %g", r.ok, r.min, r.max);
    CHECK(graft_int8_shift(r) == 128, "uint8 values take shift 128, got %d", graft_int8_shift(r));
    CHECK(!graft_int8_fits(r, 0), "255 does not fit the signed codes");
    float s[4] = {-128, 127, 0, -5};
    r = scan(s, 1, 4);
    CHECK(r.ok && graft_int8_shift(r) == 0 && !graft_int8_fits(r, 128), "int8 values take shift 0");
    float u7[3] = {0, 127, 64};
    CHECK(graft_int8_shift(scan(u7, 1, 3)) == 128, "[0, 127] takes the unsigned codes");
    CHECK(graft_int8_fits(scan(u7, 1, 3), 0), "[0, 127] fits the signed codes too");
    float wide[2] = {-1, 200};
    r = scan(wide, 1, 2);
    CHECK(r.ok && graft_int8_shift(r) == -1, "[-1, 200] fits neither code range (ok %d, shift %d)",
          r.ok, graft_int8_shift(r));
    const float bad[] = {255.5f, 256.f, -129.f, 0.5f, -0.25f, 1e9f, -1e9f, NAN, INFINITY, -INFINITY,
                         16777217.f, 3.0000002f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        float v[3] = {1, bad[i], 2};
        r = scan(v, 1, 3);
        CHECK(!r.ok && graft_int8_shift(r) == -1, "value %g accepted", bad[i]);
    }
    float nz[2] = {-0.f, 3};
    CHECK(scan(nz, 1, 2).ok, "-0 is the integer 0");
    r = scan(NULL, 0, 4);
    CHECK(r.ok && graft_int8_shift(r) == 128, "no values: fits anything");
    /* Union over adds: a signed add after an unsigned one moves the shift, a wide one ends it. */
    graft_int8_range u = graft_int8_range_union(scan(u7, 1, 3), scan(s, 1, 4));
    CHECK(graft_int8_shift(u) == 0, "[0,127] + [-128,127] takes shift 0, got %d", graft_int8_shift(u));
    u = graft_int8_range_union(scan(a, 2, 4), scan(s, 1, 4));
    CHECK(graft_int8_shift(u) == -1, "[0,255] + [-128,127] has no codes");
    u = graft_int8_range_union(scan(a, 2, 4), scan(bad, 1, 1));
    CHECK(!u.ok, "union with a non-integer add is not integer");
}

/* Millions of values: the parallel scan, a failure in the last part, extremes in distant parts. */
static void large_cases(void) {
    const int64_t n = 40000, d = 128;
    float* x = malloc(sizeof(float) * n * d);
    for (int64_t i = 0; i < n * d; i++) x[i] = (float)((i * 2654435761u >> 9) % 200 + 20);
    x[12345] = 3;
    x[n * d - 7] = 250;
    graft_int8_range r = scan(x, n, d);
    CHECK(r.ok && r.min == 3 && r.max == 250, "large: ok %d min %g max %g", r.ok, r.min, r.max);
    x[n * d - 1] = 17.5f;
    CHECK(!scan(x, n, d).ok, "large: a fraction in the last value missed");
    x[n * d - 1] = 17;
    x[(n / 2) * d] = -3;
    r = scan(x, n, d);
    CHECK(r.ok && r.min == -3 && graft_int8_shift(r) == -1, "large: -3 beside 250 (min %g)", r.min);
    free(x);
}

/* The GPU path's algebra (gpu/exact_knn.cu, "exact INT8"), redone in integers on the host for
 * every (query, base) pair of a sample: codes x' = x - s; ranked value v = ||b'||^2 - 2 q'.b' (L2)
 * or -q'.b' - s sum b' (IP); distance qterm + v with qterm = ||q'||^2, or qterm - v with qterm =
 * s sum q' + s^2 d. They must equal the exact distances (double sums of integers are exact). */
static void algebra(const float* xb, int64_t nb, const float* xq, int64_t nq, int64_t d, int shift,
                    const char* name) {
    int64_t bad = 0, pairs = 0;
    for (int64_t q = 0; q < nq; q++) {
        const float* x = xq + q * d;
        long long qs = 0, qq = 0;
        for (int64_t j = 0; j < d; j++) {
            long long v = (long long)x[j] - shift;
            qs += v;
            qq += v * v;
        }
        for (int64_t i = 0; i < nb; i++) {
            const float* b = xb + i * d;
            long long bs = 0, bb = 0, dot = 0;
            double l2 = 0, ip = 0;
            for (int64_t j = 0; j < d; j++) {
                long long u = (long long)b[j] - shift, v = (long long)x[j] - shift;
                bs += u;
                bb += u * u;
                dot += u * v;
                l2 += ((double)x[j] - b[j]) * ((double)x[j] - b[j]);
                ip += (double)x[j] * b[j];
            }
            long long v_l2 = bb - 2 * dot, v_ip = -dot - shift * bs;
            long long got_l2 = qq + v_l2, got_ip = (shift * qs + (long long)shift * shift * d) - v_ip;
            bad += (double)got_l2 != l2 || (double)got_ip != ip;
            bad += v_l2 <= INT32_MIN || v_l2 >= INT32_MAX || v_ip <= INT32_MIN || v_ip >= INT32_MAX;
            pairs++;
        }
    }
    CHECK(bad == 0, "%s: %lld of %lld pairs' integer distances differ from the exact ones", name,
          (long long)bad, (long long)pairs);
    printf("  %-28s shift %3d: %lld pairs exact\n", name, shift, (long long)pairs);
}

/* The int32 bound of graft_gpu.h: at d = GRAFT_GPU_INT8_MAX_D the ranked values of the worst
 * codes stay inside int32, and past it they would not. */
static void bounds(void) {
    const long long d = GRAFT_GPU_INT8_MAX_D;
    const long long l2_max = 128LL * 128 * d + 2 * 128LL * 127 * d;  /* ||b'||^2 - 2 q'.b' */
    const long long l2_min = -2LL * 128 * 128 * d;
    const long long ip_max = 128LL * 127 * d + 128LL * 128 * d;      /* -q'.b' - 128 sum b' */
    CHECK(l2_max < INT32_MAX && l2_min > INT32_MIN && ip_max < INT32_MAX,
          "d = %lld: ranked values reach %lld / %lld", d, l2_max, l2_min);
    CHECK(128LL * 128 * 2 * (d + 1) + 2 * 128LL * 127 * 2 * (d + 1) > INT32_MAX,
          "the bound could be doubled: revisit GRAFT_GPU_INT8_MAX_D");
    CHECK(graft_gpu_int8_row_bytes(1) == 16 && graft_gpu_int8_row_bytes(128) == 128 &&
              graft_gpu_int8_row_bytes(784) == 784 && graft_gpu_int8_row_bytes(33) == 48,
          "code rows round d up to 16 bytes");
}

/* The index's face on the CPU: exact_path 3 to 5 are accepted (and ignored), 6 is not; a CPU
 * search reports the FP32 path. */
static void flat_params(const graft_test_sift* s) {
    graft_flat_params p;
    graft_flat_params_defaults(&p);
    p.device = -1;
    p.exact_path = 6;
    graft_flat* f = NULL;
    CHECK_ERR(graft_flat_new(s->d, &p, &f), GRAFT_EINVAL);
    CHECK(strstr(graft_last_error(), "3 (int8), 4 (fp16 certified), 5 (fp16 fused)"), "message names the INT8 and FP16 paths: %s",
          graft_last_error());
    for (int path = GRAFT_EXACT_INT8; path <= GRAFT_EXACT_FP16_FUSED; path++) {
        p.exact_path = path;
        CHECK_OK(graft_flat_new(s->d, &p, &f));
        if (!f) return;
        CHECK(graft_flat_last_path(f) == 0, "no search yet, last path %d", graft_flat_last_path(f));
        CHECK_OK(graft_flat_add(f, s->nb, s->xb));
        float D[10];
        int64_t I[10];
        CHECK_OK(graft_flat_search(f, 1, s->xq, 10, D, I));
        CHECK(graft_flat_last_path(f) == GRAFT_EXACT_FP32, "path %d: CPU search reports path %d", path,
              graft_flat_last_path(f));
        CHECK(graft_flat_exact_path(f, NULL) == GRAFT_EXACT_FP32, "path %d: CPU index reports path %d", path,
              graft_flat_exact_path(f, NULL));
        CHECK(I[0] == s->gt[0], "query 0's nearest %lld, want %d", (long long)I[0], s->gt[0]);
        graft_flat_free(f);
        f = NULL;
    }
}

int main(void) {
    small_cases();
    large_cases();
    bounds();
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    /* sift5k's values are integers in [0, 255] (SIFT descriptors are uint8): the INT8 path's data. */
    graft_int8_range rb = scan(s.xb, s.nb, s.d), rq = scan(s.xq, s.nq, s.d);
    CHECK(rb.ok && rq.ok && graft_int8_shift(rb) == 128 && graft_int8_fits(rq, 128),
          "sift5k: base ok %d [%g, %g], queries ok %d [%g, %g]", rb.ok, rb.min, rb.max, rq.ok, rq.min, rq.max);
    printf("  sift5k base in [%g, %g], queries in [%g, %g]\n", rb.min, rb.max, rq.min, rq.max);
    algebra(s.xb, 300, s.xq, 20, s.d, 128, "sift5k");
    float *fb = NULL, *fq = NULL;
    int64_t fnb = 0, fnq = 0, fd = 0;
    if (graft_test_load_fmnist(2000, 20, &fb, &fnb, &fq, &fnq, &fd) == 0 && fb) {
        rb = scan(fb, fnb, fd);
        CHECK(rb.ok && graft_int8_shift(rb) == 128, "fashion-mnist pixels: ok %d [%g, %g]", rb.ok, rb.min, rb.max);
        algebra(fb, 200, fq, 10, fd, 128, "fashion-mnist");
    }
    free(fb);
    free(fq);
    /* Signed data with the extremes of the codes in every coordinate. */
    {
        const int64_t d = 37, nb = 64, nq = 8;
        float* xb = malloc(sizeof(float) * nb * d);
        float* xq = malloc(sizeof(float) * nq * d);
        for (int64_t i = 0; i < nb * d; i++) xb[i] = (i % 3 == 0) ? -128.f : (i % 3 == 1) ? 127.f : (float)((int)(i % 251) - 125);
        for (int64_t i = 0; i < nq * d; i++) xq[i] = (i % 2) ? -128.f : 127.f;
        CHECK(graft_int8_shift(scan(xb, nb, d)) == 0, "signed extremes take shift 0");
        algebra(xb, nb, xq, nq, d, 0, "signed extremes");
        free(xb);
        free(xq);
    }
    flat_params(&s);
    graft_test_free_sift(&s);
    return graft_test_finish("test_int8_range");
}
