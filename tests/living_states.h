/* Searches during writes, checked against every state a living graph index went through
 * (tests/unit/test_living.c on the CPU, tests/gpu/test_gpu_living.c on the GPU; docs/adding-and-
 * removing.md, "Searches during writes"). The writer records, before each write, the state it
 * makes: which data row each id names. Reader threads search and accept a result only when one
 * state explains it whole: every id in that state's range and every distance that of the id's row
 * (so a mix of two states, or a removed vector, shows up). A search may see any state from the one
 * published when it started to the one after the last published when it returned (the index may
 * publish a write before the writer counts it). Header-only; include once per test program. */
#ifndef GRAFT_LIVING_STATES_H
#define GRAFT_LIVING_STATES_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "graft/graph_index.h"
#include "testutil.h"

enum { LIVING_STATES = 64, LIVING_READERS = 3, LIVING_QN = 8 };

typedef struct living_states {
    graft_gindex* g;
    const float *xb, *xq;  /* the data rows and the queries */
    int64_t nq, d;
    int l2;                /* distances: squared L2, else dot products */
    int32_t* rows[LIVING_STATES]; /* state k: id -> data row (malloc'd, freed by living_free) */
    int64_t n[LIVING_STATES];
    int k;                 /* the last state made */
    atomic_int published;  /* states the writer has finished making */
    atomic_int done;
    atomic_long searches, bad;
    pthread_t readers[LIVING_READERS];
} living_states;

static inline float living_dist(const living_states* c, const float* q, int32_t row) {
    const float* x = c->xb + (int64_t)row * c->d;
    double s = 0;
    for (int64_t j = 0; j < c->d; j++) s += c->l2 ? ((double)q[j] - x[j]) * ((double)q[j] - x[j]) : (double)q[j] * x[j];
    return (float)s;
}

/* The results of LIVING_QN queries at q, state k's? */
static inline int living_explains(const living_states* c, int k, const float* q, const float* D, const int64_t* I) {
    for (int i = 0; i < LIVING_QN * 10; i++) {
        if (I[i] == -1) continue;
        if (I[i] < 0 || I[i] >= c->n[k]) return 0;
        const float want = living_dist(c, q + (i / 10) * c->d, c->rows[k][I[i]]);
        if (fabsf(D[i] - want) > 1e-3f * fmaxf(fabsf(want), 1.0f)) return 0;
    }
    return 1;
}

static void* living_reader(void* arg) {
    living_states* c = arg;
    float D[LIVING_QN * 10];
    int64_t I[LIVING_QN * 10];
    unsigned s = (unsigned)(uintptr_t)D; /* a seed a thread */
    while (!atomic_load(&c->done)) {
        s = s * 1103515245u + 12345u;
        const float* q = c->xq + (int64_t)((s >> 8) % (unsigned)(c->nq - LIVING_QN)) * c->d;
        const int k0 = atomic_load(&c->published);
        if (graft_gindex_search(c->g, LIVING_QN, q, 10, NULL, D, I, NULL) != GRAFT_OK) {
            atomic_fetch_add(&c->bad, 1);
            continue;
        }
        int k1 = atomic_load(&c->published) + 1;
        if (k1 >= LIVING_STATES || !c->rows[k1]) k1--;
        int ok = 0;
        for (int k = k0; k <= k1 && !ok; k++) ok = living_explains(c, k, q, D, I);
        if (!ok) atomic_fetch_add(&c->bad, 1);
        atomic_fetch_add(&c->searches, 1);
    }
    return NULL;
}

