/* The graph index's build dispatch (graph/build.h): GRNND on the GPU, GRNND in pieces, RNN-Descent
 * on the CPU, from S random or the exact k-NN (oracle.c) initial neighbours. Above the builders it
 * calls (grnnd.c, pieces.c, rnnd.c, oracle.c) and the checks in build.c,
 * none of which calls back. */
#include <stdio.h>
#include <stdlib.h>

#include "core/index_common.h"
#include "graph/build.h"

int graft_index_build_graph(int gpu, const float* x, const float* dx, int64_t n, int64_t d,
                            const graft_grnnd_params* b, graft_graph* out, double* seconds,
                            graft_pieces_report* rep) {
    const double t0 = graft_now_s();
    /* Data too large for GRNND's device pools (2 n R 8 bytes beside the vectors) is built on the
     * GPU in pieces that fit, halved while a piece still does not (another tenant's memory). Data
     * past the pools' room goes to the pieces at once: a whole build would first fault in its
     * n x R host graph and upload every vector, only to find no room for the pools. */
    const int64_t fit = gpu ? graft_grnnd_max_vectors(d, b) : 0;
    graft_grnnd_report gr;
    /* init_exact: the whole build (GRNND or the CPU reference) starts from the exact k-NN. */
    graft_grnnd_params bx = *b;
    int32_t* init = NULL;
    if (b->init_exact) {
        const int rc0 = graft_graph_exact_init(x, n, d, b, gpu, &init, &bx.base.init_k);
        if (rc0 != GRAFT_OK) return rc0;
        bx.base.init = init;
        b = &bx;
    }
    int rc = gpu && n <= fit ? graft_grnnd_build_gpu_on(x, dx, n, d, b, out, &gr) : GRAFT_EGPU_NOMEM;
    /* GRAFT_GRNND_PROFILE (the kernels' own clocks: gpu/grnnd_build.cu): the build's wall phases. */
    if (rc == GRAFT_OK && gpu && n <= fit && getenv("GRAFT_GRNND_PROFILE"))
        fprintf(stderr, "GRNND build of %lld on device %d: context + upload %.3f s, kernels %.3f s, "
                "download %.3f s, host %.3f s\n", (long long)n, b->device, gr.upload_seconds,
                gr.gpu_seconds, gr.download_seconds, gr.host_seconds);
    *rep = (graft_pieces_report){.pieces = 1, .largest_piece = n, .rounds = rc == GRAFT_OK ? gr.rounds : 0,
                                 .linked = rc == GRAFT_OK ? gr.linked : 0};
    for (int64_t piece = fit; rc == GRAFT_EGPU_NOMEM && !init && piece >= GRAFT_PIECE_MIN; piece /= 2)
        rc = graft_graph_build_pieces(x, n, d, b, 1, piece, out, rep);
    /* No GPU, or pieces below GRAFT_PIECE_MIN: the CPU reference (slow, but it finishes). */
    if (rc == GRAFT_EGPU_NOMEM) {
        int64_t linked = 0;
        rc = graft_rnnd_build_cpu_linked(x, n, d, &b->base, out, &linked);
        *rep = (graft_pieces_report){.pieces = 0, .largest_piece = n, .linked = linked};
    }
    free(init);
    *seconds = graft_now_s() - t0;
    if (rep->pieces < 2) rep->build_seconds = *seconds;
    return rc;
}
