/* graft: fixed-degree proximity graphs — RNN-Descent construction and best-first search, CPU
 * reference (the oracle of the GPU GRNND builder and of the GPU search kernels).
 *
 * Papers (../shared/papers/grnnd-gpu-relative-nn-descent.txt): RNN-Descent (Ono & Matsui 2023,
 * Algorithms 1-2 there) refines a random S-NN graph with the relative-neighbourhood-graph (RNG)
 * rule inside NN-Descent's neighbour propagation; GRNND (Algorithms 3-6) is its GPU version, with
 * fixed-capacity pools of R per vertex and reverse-edge sampling with ratio rho.
 *
 * Graph layout (as on the GPU, SONG's fixed-degree adjacency): n rows of R int32 ids, row v holding
 * v's out-neighbours closest first, unused slots -1. No row holds its own vertex or a duplicate.
 */
#ifndef GRAFT_GRAPH_H
#define GRAFT_GRAPH_H

#include "graft/graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Construction parameters; names and roles as in the paper's Table 1. */
typedef struct graft_rnnd_params {
    int S;        /* random initial neighbours per vertex (Alg. 1 line 3, Alg. 3 lines 3-5) */
    int R;        /* max out-degree = pool capacity (Alg. 2 line 4; GRNND 3.5 fixed-capacity pool);
                     the built graph has exactly R columns */
    int T1;       /* outer iterations; reverse edges are added after each but the last
                     (Alg. 1 lines 4 and 8-9) */
    int T2;       /* at most this many inner neighbour-propagation rounds per outer iteration
                     (Alg. 1 line 5); fewer when they converge (delta) */
    float rho;    /* reverse-edge sampling ratio (GRNND 3.6): after an outer iteration each vertex
                     offers itself as reverse neighbour to its ceil(rho * degree) closest
                     neighbours. 1 = every edge, as in Ono & Matsui; 0 = no reverse edges.
                     Must lie in [0, 1]. */
    uint64_t seed;       /* seed of the random initial graph */
    graft_metric metric; /* GRAFT_METRIC_L2 (squared L2) or GRAFT_METRIC_INNER_PRODUCT (the
                            build ranks by -dot) */
    const int32_t* init; /* NULL (default): S random initial neighbours. Else n x init_k ids in
                            [-1, n), host memory read during the build: each vertex's initial
                            neighbours (-1 and the vertex itself skipped). With the exact k-NN this
                            is the oracle graph: the best the pruning rule can do. Direct builder
                            calls only (an index refuses it: its build option is `init_exact`). */
    int init_k;   /* ids a row of init */
    float delta;  /* convergence (NN-Descent's delta): an outer iteration's inner rounds stop once
                     a round adds at most delta x n x R new entries to the pools (redirections
                     accepted), and the outer iterations stop once an iteration's reverse edges
                     led to no more than one such round. 0 = run T1 x T2 rounds (the inner rounds
                     still stop when one adds nothing). Must lie in [0, 1). */
    float alpha;  /* the pruning's slack (Vamana's alpha): a candidate w of v is dropped for an
                     accepted closer neighbour u only when alpha d(u, w) < d(v, w) (distances, not
                     squared). 1 (default) = the RNG rule; larger keeps more edges a row (denser
                     rows, fewer steps a walk, longer builds). L2 only: must be 1 with inner
                     product. At least 1. */
    int verbose;  /* 1: the build's progress on stdout, a line each round and phase (an index's
                     build: FAISS's Index::verbose); 0 (default): silent */
} graft_rnnd_params;

/* Defaults: S = 32, R = 64, T1 = 8, T2 = 30 (limits), delta = 0.002, rho = 1, alpha = 1,
 * seed = 1234, metric L2.
 * R = 64: R = 32 caps hub pools and leaves outliers unreachable; 64 is the GPU builder's limit.
 * S = 32: S = 16 loses ~0.01 recall at equal L; S = 64 builds 1.2x longer for no steady gain
 *   (H200, 1M sets, bench/RESULTS.md "A build that converges").
 * T1, T2, delta: the rounds follow the data. A round that adds at most 0.2% of n R new pool
 *   entries ends its outer iteration, and the outer iterations end once the reverse edges only
 *   churn (build.h). On the H200 the fixed T1 = 3, T2 = 8 of waves 1-3 left the graph
 *   under-converged: the converged graph gives 1.21x (dense-SIFT 1M), 1.27x (Fashion-MNIST) and
 *   2.18x (KDE-patches 1M) the QPS at recall@10 0.95, 1.3-3.8x at 0.99, for 1.7-1.8x the build
 *   time (80-150 rounds instead of 24); on a 10M set, 4.2x at 0.95 (bench/RESULTS.md).
 * rho = 1 (every reverse edge, as published): rho = 0.6 (GRNND's GPU choice) costs ~0.005
 * recall at equal L. */
