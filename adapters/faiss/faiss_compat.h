// The FAISS versions graft builds against, from 1.7.3 (Debian bookworm's) to 1.15, differ in a
// few names that graft uses. Each difference has one name here, spelled as the newer FAISS spells
// it; the rest of graft is written against these names and never tests FAISS's version itself.
// This header is the only place that does (docs/faiss-versions.md lists what each version gives).
#pragma once

#include <cstdint>

#include <faiss/Index.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexRefine.h>
#include <faiss/impl/IDSelector.h>

#include "graft_faiss_version.h"

// FAISS's version as one number, 10000 * major + 100 * minor + patch (1.15.0 = 11500). FAISS
// states it in <faiss/Index.h> since long before 1.7.3.
#define GRAFT_FAISS_VERSION_NUMBER \
    (FAISS_VERSION_MAJOR * 10000 + FAISS_VERSION_MINOR * 100 + FAISS_VERSION_PATCH)

// graft's classes are faiss::Index subclasses: their layout is that of the FAISS they were built
// against, so a program must see the same FAISS's headers.
static_assert(GRAFT_FAISS_VERSION_NUMBER == GRAFT_FAISS_BUILT_VERSION_NUMBER,
              "graft was built against FAISS " GRAFT_FAISS_BUILT_VERSION ", and the FAISS headers "
              "included here are of another version: put that FAISS's include folder first, or "
              "rebuild graft against this FAISS (cmake -DCMAKE_PREFIX_PATH=<its prefix>)");

namespace graft {

// FAISS's index type: faiss::Index::idx_t in 1.7.3, faiss::idx_t since 1.7.4 (int64_t in both).
using idx_t = decltype(faiss::Index::ntotal);
static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS's idx_t must be 64-bit");

// "major.minor.patch" of the FAISS whose headers this is compiled against.
#define GRAFT_FAISS_STR_(x) #x
#define GRAFT_FAISS_STR(x) GRAFT_FAISS_STR_(x)
constexpr const char* kFaissVersion = GRAFT_FAISS_STR(FAISS_VERSION_MAJOR) "." GRAFT_FAISS_STR(
        FAISS_VERSION_MINOR) "." GRAFT_FAISS_STR(FAISS_VERSION_PATCH);

namespace faiss_compat {

// Whether a ThreadedIndex (IndexShards, IndexReplicas) deletes its sub-indexes: the flag is
// own_fields in FAISS 1.7.3 and own_indices later. The overload for the member that exists is the
// one that compiles.
template <class Threaded>
auto owns_indices(Threaded& t) -> decltype((t.own_indices)) {
    return t.own_indices;
}
template <class Threaded>
auto owns_indices(Threaded& t) -> decltype((t.own_fields)) {
    return t.own_fields;
}

// IDSelectorAnd, IDSelectorOr and IDSelectorXOr (FAISS >= 1.7.4): two selectors combined. On an
// older FAISS, graft's own of the same shape (FAISS's definition), so that code and tests using
// them need no version test; FAISS itself then never makes one.
#if GRAFT_FAISS_VERSION_NUMBER >= 10704
using IDSelectorAnd = faiss::IDSelectorAnd;
using IDSelectorOr = faiss::IDSelectorOr;
using IDSelectorXOr = faiss::IDSelectorXOr;
#else
struct IDSelectorBinary : faiss::IDSelector {
    const faiss::IDSelector* lhs;
    const faiss::IDSelector* rhs;
    IDSelectorBinary(const faiss::IDSelector* lhs_, const faiss::IDSelector* rhs_) : lhs(lhs_), rhs(rhs_) {}
};
struct IDSelectorAnd final : IDSelectorBinary {
    using IDSelectorBinary::IDSelectorBinary;
    bool is_member(idx_t id) const override { return lhs->is_member(id) && rhs->is_member(id); }
};
struct IDSelectorOr final : IDSelectorBinary {
    using IDSelectorBinary::IDSelectorBinary;
    bool is_member(idx_t id) const override { return lhs->is_member(id) || rhs->is_member(id); }
};
struct IDSelectorXOr final : IDSelectorBinary {
    using IDSelectorBinary::IDSelectorBinary;
    bool is_member(idx_t id) const override { return lhs->is_member(id) != rhs->is_member(id); }
};
#endif

// FAISS's wrappers IndexIDMap, IndexShards and IndexRefine pass SearchParameters (IndexRefine:
// IndexRefineSearchParameters::base_index_params) on to the index they wrap in FAISS >= 1.8; FAISS
// 1.7.3's refuse any (a FaissException). IndexPreTransform passes them in both
// (SearchParametersPreTransform); IndexReplicas refuses them in both.
constexpr bool kWrappersPassSearchParameters = GRAFT_FAISS_VERSION_NUMBER >= 10800;
#if GRAFT_FAISS_VERSION_NUMBER >= 10800
using IndexRefineSearchParameters = faiss::IndexRefineSearchParameters;
#else
struct IndexRefineSearchParameters : faiss::SearchParameters {
    float k_factor = 1;
    faiss::SearchParameters* base_index_params = nullptr;
};
#endif

// IndexHNSWCagra (FAISS >= 1.9): an HNSW whose base level is a graph built elsewhere (CAGRA on
// the GPU), searched on that level alone from random entry points (base_level_only). On an older
// FAISS a stand-in of the same shape that export_hnsw_cagra refuses to make (kHasHNSWCagra).
#if GRAFT_FAISS_VERSION_NUMBER >= 10900
using IndexHNSWCagra = faiss::IndexHNSWCagra;
constexpr bool kHasHNSWCagra = true;
#else
struct IndexHNSWCagra : faiss::IndexHNSWFlat {
    using faiss::IndexHNSWFlat::IndexHNSWFlat;
    bool base_level_only = false;
    int num_base_level_search_entrypoints = 32;
};
constexpr bool kHasHNSWCagra = false;
#endif

}  // namespace faiss_compat
}  // namespace graft
