/* graft: a graph built in pieces, for data whose GRNND pools do not fit the GPU (DiskANN's
 * overlapping-shard build, Subramanya et al. 2019 section 4.2, with graft's builders per piece).
 *
 *   1. partition: k-means (Lloyd, L2) of a sample into P centroids, P = ceil(2 n / (0.8 max));
 *      each vector joins the two nearest centroids' pieces that still have room (in id order, so
 *      no piece exceeds `max`; 20% spare room keeps the fallback to a farther piece rare);
 *   2. build: each piece's graph on its own (GRNND on the GPU, or RNN-Descent on the CPU), one
 *      piece at a time, so the device holds one piece's vectors and pools; a GPU build of piece
 *      c + 1 runs while the host merges piece c;
 *   3. merge: every vector's two rows (global ids), deduplicated, sorted by (distance, id) and,
 *      for L2, pruned by a relaxed RNG rule (a candidate goes when a kept closer neighbour is much
 *      nearer to it than the vertex is: GRAFT_MERGE_ALPHA below), at most R kept.
 * The overlap (each vector in two pieces) is what joins the pieces' graphs: a vector's row holds
 * neighbours from both of its pieces. From codes (issue 48, graft_graph_build_pieces_from) every
 * step reads a code row decoded at a time and GRNND builds each piece from its codes: no n x d
 * FP32 copy on the host, the pieces sized by the codes' bytes. Deterministic for the CPU builder
 * (the partition, the per-piece builds and the merge depend on no thread count); with GRNND as the
 * GPU's builds are.
 */
#include <float.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graft/graph.h"
#include "core/index_common.h"
#include "graph/build.h"
#include "core/rng.h"
#include "core/validate.h"
#include "core/vec_dist.h"
#include "graph/merge_rule.h"

#define KMEANS_ITERS 10
#define SAMPLE_PER_PIECE 256
#define TOP_T 8 /* nearest centroids kept per vector for the capacity fallback */

typedef struct {
    float d;
    int32_t id;
} cand;

static int cand_less(cand a, cand b) { return a.d < b.d || (a.d == b.d && a.id < b.id); }

static int cand_cmp(const void* a, const void* b) {
    const cand x = *(const cand*)a, y = *(const cand*)b;
    return cand_less(x, y) ? -1 : cand_less(y, x) ? 1 : 0;
}

/* The T nearest of P centroids to v (squared L2; ties to the smaller index), ascending. */
static int nearest_centroids(const float* v, const float* cent, int P, int64_t d, int T, int* out,
                             float* outd) {
    int m = 0;
    for (int c = 0; c < P; c++) {
        const float dc = graft_vec_dist(v, cent + (int64_t)c * d, d, 1);
        if (m == T && !(dc < outd[T - 1])) continue;
        int j = m < T ? m++ : T - 1;
        while (j > 0 && dc < outd[j - 1]) {
            outd[j] = outd[j - 1];
            out[j] = out[j - 1];
            j--;
        }
        outd[j] = dc;
        out[j] = c;
    }
    return m;
}

/* The T nearest of P centroids (out, T a row) to each of m rows of x: rows[i], or i when rows is
 * NULL; each thread decodes its rows (codes) into a row of its own. 0, or 1 when out of memory. */
static int nearest_of_rows(const graft_build_vectors* x, int64_t d, const int64_t* rows, int64_t m,
                           const float* cent, int P, int T, int* out) {
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        float* tb = malloc((size_t)d * sizeof(float));
        fail = !tb;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < m; i++) {
            float dd[TOP_T];
            if (tb)
                nearest_centroids(graft_build_row(x, d, rows ? rows[i] : i, tb), cent, P, d, T, out + i * T, dd);
        }
        free(tb);
    }
    return fail;
}

