// Index I/O for faiss_c (graft_faiss_c.h): graft indexes in graft's records (GRFTFLAT in graft/io.h,
// GRFTGRPH (and the legacy GRFTBANG it reads) in graft/graph_index.h, and the GRFTIDMP id-map record
// below), every other index through faiss::write_index / read_index.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <faiss/IndexIDMap.h>
#include <faiss/c_api/macros_impl.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"
#include "GraftIndexShards.h"
#include "graft/io.h"
#include "graft_faiss_c.h"

namespace {

const char kIdMapMagic[] = "GRFTIDMP";
const char kShardsMagic[] = "GRFTSHRD";

// Throws a faiss::FaissException whose what() is just the message (faiss_get_last_error()).
[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    throw faiss::FaissException(msg);
}
#define REQUIRE(cond, ...)              \
    do {                                \
        if (!(cond)) fail(__VA_ARGS__); \
    } while (0)

constexpr int kAutoDevice = -2;  // GPU 0 when graft_gpu_available(), else the CPU

void put_le(unsigned char* p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
uint64_t get_le(const unsigned char* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
// The bytes of one of this file's records (GRFTIDMP, GRFTSHRD) with their running checksum;
// errors name the record.
struct Record {
    FILE* f;
    const char* name;  // e.g. "graft id map record"
    uint64_t sum = GRAFT_IO_CHECKSUM_INIT;

    void put(const void* p, size_t n) {
        sum = graft_io_checksum(sum, p, n);
        REQUIRE(fwrite(p, 1, n, f) == n, "%s: write failed: %s", name, strerror(errno));
    }
    void get(void* p, size_t n, const char* what) {
        size_t got = fread(p, 1, n, f);
        REQUIRE(got == n, "%s: %s in the %s", name, ferror(f) ? "read error" : "truncated", what);
        sum = graft_io_checksum(sum, p, n);
    }
    void put_checksum() {
        unsigned char b[8];
        put_le(b, sum, 8);
        put(b, 8);
    }
    void check_checksum() {
        unsigned char b[8];
        uint64_t want = sum;
        get(b, 8, "checksum");
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        if (graft_fuzzing_ignore_checksums) want = get_le(b, 8);
#endif
        REQUIRE(get_le(b, 8) == want, "%s: checksum mismatch: the record is corrupt", name);
    }
};

bool is_graft_index(const faiss::Index* idx) {
    return dynamic_cast<const graft::GraftIndexFlat*>(idx) ||
           dynamic_cast<const graft::GraftIndexGraph*>(idx);  // GraftIndexGraphPQ included
}

// Writes idx as its graft record (GRFTFLAT, GRFTGRPH for every storage of the graph index);
// false when idx is not a graft index.
bool write_graft(const faiss::Index* idx, FILE* f) {
    const char* fn = "faiss_graft_write_index";
    if (auto* g = dynamic_cast<const graft::GraftIndexFlat*>(idx)) {
        graft::throw_if_error(graft_flat_write(g->flat, f), fn);
        return true;
    }
    if (auto* g = dynamic_cast<const graft::GraftIndexGraph*>(idx)) {
        graft::throw_if_error(graft_gindex_write(g->gindex, f), fn);
        return true;
    }
    return false;
}

// IndexIDMap/IndexIDMap2 over a graft index: GRFTIDMP, uint32 version 1, uint32 kind (1 IDMap,
// 2 IDMap2), int64 n, n int64 ids, uint64 checksum of those bytes; then the inner graft record.
// False (nothing written) when the inner index is not graft's.
bool write_idmap(const faiss::IndexIDMap* m, FILE* f) {
    if (!is_graft_index(m->index)) return false;
    unsigned char h[24], buf[8 * 1024];
    std::memcpy(h, kIdMapMagic, 8);
    put_le(h + 8, 1, 4);
    put_le(h + 12, dynamic_cast<const faiss::IndexIDMap2*>(m) ? 2 : 1, 4);
    put_le(h + 16, m->id_map.size(), 8);
    Record rec{f, "graft id map record"};
    rec.put(h, sizeof h);
    for (size_t i = 0; i < m->id_map.size(); i += sizeof buf / 8) {
        size_t c = std::min(m->id_map.size() - i, sizeof buf / 8);
        for (size_t j = 0; j < c; j++) put_le(buf + 8 * j, (uint64_t)m->id_map[i + j], 8);
        rec.put(buf, 8 * c);
    }
    rec.put_checksum();
    return write_graft(m->index, f);
}

constexpr uint32_t kMaxShards = 256;  // as the factory's limit

// GraftIndexShards / GraftIndexReplicas (or FAISS's IndexShards / IndexReplicas) over graft
// indexes: GRFTSHRD, uint32 version 1, uint32 kind (1 shards, 2 replicas), uint32 nshard,
// uint32 0, int64 next id; for shards then per shard int64 nruns and nruns pairs of int64 (local,
// global) id runs (GraftIndexShards.h); uint64 checksum of those bytes; then each shard's graft
// record. FAISS's IndexShards is written with the ids its successive_ids search gives. False
// (nothing written) when a shard is not a graft index.
bool write_shards(const faiss::ThreadedIndex<faiss::Index>* t, FILE* f) {
    auto* gs = dynamic_cast<const graft::GraftIndexShards*>(t);
    auto* fs = dynamic_cast<const faiss::IndexShards*>(t);
    auto* fr = dynamic_cast<const faiss::IndexReplicas*>(t);
    if (!fs && !fr) return false;
    if (t->count() == 0 || (uint32_t)t->count() > kMaxShards) return false;
    for (int i = 0; i < t->count(); i++)
        if (!is_graft_index(t->at(i))) return false;
    REQUIRE(!fs || gs || fs->successive_ids,
            "faiss_graft_write_index: an IndexShards without successive_ids over graft indexes "
            "cannot be written (graft indexes take no ids of their own)");
    unsigned char h[32], buf[16];
    std::memcpy(h, kShardsMagic, 8);
    put_le(h + 8, 1, 4);
    put_le(h + 12, fs ? 1 : 2, 4);
    put_le(h + 16, (uint64_t)t->count(), 4);
    put_le(h + 20, 0, 4);
    put_le(h + 24, gs ? (uint64_t)gs->next_id : fs ? (uint64_t)fs->ntotal : 0, 8);
    Record rec{f, "graft shards record"};
    rec.put(h, sizeof h);
    graft::idx_t start = 0;
    for (int i = 0; fs && i < t->count(); i++) {
        std::vector<graft::IdRun> runs;
        if (gs)
            runs = gs->shard_runs(i);
        else if (t->at(i)->ntotal > 0)
            runs.push_back({0, start});
        start += t->at(i)->ntotal;
        put_le(buf, runs.size(), 8);
        rec.put(buf, 8);
        for (const graft::IdRun& r : runs) {
            put_le(buf, (uint64_t)r.local, 8);
            put_le(buf + 8, (uint64_t)r.global, 8);
            rec.put(buf, 16);
        }
    }
    rec.put_checksum();
    for (int i = 0; i < t->count(); i++) write_graft(t->at(i), f);
    return true;
}

void write_any(const faiss::Index* idx, FILE* f) {
    REQUIRE(idx && f, "faiss_graft_write_index: NULL argument");
    if (write_graft(idx, f)) return;
    if (auto* t = dynamic_cast<const faiss::ThreadedIndex<faiss::Index>*>(idx))
        if (write_shards(t, f)) return;
    if (auto* m = dynamic_cast<const faiss::IndexIDMap*>(idx))
        if (write_idmap(m, f)) return;
    faiss::write_index(idx, f);
}

using FlatPtr = std::unique_ptr<graft_flat, void (*)(graft_flat*)>;

// Reads a GRFTFLAT record onto `device`; *p: the parameters it was loaded with.
FlatPtr load_flat(FILE* f, int device, graft_flat_params* p) {
    graft_flat_params_defaults(p);
    p->cpu_knn = graft_faiss_knn;
    if (device != kAutoDevice) p->device = device;
    graft_flat* loaded = nullptr;
    graft::throw_if_error(graft_flat_read(f, p, &loaded), "faiss_graft_read_index");
    p->metric = graft_flat_metric(loaded);
    return FlatPtr(loaded, graft_flat_free);
}
// An empty GraftIndexFlat shaped like fl, on the CPU (cheap: no device context), to adopt it.
std::unique_ptr<graft::GraftIndexFlat> empty_like(const graft_flat* fl, graft_flat_params p) {
    p.device = -1;
    return std::make_unique<graft::GraftIndexFlat>(graft_flat_d(fl), (faiss::MetricType)p.metric, &p);
}
void adopt(graft::GraftIndexFlat* g, FlatPtr fl, const graft_flat_params& p) {
    graft_flat_free(g->flat);
    g->flat = fl.release();
    g->flat_params = p;
    g->ntotal = graft_flat_ntotal(g->flat);
}

bool is_graft_magic(const unsigned char* magic) {
    return !std::memcmp(magic, GRAFT_FLAT_MAGIC, 8) || !std::memcmp(magic, GRAFT_GRAPH_MAGIC, 8) ||
           !std::memcmp(magic, GRAFT_BANG_MAGIC, 8) || !std::memcmp(magic, kIdMapMagic, 8) ||
           !std::memcmp(magic, kShardsMagic, 8);
}

// The 8-byte magic at f's position, put back (seek, or ungetc on pipes).
void peek_magic(FILE* f, unsigned char* magic) {
    off_t pos = ftello(f);
    size_t got = fread(magic, 1, 8, f);
    REQUIRE(!ferror(f), "faiss_graft_read_index: read error: %s", strerror(errno));
    REQUIRE(got == 8, "faiss_graft_read_index: truncated or empty: the stream ends after %zu bytes", got);
    if (pos < 0 || fseeko(f, pos, SEEK_SET) != 0)
        for (int i = 7; i >= 0; i--)
            REQUIRE(ungetc(magic[i], f) != EOF, "faiss_graft_read_index: cannot push the magic back");
}

// A GRFTFLAT, GRFTGRPH or (legacy) GRFTBANG record (by its magic) as a graft index on `device`;
// nullptr for any other magic. A graph index with the PQ storage comes back as GraftIndexGraphPQ.
std::unique_ptr<faiss::Index> read_graft(FILE* f, const unsigned char* magic, int device) {
    if (!std::memcmp(magic, GRAFT_FLAT_MAGIC, 8)) {
        graft_flat_params p;
        FlatPtr fl = load_flat(f, device, &p);
        auto g = empty_like(fl.get(), p);
        adopt(g.get(), std::move(fl), p);
        return g;
    }
    if (!std::memcmp(magic, GRAFT_GRAPH_MAGIC, 8) || !std::memcmp(magic, GRAFT_BANG_MAGIC, 8)) {
        graft_gindex_params p;
        graft_gindex_params_defaults(&p);
        if (device != kAutoDevice) p.device = device;
        p.pq.kmeans = graft_faiss_kmeans;  // PQ: for training an index that was saved untrained
        p.cpu_knn = graft_faiss_knn;       // the filtered exact path on the CPU
        graft_gindex* loaded = nullptr;
        graft::throw_if_error(graft_gindex_read(f, &p, &loaded), "faiss_graft_read_index");
        if (graft_gindex_storage(loaded)->kind == GRAFT_STORAGE_PQ)
            return std::make_unique<graft::GraftIndexGraphPQ>(loaded);
        return std::make_unique<graft::GraftIndexGraph>(loaded);
    }
    return nullptr;
}

faiss::Index* read_idmap(FILE* f, int device) {
    unsigned char h[24], buf[8 * 1024];
    Record rec{f, "graft id map record"};
    rec.get(h, sizeof h, "header");
    uint32_t version = (uint32_t)get_le(h + 8, 4), kind = (uint32_t)get_le(h + 12, 4);
    int64_t n = (int64_t)get_le(h + 16, 8);
    REQUIRE(version == 1, "graft id map record: format version %u (this graft reads 1)", version);
    REQUIRE(kind == 1 || kind == 2, "graft id map record: unknown kind %u", kind);
    REQUIRE(n >= 0, "graft id map record: %lld ids", (long long)n);
    std::vector<graft::idx_t> ids;  // grown as the bytes arrive: a corrupt n allocates nothing
    for (int64_t i = 0; i < n; i += sizeof buf / 8) {
        size_t c = (size_t)std::min<int64_t>(n - i, sizeof buf / 8);
        rec.get(buf, 8 * c, "ids");
        for (size_t j = 0; j < c; j++) ids.push_back((graft::idx_t)get_le(buf + 8 * j, 8));
    }
    rec.check_checksum();
    unsigned char magic[8];
    peek_magic(f, magic);
    std::unique_ptr<faiss::Index> inner = read_graft(f, magic, device);
    REQUIRE(inner, "graft id map record: not followed by a graft index record");
    REQUIRE(inner->ntotal == n, "graft id map record: %lld ids for %lld vectors", (long long)n,
            (long long)inner->ntotal);
    inner->ntotal = 0;  // IndexIDMap insists on an empty index at construction
    std::unique_ptr<faiss::IndexIDMap> m(kind == 2 ? new faiss::IndexIDMap2(inner.get())
                                                   : new faiss::IndexIDMap(inner.get()));
    inner->ntotal = n;
    m->own_fields = true;
    inner.release();
    m->id_map = std::move(ids);
    m->ntotal = n;
    if (kind == 2) static_cast<faiss::IndexIDMap2*>(m.get())->construct_rev_map();
    return m.release();
}

// Where a read puts graft's indexes: shard i on devices[i % size] (empty: automatic), and how
// many shards (0: as written).
struct Placement {
    std::vector<int> devices;
    int shards = 0;
    int device(int i) const { return devices.empty() ? kAutoDevice : devices[i % devices.size()]; }
};

// An empty graft index like `old` (type, metric, parameters, PQ codebooks) on `device`.
std::unique_ptr<faiss::Index> make_like(const faiss::Index* old, int device) {
    const int dev = device == kAutoDevice ? (graft_gpu_available() ? 0 : -1) : device;
    if (auto* g = dynamic_cast<const graft::GraftIndexFlat*>(old)) {
        graft_flat_params p = g->flat_params;
        p.device = dev;
        return std::make_unique<graft::GraftIndexFlat>(g->d, g->metric_type, &p);
    }
    auto* g = dynamic_cast<const graft::GraftIndexGraph*>(old);
    REQUIRE(g, "faiss_graft_read_index: not a graft index");
    graft_gindex_params p = graft_gindex_get_params(g->gindex);
    p.device = dev;
    if (p.storage != GRAFT_STORAGE_PQ) return std::make_unique<graft::GraftIndexGraph>(g->d, g->metric_type, &p);
    const graft_pq* pq = graft_gindex_pq(g->gindex);
    auto out = std::make_unique<graft::GraftIndexGraphPQ>(g->d, p.pq.M, g->metric_type, &p);
    if (pq) {
        graft::throw_if_error(graft_gindex_set_pq(out->gindex, pq), "faiss_graft_read_index");
        out->is_trained = true;
    }
    return out;
}

// The read shards (or replicas) as the placement asks: as written onto its devices, or their
// vectors in id order spread over a new number of shards (graphs built again; PQ codebooks kept).
faiss::Index* place(std::vector<std::unique_ptr<faiss::Index>> parts,
                    std::vector<std::vector<graft::IdRun>> runs, int64_t next_id, bool replicas,
                    const Placement& pl, bool resharding) {
    const int want = pl.shards ? pl.shards : (int)parts.size();
    const faiss::Index* first = parts[0].get();
    if (!resharding && want == 1) return parts[0].release();
    std::unique_ptr<faiss::ThreadedIndex<faiss::Index>> t;
    if (replicas)
        t.reset(new graft::GraftIndexReplicas(first->d, first->metric_type));
    else
        t.reset(new graft::GraftIndexShards(first->d, first->metric_type));
    graft::faiss_compat::owns_indices(*t) = true;
    if (!resharding) {
        for (auto& p : parts) {
            t->addIndex(p.get());
            p.release();
        }
        if (auto* gs = dynamic_cast<graft::GraftIndexShards*>(t.get())) {
            for (int i = 0; i < gs->count(); i++) gs->set_runs(i, std::move(runs[i]));
            gs->next_id = next_id;
        }
        return t.release();
    }
    // Every vector, at its id (replicas: replica 0 holds them all).
    const int64_t d = first->d;
    int64_t total = replicas ? first->ntotal : 0;
    if (!replicas) {
        for (auto& p : parts) total += p->ntotal;
        REQUIRE(total == next_id,
                "faiss_graft_read_index: the sharded index holds %lld vectors under ids up to %lld "
                "(a shard was removed): it reads back onto its own shard count only",
                (long long)total, (long long)next_id);
    }
    std::vector<float> x((size_t)total * d);
    for (size_t s = 0; s < (replicas ? 1 : parts.size()); s++) {
        const std::vector<graft::IdRun>& r = runs[s];
        for (size_t j = 0; j < r.size(); j++) {
            int64_t end = j + 1 < r.size() ? r[j + 1].local : parts[s]->ntotal;
            for (int64_t l = r[j].local; l < end; l++)
                parts[s]->reconstruct(l, x.data() + (size_t)(r[j].global + l - r[j].local) * d);
        }
    }
    if (want == 1) {
        auto one = make_like(first, pl.device(0));
        if (total) one->add(total, x.data());
        return one.release();
    }
    for (int i = 0; i < want; i++) {
        auto one = make_like(first, pl.device(i));
        t->addIndex(one.get());
        one.release();
    }
    if (total) t->add(total, x.data());
    return t.release();
}

// A GRFTSHRD record (write_shards).
faiss::Index* read_shards(FILE* f, const Placement& pl) {
    unsigned char h[32], buf[16];
    Record rec{f, "graft shards record"};
    rec.get(h, sizeof h, "shards header");
    const uint32_t version = (uint32_t)get_le(h + 8, 4), kind = (uint32_t)get_le(h + 12, 4),
                   nshard = (uint32_t)get_le(h + 16, 4), zero = (uint32_t)get_le(h + 20, 4);
    const int64_t next_id = (int64_t)get_le(h + 24, 8);
    REQUIRE(version == 1, "graft shards record: format version %u (this graft reads 1)", version);
    REQUIRE(kind == 1 || kind == 2, "graft shards record: unknown kind %u", kind);
    REQUIRE(nshard >= 1 && nshard <= kMaxShards && zero == 0 && next_id >= 0,
            "graft shards record: bad header (%u shards, next id %lld)", nshard, (long long)next_id);
    std::vector<std::vector<graft::IdRun>> runs(nshard);
    for (uint32_t s = 0; kind == 1 && s < nshard; s++) {
        rec.get(buf, 8, "id runs");
        const int64_t nruns = (int64_t)get_le(buf, 8);
        REQUIRE(nruns >= 0, "graft shards record: shard %u: %lld id runs", s, (long long)nruns);
        for (int64_t r = 0; r < nruns; r++) {  // grown as the bytes arrive
            rec.get(buf, 16, "id runs");
            graft::IdRun run{(int64_t)get_le(buf, 8), (int64_t)get_le(buf + 8, 8)};
            REQUIRE(run.local >= 0 && run.global >= 0 && run.global < next_id &&
                            (runs[s].empty() || run.local > runs[s].back().local),
                    "graft shards record: shard %u: bad id run (%lld, %lld)", s,
                    (long long)run.local, (long long)run.global);
            runs[s].push_back(run);
        }
    }
    rec.check_checksum();
    const bool resharding = pl.shards != 0 && pl.shards != (int)nshard;
    std::vector<std::unique_ptr<faiss::Index>> parts;
    for (uint32_t s = 0; s < nshard; s++) {
        unsigned char magic[8];
        peek_magic(f, magic);
        // Vectors that move to other shards are read on the CPU: no device work for them.
        std::unique_ptr<faiss::Index> part = read_graft(f, magic, resharding ? -1 : pl.device(s));
        REQUIRE(part, "graft shards record: shard %u is not a graft index record", s);
        if (!parts.empty())
            REQUIRE(part->d == parts[0]->d && part->metric_type == parts[0]->metric_type &&
                            typeid(*part) == typeid(*parts[0]),
                    "graft shards record: shard %u differs from shard 0 (type, d or metric)", s);
        const std::vector<graft::IdRun>& r = runs[s];
        for (size_t j = 0; j < r.size(); j++) {
            int64_t end = j + 1 < r.size() ? r[j + 1].local : part->ntotal;
            REQUIRE(end > r[j].local && r[j].global <= next_id - (end - r[j].local),
                    "graft shards record: shard %u: id run %zu does not fit its %lld vectors and "
                    "the %lld ids",
                    s, j, (long long)part->ntotal, (long long)next_id);
        }
        REQUIRE(kind == 2 || part->ntotal == 0 || (!r.empty() && r[0].local == 0),
                "graft shards record: shard %u: %lld vectors without ids", s, (long long)part->ntotal);
        parts.push_back(std::move(part));
    }
    if (kind == 2) runs[0] = {{0, 0}};
    return place(std::move(parts), std::move(runs), next_id, kind == 2, pl, resharding);
}

// Hands f to the reader its magic names.
faiss::Index* read_any(FILE* f, int io_flags, const Placement& pl) {
    REQUIRE(f, "faiss_graft_read_index: f is NULL");
    unsigned char magic[8];
    peek_magic(f, magic);
    if (!std::memcmp(magic, kIdMapMagic, 8)) return read_idmap(f, pl.device(0));
    if (!std::memcmp(magic, kShardsMagic, 8)) return read_shards(f, pl);
    const bool resharding = pl.shards > 1;
    if (auto g = read_graft(f, magic, resharding ? -1 : pl.device(0))) {
        if (!resharding) return g.release();
        std::vector<std::unique_ptr<faiss::Index>> parts;
        const int64_t n = g->ntotal;
        parts.push_back(std::move(g));
        return place(std::move(parts), {{{0, 0}}}, n, false, pl, true);
    }
    return faiss::read_index(f, io_flags);
}
faiss::Index* read_any(FILE* f, int io_flags, int device) {
    Placement pl;
    if (device != kAutoDevice) pl.devices = {device};
    return read_any(f, io_flags, pl);
}

int read_fname(const char* fname, int io_flags, const Placement& pl, FaissIndex** p_out) {
    try {
        REQUIRE(fname && p_out, "faiss_graft_read_index_fname: NULL argument");
        std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(fname, "rb"), fclose);
        REQUIRE(f, "faiss_graft_read_index_fname: cannot open '%s': %s", fname, strerror(errno));
        unsigned char magic[8];
        size_t got = fread(magic, 1, 8, f.get());
        REQUIRE(!ferror(f.get()), "faiss_graft_read_index_fname: cannot read '%s': %s", fname,
                strerror(errno));
        REQUIRE(got == 8, "faiss_graft_read_index_fname: '%s' holds %zu bytes: truncated or empty, not "
                "an index", fname, got);
        // Not graft's: FAISS's file-name reader, which knows IO_FLAG_MMAP and IO_FLAG_ONDISK_SAME_DIR.
        if (!is_graft_magic(magic)) {
            f.reset();
            *p_out = reinterpret_cast<FaissIndex*>(faiss::read_index(fname, io_flags));
            return 0;
        }
        rewind(f.get());
        *p_out = reinterpret_cast<FaissIndex*>(read_any(f.get(), io_flags, pl));
    }
    CATCH_AND_HANDLE
}

// "gpus=0,1" / "gpus=all" / "cpu" / "gpu=N", optionally with ",shards=N"; NULL or "": as written.
Placement parse_placement(const char* placement) {
    Placement pl;
    if (!placement || !*placement) return pl;
    const std::string desc = placement;
    bool have_dev = false;
    size_t start = 0;
    std::vector<std::string> comps;
    for (;;) {
        size_t c = desc.find(',', start);
        comps.push_back(desc.substr(start, c == std::string::npos ? c : c - start));
        if (c == std::string::npos) break;
        start = c + 1;
    }
    auto number = [](const std::string& t, int* v) {
        if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
            return false;
        *v = std::stoi(t);
        return true;
    };
    const char* usage = "faiss_graft_read_index: placement \"%s\": use \"gpus=all\", \"gpus=0-3\", "
                        "\"gpus=0,1\" (shard i onto the (i mod count)-th GPU listed), \"cpu\" or "
                        "\"gpu=N\", optionally with \",shards=N\" (spread the vectors over N shards; "
                        "their graphs are built again)";
    for (size_t i = 0; i < comps.size(); i++) {
        const std::string& c = comps[i];
        int v = 0;
        if (c.compare(0, 7, "shards=") == 0) {
            REQUIRE(pl.shards == 0 && number(c.substr(7), &v) && v >= 1 && v <= (int)kMaxShards,
                    usage, placement);
            pl.shards = v;
        } else if (c == "cpu" || c.compare(0, 4, "gpu=") == 0) {
            REQUIRE(!have_dev && (c == "cpu" || number(c.substr(4), &v)), usage, placement);
            pl.devices = {c == "cpu" ? -1 : v};
            have_dev = true;
        } else if (c.compare(0, 5, "gpus=") == 0) {
            REQUIRE(!have_dev, usage, placement);
            have_dev = true;
            std::vector<std::string> items{c.substr(5)};
            while (i + 1 < comps.size() && !comps[i + 1].empty() &&
                   comps[i + 1].find_first_not_of("0123456789-") == std::string::npos)
                items.push_back(comps[++i]);
            if (items.size() == 1 && items[0] == "all") {
                int n = graft_gpu_count();
                REQUIRE(n > 0, "faiss_graft_read_index: placement \"%s\": no CUDA device is visible",
                        placement);
                for (int g = 0; g < n; g++) pl.devices.push_back(g);
                continue;
            }
            for (const std::string& it : items) {
                size_t dash = it.find('-');
                int a = -1, b = -1;
                bool ok = dash == std::string::npos
                                  ? number(it, &a) && (b = a, true)
                                  : number(it.substr(0, dash), &a) && number(it.substr(dash + 1), &b) &&
                                            a <= b;
                REQUIRE(ok && pl.devices.size() + (b - a) < kMaxShards, usage, placement);
                for (int g = a; g <= b; g++) pl.devices.push_back(g);
            }
        } else {
            fail(usage, placement);
        }
    }
    return pl;
}

}  // namespace

extern "C" {

int faiss_graft_write_index(const FaissIndex* idx, FILE* f) {
    try {
        write_any(reinterpret_cast<const faiss::Index*>(idx), f);
    }
    CATCH_AND_HANDLE
}

int faiss_graft_write_index_fname(const FaissIndex* idx, const char* fname) {
    try {
        REQUIRE(idx && fname, "faiss_graft_write_index_fname: NULL argument");
        FILE* f = fopen(fname, "wb");
        REQUIRE(f, "faiss_graft_write_index_fname: cannot open '%s': %s", fname, strerror(errno));
        auto drop_partial = [fname] {  // never leave half a record behind
            struct stat st;
            if (stat(fname, &st) == 0 && S_ISREG(st.st_mode)) remove(fname);
        };
        try {
            write_any(reinterpret_cast<const faiss::Index*>(idx), f);
        } catch (...) {
            fclose(f);
            drop_partial();
            throw;
        }
        if (fclose(f) != 0) {
            int e = errno;
            drop_partial();
            fail("faiss_graft_write_index_fname: writing '%s' failed: %s", fname, strerror(e));
        }
    }
    CATCH_AND_HANDLE
}

int faiss_graft_read_index_placed(FILE* f, int io_flags, const char* placement, FaissIndex** p_out) {
    try {
        REQUIRE(p_out, "faiss_graft_read_index: p_out is NULL");
        Placement pl = parse_placement(placement);
        *p_out = reinterpret_cast<FaissIndex*>(read_any(f, io_flags, pl));
    }
    CATCH_AND_HANDLE
}

int faiss_graft_read_index_placed_fname(const char* fname, int io_flags, const char* placement,
                                        FaissIndex** p_out) {
    try {
        Placement pl = parse_placement(placement);
        return read_fname(fname, io_flags, pl, p_out);
    }
    CATCH_AND_HANDLE
}

int faiss_graft_read_index_device(FILE* f, int io_flags, int device, FaissIndex** p_out) {
    try {
        REQUIRE(p_out, "faiss_graft_read_index: p_out is NULL");
        REQUIRE(device >= -1 || device == kAutoDevice, "faiss_graft_read_index: bad device %d", device);
        *p_out = reinterpret_cast<FaissIndex*>(read_any(f, io_flags, device));
    }
    CATCH_AND_HANDLE
}

int faiss_graft_read_index(FILE* f, int io_flags, FaissIndex** p_out) {
    return faiss_graft_read_index_device(f, io_flags, kAutoDevice, p_out);
}

int faiss_graft_read_index_fname(const char* fname, int io_flags, FaissIndex** p_out) {
    return read_fname(fname, io_flags, Placement(), p_out);
}

}  // extern "C"