/* State 0: ids 0 .. n0 - 1 are rows 0 .. n0 - 1 (the index holds them); the readers start. */
static inline void living_start(living_states* c, graft_gindex* g, const float* xb, int64_t nb,
                                const float* xq, int64_t nq, int64_t d, int l2, int64_t n0) {
    memset(c, 0, sizeof *c);
    c->g = g, c->xb = xb, c->xq = xq, c->nq = nq, c->d = d, c->l2 = l2;
    c->rows[0] = malloc(sizeof(int32_t) * nb);
    for (int64_t i = 0; i < n0; i++) c->rows[0][i] = (int32_t)i;
    c->n[0] = n0;
    for (int i = 0; i < LIVING_READERS; i++) pthread_create(&c->readers[i], NULL, living_reader, c);
}

/* The next state's map, a copy of the last one (room for nb ids), to edit before the write. */
static inline int32_t* living_next(living_states* c, int64_t nb) {
    int32_t* rows = malloc(sizeof(int32_t) * nb);
    memcpy(rows, c->rows[c->k], sizeof(int32_t) * c->n[c->k]);
    c->rows[c->k + 1] = rows;
    c->n[c->k + 1] = c->n[c->k];
    return rows;
}
/* The next state: ids[0..m) (ascending) removed from the last one's. */
static inline void living_removed(living_states* c, int64_t nb, const int64_t* ids, int64_t m) {
    int32_t* rows = living_next(c, nb);
    int64_t j = 0, r = 0;
    for (int64_t i = 0; i < c->n[c->k]; i++)
        if (r < m && ids[r] == i) r++;
        else rows[j++] = rows[i];
    c->n[c->k + 1] = j;
}
/* The next state: rows r0 .. r0 + m - 1 appended. */
static inline void living_added(living_states* c, int64_t nb, int64_t r0, int64_t m) {
    int32_t* rows = living_next(c, nb);
    for (int64_t i = 0; i < m; i++) rows[c->n[c->k] + i] = (int32_t)(r0 + i);
    c->n[c->k + 1] = c->n[c->k] + m;
}
/* The write that made the next state has returned. */
static inline void living_published(living_states* c) { atomic_store(&c->published, ++c->k); }

/* Stops the readers and frees the maps; returns the results no state explained. */
static inline long living_stop(living_states* c) {
    atomic_store(&c->done, 1);
    for (int i = 0; i < LIVING_READERS; i++) pthread_join(c->readers[i], NULL);
    for (int i = 0; i <= c->k; i++) free(c->rows[i]);
    return atomic_load(&c->bad);
}

/* The rows rows[0..n) of xb (d floats each), gathered into a new buffer (malloc'd). */
static inline float* living_rows(const float* xb, int64_t d, const int32_t* rows, int64_t n) {
    float* x = malloc(sizeof(float) * (size_t)(n ? n : 1) * d);
    for (int64_t i = 0; i < n; i++) memcpy(x + i * d, xb + (int64_t)rows[i] * d, sizeof(float) * d);
    return x;
}

/* Exact top 10 of the nq queries among the rows rows[0..n) of xb, as row numbers (malloc'd). */
static inline int32_t* living_truth(const float* xb, int64_t d, const int32_t* rows, int64_t n,
                                    const float* xq, int64_t nq, graft_metric metric) {
    float* x = living_rows(xb, d, rows, n);
    int32_t* gt = graft_test_exact_topk(x, n, xq, nq, d, metric, 10);
    for (int64_t i = 0; i < nq * 10; i++) gt[i] = rows[gt[i]];
    free(x);
    return gt;
}

/* g written to a record and read back onto g's device (the record holds no device; NULL params
 * would put it on GPU 0 wherever there is one, whose cost model may take another search path).
 * NULL (a failed check counted) when the write or read fails. */
static inline graft_gindex* living_reread(const graft_gindex* g) {
    FILE* f = tmpfile();
    if (!f) return NULL;
    CHECK_OK(graft_gindex_write(g, f));
    rewind(f);
    const graft_gindex_params gp = graft_gindex_get_params(g);
    graft_gindex* r = NULL;
    CHECK_OK(graft_gindex_read(f, &gp, &r));
    fclose(f);
    return r;
}

#endif
