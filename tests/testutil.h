/* Small test harness shared by graft's CTest programs (C11, no framework). */
#ifndef GRAFT_TESTUTIL_H
#define GRAFT_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "graft/graft.h"
#include "graft/flat.h"
#include "graft/graph.h"
#include "graft/storage.h"

extern int graft_test_failures;

/* CHECK(cond, fmt, ...): records a failure with file:line and the message, keeps going. */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            graft_test_failures++;                                             \
        }                                                                      \
    } while (0)

/* CHECK_OK(expr): expr returns a graft status that must be GRAFT_OK. */
#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        CHECK(rc_ == GRAFT_OK, "%s -> %s: %s", #expr, graft_status_name(rc_),  \
              graft_last_error());                                             \
    } while (0)

/* CHECK_ERR(expr, status): expr must fail with exactly `status` and leave a message. */
#define CHECK_ERR(expr, status)                                                \
    do {                                                                       \
        graft_clear_error();                                                   \
        int rc_ = (expr);                                                      \
        CHECK(rc_ == (status), "%s -> %s, expected %s (%s)", #expr,            \
              graft_status_name(rc_), graft_status_name(status), graft_last_error()); \
        CHECK(graft_last_error()[0] != '\0', "%s left no error message", #expr); \
    } while (0)

/* Prints "N passed, N failed" style summary and returns the process exit code. */
int graft_test_finish(const char* name);

/* A new empty directory $TMPDIR/graft_<name>_XXXXXX (TMPDIR unset: /tmp) into dir (cap bytes);
 * exits 1 when it cannot be made. graft_test_remove_dir removes it with its files (0: done). */
void graft_test_temp_dir(char* dir, size_t cap, const char* name);
int graft_test_remove_dir(const char* dir);

/* Directory of the real data (env GRAFT_DATA_DIR, else the configured ../shared/data). */
const char* graft_test_data_dir(void);

/* Joins data dir and a relative path into a static buffer. */
const char* graft_test_data_path(const char* rel);

/* The sift5k set (4500 x 128 base, 500 x 128 queries, 500 x 100 ground truth). Exits 1 with a
 * message when the files are missing: real data is required, never silently skipped. */
typedef struct graft_test_sift {
    float* xb;
    float* xq;
    int32_t* gt;
    int64_t nb, nq, d, gt_k;
} graft_test_sift;
void graft_test_load_sift5k(graft_test_sift* s);
void graft_test_free_sift(graft_test_sift* s);

/* GRAFT_TEST_QUICK=1: the sanitizer tree's run (tests/sanitize/run_tree.sh), where ASan + UBSan
 * make the CPU builds and walks 5-10x slower and each of the asan_unit and asan_faiss suites must
 * stay within 10 minutes on 2 shared cores. A test then runs every path it has on less data (and
 * leaves out repeats of a path at another size); the same test at full size runs in the unit and
 * faiss labels of the same CI, where its quality bars are set. Its bars stay as they are: a fault
 * that corrupts a graph or a result still falls below them on the smaller set, whose exact truth
 * is computed for it. */
int graft_test_quick(void);
/* Under GRAFT_TEST_QUICK: s cut to its first nb base vectors and first nq queries, its ground truth
 * (gt_k = 100 columns, as shipped) the exact top-100 of the cut base (graft_knn_cpu, which
 * test_knn_cpu holds against the shipped truth). Otherwise nothing. */
void graft_test_sift_quick(graft_test_sift* s, int64_t nb, int64_t nq);

/* recall@k: |found ∩ true top-k| / k averaged over queries. found is nq x found_stride (int64),
 * truth is nq x truth_stride (int32). */
double graft_test_recall(const int64_t* found, int64_t found_stride, const int32_t* truth,
                         int64_t truth_stride, int64_t nq, int k);

/* Deterministic uniform [0,1) floats (xorshift), for random-data tests. */
void graft_test_random(float* x, size_t n, uint64_t seed);

/* A duplicate-heavy set grown from real vectors (SIFT rows: integers 0..255), like dense SIFT of
 * smooth images: many exact and near-duplicate descriptors. Deterministic; the recipe:
 *  - Base: clusters in order, cluster c from seed row c (c < nseeds), of max_cluster >> j rows
 *    for the 2^j clusters c in [2^j - 1, 2^(j+1) - 1) while that is >= 2 (each size class holds
 *    max_cluster rows: one cluster of max_cluster, two of half, ...), then single rows. Row i of a
 *    cluster is its seed, exact, for even i; for odd i the seed with 1 to 4 components (hashed)
 *    moved by +-1 (inside 0..255). At most n rows; fewer when the seeds run out.
 *  - Queries: even ones a base row's seed (the row hashed from the query number, uniform over the
 *    rows: large clusters draw more queries, as smooth regions do) with 1 to 4 components moved by
 *    +-1 or +-2; odd ones the rows of real_q in order (held-out real queries), nreal_q > 0.
 * xb: n x d, xq: nq x d (caller's buffers). Returns the number of base rows written. */
int64_t graft_test_duplicates(const float* seeds, int64_t nseeds, const float* real_q, int64_t nreal_q,
                              int64_t d, int64_t n, int64_t max_cluster, int64_t nq, float* xb, float* xq);

/* Records a failure (with `what`) unless g is a well-formed n x R graph: row v holds ids in
 * [0, n) first, then only -1; no self loop, no duplicate; entry in [0, n). With x (n x d, may be
 * NULL) each row's distances to its vertex must not decrease: squared L2, or -dot when l2 == 0,
 * with a relative slack of 1e-5 (builds sum in float, this check in double). */
void graft_test_check_graph(const graft_graph* g, int64_t n, int R, const float* x, int64_t d,
                            int l2, const char* what);

/* Fraction of g's vertices reachable from its entry (graft_graph_stats), -1 on error. */
double graft_test_reachable(const graft_graph* g);

/* Vertices of g other than its entry that no row points to (graph/orphans.c: every builder links
 * them; a vertex without an in-edge is a vector no search returns). */
int64_t graft_test_orphans(const graft_graph* g);
/* x (n x d) coded by a storage of `kind` trained on x: *codes and the decoded vectors *dec, what
 * a CPU reference of a build from codes reads (both malloc'd). */
void graft_test_encode(int kind, const float* x, int64_t n, int64_t d, graft_storage* st,
                       uint8_t** codes, float** dec);

/* Scales each of the n rows of x (d floats) to unit L2 norm (zero rows stay zero). */
void graft_test_normalize(float* x, int64_t n, int64_t d);

/* Exact top-k ids of the queries by the CPU reference (graft_knn_cpu), nq x k int32, malloc'd. */
int32_t* graft_test_exact_topk(const float* xb, int64_t nb, const float* xq, int64_t nq,
                               int64_t d, graft_metric m, int k);

/* Fashion-MNIST: the first max_base training and max_query test images (d = 784) from
 * GRAFT_DATA_DIR/fashion-mnist or /usr/share/datasets/fashion-mnist. Records a failure and
 * returns -1 when missing (real data is required); 0 with malloc'd *xb, *xq otherwise. */
int graft_test_load_fmnist(int64_t max_base, int64_t max_query, float** xb, int64_t* nb,
                           float** xq, int64_t* nq, int64_t* d);

/* Exit code CTest reads as SKIPPED (SKIP_RETURN_CODE). */
#define GRAFT_TEST_SKIP 77

/* First line of a GPU test's main: SKIPPED (never a pass) where no CUDA device is visible. */
#define GRAFT_TEST_REQUIRE_GPU()                  \
    do {                                          \
        if (!graft_gpu_available()) {             \
            printf("no CUDA device: skipped\n"); \
            return GRAFT_TEST_SKIP;               \
        }                                         \
    } while (0)

/* ---- damaged index records (the I/O tests of every index type) ---- */

/* Parses one record from f into *out (a new index, as void*) and returns its status; must leave
 * *out untouched on failure. Each index test wraps its graft_*_read this way. */
typedef int (*graft_test_reader)(FILE* f, void** out);

/* Everything written to f (a tmpfile) so far, malloc'd, with *len its size; f is closed. */
unsigned char* graft_test_bytes_of(FILE* f, size_t* len);

/* Records a failure unless reading b[0..len) fails with GRAFT_EFORMAT, a message containing
 * needle, and *out untouched; prints the message beside `what`. */
void graft_test_expect_format(graft_test_reader read, const unsigned char* b, size_t len,
                              const char* what, const char* needle);

/* graft_test_expect_format on a copy of b whose n-byte little-endian field at off is set to v,
 * the trailing checksum (graft_io_checksum) recomputed when `resum`. */
void graft_test_with_field(graft_test_reader read, const unsigned char* b, size_t len, size_t off,
                           uint64_t v, int n, int resum, const char* what, const char* needle);

#endif