void graft_rnnd_params_defaults(graft_rnnd_params* params);

/* GRNND on the GPU (the paper's Algorithms 3-6, gpu/grnnd_build.cu): the same roles as the CPU
 * reference's parameters in `base`, plus the GPU's own knobs. */
typedef struct graft_grnnd_params {
    graft_rnnd_params base; /* S, R (at most 64 on the GPU), T1, T2, rho, seed, metric */
    int order;   /* GRAFT_GRNND_SORTED (default): each round is Algorithm 2 (candidates in
                    ascending distance, pruned only by accepted closer ones), as the CPU
                    reference; GRAFT_GRNND_RANDOM: GRNND's disordered propagation (3.3), random
                    pairs resolved in draw order. The paper's ordering ablation; see
                    bench/RESULTS.md for why sorted is the default */
    int pairs;   /* random order: pairs drawn per vertex and round, 0..256 */
    int staged;  /* how pair distances are computed. 1: from the neighbour vectors staged in
                    shared memory (sorted order: every pair that is not old-old, up front;
                    random order: the drawn pairs). 0: one warp per pair distance (the paper's
                    Alg. 5); in the sorted order only the pairs Algorithm 2 reads (a candidate
                    against the accepted closer entries, up to the first that prunes it).
                    -1 (default): the faster measured form for the order (sorted: 0, random: 1).
                    Same decisions up to float rounding */
    int device;  /* CUDA device */
    size_t memory_budget; /* device scratch cap in bytes; 0 = what the build needs (two pools of
                             n x R x 8 bytes) */
    int init_exact; /* index builds: 1 = each vertex starts from its exact R nearest (graft_flat's
                       k-NN graph: n^2 d work, for small sets and as the oracle graph that
                       GRNND's graph is measured against); 0 (default) = S random */
    int build_from; /* index builds: what the graph is built from. GRAFT_BUILD_FROM_FP32 (default):
                       the FP32 vectors; GRAFT_BUILD_FROM_CODES: an FP16 or SQ8 index's codes,
                       which GRNND reads on the GPU (2 d or d bytes a vector instead of 4 d: the
                       graph of the decoded vectors); FP32 storage builds from its vectors
                       either way; a PQ index refuses it (GRAFT_EINVAL). graft_grnnd_build_gpu
                       ignores it */
    int fill;       /* index builds: 1 = each row's slots that the RNG rule left empty are filled
                       with its vertex's nearest two-hop vertices after the build (rows of R
                       entries, as a k-NN graph's: a shorter chain of steps for a walk at small
                       batches, more distances a step; bench/RESULTS.md); 0 (default) = the
                       pruned rows. graft_grnnd_build_gpu ignores it */
} graft_grnnd_params;

enum { GRAFT_GRNND_SORTED = 0, GRAFT_GRNND_RANDOM = 1 };
enum { GRAFT_BUILD_FROM_FP32 = 0, GRAFT_BUILD_FROM_CODES = 1 };

/* Defaults: the CPU reference's (graft_rnnd_params_defaults), order sorted, pairs = 128,
 * staged = -1 (automatic), device 0, no budget. See bench/RESULTS.md for the measurements behind them. */
void graft_grnnd_params_defaults(graft_grnnd_params* params);

/* What a GPU build measured (optional output). */
typedef struct graft_grnnd_report {
    double gpu_seconds;    /* device time of the build kernels (vector upload, graph download and
                              context creation excluded) */
    double upload_seconds; /* wall time of context creation, allocation and vector upload */
    double download_seconds; /* wall time from the end of the kernels to the graph on the host */
    double host_seconds;   /* wall time of the host-side checks, of faulting in the graph's host
                              memory, of the entry point and of linking the orphans */
    size_t gpu_peak_bytes; /* device memory the build held: vectors (or codes) + pools */
    int rounds;            /* inner rounds run, over every outer iteration (at most T1 x T2) */
    int64_t linked;        /* vertices the kernels left without an in-edge that were given one
                              on the host (every builder's last step: a vertex no row points to
                              is a vector no search returns; plugin/graph/orphans.c) */
} graft_grnnd_report;

/* A fixed-degree graph. nbrs is malloc'd n x R, owned by the struct: release it with
 * graft_graph_free. entry is the search start vertex. */
typedef struct graft_graph {
    int64_t n;
    int R;
    int32_t* nbrs; /* n x R, -1 padded, each row sorted by distance to its vertex (ties: smaller
                      id) */
    int64_t entry;
} graft_graph;

