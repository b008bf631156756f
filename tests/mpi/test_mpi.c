/* One graft index across MPI ranks (issue 49), through faiss_c like a user, run by mpirun with 2
 * and 4 ranks on the CPU references: "MPI,X" against one process's "X,shards=R" over the same
 * parts (the same D and I, bit for bit, over two adds with a search between), on every rank;
 * a selector over the global ids; add_local against add; k > ntotal; ties across ranks; bad input on one rank failing on every rank and leaving the
 * index usable; the pipelined merge (merge_chunks forced to several chunks, and the automatic
 * rule on a batch large enough for it) giving the unpipelined merge's bytes, with a selector,
 * k > ntotal, and a local search failing on one rank in the middle of the pipeline; write on
 * every rank and read back (and refused on another rank count); the parameters.
 * test_mpi_fault.c has the dead and stalled ranks. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>

#include "faiss_testutil.h"
#include "graft_mpi_c.h"

#define K 10

static graft_test_sift s;
static int rank, ranks;

typedef struct results {
    float* D;
    idx_t* I;
} results;

static results search(FaissIndex* index, int64_t nq, int64_t k) {
    results r = {malloc(sizeof(float) * nq * k), malloc(sizeof(idx_t) * nq * k)};
    FAISS_OK(faiss_Index_search(index, nq, s.xq, k, r.D, r.I));
    return r;
}
static void free_results(results* r) {
    free(r->D);
    free(r->I);
}
static int same(results a, results b, int64_t m) {
    return !memcmp(a.D, b.D, sizeof(float) * m) && !memcmp(a.I, b.I, sizeof(idx_t) * m);
}
static FaissIndex* make(const char* desc) {
    FaissIndex* index = NULL;
    FAISS_OK(faiss_graft_index_factory(&index, (int)s.d, desc, METRIC_L2));
    return index;
}
/* Every rank holds what rank 0 holds (the merge gives every rank the same bytes). */
static void check_same_everywhere(results r, int64_t m, const char* what) {
    results r0 = {malloc(sizeof(float) * m), malloc(sizeof(idx_t) * m)};
    memcpy(r0.D, r.D, sizeof(float) * m);
    memcpy(r0.I, r.I, sizeof(idx_t) * m);
    MPI_Bcast(r0.D, (int)m, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Bcast(r0.I, (int)m, MPI_INT64_T, 0, MPI_COMM_WORLD);
    CHECK(same(r, r0, m), "%s: rank %d's results differ from rank 0's", what, rank);
    free_results(&r0);
}

/* "MPI,<desc>" against "<desc>,shards=R" in one process (rank 0), the same two adds (3000 rows,
 * then the rest) with a search between, so that ids run over two adds and a graph index inserts. */
static void against_shards(const char* desc) {
    char mpi_desc[128], shards_desc[128];
    snprintf(mpi_desc, sizeof mpi_desc, "MPI,timeout=60,%s", desc);
    snprintf(shards_desc, sizeof shards_desc, "%s,shards=%d", desc, ranks);
    const int64_t first = 3000, m = s.nq * K;
    FaissIndex* mpi = make(mpi_desc);
    FaissIndex* one = rank == 0 ? make(shards_desc) : NULL;
    results a[2], b[2];
    for (int step = 0; step < 2; step++) {
        const int64_t lo = step ? first : 0, n = step ? s.nb - first : first;
        FAISS_OK(faiss_Index_add(mpi, n, s.xb + lo * s.d));
        a[step] = search(mpi, s.nq, K);
        check_same_everywhere(a[step], m, mpi_desc);
        if (rank) continue;
        FAISS_OK(faiss_Index_add(one, n, s.xb + lo * s.d));
        b[step] = search(one, s.nq, K);
        CHECK(same(a[step], b[step], m), "%s, search %d: results differ from %s's", mpi_desc, step,
              shards_desc);
    }
    CHECK(faiss_Index_ntotal(mpi) == s.nb, "%s: ntotal %lld", mpi_desc, (long long)faiss_Index_ntotal(mpi));
    double local = 0, sum = 0;
    FAISS_OK(faiss_graft_get_param(mpi, "local_ntotal", &local));
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == s.nb, "%s: the ranks hold %g vectors", mpi_desc, sum);
    if (rank == 0) {
        printf("  %-34s = %s over %d ranks, recall@10 %.4f\n", mpi_desc, shards_desc, ranks,
               graft_test_recall(a[1].I, K, s.gt, s.gt_k, s.nq, K));
        free_results(&b[0]), free_results(&b[1]);
        faiss_Index_free(one);
    }
    free_results(&a[0]), free_results(&a[1]);
    faiss_Index_free(mpi);
}