/* Lloyd's k-means of ns sampled rows of x into P centroids (written, P x d). */
static int partition_centroids(const graft_build_vectors* x, int64_t n, int64_t d, int P,
                               uint64_t seed, float* cent) {
    const int64_t ns = n < (int64_t)P * SAMPLE_PER_PIECE ? n : (int64_t)P * SAMPLE_PER_PIECE;
    int64_t* rows = malloc((size_t)ns * sizeof(int64_t));
    int* asg = malloc((size_t)ns * sizeof(int));
    int64_t* order = malloc((size_t)ns * sizeof(int64_t));
    int64_t* start = malloc(((size_t)P + 1) * sizeof(int64_t));
    float* buf = malloc((size_t)d * sizeof(float));
    if (!rows || !asg || !order || !start || !buf) {
        free(rows), free(asg), free(order), free(start), free(buf);
        return graft_fail(GRAFT_ENOMEM, "graft_graph_build_pieces: out of host memory");
    }
    /* Stratified sample (one row from each of ns equal strata), then P distinct rows of it as the
     * first centroids (a partial Fisher-Yates shuffle). */
    uint64_t s = seed ^ 0x5eed9a27u;
    for (int64_t i = 0; i < ns; i++) {
        const int64_t lo = i * n / ns, hi = (i + 1) * n / ns;
        rows[i] = lo + (int64_t)(graft_splitmix64(&s) % (uint64_t)(hi - lo));
        order[i] = i;
    }
    for (int c = 0; c < P; c++) {
        const int64_t j = c + (int64_t)(graft_splitmix64(&s) % (uint64_t)(ns - c));
        const int64_t t = order[c];
        order[c] = order[j];
        order[j] = t;
        const float* row = graft_build_row(x, d, rows[order[c]], buf);
        memcpy(cent + (int64_t)c * d, row, (size_t)d * sizeof(float));
    }
    for (int it = 0; it < KMEANS_ITERS; it++) {
        int fail = nearest_of_rows(x, d, rows, ns, cent, P, 1, asg);
        if (fail) {
            free(rows), free(asg), free(order), free(start), free(buf);
            return graft_fail(GRAFT_ENOMEM, "graft_graph_build_pieces: out of host memory");
        }
        /* Members of each centroid in sample order (a counting sort), summed in that order: the
         * centroids do not depend on the thread count. */
        memset(start, 0, ((size_t)P + 1) * sizeof(int64_t));
        for (int64_t i = 0; i < ns; i++) start[asg[i] + 1]++;
        for (int c = 0; c < P; c++) start[c + 1] += start[c];
        for (int64_t i = 0; i < ns; i++) order[start[asg[i]]++] = i;
        for (int c = P; c > 0; c--) start[c] = start[c - 1];
        start[0] = 0;
#pragma omp parallel reduction(| : fail)
        {
            float* tb = malloc((size_t)d * sizeof(float));
            fail = !tb;
#pragma omp for schedule(dynamic, 1)
            for (int c = 0; c < P; c++) {
                const int64_t m = start[c + 1] - start[c];
                if (m == 0 || !tb) continue; /* an empty centroid keeps its place */
                double acc[4096];
                for (int64_t j0 = 0; j0 < d; j0 += 4096) {
                    const int64_t w = d - j0 < 4096 ? d - j0 : 4096;
                    memset(acc, 0, (size_t)w * sizeof(double));
                    for (int64_t t = start[c]; t < start[c + 1]; t++) {
                        const float* v = graft_build_row(x, d, rows[order[t]], tb) + j0;
                        for (int64_t j = 0; j < w; j++) acc[j] += v[j];
                    }
                    for (int64_t j = 0; j < w; j++) cent[(int64_t)c * d + j0 + j] = (float)(acc[j] / m);
                }
            }
            free(tb);
        }
        if (fail) {
            free(rows), free(asg), free(order), free(start), free(buf);
            return graft_fail(GRAFT_ENOMEM, "graft_graph_build_pieces: out of host memory");
        }
    }
    free(rows), free(asg), free(order), free(start), free(buf);
    return GRAFT_OK;
}

/* A merging thread's scratch: candidates, ids, and (from codes) decoded rows: v's, a
 * candidate's, and the kept ones' (R + 2 rows of d). */
