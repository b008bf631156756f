// GraftIndexMPI's files: one a rank, "<fname>.rank<r>", each a GRFTMPIR header and then the
// rank's local index as faiss_graft_write_index writes it (docs/file-format.md):
//   8 bytes "GRFTMPIR", uint32 version 1, uint32 ranks, uint32 rank, uint32 0, int64 next id,
//   int64 run count, that many (int64 local, int64 global) id runs, uint64 FNV-1a of the bytes
//   before it; little-endian.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <faiss/c_api/error_c.h>

#include "GraftIndexMPI.h"
#include "graft_faiss_c.h"

namespace graft {

namespace {

constexpr char kMagic[8] = {'G', 'R', 'F', 'T', 'M', 'P', 'I', 'R'};
constexpr uint32_t kVersion = 1;

std::string part_name(const char* fname, int rank) {
    return std::string(fname) + ".rank" + std::to_string(rank);
}

struct File {
    FILE* f = nullptr;
    ~File() {
        if (f) fclose(f);
    }
};

void put(FILE* f, const void* p, size_t n, std::string& bytes) {
    bytes.append(static_cast<const char*>(p), n);
    GRAFT_REQUIRE(fwrite(p, 1, n, f) == n, "%s", "write failed");
}
void get(FILE* f, void* p, size_t n, const std::string& name, std::string& bytes) {
    GRAFT_REQUIRE(fread(p, 1, n, f) == n, "%s: truncated header at byte %zu", name.c_str(),
                  bytes.size());
    bytes.append(static_cast<const char*>(p), n);
}

}  // namespace

void GraftIndexMPI::write(const char* fname) const {
    const char* fn = "GraftIndexMPI::write";
    require_usable();
    mpi::Vote mine;
    std::string name;
    try {
        GRAFT_REQUIRE(fname, "%s", "fname is NULL");
        name = part_name(fname, rank);
        File out;
        out.f = fopen(name.c_str(), "wb");
        GRAFT_REQUIRE(out.f, "cannot open %s for writing", name.c_str());
        std::string bytes;
        const uint32_t head[4] = {kVersion, (uint32_t)ranks, (uint32_t)rank, 0};
        const int64_t next = next_id_, nruns = (int64_t)runs_.size();
        put(out.f, kMagic, sizeof kMagic, bytes);
        put(out.f, head, sizeof head, bytes);
        put(out.f, &next, sizeof next, bytes);
        put(out.f, &nruns, sizeof nruns, bytes);
        for (const IdRun& r : runs_) put(out.f, &r, sizeof r, bytes);
        const uint64_t sum = mpi::fnv1a(bytes.data(), bytes.size());
        put(out.f, &sum, sizeof sum, bytes);
        if (faiss_graft_write_index(reinterpret_cast<const FaissIndex*>(local), out.f))
            FAISS_THROW_FMT("%s: %s", name.c_str(), faiss_get_last_error());
        FILE* f = out.f;
        out.f = nullptr;
        GRAFT_REQUIRE(fclose(f) == 0, "%s: close failed", name.c_str());
    } catch (const std::exception& e) {
        if (!name.empty()) remove(name.c_str());
        mine = mpi::vote_of(e.what());
    }
    mpi::require_all_ok(agree(mine, fn), fn);
}

GraftIndexMPI* GraftIndexMPI::read(const char* fname, MPI_Comm comm, const char* placement,
                                   double timeout_s) {
    const char* fn = "GraftIndexMPI::read";
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    std::string place = placement ? placement : "";
    const size_t at = place.find("gpu=local");
    if (at != std::string::npos) {
        const int dev = local_gpu(comm, timeout_s);
        place.replace(at, 9, dev >= 0 ? "gpu=" + std::to_string(dev) : std::string("cpu"));
    }
    std::unique_ptr<faiss::Index> loaded;
    std::vector<IdRun> runs;
    mpi::Vote mine;
    try {
        GRAFT_REQUIRE(fname, "%s", "fname is NULL");
        const std::string name = part_name(fname, rank);
        File in;
        in.f = fopen(name.c_str(), "rb");
        GRAFT_REQUIRE(in.f, "cannot open %s (every rank reads its own part, <fname>.rank<r>)",
                      name.c_str());
        std::string bytes;
        char magic[8];
        uint32_t head[4];
        int64_t next = 0, nruns = 0;
        get(in.f, magic, sizeof magic, name, bytes);
        GRAFT_REQUIRE(!memcmp(magic, kMagic, sizeof kMagic), "%s: not a GRFTMPIR file", name.c_str());
        get(in.f, head, sizeof head, name, bytes);
        GRAFT_REQUIRE(head[0] == kVersion, "%s: format version %u (this graft reads %u)",
                      name.c_str(), head[0], kVersion);
        GRAFT_REQUIRE((int)head[2] == rank, "%s: holds rank %u's part", name.c_str(), head[2]);
        get(in.f, &next, sizeof next, name, bytes);
        get(in.f, &nruns, sizeof nruns, name, bytes);
        GRAFT_REQUIRE(nruns >= 0 && nruns < (1 << 24) && next >= 0, "%s: bad header",
                      name.c_str());
        runs.resize((size_t)nruns);
        for (IdRun& r : runs) get(in.f, &r, sizeof r, name, bytes);
        const uint64_t want = mpi::fnv1a(bytes.data(), bytes.size());
        uint64_t sum = 0;
        get(in.f, &sum, sizeof sum, name, bytes);
        GRAFT_REQUIRE(sum == want, "%s: header checksum mismatch", name.c_str());
        FaissIndex* out = nullptr;
        if (faiss_graft_read_index_placed(in.f, 0, place.c_str(), &out))
            FAISS_THROW_FMT("%s: %s", name.c_str(), faiss_get_last_error());
        loaded.reset(reinterpret_cast<faiss::Index*>(out));
        mine.v[0] = head[1];
        mine.v[1] = next;
    } catch (const std::exception& e) {
        mine = mpi::vote_of(e.what());
    }
    std::string broken;
    std::vector<mpi::Vote> votes = mpi::agree(comm, mine, timeout_s, fn, &broken);
    mpi::require_all_ok(votes, fn);
    GRAFT_REQUIRE(votes[0].v[0] == ranks,
                  "%s: \"%s\" was written by %lld ranks and is read by %d: read it on as many",
                  fn, fname, (long long)votes[0].v[0], ranks);
    for (size_t r = 1; r < votes.size(); r++)
        GRAFT_REQUIRE(votes[r].v[0] == votes[0].v[0] && votes[r].v[1] == votes[0].v[1],
                      "%s: \"%s\": rank %zu's part is of another index than rank 0's", fn, fname, r);
    auto* index = new GraftIndexMPI(loaded.release(), comm, timeout_s);
    index->runs_ = std::move(runs);
    index->next_id_ = index->ntotal = votes[0].v[1];
    return index;
}

}  // namespace graft
