/* Vector storages of the graph index (graft/storage.h): codecs on the CPU. SQ8 follows FAISS
 * 1.7.3's ScalarQuantizer (impl/ScalarQuantizer.cpp: train_NonUniform with RS_minmax,
 * QuantizerTemplate<Codec8bit, false, 1>::encode_vector / decode_vector) operation for
 * operation, so codes and decoded values equal FAISS's. */
#include "graft/storage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/threads.h"
#include "core/validate.h"
#include "storage/decode.h"

const char* graft_storage_name(int kind) {
    switch (kind) {
    case GRAFT_STORAGE_FP32: return "FP32";
    case GRAFT_STORAGE_FP16: return "FP16";
    case GRAFT_STORAGE_SQ8: return "SQ8";
    case GRAFT_STORAGE_PQ: return "PQ";
    default: return NULL;
    }
}

size_t graft_storage_code_size(int kind, int64_t d) {
    if (d < 1) return 0;
    switch (kind) {
    case GRAFT_STORAGE_FP32: return (size_t)d * 4;
    case GRAFT_STORAGE_FP16: return (size_t)d * 2;
    case GRAFT_STORAGE_SQ8: return (size_t)d;
    default: return 0;
    }
}

int graft_storage_init(graft_storage* s, int kind, int64_t d) {
    if (!s) return graft_fail(GRAFT_EINVAL, "graft_storage_init: NULL storage");
    if (!graft_storage_name(kind))
        return graft_fail(GRAFT_EINVAL, "graft_storage_init: unknown storage kind %d (FP32 = 0, "
                          "FP16 = 1, SQ8 = 2, PQ = 3)", kind);
    if (d < 1) return graft_fail(GRAFT_EINVAL, "graft_storage_init: dimension %lld", (long long)d);
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->d = d;
    s->trained = kind != GRAFT_STORAGE_SQ8 && kind != GRAFT_STORAGE_PQ;
    return GRAFT_OK;
}

void graft_storage_free(graft_storage* s) {
    if (!s) return;
    free(s->vmin);
    free(s->vdiff);
    s->vmin = s->vdiff = NULL;
    if (s->kind == GRAFT_STORAGE_SQ8 || s->kind == GRAFT_STORAGE_PQ) s->trained = 0;
}

/* Installs malloc'd parameters (taken). */
static void adopt_sq8(graft_storage* s, float* vmin, float* vdiff) {
    free(s->vmin);
    free(s->vdiff);
    s->vmin = vmin;
    s->vdiff = vdiff;
    s->trained = 1;
}

int graft_storage_train(graft_storage* s, int64_t n, const float* x) {
    const char* fn = "graft_storage_train";
    if (!s || !x || n < 1) return graft_fail(GRAFT_EINVAL, "%s: NULL argument or n < 1", fn);
    GRAFT_TRY(graft_check_finite(x, n, s->d, "graft_storage_train: training vectors"));
    if (s->kind == GRAFT_STORAGE_PQ) /* needs M and a k-means: the index's graft_pq_train */
        return graft_fail(GRAFT_EINVAL, "%s: PQ codebooks are trained by graft_gindex_train", fn);
    if (s->kind != GRAFT_STORAGE_SQ8) return GRAFT_OK;
    const int64_t d = s->d;
    float* vmin = malloc((size_t)d * sizeof(float));
    float* vmax = malloc((size_t)d * sizeof(float));
    if (!vmin || !vmax) {
        free(vmin);
        free(vmax);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    memcpy(vmin, x, (size_t)d * sizeof(float));
    memcpy(vmax, x, (size_t)d * sizeof(float));
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            const float v = x[i * d + j];
            if (v < vmin[j]) vmin[j] = v;
            if (v > vmax[j]) vmax[j] = v;
        }
    /* RS_minmax with rangestat_arg 0: vexp = 0, and vmax becomes vdiff. */
    for (int64_t j = 0; j < d; j++) vmax[j] = vmax[j] - vmin[j];
    adopt_sq8(s, vmin, vmax);
    return GRAFT_OK;
}

int graft_storage_set_sq8(graft_storage* s, const float* vmin, const float* vdiff) {
    const char* fn = "graft_storage_set_sq8";
    if (!s || !vmin || !vdiff || s->kind != GRAFT_STORAGE_SQ8)
        return graft_fail(GRAFT_EINVAL, "%s: NULL argument or not an SQ8 storage", fn);
    for (int64_t j = 0; j < s->d; j++)
        if (!isfinite(vmin[j]) || !isfinite(vdiff[j]) || vdiff[j] < 0)
            return graft_fail(GRAFT_EINVAL, "%s: dimension %lld: vmin %g, vdiff %g (finite, vdiff "
                              ">= 0)", fn, (long long)j, vmin[j], vdiff[j]);
    const size_t bytes = (size_t)s->d * sizeof(float);
    float* a = malloc(bytes);
    float* b = malloc(bytes);
    if (!a || !b) {
        free(a);
        free(b);
        return graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    }
    memcpy(a, vmin, bytes);
    memcpy(b, vdiff, bytes);
    adopt_sq8(s, a, b);
    return GRAFT_OK;
}