/* A selector over the global ids [1000, 3000): the shards' results, every id inside. */
static void selector(const char* desc) {
    char mpi_desc[128], shards_desc[128];
    snprintf(mpi_desc, sizeof mpi_desc, "MPI,%s", desc);
    snprintf(shards_desc, sizeof shards_desc, "%s,shards=%d", desc, ranks);
    FaissIDSelectorRange* sel = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&sel, 1000, 3000));
    FaissIndex* mpi = make(mpi_desc);
    FAISS_OK(faiss_Index_add(mpi, s.nb, s.xb));
    results r = {malloc(sizeof(float) * s.nq * K), malloc(sizeof(idx_t) * s.nq * K)};
    FAISS_OK(faiss_graft_search_with_selector(mpi, s.nq, s.xq, K, (FaissIDSelector*)sel, r.D, r.I));
    int64_t outside = 0;
    for (int64_t i = 0; i < s.nq * K; i++) outside += r.I[i] < 1000 || r.I[i] >= 3000;
    CHECK(outside == 0, "%s with a selector: %lld ids outside it", mpi_desc, (long long)outside);
    if (rank == 0) {
        FaissIndex* one = make(shards_desc);
        FAISS_OK(faiss_Index_add(one, s.nb, s.xb));
        results o = {malloc(sizeof(float) * s.nq * K), malloc(sizeof(idx_t) * s.nq * K)};
        FAISS_OK(faiss_graft_search_with_selector(one, s.nq, s.xq, K, (FaissIDSelector*)sel, o.D, o.I));
        CHECK(same(r, o, s.nq * K), "%s with a selector: differs from %s's", mpi_desc, shards_desc);
        printf("  %-34s with a selector = %s\n", mpi_desc, shards_desc);
        free_results(&o);
        faiss_Index_free(one);
    }
    free_results(&r);
    faiss_Index_free(mpi);
    faiss_IDSelector_free((FaissIDSelector*)sel);
}