/* Frees nbrs and zeroes the struct; NULL and an already-freed graph are fine. */
void graft_graph_free(graft_graph* graph);

/* RNN-Descent (Algorithms 1-2) on the CPU, OpenMP-parallel. x is n x d row-major (not kept).
 * params may be NULL (defaults). On success *out holds a new graph (n x R) whose entry is the
 * vertex nearest the dataset centroid (L2, for either metric); on failure *out is untouched.
 *
 * Deterministic: the result depends only on (x, n, d, params), not on the thread count or the
 * schedule. Each vertex draws its S initial neighbours from its own generator seeded by (seed, v);
 * a round refines every pool in parallel against the previous round's pools (GRNND's double
 * buffer, 3.5) and then inserts the RNG redirections into their target pools in vertex order.
 * A redirection that a full pool has no room for stays with its source (Ono & Matsui's pools are
 * unbounded, so no candidate is lost there); see plugin/graph/rnnd.c for why. Last, a vertex
 * that no row points to (the entry excepted) is put into one of its neighbours' rows
 * (plugin/graph/orphans.c): a vertex without an in-edge is a vector no search returns.
 * Work: about (n R^2 / 2) distances per round at first, far fewer once entries turn old; memory
 * about 32 n R bytes besides x.
 *
 * Degenerate inputs give valid graphs: n = 1 gives one row of -1; n - 1 <= S links every vertex to
 * all others at the start; identical vectors are never pruned (the RNG test is strict).
 * Errors (GRAFT_EINVAL): NULL x or out, n < 1, n > INT32_MAX, d < 1, S < 1, R < 1, T1 < 0,
 * T2 < 0, rho outside [0, 1], an unknown metric, NaN/Inf in x. GRAFT_ENOMEM: host memory. */
int graft_rnnd_build_cpu(const float* x, int64_t n, int64_t d, const graft_rnnd_params* params,
                         graft_graph* out);

/* GRNND on the GPU. x is n x d row-major host memory (copied to the device, not kept). params
 * may be NULL (defaults); report may be NULL. On success *out holds a new graph (n x R, same
 * layout and entry rule as graft_rnnd_build_cpu, and the same in-edge for every vertex, linked on
 * the host: report->linked); on failure *out is untouched.
 * Deterministic in its random draws (seed); concurrent insertions into one pool may land in a
 * different order between runs, so two builds can differ in a few edges.
 * Errors: GRAFT_EINVAL (as graft_rnnd_build_cpu, and R > 64, an unknown order, pairs outside
 * 0..256, staged outside -1..1),
 * GRAFT_ENODEVICE (no GPU, or graft built without CUDA), GRAFT_EGPU_NOMEM (device memory or
 * budget), GRAFT_ECUDA, GRAFT_ENOMEM (host). */
int graft_grnnd_build_gpu(const float* x, int64_t n, int64_t d, const graft_grnnd_params* params,
                          graft_graph* out, graft_grnnd_report* report);

/* The most vectors of dimension d one GRNND build holds: its two pools (16 R bytes a vector,
 * capped by params->memory_budget when set) and the vectors (4 d bytes; an index building from its
 * codes counts the codes' bytes instead) in 80% of the device's memory. 0 without a device. */
int64_t graft_grnnd_max_vectors(int64_t d, const graft_grnnd_params* params);

/* A graph built in pieces, for data whose GRNND pools do not fit the GPU (plugin/graph/pieces.c, the
 * overlapping-shard build of DiskANN): a k-means of a sample splits the vectors into P pieces of
 * at most piece_max, each vector in the pieces of its two nearest centroids (P about
 * 2.5 n / piece_max); each piece's graph is built alone (gpu: GRNND with params, one piece on the
 * device at a time; else RNN-Descent with params->base); every vector's two rows are merged with
 * a relaxed RNG rule (DiskANN's alpha; inner product: their union; pieces.c says why; at most R
 * kept, closest first), and the merged graph's vertices left without an in-edge are linked as
 * the builders' are (report->linked). n <= piece_max is the plain build.
 * params may be NULL (defaults), report may be NULL. Same layout and entry as the builders; on
 * failure *out is untouched. Errors: the builders' (a piece's failure names the piece), and
 * GRAFT_EINVAL for piece_max < GRAFT_PIECE_MIN or more than 65536 pieces. */