typedef struct {
    cand* c;
    int32_t* add;
    int32_t* kept;
    const float** kept_rows;
    float* rows;
} merge_scratch;

/* Merges vertex v's current row (global ids) with the candidates add[0..na), writing at most R
 * survivors of the RNG rule back to the row. */
static void merge_row(const graft_build_vectors* x, int64_t d, int l2, int R, int64_t v, int32_t* row,
                      const int32_t* add, int na, merge_scratch* sc) {
    cand* c = sc->c;
    int m = 0;
    for (int j = 0; j < R && row[j] >= 0; j++) c[m++] = (cand){0, row[j]};
    for (int j = 0; j < na; j++) c[m++] = (cand){0, add[j]};
    const float* xv = graft_build_row(x, d, v, sc->rows);
    float* cbuf = sc->rows ? sc->rows + d : NULL; /* (NULL: FP32 rows, read in place) */
    for (int j = 0; j < m; j++) c[j].d = graft_vec_dist(xv, graft_build_row(x, d, c[j].id, cbuf), d, l2);
    qsort(c, (size_t)m, sizeof(cand), cand_cmp);
    int kept = 0;
    for (int j = 0; j < m && kept < R; j++) {
        if (j && c[j].id == c[j - 1].id) continue; /* a neighbour both pieces found */
        /* decoded into the next kept row's place, which keeps it if it stays */
        float* slot = sc->rows ? sc->rows + (int64_t)(2 + kept) * d : NULL;
        const float* xc = graft_build_row(x, d, c[j].id, slot);
        int ok = 1;
        for (int t = 0; t < kept && ok && l2; t++)
            ok = !(GRAFT_MERGE_ALPHA * graft_vec_dist(sc->kept_rows[t], xc, d, 1) < c[j].d);
        if (ok) sc->kept_rows[kept] = xc, sc->kept[kept++] = c[j].id;
    }
    for (int j = 0; j < R; j++) row[j] = j < kept ? sc->kept[j] : -1;
}

/* One piece's build: its vectors gathered into sub, then its graph (local ids) by the pieces'
 * builder. Runs on a thread of its own while the host merges the piece before it (GPU builds). */
typedef struct {
    const graft_build_vectors* x;
    int64_t d;
    const int64_t* mem; /* the piece's vectors (global ids) */
    int64_t m;
    const graft_grnnd_params* p;
    int gpu;
    uint8_t* sub;      /* room for the largest piece: its FP32 rows, or its codes for GRNND */
    graft_graph g;     /* out */
    int rc;
    double seconds;
    char err[900];     /* the builder's message (graft_last_error is per thread) */
} piece_job;

static void* piece_build(void* arg) {
    piece_job* j = arg;
    const double t = graft_now_s();
    const int64_t d = j->d;
    /* GRNND reads the piece's codes; the CPU builder its rows (decoded: one piece's transient). */
    const int codes = j->gpu && graft_build_reads_codes(j->x);
    const size_t row = codes ? graft_storage_code_size(j->x->st->kind, d) : (size_t)d * sizeof(float);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < j->m; i++) {
        uint8_t* to = j->sub + (size_t)i * row;
        if (codes)
            memcpy(to, j->x->codes + (size_t)j->mem[i] * row, row);
        else {
            const float* r = graft_build_row(j->x, d, j->mem[i], (float*)(void*)to);
            if (r != (const float*)(void*)to) memcpy(to, r, row);
        }
    }
    memset(&j->g, 0, sizeof j->g);
    const graft_build_vectors piece = {.x = codes ? NULL : (const float*)(void*)j->sub,
                                       .st = codes ? j->x->st : NULL, .codes = codes ? j->sub : NULL};
    j->rc = j->gpu ? graft_grnnd_build_gpu_from(&piece, j->m, d, j->p, &j->g, NULL)
                   : graft_rnnd_build_cpu(piece.x, j->m, d, &j->p->base, &j->g);
    if (j->rc != GRAFT_OK) snprintf(j->err, sizeof j->err, "%s", graft_last_error());
    j->seconds = graft_now_s() - t;
    return NULL;
}

