// graft_groundtruth: exact k-NN ground truth with FAISS's flat (brute-force) index.
//
//   graft_groundtruth BASE QUERY K OUT.ibin [--metric l2|ip] [--threads N] [--batch B]
//
// BASE and QUERY are any vector files graft reads (.fvecs/.bvecs/.ivecs/.fbin/.u8bin/.ibin), converted
// to float32. The answer is written as .ibin (int32 n, int32 k, then n*k int32 base ids, row-major),
// nearest first; ties are in FAISS's own order. Queries are searched in batches of B (default 4096)
// so that the distance scratch stays bounded. Exits 1 on any error, with the message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include <omp.h>

#include <faiss/IndexFlat.h>

#include "graft/dataset.h"
#include "graft/graft.h"

#include <chrono>

namespace {

double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s BASE QUERY K OUT.ibin [--metric l2|ip] [--threads N] [--batch B]\n",
                 argv0);
    return 1;
}

bool parse_i64(const char* s, long long* v) {
    char* end = nullptr;
    long long x = std::strtoll(s, &end, 10);
    if (end == s || *end != '\0') return false;
    *v = x;
    return true;
}

struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) return usage(argv[0]);
    const char* base_path = argv[1];
    const char* query_path = argv[2];
    const char* out_path = argv[4];
    long long k = 0, threads = 0, batch = 4096;
    bool ip = false;
    if (!parse_i64(argv[3], &k) || k <= 0 || k > 1000000) {
        std::fprintf(stderr, "graft_groundtruth: bad K '%s'\n", argv[3]);
        return 1;
    }
    for (int i = 5; i < argc; ++i) {
        if (i + 1 >= argc) return usage(argv[0]);
        const char* opt = argv[i];
        const char* val = argv[++i];
        if (std::strcmp(opt, "--metric") == 0) {
            if (std::strcmp(val, "l2") == 0) ip = false;
            else if (std::strcmp(val, "ip") == 0) ip = true;
            else { std::fprintf(stderr, "graft_groundtruth: bad metric '%s'\n", val); return 1; }
        } else if (std::strcmp(opt, "--threads") == 0) {
            if (!parse_i64(val, &threads) || threads <= 0) {
                std::fprintf(stderr, "graft_groundtruth: bad --threads '%s'\n", val);
                return 1;
            }
        } else if (std::strcmp(opt, "--batch") == 0) {
            if (!parse_i64(val, &batch) || batch <= 0) {
                std::fprintf(stderr, "graft_groundtruth: bad --batch '%s'\n", val);
                return 1;
            }
        } else {
            return usage(argv[0]);
        }
    }
    if (threads > 0) omp_set_num_threads((int)threads);

    const double t0 = now_s();
    float* raw = nullptr;
    int64_t n = 0, d = 0, nq = 0, dq = 0;
    if (graft_dataset_read_f32(base_path, 0, -1, &raw, &n, &d) != GRAFT_OK) {
        std::fprintf(stderr, "graft_groundtruth: %s\n", graft_last_error());
        return 1;
    }
    std::unique_ptr<float, FreeDeleter> base(raw);
    raw = nullptr;
    if (graft_dataset_read_f32(query_path, 0, -1, &raw, &nq, &dq) != GRAFT_OK) {
        std::fprintf(stderr, "graft_groundtruth: %s\n", graft_last_error());
        return 1;
    }
    std::unique_ptr<float, FreeDeleter> query(raw);
    if (d != dq) {
        std::fprintf(stderr, "graft_groundtruth: base has d=%lld but queries have d=%lld\n",
                     (long long)d, (long long)dq);
        return 1;
    }
    if (n <= 0 || nq <= 0) {
        std::fprintf(stderr, "graft_groundtruth: empty base or query set\n");
        return 1;
    }
    if (k > n) {
        std::fprintf(stderr, "graft_groundtruth: K=%lld exceeds the base size %lld\n", k, (long long)n);
        return 1;
    }
    if (n > INT32_MAX || nq > INT32_MAX) {
        std::fprintf(stderr, "graft_groundtruth: ids do not fit in int32 (n=%lld)\n", (long long)n);
        return 1;
    }
    const double t_load = now_s() - t0;
    std::printf("graft_groundtruth: base %s n=%lld d=%lld, queries %s nq=%lld, k=%lld, metric=%s, "
                "threads=%d\n",
                base_path, (long long)n, (long long)d, query_path, (long long)nq, k, ip ? "ip" : "l2",
                omp_get_max_threads());
    std::fflush(stdout);

    std::vector<int32_t> labels((size_t)nq * (size_t)k);
    double t_search = 0.0;
    try {
        std::unique_ptr<faiss::IndexFlat> index;
        if (ip) index.reset(new faiss::IndexFlatIP(d));
        else index.reset(new faiss::IndexFlatL2(d));
        index->add(n, base.get());
        base.reset();  // the index holds its own copy

        const double t1 = now_s();
        const int64_t bs = batch < nq ? (int64_t)batch : nq;
        std::vector<float> D((size_t)bs * (size_t)k);
        std::vector<int64_t> I((size_t)bs * (size_t)k);
        for (int64_t q0 = 0; q0 < nq; q0 += bs) {
            const int64_t m = (nq - q0 < bs) ? nq - q0 : bs;
            index->search(m, query.get() + (size_t)q0 * (size_t)d, k, D.data(), I.data());
            for (size_t j = 0; j < (size_t)m * (size_t)k; ++j) {
                if (I[j] < 0 || I[j] >= n) {
                    std::fprintf(stderr, "graft_groundtruth: FAISS returned id %lld for query %lld\n",
                                 (long long)I[j], (long long)(q0 + (int64_t)(j / (size_t)k)));
                    return 1;
                }
                labels[(size_t)q0 * (size_t)k + j] = (int32_t)I[j];
            }
        }
        t_search = now_s() - t1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "graft_groundtruth: FAISS: %s\n", e.what());
        return 1;
    }

    if (graft_dataset_write(out_path, labels.data(), nq, k, GRAFT_DTYPE_I32) != GRAFT_OK) {
        std::fprintf(stderr, "graft_groundtruth: %s\n", graft_last_error());
        return 1;
    }
    std::printf("graft_groundtruth: wrote %s (%lld x %lld int32); load %.2f s, search %.2f s "
                "(%.0f queries/s), total %.2f s\n",
                out_path, (long long)nq, k, t_load, t_search, t_search > 0 ? nq / t_search : 0.0,
                now_s() - t0);
    return 0;
}