#define GRAFT_PIECE_MIN 256
typedef struct graft_pieces_report {
    int pieces;              /* P (1: the plain build) */
    int64_t largest_piece;   /* vectors in the largest piece */
    double partition_seconds; /* k-means and assignment */
    double build_seconds;    /* the pieces' builds, gathers of their vectors included */
    double merge_seconds;    /* the rows' merges and the merged graph's orphans linked (GPU
                                builds: piece c + 1 builds while piece c merges, so the two
                                overlap and can add up to more than the wall) */
    int rounds;              /* a whole GRNND build (pieces 1): its inner rounds (graft_grnnd_report);
                                else 0 */
    int64_t linked;          /* vertices the build left without an in-edge and linked at its end
                                (graft_grnnd_report.linked; with P pieces, those of the merged
                                graph: each piece's own build links its own first) */
} graft_pieces_report;
int graft_graph_build_pieces(const float* x, int64_t n, int64_t d, const graft_grnnd_params* params,
                             int gpu, int64_t piece_max, graft_graph* out,
                             graft_pieces_report* report);

/* Fills each row's empty slots with its vertex's nearest vertices among its neighbours' neighbours
 * that the row lacks (itself excepted), keeping every entry it had; rows stay sorted by distance
 * (ties: smaller id), -1 padded and duplicate-free (plugin/graph/fill.c says why; an index does
 * it after its build with graft_grnnd_params.fill = 1). Every row reads the graph as it was, so
 * the result depends on no thread count. x: the n x d vectors the graph is over, metric its
 * build's. *added (nullable): entries added. Errors: GRAFT_EINVAL (NULL or malformed graph, x
 * NULL, d < 1, unknown metric), GRAFT_ENOMEM (n x R ids of scratch; the graph is then unchanged). */
int graft_graph_fill_rows(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                          int64_t* added);

/* The search entry point of every graft graph: the vertex nearest (squared L2, ties to the smaller
 * id) the centroid of x (n x d), a cheap medoid stand-in. 0 when n < 1, d < 1 or x is NULL. */
int64_t graft_graph_entry_point(const float* x, int64_t n, int64_t d);

/* Best-first beam search (width L) from graph->entry, with a visited set; OpenMP over queries.
 * x is the graph's n x d vectors. Results in FAISS layout, nq x k row-major: L2 squared distances
 * ascending, inner products descending; slots beyond the vertices found hold label -1 and
 * distance FLT_MAX (L2) or -FLT_MAX (inner product). Ids outside [0, n) in the graph are ignored.
 * Errors (GRAFT_EINVAL): NULL pointers, an empty or malformed graph struct, d < 1, nq < 0, k < 1,
 * L outside [k, 1024], an unknown metric, NaN/Inf in xq. The same search as
 * graft_graph_search_cpu_ex with default parameters and this L. */
int graft_graph_search_cpu(const graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                           const float* xq, int64_t nq, int64_t k, int L, float* D, int64_t* I);

/* ---- search (SONG-style best-first search; CPU reference and GPU kernel) -------------------- */

/* Visited-set kinds of the GPU search (the CPU reference keeps an exact visited set; both GPU
 * kinds give the CPU reference's results, the Bloom filter up to its false positives). */
enum {
    GRAFT_VISITED_HASH = 0,  /* SONG: open-addressing hash in shared memory holding exactly the
                                worklist (selected insertion + visited deletion, so it stays
                                under 2 (L + probes R) slots); a vertex that left the worklist may
                                have its distance computed again, never re-enters */
    GRAFT_VISITED_BLOOM = 1  /* BANG: per-query Bloom filter (2 hashes) in global memory, never
                                cleared during a query */
};
/* Worklist update of the GPU search. Since the wave-3 walk (gpu/graph_search.cu) both values run
 * the same update: the candidates that enter are placed by rank with ballots, in place. The
 * field is kept so that programs and index files that set it keep working; results never
 * depended on it. */
enum {
    GRAFT_MERGE_SORT = 0,
    GRAFT_MERGE_INSERT = 1
};

/* Filtered search (the graph index, every storage: graft_gindex_search). With a filter
 * (`allowed`), the index counts the ids that pass (popcount of the bitmap) and picks a path:
 *   - exact: the k nearest among the passing ids by brute force (the GPU's exact k-NN over the
 *     gathered passing vectors on a GPU index; on the CPU graft_gindex_params.cpu_knn, which the
 *     FAISS adapter sets to FAISS's brute force, else the CPU reference). Cost: one distance
 *     per passing id and query, whatever the selectivity.
 *   - walk: the graph search with the beam widened as selectivity s drops, L' = min(1024,
 *     max(L, ceil(L / s))), so that about L passing vertices stay in the beam (ACORN's and
 *     Filtered-DiskANN's argument). A query the walk leaves with fewer than min(k, passing)
 *     results is searched again on the exact path.
 * So a search returns k results whenever at least k ids pass (min(k, passing) otherwise, -1
 * beyond). The choice: exact when s < filter_exact_below; by default (filter_exact_below < 0)
 * where the exact path's estimated cost, passing x c, is below the walk's, 0.37 L' R
 * (distances a query; 0.37 L R measured for the GPU kernel on 1M dense SIFT, bench/RESULTS.md),
 * c being the cost of an exact distance relative to a walk's: on the GPU 1/34 (the exact GEMM's
 * 2.1e11 distances/s against the walk kernel's 6.2e9 on the H100), on the CPU 0.5 with a cpu_knn
 * (FAISS's brute force) and 2.5 without (the double reference against the float walk; both
 * measured on sift5k and Fashion-MNIST). The threshold
 * selectivity this gives (about sqrt(0.37 L R / (c n))) is reported. */