int graft_storage_copy(graft_storage* dst, const graft_storage* src) {
    if (!dst || !src) return graft_fail(GRAFT_EINVAL, "graft_storage_copy: NULL argument");
    graft_storage t = *src;
    t.vmin = t.vdiff = NULL;
    if (src->kind == GRAFT_STORAGE_SQ8 && src->trained) {
        t.trained = 0;
        GRAFT_TRY(graft_storage_set_sq8(&t, src->vmin, src->vdiff));
    }
    *dst = t;
    return GRAFT_OK;
}

/* IEEE binary16, round to nearest even (what __float2half_rn does on the GPU). */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
    if (ax < 0x38800000u) {                                    /* below 2^-14: subnormal or 0 */
        if (ax < 0x33000000u) return (uint16_t)sign;           /* at most 2^-25: ties to 0 */
        const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    const uint32_t v = ax - (112u << 23);
    uint32_t h = v >> 13;
    const uint32_t rem = v & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else { /* subnormal: m * 2^-24, exact in float */
            float f = (float)m * 0x1p-24f;
            memcpy(&x, &f, 4);
            x |= sign;
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

void graft_storage_encode(const graft_storage* s, int64_t n, const float* x, uint8_t* codes) {
    const int64_t d = s->d;
    const int t = graft_threads_for(n * d * (int64_t)sizeof(float));
    switch (s->kind) {
    case GRAFT_STORAGE_FP32:
        memcpy(codes, x, (size_t)n * (size_t)d * sizeof(float));
        break;
    case GRAFT_STORAGE_FP16:
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (int64_t i = 0; i < n; i++) {
            uint16_t* c = (uint16_t*)(codes + (size_t)i * (size_t)d * 2);
            for (int64_t j = 0; j < d; j++) c[j] = f32_to_f16(x[i * d + j]);
        }
        break;
    case GRAFT_STORAGE_SQ8:
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (int64_t i = 0; i < n; i++) {
            uint8_t* c = codes + (size_t)i * (size_t)d;
            for (int64_t j = 0; j < d; j++) {
                float xi = 0;
                if (s->vdiff[j] != 0) {
                    xi = (x[i * d + j] - s->vmin[j]) / s->vdiff[j];
                    if (xi < 0) xi = 0;
                    if (xi > 1.0f) xi = 1.0f;
                }
                c[j] = (uint8_t)(int)(255 * xi);
            }
        }
        break;
    }
}

void graft_storage_decode(const graft_storage* s, int64_t n, const uint8_t* codes, float* x) {
    const int64_t d = s->d;
    switch (s->kind) {
    case GRAFT_STORAGE_FP32:
        memcpy(x, codes, (size_t)n * (size_t)d * sizeof(float));
        break;
    case GRAFT_STORAGE_FP16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t* c = (const uint16_t*)(codes + (size_t)i * (size_t)d * 2);
            for (int64_t j = 0; j < d; j++) x[i * d + j] = f16_to_f32(c[j]);
        }
        break;
    case GRAFT_STORAGE_SQ8:
        for (int64_t i = 0; i < n; i++) {
            const uint8_t* c = codes + (size_t)i * (size_t)d;
            for (int64_t j = 0; j < d; j++) {
                const float xi = (c[j] + 0.5f) / 255.0f;
                x[i * d + j] = s->vmin[j] + xi * s->vdiff[j];
            }
        }
        break;
    }
}

void graft_sq8_affine(const graft_storage* st, float* so) {
    const int64_t d = st->d;
    for (int64_t j = 0; j < d; j++) {
        so[j] = st->vdiff[j] / 255.0f;
        so[d + j] = st->vmin[j] + 0.5f * so[j];
    }
}

void graft_storage_decode_rows(const graft_storage* st, int64_t n, const uint8_t* codes, float* x) {
    const size_t cs = graft_storage_code_size(st->kind, st->d);
    const int64_t block = 1024;
    const int t = graft_threads_for(n * st->d * (int64_t)sizeof(float));
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1 && n > block)
    for (int64_t b = 0; b < n; b += block)
        graft_storage_decode(st, n - b < block ? n - b : block, codes + (size_t)b * cs, x + b * st->d);
}

int64_t graft_storage_first_nonfinite(const graft_storage* st, int64_t n, const uint8_t* codes) {
    const int64_t m = n * st->d;
    if (st->kind != GRAFT_STORAGE_FP16) return m;
    const uint16_t* h = (const uint16_t*)(const void*)codes;
    int64_t first = m;
    const int t = graft_threads_for(m * 2);
#pragma omp parallel for schedule(static) reduction(min : first) num_threads(t) if (t > 1)
    for (int64_t i = 0; i < m; i++)
        if ((h[i] & 0x7c00u) == 0x7c00u && i < first) first = i;
    return first;
}