/* The first piece from c on that has vectors (fill[c] = start of piece c), or P. */
static int nonempty_piece(const int64_t* fill, int P, int c) {
    while (c < P && fill[c + 1] == fill[c]) c++;
    return c;
}

/* Merges piece c's graph (job->g, local ids over mem) into the rows (global ids): a vector's
 * first piece gives its row as built, the second is merged into it. 0, or 1 when out of host
 * memory. */
static int merge_piece(const graft_build_vectors* x, int64_t d, int l2, int R, const piece_job* job,
                       int32_t* nbrs, uint8_t* seen) {
    const int64_t* mem = job->mem;
    const int64_t m = job->m;
    const int32_t* gn = job->g.nbrs;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        const int codes = graft_build_reads_codes(x);
        merge_scratch sc = {malloc((size_t)2 * R * sizeof(cand)), malloc((size_t)R * sizeof(int32_t)),
                            malloc((size_t)R * sizeof(int32_t)), malloc((size_t)R * sizeof(float*)),
                            codes ? malloc((size_t)(R + 2) * d * sizeof(float)) : NULL};
        const int ok = sc.c && sc.add && sc.kept && sc.kept_rows && (sc.rows || !codes);
#pragma omp for schedule(dynamic, 256)
        for (int64_t i = 0; i < m; i++) {
            if (!ok) { /* every thread still takes its share of the loop */
                fail = 1;
                continue;
            }
            const int64_t v = mem[i];
            int32_t* row = nbrs + v * R;
            int na = 0;
            for (int j = 0; j < R; j++) {
                const int32_t u = gn[i * R + j];
                if (u >= 0) sc.add[na++] = (int32_t)mem[u];
            }
            if (!seen[v]) { /* v's first piece: its row as built */
                for (int j = 0; j < R; j++) row[j] = j < na ? sc.add[j] : -1;
                seen[v] = 1;
            } else
                merge_row(x, d, l2, R, v, row, sc.add, na, &sc);
        }
        free(sc.c), free(sc.add), free(sc.kept), free((void*)sc.kept_rows), free(sc.rows);
    }
    return fail;
}

int graft_graph_build_pieces(const float* x, int64_t n, int64_t d, const graft_grnnd_params* params,
                             int gpu, int64_t piece_max, graft_graph* out,
                             graft_pieces_report* report) {
    const graft_build_vectors v = {.x = x};
    return graft_graph_build_pieces_from(&v, n, d, params, gpu, piece_max, out, report);
}