enum {
    GRAFT_FILTER_NONE = 0,  /* no filter */
    GRAFT_FILTER_EXACT = 1, /* brute force over the passing ids */
    GRAFT_FILTER_WALK = 2   /* graph walk with a widened beam (+ exact redo of short queries) */
};
typedef struct graft_filter_report {
    int path;            /* GRAFT_FILTER_* */
    int64_t passing;     /* ids the filter lets through */
    double selectivity;  /* passing / ntotal (1 without a filter) */
    double exact_below;  /* the threshold selectivity applied (the parameter or the cost model's) */
    int L;               /* beam of the walk (0 on the exact path) */
    int64_t redone;      /* queries the walk left short, searched again exactly */
} graft_filter_report;

enum { GRAFT_SEARCH_AUTO = 0, GRAFT_SEARCH_SINGLE = 1, GRAFT_SEARCH_MULTI = 2 };
typedef struct graft_search_params {
    int L;           /* worklist (beam) width, k <= L <= 1024. Default 64 */
    int probes;      /* multi-step probing: the best `probes` unexpanded vertices are expanded
                        together each iteration, 1..8. Default 1 */
    int visited;     /* GRAFT_VISITED_HASH (default) or GRAFT_VISITED_BLOOM; GPU only */
    int merge;       /* GRAFT_MERGE_SORT (default) or GRAFT_MERGE_INSERT: no effect (above) */
    int bloom_log2;  /* Bloom filter of 2^bloom_log2 bits per query, 10..24. Default 17 */
    const uint8_t* allowed; /* optional filter (FAISS IDSelector): bit (i & 7) of byte i >> 3
                        set = id i may be returned (FAISS's IDSelectorBitmap layout), n bits.
                        Every vertex is traversed; only allowed ones enter the results, which
                        then hold up to k allowed ids (-1 beyond those found). NULL = all */
    int device;      /* CUDA device for graft_graph_search_gpu (default 0) */
    size_t memory_budget; /* GPU bytes for one batch's queries, results and Bloom filters;
                        0 = 1 GiB. Larger batches are split */
    int64_t allowed_n; /* bits of `allowed` (ids it covers); 0 = as many as the index holds. An
                        index search refuses a shorter filter (GRAFT_ESTATE): an add between
                        building it and the search made it stale */
    double filter_exact_below; /* filtered search: exact over the passing ids when the fraction
                        of ids that pass is below this (0: always walk, 1: always exact);
                        < 0 (default): the cost model above decides. Index searches only */
    int rerank;      /* compressed storages (graft/storage.h) only: how many entries of the final
                        worklist, best code distance first, get exact FP32 distances before the
                        k best are returned; 0 (default) = the whole worklist (BANG's choice),
                        else >= k. With a filter, the k allowed results are re-ranked. The PQ
                        storage: the best `rerank` expanded vertices by PQ distance (graft/bang.h) */
    int mode;        /* walks a query (issue 47): GRAFT_SEARCH_AUTO (default) picks per call from the
                        batch, L and the device: one walk a query once the batch fills half a
                        wave of the GPU, else several (graft_gpu_graph_search_walks);
                        GRAFT_SEARCH_SINGLE forces one walk a query (a block of four warps when
                        the batch fits resident, else a warp: waves 1-3's walk);
                        GRAFT_SEARCH_MULTI forces several: `walks` walks a query, walk 0 the
                        single walk from the entry and the others from vertices drawn from the
                        query's hash (graft_walk_seed), each with its own visited set and
                        worklist of L, their k best merged: deterministic, the same for a query
                        wherever it sits in a batch, never worse than the single walk. So in
                        auto a small batch's results can be better than the same queries' in a
                        large batch. The CPU walks the same way in multi (its reference); auto
                        is one walk there (no wave to fill) */
    int walks;       /* GRAFT_SEARCH_MULTI's walks a query, 2..64 with walks x k <= 4096; 0 (default)
                        = the auto rule's, at least 2 (on the CPU: 2) */
    /* --- the PQ storage's search (BANG, graft/bang.h) only; the other walks ignore them --- */
    int max_expand;  /* expansions per query at most (bounds the re-rank store), L..8192;
                        0 = 2 L + 64 (sift5k and Fashion-MNIST 10k expand 1.0-1.25 L on
                        average, at most 1.75 L at L = 16). Default 0 */
    int threads;     /* host threads gathering neighbour rows (out-of-core); 0 = OpenMP's */
    size_t vector_stream_bytes; /* out-of-core: an iteration of a half batch whose staged full
                        vectors take at least this many bytes copies them on a stream of their
                        own, off the path of the half's next steps (many live queries, large
                        d); smaller ones go on the half's stream and step B files them, two
                        queueing calls and an event wait fewer (the tail of a batch, when few
                        queries still search). 0 = 1 MiB; 1 = always their own stream;
                        SIZE_MAX = never. Results do not depend on it */
} graft_search_params;

