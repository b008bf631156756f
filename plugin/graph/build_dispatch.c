/* The graph index's build dispatch (graph/build.h): GRNND on the GPU, GRNND in pieces, RNN-Descent
 * on the CPU, from S random or the exact k-NN (oracle.c) initial neighbours, over FP32 vectors or
 * a storage's codes. Above the builders it calls (grnnd.c, pieces.c, rnnd.c, oracle.c) and the
 * checks in build.c and build_vectors.c, none of which calls back. */
#include <stdio.h>
#include <stdlib.h>

#include "core/index_common.h"
#include "graph/build.h"

int graft_index_build_graph(int gpu, const graft_build_vectors* vin, int64_t n, int64_t d,
                            const graft_grnnd_params* b, graft_graph* out, double* seconds,
                            graft_pieces_report* rep) {
    const double t0 = graft_now_s();
    /* build_from: the codes (or nothing else to read), else the FP32 vectors alone. */
    graft_build_vectors v = *vin;
    if (v.x && b->build_from != GRAFT_BUILD_FROM_CODES) v.st = NULL;
    const int codes = graft_build_reads_codes(&v);
    /* Data too large for GRNND's device pools (2 n R 8 bytes beside the vectors) is built on the
     * GPU in pieces that fit, halved while a piece still does not (another tenant's memory). Data
     * past the pools' room goes to the pieces at once: a whole build would first fault in its
     * n x R host graph and upload every vector, only to find no room for the pools. */
    const int64_t fit = gpu ? graft_grnnd_max_vectors_of(graft_build_row_bytes(&v, d), b) : 0;
    const int whole = gpu && n <= fit;
    if (b->base.verbose) {
        printf("graft build: the graph of %lld vectors (d = %lld, R = %d) from %s, %s\n", (long long)n,
               (long long)d, b->base.R, codes ? graft_storage_name(v.st->kind) : "FP32",
               !gpu ? "RNN-Descent on the CPU"
                    : whole ? "GRNND on the GPU"
                            : "GRNND on the GPU in pieces (the whole does not fit)");
        fflush(stdout);
    }
    /* The builders that read FP32 rows on the host (the exact start, the CPU reference) take the
     * codes decoded whole: the graph of the decoded vectors either way. The pieces read the
     * codes (graft_graph_build_pieces_from). */
    float* decoded = NULL;
    if (codes && b->init_exact) {
        int rc0 = graft_check_build_vectors(&v, n, d, &b->base, out, "graft_index_build_graph");
        if (rc0 == GRAFT_OK) rc0 = graft_build_decode(&v, n, d, &decoded);
        if (rc0 != GRAFT_OK) return rc0;
    }
    const float* x = decoded ? decoded : v.x;
    graft_grnnd_report gr;
    /* init_exact: the whole build (GRNND or the CPU reference) starts from the exact k-NN. */
    graft_grnnd_params bx = *b;
    int32_t* init = NULL;
    if (b->init_exact) {
        const int rc0 = graft_graph_exact_init(x, n, d, b, gpu, &init, &bx.base.init_k);
        if (rc0 != GRAFT_OK) {
            free(decoded);
            return rc0;
        }
        bx.base.init = init;
        b = &bx;
    }
    int rc = whole ? graft_grnnd_build_gpu_from(&v, n, d, b, out, &gr) : GRAFT_EGPU_NOMEM;
    /* GRAFT_GRNND_PROFILE (the kernels' own clocks: gpu/grnnd_build.cu): the build's wall phases. */
    if (rc == GRAFT_OK && whole && getenv("GRAFT_GRNND_PROFILE"))
        fprintf(stderr, "GRNND build of %lld on device %d from %s: context + upload %.3f s, "
                "kernels %.3f s, download %.3f s, host %.3f s\n", (long long)n, b->device,
                codes ? graft_storage_name(v.st->kind) : "FP32", gr.upload_seconds, gr.gpu_seconds,
                gr.download_seconds, gr.host_seconds);
    *rep = (graft_pieces_report){.pieces = 1, .largest_piece = n, .rounds = rc == GRAFT_OK ? gr.rounds : 0,
                                 .linked = rc == GRAFT_OK ? gr.linked : 0};
    for (int64_t piece = fit; rc == GRAFT_EGPU_NOMEM && !init && piece >= GRAFT_PIECE_MIN; piece /= 2)
        rc = graft_graph_build_pieces_from(&v, n, d, b, 1, piece, out, rep);
    /* No GPU, or pieces below GRAFT_PIECE_MIN: the CPU reference (slow, but it finishes). */
    if (rc == GRAFT_EGPU_NOMEM && codes && !decoded) {
        int rc0 = graft_check_build_vectors(&v, n, d, &b->base, out, "graft_index_build_graph");
        if (rc0 == GRAFT_OK) rc0 = graft_build_decode(&v, n, d, &decoded);
        if (rc0 != GRAFT_OK) {
            free(init);
            return rc0;
        }
        x = decoded;
    }
    if (rc == GRAFT_EGPU_NOMEM) {
        int64_t linked = 0;
        rc = graft_rnnd_build_cpu_linked(x, n, d, &b->base, out, &linked);
        *rep = (graft_pieces_report){.pieces = 0, .largest_piece = n, .linked = linked};
    }
    /* fill: the empty slots given to two-hop neighbours (fill.c), over what the build read. */
    int64_t added = 0;
    if (rc == GRAFT_OK && b->fill) {
        const graft_build_vectors fv = decoded ? (graft_build_vectors){.x = decoded} : v;
        rc = graft_graph_fill_rows_of(out, &fv, d, b->base.metric, &added);
        if (rc != GRAFT_OK) graft_graph_free(out);
    }
    free(init);
    free(decoded);
    *seconds = graft_now_s() - t0;
    if (rep->pieces < 2) rep->build_seconds = *seconds;
    if (b->base.verbose && rc == GRAFT_OK) {
        char how[64];
        if (rep->pieces > 1) snprintf(how, sizeof how, "%d pieces", rep->pieces);
        else if (rep->pieces == 1) snprintf(how, sizeof how, "GRNND, %d rounds", rep->rounds);
        else snprintf(how, sizeof how, "on the CPU");
        printf("graft build: done in %.2f s (%s, %lld vertices linked, %lld entries filled)\n",
               *seconds, how, (long long)rep->linked, (long long)added);
        fflush(stdout);
    }
    return rc;
}