int graft_graph_build_pieces_from(const graft_build_vectors* x, int64_t n, int64_t d,
                                  const graft_grnnd_params* params, int gpu, int64_t piece_max,
                                  graft_graph* out, graft_pieces_report* report) {
    static const char* fn = "graft_graph_build_pieces";
    graft_grnnd_params p;
    if (params)
        p = *params;
    else
        graft_grnnd_params_defaults(&p);
    GRAFT_TRY(graft_check_build_vectors(x, n, d, &p.base, out, fn));
    GRAFT_TRY(graft_check_build_params(&p, gpu, fn)); /* GRNND's limits before any work */
    if (piece_max < GRAFT_PIECE_MIN)
        return graft_fail(GRAFT_EINVAL, "%s: piece_max=%lld, need at least %d vectors a piece", fn,
                          (long long)piece_max, GRAFT_PIECE_MIN);
    const double t0 = graft_now_s();
    graft_pieces_report rep;
    memset(&rep, 0, sizeof rep);
    if (n <= piece_max) { /* one piece: the plain build */
        rep.pieces = 1;
        rep.largest_piece = n;
        graft_grnnd_report gr = {0};
        float* rows = NULL; /* the CPU builder's rows of codes, decoded */
        int rc = !gpu && graft_build_reads_codes(x) ? graft_build_decode(x, n, d, &rows) : GRAFT_OK;
        if (rc == GRAFT_OK)
            rc = gpu ? graft_grnnd_build_gpu_from(x, n, d, &p, out, &gr)
                     : graft_rnnd_build_cpu_linked(rows ? rows : x->x, n, d, &p.base, out, &gr.linked);
        free(rows);
        rep.build_seconds = graft_now_s() - t0;
        rep.linked = gr.linked;
        if (rc == GRAFT_OK && report) *report = rep;
        return rc;
    }
    const int64_t P64 = (2 * n + piece_max * 8 / 10 - 1) / (piece_max * 8 / 10);
    if (P64 > 65536)
        return graft_fail(GRAFT_EINVAL, "%s: %lld pieces of %lld vectors for n=%lld; at most 65536",
                          fn, (long long)P64, (long long)piece_max, (long long)n);
    const int P = (int)P64, R = p.base.R, T = P < TOP_T ? P : TOP_T;
    const int l2 = p.base.metric == GRAFT_METRIC_L2;

    float* cent = malloc((size_t)P * (size_t)d * sizeof(float));
    int* top = malloc((size_t)n * T * sizeof(int));
    int32_t* asg = malloc((size_t)n * 2 * sizeof(int32_t));
    int64_t* fill = calloc((size_t)P + 1, sizeof(int64_t));
    int64_t* members = malloc((size_t)n * 2 * sizeof(int64_t));
    int32_t* nbrs = malloc((size_t)n * R * sizeof(int32_t));
    uint8_t* seen = calloc((size_t)n, 1);
    int rc = GRAFT_OK;
    if (!cent || !top || !asg || !fill || !members || !nbrs || !seen)
        rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    if (rc == GRAFT_OK) rc = partition_centroids(x, n, d, P, p.base.seed, cent);
    if (rc == GRAFT_OK) {
        const int fail = nearest_of_rows(x, d, NULL, n, cent, P, T, top);
        /* Two pieces per vector, nearest first among those with room, in id order. */
        int64_t* size = fill + 1;
        int* all = malloc((size_t)P * sizeof(int)); /* the fallback's ranking of every piece */
        float* alld = malloc((size_t)P * sizeof(float));
        float* buf = malloc((size_t)d * sizeof(float));
        if (fail || !all || !alld || !buf) rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        for (int64_t v = 0; v < n && rc == GRAFT_OK; v++) {
            int got = 0;
            for (int j = 0; j < T && got < 2; j++)
                if (size[top[v * T + j]] < piece_max) asg[v * 2 + got++] = top[v * T + j];
            if (got < 2) { /* the T nearest are full: the nearest others with room */
                nearest_centroids(graft_build_row(x, d, v, buf), cent, P, d, P, all, alld);
                for (int j = 0; j < P && got < 2; j++)
                    if (size[all[j]] < piece_max && (got == 0 || asg[v * 2] != all[j]))
                        asg[v * 2 + got++] = all[j];
            }
            /* One piece only when no second one has room (possible when the pieces are few and
             * two filled up): the vector's row then comes from that piece alone. */
            if (got == 0) /* cannot happen: the pieces hold 2.5 n, so some piece has room */
                rc = graft_fail(GRAFT_EINTERNAL, "%s: no piece has room for vector %lld", fn,
                                (long long)v);
            if (got < 2) asg[v * 2 + 1] = -1;
            for (int j = 0; j < got; j++) size[asg[v * 2 + j]]++;
        }
        free(all), free(alld), free(buf);
        free(top);
        top = NULL;
    }
    rep.partition_seconds = graft_now_s() - t0;
    if (p.base.verbose && rc == GRAFT_OK) {
        printf("graft pieces: %lld vectors into %d pieces of at most %lld (partition %.2f s)\n",
               (long long)n, P, (long long)piece_max, rep.partition_seconds);
        fflush(stdout);
    }
    /* Members of each piece in id order (fill[c] = start of piece c). */
    int64_t largest = 0;
    if (rc == GRAFT_OK) {
        for (int c = 0; c < P; c++) {
            largest = fill[c + 1] > largest ? fill[c + 1] : largest;
            fill[c + 1] += fill[c];
        }
        int64_t* at = malloc((size_t)P * sizeof(int64_t));
        if (!at) rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        else {
            memcpy(at, fill, (size_t)P * sizeof(int64_t));
            for (int64_t v = 0; v < n; v++)
                for (int j = 0; j < 2; j++)
                    if (asg[v * 2 + j] >= 0) members[at[asg[v * 2 + j]]++] = v;
            free(at);
        }
    }
    /* A piece as GRNND reads it (its codes, when the build reads codes) or the CPU builder. */
    const size_t row_bytes = gpu ? graft_build_row_bytes(x, d) : (size_t)d * sizeof(float);
    uint8_t* sub = rc == GRAFT_OK ? malloc((size_t)largest * row_bytes) : NULL;
    if (rc == GRAFT_OK && !sub) rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
    /* Piece c + 1 builds while piece c merges: GPU builds on a thread of their own (the host's
     * cores are free while GRNND runs, the merge is host work), CPU builds after the merge (both
     * use every core). The merges run in piece order, so the rows do not depend on the overlap.
     * sub is free once a build has ended: the merge reads x and the piece's graph. */
    piece_job jobs[2];
    int cur = 0, c = nonempty_piece(fill, P, 0);
    if (rc == GRAFT_OK && c < P) {
        jobs[0] = (piece_job){x, d, members + fill[c], fill[c + 1] - fill[c], &p, gpu, sub};
        piece_build(&jobs[0]);
    }
    while (rc == GRAFT_OK && c < P) {
        piece_job* job = &jobs[cur];
        rep.build_seconds += job->seconds;
        if (p.base.verbose) {
            printf("graft pieces: piece %d of %d (%lld vectors) built in %.2f s\n", c + 1, P,
                   (long long)job->m, job->seconds);
            fflush(stdout);
        }
        if (job->rc != GRAFT_OK) {
            rc = graft_fail(job->rc, "%s: piece %d of %d (%lld vectors): %s", fn, c + 1, P,
                            (long long)job->m, job->err);
            break;
        }
        const int cn = nonempty_piece(fill, P, c + 1);
        piece_job* next = &jobs[1 - cur];
        pthread_t th;
        int threaded = 0;
        if (cn < P) {
            *next = (piece_job){x, d, members + fill[cn], fill[cn + 1] - fill[cn], &p, gpu, sub};
            threaded = gpu && pthread_create(&th, NULL, piece_build, next) == 0;
        }
        const double tm = graft_now_s();
        const int fail = merge_piece(x, d, l2, R, job, nbrs, seen);
        rep.merge_seconds += graft_now_s() - tm;
        graft_graph_free(&job->g);
        if (threaded) pthread_join(th, NULL);
        else if (cn < P && !fail) piece_build(next);
        if (fail) {
            if (cn < P) graft_graph_free(&next->g);
            rc = graft_fail(GRAFT_ENOMEM, "%s: out of host memory", fn);
        }
        c = cn;
        cur = 1 - cur;
    }
    free(sub), free(cent), free(top), free(asg), free(fill), free(members), free(seen);
    /* Each piece's build linked its own orphans, but the merge prunes rows apart again: a vertex
     * can lose its in-edges of both pieces (graph/orphans.c). */
    graft_graph merged = {n, R, nbrs, 0};
    if (rc == GRAFT_OK) {
        merged.entry = graft_graph_entry_point_of(x, n, d);
        const double tm = graft_now_s();
        rc = graft_graph_link_orphans_of(&merged, x, d, p.base.metric, &rep.linked);
        rep.merge_seconds += graft_now_s() - tm;
    }
    if (rc != GRAFT_OK) {
        free(nbrs);
        return rc;
    }
    *out = merged;
    rep.pieces = P;
    rep.largest_piece = largest;
    if (report) *report = rep;
    return GRAFT_OK;
}