/* Defaults as documented in the struct (L 64, probes 1, hash, sort-merge, 2^17-bit Bloom, no
 * filter, device 0, budget auto, filter_exact_below -1 = cost model, rerank 0). */
void graft_search_params_defaults(graft_search_params* params);

/* The CPU reference of the GPU search: best-first search from graph->entry with an exact visited
 * set, worklist of L sorted by (distance, id), the best `probes` unexpanded entries expanded per
 * iteration, until every worklist entry is expanded. With a filter, a second list keeps the k
 * best allowed vertices seen. params NULL = defaults; its visited/merge/bloom_log2/device/budget
 * are GPU-only and ignored here. Results as graft_graph_search_cpu. Errors (GRAFT_EINVAL): those
 * of graft_graph_search_cpu, L outside [k, 1024], probes outside 1..8. */
int graft_graph_search_cpu_ex(const graft_graph* graph, const float* x, int64_t d,
                              graft_metric metric, const float* xq, int64_t nq, int64_t k,
                              const graft_search_params* params, float* D, int64_t* I);

/* What a GPU search measured (optional output). The walk of FP32 / FP16 / SQ8 fills the first
 * group, the PQ storage's BANG pipeline (graft/bang.h) the second; both fill filter. */
typedef struct graft_search_report {
    double gpu_seconds;   /* walk: device time of the search kernels (copies excluded). BANG:
                             the device's span per batch, tables kernel to re-rank end (events):
                             kernels, copies between them and, out-of-core, time the device
                             waits for the host */
    int64_t distances;    /* walk: distances computed, summed over queries */
    int64_t iterations;   /* search iterations (BANG: expansions), summed over queries */
    int batches;          /* batches (walk: kernel launches) the queries were split into */
    graft_filter_report filter; /* index searches: the filtered search's path (also on the CPU) */
    /* BANG only. Times are wall seconds on the host unless said otherwise; "overlapped" stages
     * run while others do, so they need not add up to the wall. */
    double wall_seconds;    /* the whole call */
    double gather_seconds;  /* host threads collecting neighbour rows and vectors (out-of-core;
                               the wall of their OpenMP regions, inside which the calling thread
                               also queues the steps: api_seconds counts that time too) */
    double wait_seconds;    /* host time blocked on the GPU (kernels or copies not yet done) */
    double loop_seconds;    /* host time in the iterations' loop (gather and wait included; the
                               batches' query upload, tables, re-rank and result download not) */
    double api_seconds;     /* out-of-core: host time inside the loop's queueing calls (copies,
                               kernel launches, event records; waits not) */
    int64_t h2d_bytes;      /* bytes copied host -> device during the search (rows, vectors,
                               queries) */
    int64_t d2h_bytes;      /* bytes copied device -> host (candidates, results) */
    int out_of_core;        /* 1: rows gathered from host memory; 0: graph and vectors on the GPU */
    size_t gpu_peak_bytes;  /* device bytes held: resident data + the largest batch's scratch */
} graft_search_report;

/* graft_graph_search_cpu_ex, with what its walks did: report (may be NULL) zeroed, then its
 * iterations (each expands up to `probes` vertices: the chain of dependent steps a GPU walk of
 * the same query runs) and distances, summed over queries (bench/studies/bench_build.cpp's
 * `--chain`). */
int graft_graph_search_cpu_report(const graft_graph* graph, const float* x, int64_t d,
                                  graft_metric metric, const float* xq, int64_t nq, int64_t k,
                                  const graft_search_params* params, float* D, int64_t* I,
                                  graft_search_report* report);

/* One-shot GPU search (gpu/graph_search.cu): uploads the graph and the vectors to
 * params->device, searches, frees. Same parameters, results and errors as
 * graft_graph_search_cpu_ex, plus bloom_log2 outside 10..24, an unknown visited/merge kind,
 * R > 256, GRAFT_ENODEVICE, GRAFT_EGPU_NOMEM, GRAFT_ECUDA. report may be NULL. For repeated
 * searches use the graph index (graft/graph_index.h), which keeps them on the GPU. */
