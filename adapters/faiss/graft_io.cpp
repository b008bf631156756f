// Index I/O for faiss_c (graft_faiss_c.h): graft indexes in graft's records (GRFTFLAT in graft/io.h,
// GRFTGRPH in graft/graph_index.h, GRFTBANG in graft/bang_index.h, and the GRFTIDMP id-map record
// below), every other index through faiss::write_index / read_index.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <faiss/IndexIDMap.h>
#include <faiss/c_api/macros_impl.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>

#include "GraftIndexFlat.h"
#include "GraftIndexGraph.h"
#include "GraftIndexGraphPQ.h"
#include "graft/io.h"
#include "graft_faiss_c.h"

namespace {

const char kIdMapMagic[] = "GRFTIDMP";

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
void put(FILE* f, const void* p, size_t n, uint64_t& h) {
    h = graft_io_checksum(h, p, n);
    REQUIRE(fwrite(p, 1, n, f) == n, "graft id map record: write failed: %s", strerror(errno));
}
void get(FILE* f, void* p, size_t n, uint64_t& h, const char* what) {
    size_t got = fread(p, 1, n, f);
    REQUIRE(got == n, "graft id map record: %s in the %s", ferror(f) ? "read error" : "truncated", what);
    h = graft_io_checksum(h, p, n);
}

bool is_graft_index(const faiss::Index* idx) {
    return dynamic_cast<const graft::GraftIndexFlat*>(idx) ||
           dynamic_cast<const graft::GraftIndexGraph*>(idx) ||
           dynamic_cast<const graft::GraftIndexGraphPQ*>(idx);
}

// Writes idx as its graft record (GRFTFLAT, GRFTGRPH, GRFTBANG); false when idx is not a graft
// index.
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
    if (auto* g = dynamic_cast<const graft::GraftIndexGraphPQ*>(idx)) {
        graft::throw_if_error(graft_bindex_write(g->bindex, f), fn);
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
    uint64_t sum = GRAFT_IO_CHECKSUM_INIT;
    put(f, h, sizeof h, sum);
    for (size_t i = 0; i < m->id_map.size(); i += sizeof buf / 8) {
        size_t c = std::min(m->id_map.size() - i, sizeof buf / 8);
        for (size_t j = 0; j < c; j++) put_le(buf + 8 * j, (uint64_t)m->id_map[i + j], 8);
        put(f, buf, 8 * c, sum);
    }
    put_le(buf, sum, 8);
    put(f, buf, 8, sum);
    return write_graft(m->index, f);
}

void write_any(const faiss::Index* idx, FILE* f) {
    REQUIRE(idx && f, "faiss_graft_write_index: NULL argument");
    if (write_graft(idx, f)) return;
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
           !std::memcmp(magic, GRAFT_BANG_MAGIC, 8) || !std::memcmp(magic, kIdMapMagic, 8);
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

// A GRFTFLAT, GRFTGRPH or GRFTBANG record (by its magic) as a graft index on `device`; nullptr
// for any other magic.
std::unique_ptr<faiss::Index> read_graft(FILE* f, const unsigned char* magic, int device) {
    if (!std::memcmp(magic, GRAFT_FLAT_MAGIC, 8)) {
        graft_flat_params p;
        FlatPtr fl = load_flat(f, device, &p);
        auto g = empty_like(fl.get(), p);
        adopt(g.get(), std::move(fl), p);
        return g;
    }
    if (!std::memcmp(magic, GRAFT_GRAPH_MAGIC, 8)) {
        graft_gindex_params p;
        graft_gindex_params_defaults(&p);
        if (device != kAutoDevice) p.device = device;
        graft_gindex* loaded = nullptr;
        graft::throw_if_error(graft_gindex_read(f, &p, &loaded), "faiss_graft_read_index");
        return std::make_unique<graft::GraftIndexGraph>(loaded);
    }
    if (!std::memcmp(magic, GRAFT_BANG_MAGIC, 8)) {
        graft_bindex_params p;
        graft_bindex_params_defaults(&p);
        if (device != kAutoDevice) p.device = device;
        p.pq.kmeans = graft_faiss_kmeans;  // for training an index that was saved untrained
        graft_bindex* loaded = nullptr;
        graft::throw_if_error(graft_bindex_read(f, &p, &loaded), "faiss_graft_read_index");
        return std::make_unique<graft::GraftIndexGraphPQ>(loaded);
    }
    return nullptr;
}

faiss::Index* read_idmap(FILE* f, int device) {
    unsigned char h[24], buf[8 * 1024];
    uint64_t sum = GRAFT_IO_CHECKSUM_INIT;
    get(f, h, sizeof h, sum, "header");
    uint32_t version = (uint32_t)get_le(h + 8, 4), kind = (uint32_t)get_le(h + 12, 4);
    int64_t n = (int64_t)get_le(h + 16, 8);
    REQUIRE(version == 1, "graft id map record: format version %u (this graft reads 1)", version);
    REQUIRE(kind == 1 || kind == 2, "graft id map record: unknown kind %u", kind);
    REQUIRE(n >= 0, "graft id map record: %lld ids", (long long)n);
    std::vector<faiss::Index::idx_t> ids;  // grown as the bytes arrive: a corrupt n allocates nothing
    for (int64_t i = 0; i < n; i += sizeof buf / 8) {
        size_t c = (size_t)std::min<int64_t>(n - i, sizeof buf / 8);
        get(f, buf, 8 * c, sum, "ids");
        for (size_t j = 0; j < c; j++) ids.push_back((faiss::Index::idx_t)get_le(buf + 8 * j, 8));
    }
    uint64_t want = sum;
    get(f, buf, 8, sum, "checksum");
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (graft_fuzzing_ignore_checksums) want = get_le(buf, 8);
#endif
    REQUIRE(get_le(buf, 8) == want, "graft id map record: checksum mismatch: the record is corrupt");
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

// Hands f to the reader its magic names.
faiss::Index* read_any(FILE* f, int io_flags, int device) {
    REQUIRE(f, "faiss_graft_read_index: f is NULL");
    unsigned char magic[8];
    peek_magic(f, magic);
    if (!std::memcmp(magic, kIdMapMagic, 8)) return read_idmap(f, device);
    if (auto g = read_graft(f, magic, device)) return g.release();
    return faiss::read_index(f, io_flags);
}

int read_fname(const char* fname, int io_flags, int device, FaissIndex** p_out) {
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
        *p_out = reinterpret_cast<FaissIndex*>(read_any(f.get(), io_flags, device));
    }
    CATCH_AND_HANDLE
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
    return read_fname(fname, io_flags, kAutoDevice, p_out);
}

}  // extern "C"