/* k > ntotal: 3 vectors over the ranks, k = 10: FAISS's -1 labels and FLT_MAX distances. */
static void few_vectors(void) {
    FaissIndex* mpi = make("MPI,GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(mpi, 3, s.xb));
    results r = search(mpi, 4, K);
    int ok = 1;
    for (int q = 0; q < 4; q++)
        for (int j = 0; j < K; j++)
            if ((j < 3) != (r.I[q * K + j] >= 0) || (j >= 3 && r.D[q * K + j] != 3.40282347e38f)) ok = 0;
    CHECK(ok, "k > ntotal: not 3 results then -1 / FLT_MAX");
    if (rank == 0) {
        FaissIndex* one = make("GraftFlat,cpu");
        FAISS_OK(faiss_Index_add(one, 3, s.xb));
        results o = search(one, 4, K);
        CHECK(same(r, o, 4 * K), "k > ntotal: differs from one GraftFlat");
        free_results(&o);
        faiss_Index_free(one);
    }
    free_results(&r);
    faiss_Index_free(mpi);
}

/* Ties across ranks: 40 copies of one vector, every distance equal: the smaller ids first, as one
 * index and one process's shards order them. */
static void ties(void) {
    float* same_x = malloc(sizeof(float) * 40 * s.d);
    for (int i = 0; i < 40; i++) memcpy(same_x + i * s.d, s.xb, sizeof(float) * s.d);
    FaissIndex* mpi = make("MPI,GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(mpi, 40, same_x));
    results r = search(mpi, 3, K);
    int ordered = 1;
    for (int q = 0; q < 3; q++)
        for (int j = 1; j < K; j++)
            if (r.D[q * K + j] == r.D[q * K + j - 1] && r.I[q * K + j] <= r.I[q * K + j - 1]) ordered = 0;
    CHECK(ordered, "ties: equal distances not in ascending id order");
    if (rank == 0) {
        char desc[64];
        snprintf(desc, sizeof desc, "GraftFlat,cpu,shards=%d", ranks);
        FaissIndex* one = make(desc);
        FAISS_OK(faiss_Index_add(one, 40, same_x));
        results o = search(one, 3, K);
        CHECK(same(r, o, 3 * K), "ties: differ from %s", desc);
        free_results(&o);
        faiss_Index_free(one);
    }
    free_results(&r);
    faiss_Index_free(mpi);
    free(same_x);
}

/* Each rank adds its own part (FAISS's split) with add_local: the index add() makes. */
static void add_local(void) {
    FaissIndex* a = make("MPI,GraftGraph,cpu");
    FaissIndex* b = make("MPI,GraftGraph,cpu");
    FAISS_OK(faiss_Index_add(a, s.nb, s.xb));
    const int64_t lo = rank * s.nb / ranks, hi = (rank + 1) * s.nb / ranks;
    FAISS_OK(faiss_graft_mpi_add_local(b, hi - lo, s.xb + lo * s.d));
    CHECK(faiss_Index_ntotal(b) == s.nb, "add_local: ntotal %lld", (long long)faiss_Index_ntotal(b));
    results ra = search(a, s.nq, K), rb = search(b, s.nq, K);
    CHECK(same(ra, rb, s.nq * K), "add_local: results differ from add's");
    free_results(&ra), free_results(&rb);
    faiss_Index_free(a);
    faiss_Index_free(b);
    if (rank == 0) printf("  add_local of each rank's part = add of the whole batch\n");
}

/* An error on one rank is the same error on every rank, within the call, and changes nothing. */
static void bad_input_on_one_rank(void) {
    const int last = ranks - 1;
    char needle[32];
    snprintf(needle, sizeof needle, "rank %d", last);
    FaissIndex* mpi = make("MPI,timeout=60,GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(mpi, s.nb, s.xb));
    results good = search(mpi, s.nq, K);
    float D[4 * K];
    idx_t I[4 * K];
    FAISS_FAILS(faiss_Index_search(mpi, 4, s.xq, rank == last ? 0 : K, D, I), needle);
    FAISS_FAILS(faiss_Index_search(mpi, rank == last ? 3 : 4, s.xq, K, D, I), "disagree");
    FAISS_FAILS(faiss_Index_search(mpi, 4, rank == last ? s.xq + s.d : s.xq, K, D, I), "fingerprint");
    /* A NaN in the last rank's part of its batch: nothing added anywhere. */
    float* bad = malloc(sizeof(float) * s.nb * s.d);
    memcpy(bad, s.xb, sizeof(float) * s.nb * s.d);
    if (rank == last) bad[(s.nb - 1) * s.d + 5] = NAN;
    FAISS_FAILS(faiss_Index_add(mpi, s.nb, bad), needle);
    CHECK(faiss_Index_ntotal(mpi) == s.nb, "a failed add changed ntotal to %lld",
          (long long)faiss_Index_ntotal(mpi));
    free(bad);
    /* A bad string on one rank: no index anywhere. */
    FaissIndex* none = NULL;
    FAISS_FAILS(faiss_graft_index_factory(&none, (int)s.d, rank == last ? "MPI,GraftNope" : "MPI,GraftFlat,cpu",
                                          METRIC_L2), "disagree");
    FAISS_FAILS(faiss_graft_index_factory(&none, (int)s.d, "MPI,GraftFlat,gpu=99", METRIC_L2), "rank 0");
    results again = search(mpi, s.nq, K);
    CHECK(same(good, again, s.nq * K), "after the errors: results changed");
    free_results(&good), free_results(&again);
    faiss_Index_free(mpi);
    if (rank == 0) printf("  bad input on rank %d: the same error on every rank, index unchanged\n", last);
}

static void set_chunks(FaissIndex* index, int chunks) {
    FAISS_OK(faiss_graft_set_param(index, "merge_chunks", chunks));
}
static double param(FaissIndex* index, const char* name) {
    double v = -1;
    FAISS_OK(faiss_graft_get_param(index, name, &v));
    return v;
}

/* The pipelined merge: every forced chunk count gives the bytes of one chunk (and of one
 * process's shards), with and without a selector; the chunks used are reported. */
static void pipelined(const char* desc) {
    char mpi_desc[128], shards_desc[128];
    snprintf(mpi_desc, sizeof mpi_desc, "MPI,timeout=60,%s", desc);
    snprintf(shards_desc, sizeof shards_desc, "%s,shards=%d", desc, ranks);
    const int64_t m = s.nq * K;
    FaissIndex* mpi = make(mpi_desc);
    FAISS_OK(faiss_Index_add(mpi, 3000, s.xb));
    FAISS_OK(faiss_Index_add(mpi, s.nb - 3000, s.xb + 3000 * s.d));
    set_chunks(mpi, 1);
    results one = search(mpi, s.nq, K);
    CHECK(param(mpi, "last_chunks") == 1, "%s: %g chunks at merge_chunks = 1", mpi_desc, param(mpi, "last_chunks"));
    FaissIDSelectorRange* range = NULL;
    FAISS_OK(faiss_IDSelectorRange_new(&range, 1000, 3000));
    FaissIDSelector* sel = (FaissIDSelector*)range;
    results one_sel = {malloc(sizeof(float) * m), malloc(sizeof(idx_t) * m)};
    FAISS_OK(faiss_graft_search_with_selector(mpi, s.nq, s.xq, K, sel, one_sel.D, one_sel.I));
    const int forced[] = {2, 3, 4, 7, 64};
    for (size_t i = 0; i < sizeof forced / sizeof forced[0]; i++) {
        set_chunks(mpi, forced[i]);
        results r = search(mpi, s.nq, K);
        CHECK(param(mpi, "last_chunks") == forced[i], "%s: %g chunks used, %d forced", mpi_desc,
              param(mpi, "last_chunks"), forced[i]);
        CHECK(same(r, one, m), "%s: %d chunks differ from one chunk", mpi_desc, forced[i]);
        CHECK(param(mpi, "last_total_s") > 0 && param(mpi, "last_local_s") > 0,
              "%s: no timings after %d chunks", mpi_desc, forced[i]);
        check_same_everywhere(r, m, mpi_desc);
        free_results(&r);
        results rs = {malloc(sizeof(float) * m), malloc(sizeof(idx_t) * m)};
        FAISS_OK(faiss_graft_search_with_selector(mpi, s.nq, s.xq, K, sel, rs.D, rs.I));
        CHECK(same(rs, one_sel, m), "%s with a selector: %d chunks differ from one", mpi_desc, forced[i]);
        free_results(&rs);
    }
    /* Small batches under the automatic rule: one chunk. */
    set_chunks(mpi, 0);
    results r = search(mpi, s.nq, K);
    CHECK(param(mpi, "last_chunks") == 1, "%s: %g chunks for %lld queries (auto)", mpi_desc,
          param(mpi, "last_chunks"), (long long)s.nq);
    CHECK(same(r, one, m), "%s: auto differs from one chunk", mpi_desc);
    free_results(&r);
    if (rank == 0) {
        FaissIndex* shards = make(shards_desc);
        FAISS_OK(faiss_Index_add(shards, 3000, s.xb));
        FAISS_OK(faiss_Index_add(shards, s.nb - 3000, s.xb + 3000 * s.d));
        results o = search(shards, s.nq, K);
        CHECK(same(one, o, m), "%s: differs from %s", mpi_desc, shards_desc);
        FAISS_OK(faiss_graft_search_with_selector(shards, s.nq, s.xq, K, sel, o.D, o.I));
        CHECK(same(one_sel, o, m), "%s with a selector: differs from %s", mpi_desc, shards_desc);
        free_results(&o);
        faiss_Index_free(shards);
        printf("  %-34s pipelined in 2, 3, 4, 7, 64 chunks = 1 chunk = %s, selector too\n", mpi_desc,
               shards_desc);
    }
    free_results(&one), free_results(&one_sel);
    faiss_IDSelector_free(sel);
    faiss_Index_free(mpi);
}

/* The automatic rule on a batch large enough for it (64k queries against 200 vectors, so that
 * it stays fast on the CPU): several chunks, the bytes of one chunk; k > ntotal in chunks
 * (3 vectors, 4 queries in 3 chunks). */
static void pipelined_auto_and_few(void) {
    const int64_t nq = 65536, nb = 200, m = nq * K;
    float* xq = malloc(sizeof(float) * nq * s.d);
    for (int64_t q = 0; q < nq; q++) memcpy(xq + q * s.d, s.xq + (q % s.nq) * s.d, sizeof(float) * s.d);
    FaissIndex* mpi = make("MPI,timeout=60,GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(mpi, nb, s.xb));
    results a = {malloc(sizeof(float) * m), malloc(sizeof(idx_t) * m)};
    results b = {malloc(sizeof(float) * m), malloc(sizeof(idx_t) * m)};
    FAISS_OK(faiss_Index_search(mpi, nq, xq, K, a.D, a.I));
    const double chunks = param(mpi, "last_chunks");
    CHECK(chunks >= 2, "auto: %g chunk(s) for %lld queries on %d ranks", chunks, (long long)nq, ranks);
    set_chunks(mpi, 1);
    FAISS_OK(faiss_Index_search(mpi, nq, xq, K, b.D, b.I));
    CHECK(same(a, b, m), "auto (%g chunks) differs from one chunk", chunks);
    if (rank == 0) {
        char desc[64];
        snprintf(desc, sizeof desc, "GraftFlat,cpu,shards=%d", ranks);
        FaissIndex* one = make(desc);
        FAISS_OK(faiss_Index_add(one, nb, s.xb));
        FAISS_OK(faiss_Index_search(one, nq, xq, K, b.D, b.I));
        CHECK(same(a, b, m), "auto (%g chunks) differs from %s", chunks, desc);
        faiss_Index_free(one);
        printf("  auto: %lld queries on %d ranks in %g chunks = 1 chunk = %s\n", (long long)nq, ranks,
               chunks, desc);
    }
    free_results(&a), free_results(&b);
    free(xq);
    faiss_Index_free(mpi);

    FaissIndex* few = make("MPI,GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(few, 3, s.xb));
    set_chunks(few, 1);
    results r1 = search(few, 4, K);
    set_chunks(few, 3);
    results r3 = search(few, 4, K);
    CHECK(param(few, "last_chunks") == 3, "k > ntotal: %g chunks", param(few, "last_chunks"));
    CHECK(same(r1, r3, 4 * K), "k > ntotal: 3 chunks differ from one");
    /* More chunks than queries: one a query. */
    set_chunks(few, 64);
    results r4 = search(few, 4, K);
    CHECK(param(few, "last_chunks") == 4, "4 queries, 64 chunks asked: %g used", param(few, "last_chunks"));
    CHECK(same(r1, r4, 4 * K), "k > ntotal: one chunk a query differs from one chunk");
    free_results(&r1), free_results(&r3), free_results(&r4);
    faiss_Index_free(few);
}

/* Whether the fingerprint of n rows (mpi_deadline.cpp: 64 rows spread over them) reads row. */
static int fingerprint_reads(int64_t n, int64_t row) {
    const int64_t rows = n < 64 ? n : 64;
    for (int64_t j = 0; j < rows; j++)
        if ((rows == 1 ? 0 : j * (n - 1) / (rows - 1)) == row) return 1;
    return 0;
}

/* A local search failing on the last rank only, in the first, a middle or the last of 4 chunks
 * (a NaN in a query row that the queries' fingerprint does not read, so that every rank agrees
 * on the call and starts the earlier chunks' merges): the same error on every rank, within the
 * call, and the index usable after it with the same results. */
static void pipelined_error_on_one_rank(void) {
    const int last = ranks - 1;
    char needle[32];
    snprintf(needle, sizeof needle, "rank %d", last);
    FaissIndex* mpi = make("MPI,timeout=60,GraftFlat,cpu");
    FAISS_OK(faiss_Index_add(mpi, s.nb, s.xb));
    set_chunks(mpi, 4);
    results good = search(mpi, s.nq, K);
    float* xq = malloc(sizeof(float) * s.nq * s.d);
    results r = {malloc(sizeof(float) * s.nq * K), malloc(sizeof(idx_t) * s.nq * K)};
    const int bad_chunks[] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        int64_t row = bad_chunks[i] * s.nq / 4 + 3;
        while (fingerprint_reads(s.nq, row)) row++;
        memcpy(xq, s.xq, sizeof(float) * s.nq * s.d);
        if (rank == last) xq[row * s.d + 7] = NAN;
        FAISS_FAILS(faiss_Index_search(mpi, s.nq, xq, K, r.D, r.I), needle);
        FAISS_FAILS(faiss_Index_search(mpi, s.nq, xq, K, r.D, r.I), "NaN");
        CHECK(param(mpi, "last_chunks") == 4, "failed search: %g chunks", param(mpi, "last_chunks"));
        results again = search(mpi, s.nq, K);
        CHECK(same(good, again, s.nq * K), "after a failure in chunk %d: results changed", bad_chunks[i]);
        free_results(&again);
    }
    /* merge_chunks is collective: a value one rank refuses is refused on every rank. */
    set_chunks(mpi, 2);
    FAISS_FAILS(faiss_graft_set_param(mpi, "merge_chunks", rank == last ? 3 : 2), "rank");
    CHECK(param(mpi, "merge_chunks") == 2, "merge_chunks %g after a refused set", param(mpi, "merge_chunks"));
    FAISS_FAILS(faiss_graft_set_param(mpi, "merge_chunks", rank == last ? -1 : 2), "merge_chunks");
    FAISS_FAILS(faiss_graft_set_param(mpi, "last_chunks", 2), "read-only");
    free_results(&good), free_results(&r);
    free(xq);
    faiss_Index_free(mpi);
    if (rank == 0)
        printf("  a local search failing on rank %d in chunk 0, 2 or 3 of 4: the same error on every "
               "rank, index unchanged\n", last);
}

static void write_read(void) {
    char dir[256] = {0}, name[300];
    if (rank == 0) graft_test_temp_dir(dir, sizeof dir, "mpi");
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "%s/index", dir);
    FaissIndex* mpi = make("MPI,GraftGraph,cpu");
    FAISS_OK(faiss_Index_add(mpi, 3000, s.xb));
    FAISS_OK(faiss_Index_add(mpi, s.nb - 3000, s.xb + 3000 * s.d));
    results a = search(mpi, s.nq, K);
    FAISS_OK(faiss_graft_mpi_write_index_fname(mpi, name));
    FaissIndex* back = NULL;
    FAISS_OK(faiss_graft_mpi_read_index_fname(name, "cpu", MPI_COMM_WORLD, 60, &back));
    if (back) {
        CHECK(faiss_Index_ntotal(back) == s.nb, "read: ntotal %lld", (long long)faiss_Index_ntotal(back));
        results b = search(back, s.nq, K);
        CHECK(same(a, b, s.nq * K), "read: results differ from the written index's");
        free_results(&b);
        faiss_Index_free(back);
    }
    /* Rank 0 alone cannot read what every rank wrote. */
    MPI_Comm alone;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &alone);
    if (rank == 0) {
        back = NULL;
        FAISS_FAILS(faiss_graft_mpi_read_index_fname(name, "cpu", alone, 60, &back), "read by 1");
        MPI_Comm_free(&alone);
    }
    free_results(&a);
    faiss_Index_free(mpi);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        graft_test_remove_dir(dir);
        printf("  written by %d ranks, read back: the same results\n", ranks);
    }
}

static void params(void) {
    FaissIndex* mpi = make("MPI,timeout=7.5,GraftGraph,cpu");
    double v = 0;
    FAISS_OK(faiss_graft_get_param(mpi, "timeout", &v));
    CHECK(v == 7.5, "timeout %g", v);
    FAISS_OK(faiss_graft_set_param(mpi, "timeout", 30));
    FAISS_OK(faiss_graft_get_param(mpi, "timeout", &v));
    CHECK(v == 30, "timeout %g after set", v);
    FAISS_OK(faiss_graft_set_param(mpi, "L", 96));
    FAISS_OK(faiss_graft_get_param(mpi, "L", &v));
    CHECK(v == 96, "L %g: set_param does not reach the local index", v);
    /* A value the last rank refuses: refused on every rank, L back to 96 where it was taken. */
    FAISS_FAILS(faiss_graft_set_param(mpi, "L", rank == ranks - 1 ? 0 : 64), "rank");
    FAISS_OK(faiss_graft_get_param(mpi, "L", &v));
    CHECK(v == 96, "L %g after a set_param refused on one rank", v);
    FAISS_OK(faiss_graft_get_param(mpi, "rank", &v));
    CHECK(v == rank, "rank %g", v);
    FAISS_OK(faiss_graft_get_param(mpi, "ranks", &v));
    CHECK(v == ranks, "ranks %g", v);
    FAISS_FAILS(faiss_graft_set_param(mpi, "timeout", 0), "timeout");
    FAISS_FAILS(faiss_graft_set_param(mpi, "ranks", 3), "read-only");
    CHECK(faiss_GraftIndexMPI_cast(mpi) == mpi, "cast");
    faiss_Index_free(mpi);
    /* gpu=local: rank r on GPU r mod the visible GPUs (one host here), the CPU where none is. */
    FaissIndex* g = make("MPI,GraftFlat,gpu=local");
    const int gpus = graft_gpu_count();
    FAISS_OK(faiss_graft_get_param(g, "device", &v));
    CHECK(v == (gpus > 0 ? rank % gpus : -1), "gpu=local: rank %d on device %g (%d GPUs)", rank, v, gpus);
    faiss_Index_free(g);
    FaissIndex* none = NULL;
    FAISS_FAILS(faiss_graft_index_factory(&none, (int)s.d, "MPI,timeout=-1,GraftFlat", METRIC_L2), "timeout");
    FAISS_FAILS(faiss_graft_index_factory(&none, (int)s.d, "MPI,", METRIC_L2), "no local index");
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    graft_test_load_sift5k(&s);
    const double t0 = MPI_Wtime();
    against_shards("GraftFlat,cpu");
    against_shards("GraftGraph,cpu");
    selector("GraftFlat,cpu");
    selector("GraftGraph,cpu");
    few_vectors();
    ties();
    add_local();
    bad_input_on_one_rank();
    pipelined("GraftFlat,cpu");
    pipelined("GraftGraph,cpu");
    pipelined_auto_and_few();
    pipelined_error_on_one_rank();
    write_read();
    params();
    if (rank == 0) printf("  %d ranks: %.1f s\n", ranks, MPI_Wtime() - t0);
    graft_test_free_sift(&s);
    int failures = graft_test_failures, total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    graft_test_failures = total;  /* every rank fails when one does */
    return rank == 0 ? graft_test_finish("test_mpi") : (total ? 1 : 0);
}