int graft_graph_search_gpu(const graft_graph* graph, const float* x, int64_t d,
                           graft_metric metric, const float* xq, int64_t nq, int64_t k,
                           const graft_search_params* params, float* D, int64_t* I,
                           graft_search_report* report);

/* ---- a living graph: insertion and consolidation (plugin/graph/insert.c) ----------------------
 * What the graph index's adds and removals do to a built graph (graft/graph_index.h, "A living
 * index"); the CPU references of gpu/graph_insert.cu.
 *
 * Insertion of m new vertices (ids n .. n + m - 1, their vectors rows n .. of x) into a graph of
 * n rows, in rounds of at most graft_insert_round_size(current n) vertices. A round:
 *   1. candidates: each new vertex's walk over the graph (graft_graph_search_cpu_ex, beam L,
 *      removed vertices passed through but never returned): the L best live vertices it saw; and
 *      its R nearest among the round's other new vertices (exact), which the walk cannot see;
 *   2. prune with the build's rule (RNN-Descent's Alg. 2, strict RNG test): candidates by
 *      (distance, id), c kept unless a kept closer a has d(a, c) < d(v, c); at most R kept;
 *   3. reverse edges: v is offered to each kept old neighbour; a row with room takes its offers, a row
 *      they overflow is pruned again by the same test (offers new, the row's entries old: two old
 *      entries are not compared again) and keeps the R closest survivors; at most R offers a row;
 *   4. a new vertex no row took (new or old) is linked from its nearest kept neighbour (replacing that row's
 *      farthest entry), so that every new vertex has an in-edge.
 * Offers are applied per row in (distance, source) order: deterministic, whatever the threads. */
#define GRAFT_INSERT_ROUND_SHARE 0.02 /* a round inserts at most 2% of the graph ... */
#define GRAFT_INSERT_ROUND_MIN 256    /* ... or 256 vertices: vertices of one round do not see each
                                         other's rows but their exact k-NN, later rounds the
                                         earlier ones (ParlayANN's prefix-doubling batches) */
#define GRAFT_GRAPH_INSERT_MAX_R 256  /* the GPU search's degree limit */

/* The default beam (and candidates) of an insert's walk: max(64, 2 R), at most 1024. */
int graft_insert_default_L(int R);
/* Vertices a round inserts into a graph of n: max(GRAFT_INSERT_ROUND_MIN, ceil(2% of n)). */
int64_t graft_insert_round_size(int64_t n);

typedef struct graft_insert_report {
    int rounds;            /* rounds the new vertices were inserted in */
    int64_t reverse_edges; /* offers made (one per kept neighbour of a new vertex) */
    int64_t repruned;      /* rows the offers overflowed, pruned again */
    int64_t forced;        /* new vertices no row took, linked from their nearest neighbour */
} graft_insert_report;

/* Inserts the m vertices after graph->n (x holds graph->n + m rows of d; graph->nbrs must have
 * room for graph->n + m rows) and adds m to graph->n. dead: NULL, or a bitmap of removed
 * vertices (bit v & 7 of byte v >> 3, graph->n + m bits; new vertices live): the walks pass
 * through them, no row gains an edge to them. L: the walk's beam, 0 = graft_insert_default_L.
 * report (may be NULL) is zeroed, then counts. Errors (GRAFT_EINVAL): a malformed graph, R over
 * GRAFT_GRAPH_INSERT_MAX_R, L outside 1..1024, NaN/Inf in the new vectors, an unknown metric;
 * GRAFT_ENOMEM. On failure rounds already done stay (graph->n counts them). */
int graft_graph_insert_cpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                           int64_t m, const uint8_t* dead, int L, graft_insert_report* report);
/* One round (steps 2-4) with the candidates given: cand is m x C vertex ids (ids outside
 * [0, graph->n + m), the vertex itself, removed ones and repeats are skipped), e.g. from the
 * GPU's walk. What gpu/graph_insert.cu computes on the device from the same candidates. report
 * accumulates. */
int graft_graph_insert_round_cpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                                 int64_t m, const uint8_t* dead, const int64_t* cand, int C,
                                 graft_insert_report* report);

/* A round's candidates (step 1) for the m vertices after graph->n: m x (L + graph->R) ids into
 * cand, the walk's L (live: NULL or the walk's filter, graft_search_params.allowed), then the ids
 * graph->n + j of each one's R nearest among the m (graft_knn_cpu, itself excluded; -1 padded).
 * graft_graph_insert_cpu's; tests build rounds by hand with it. */
int graft_insert_candidates_cpu(const graft_graph* graph, const float* x, int64_t d,
                                graft_metric metric, int64_t m, const uint8_t* live, int L,
                                int64_t* cand);
/* The same on a GPU (plugin/graph/insert_gpu.c): graph and vectors to `device`, each round's
 * candidates from the GPU walk (FP32, beam L) and the round's exact k-NN (cuBLAS,
 * graft_gpu_exact_knn), the round on the device (gpu/graph_insert.cu), the rows back. Deterministic; equal to graft_graph_insert_cpu wherever the walks return the same
 * candidates (the GPU walk's float sums differ from the CPU's, which can swap near-ties).
 * Errors: graft_graph_insert_cpu's, GRAFT_ENODEVICE, GRAFT_EGPU_NOMEM, GRAFT_ECUDA. The graph
 * index does the same on its own device data. */
int graft_graph_insert_gpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                           int64_t m, const uint8_t* dead, int L, int device,
                           graft_insert_report* report);
/* graft_graph_insert_round_cpu on a GPU: the same rows, bit for bit, from the same candidates. */
int graft_graph_insert_round_gpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                                 int64_t m, const uint8_t* dead, const int64_t* cand, int C,
                                 int device, graft_insert_report* report);

/* Consolidation (FreshDiskANN's delete consolidation): every live vertex whose row holds removed
 * vertices (dead, bitmap of graph->n bits) takes as candidates its live neighbours (old) and its
 * removed neighbours' live neighbours (new), pruned to R as graft_graph_build_pieces merges rows
 * (L2: the relaxed RNG test, alpha 1.2; inner product: the closest R); then the removed
 * rows go and ids are renumbered in order (an id minus the removed ids before it), graph->n
 * becoming the live count; a removed entry point is replaced by graft_graph_entry_point's choice
 * among the live vertices. x: the graph->n vectors (not moved: the caller compacts its own).
 * *repaired (may be NULL): rows repaired. dead NULL: nothing to do. Errors: GRAFT_EINVAL
 * (malformed graph, every vertex removed), GRAFT_ENOMEM. */
int graft_graph_consolidate_cpu(graft_graph* graph, const float* x, int64_t d, graft_metric metric,
                                const uint8_t* dead, int64_t* repaired);

/* DiskANN's in-memory Vamana graph file, as its build_memory_index writes it (little-endian):
 * uint64 file size, uint32 max degree, uint32 start vertex, uint64 frozen points, then for every
 * vertex a uint32 count and that many uint32 ids. graft_vamana_read keeps the first n rows
 * (n = the data file's vector count; frozen points come after them) as a graph of R = max degree
 * columns (1 for a graph without edges), -1 padded, ids >= n dropped; entry = the start vertex,
 * or when that is a frozen point its first neighbour below n. Rows keep the file's order (the
 * searches do not need them sorted). On failure *out is untouched. Errors: GRAFT_EIO (open/read),
 * GRAFT_EFORMAT naming the byte offset where it applies (truncated, counts above the max degree,
 * a file size that does not match, a row count other than n + the frozen points, ids beyond
 * them, a frozen start vertex without a neighbour below n), GRAFT_EINVAL (NULL, n < 1 or
 * > 2^31 - 1). graft_vamana_write writes graph (no frozen points, start = graph->entry, max
 * degree = its longest row) in the same format; GRAFT_EINVAL for a malformed graph, GRAFT_EIO
 * (a partly written file is removed). */
int graft_vamana_read(const char* path, int64_t n, graft_graph* out);
int graft_vamana_write(const char* path, const graft_graph* graph);

/* Structure of a graph: mean and max out-degree (valid ids per row), rows holding exactly R
 * neighbours, and the fraction of vertices reachable from entry along out-edges (BFS). Any output
 * pointer may be NULL. GRAFT_EINVAL on a NULL or malformed graph. */
int graft_graph_stats(const graft_graph* graph, double* mean_degree, int* max_degree,
                      int64_t* n_at_R, double* reachable_fraction);

/* k-NN graph recall: of the true k nearest of every vertex (row v of knn_I, n x knn_k, self
 * excluded, e.g. from graft_flat_knn_graph or graft_knn_cpu with exclude_self = 0), the fraction
 * found among that vertex's graph neighbours, pooled over all vertices; -1 entries of knn_I are
 * not counted.
 * Returns a value in [0, 1], or -1 with graft_last_error() set on bad arguments (NULL, a malformed
 * graph, k < 1 or k > knn_k). */
double graft_graph_knn_recall(const graft_graph* graph, const int64_t* knn_I, int64_t knn_k, int k);

#ifdef __cplusplus
}
#endif
#endif
