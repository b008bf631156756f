// Exact k-NN benchmark: graft's GPU flat index against its peers in one run.
//
//   bench_exact --out results.jsonl [--commit C] [--run-id R] [--quick | --focus] [--dense-sift DIR]
//               [--smooth-sift DIR]
//
// --focus: only k = 10 and 1024 on dense-SIFT (DIR), random-uniform and random-uint8 1M x 128, and
// random-uniform 1M x 960 (the exact paths' targets, against the same peers). GRAFT_EXACT_PATHS
// (digits of graft/flat.h's exact_path, e.g. "45") keeps only those GraftFlat paths, and
// GRAFT_EXACT_SETS (names, e.g. "dense-sift1m,dup-sift1m") only those data sets.
// Two sets with many equal or near-duplicate vectors (issue 36), k = 10: with --dense-sift,
// "dup-sift1m", grown from it by graft_test_duplicates (tests/testutil.h: clusters of exact and
// +-1 copies of its rows, one of 32768 rows, two of 16384, ... down to 2, then single rows, 49% of
// the base in clusters; half the queries near a base row's cluster seed, half its real queries);
// with --smooth-sift DIR, "smooth-sift1m": dense SIFT of smooth digital art, duplicates kept
// (scripts/make_dense_sift.py --smooth). Records of the certified paths give the share of queries
// searched in FP32 (fp32_fallback_frac) and, on the fused path, of those answered by re-ranking
// their ambiguous band from the list (band_frac) or after a second fused pass (second_frac).
//
// Peers in the same process: FAISS GPU GpuIndexFlatL2 (when built with GRAFT_BENCH_FAISS_GPU),
// FAISS CPU IndexFlatL2 on all cores, graft's CPU reference. The torch peer is
// bench/studies/torch_exact.py (same shapes, same JSON fields). Every search is timed from host arrays
// to host arrays (query upload and result download included, as FAISS GPU does), after a warm-up,
// as the median of repeats. The floors printed beside it: the FP32 GEMM at the rate cuBLAS reaches
// on this device, and the bytes of the distance matrix (written once, read once) at the measured
// copy bandwidth. Integer data (dense-SIFT, random-uint8) also runs the exact INT8 path, whose
// floor is cuBLAS's INT8 GEMM (int32 output) at this shape plus the same distance matrix bytes
// (its int32 dot products are as large as FP32 distances); every record names the path that ran.
#include <cstdint>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench_common.h"
#include <faiss/IndexFlat.h>
#ifdef GRAFT_BENCH_FAISS_GPU
#include <faiss/gpu/GpuIndexFlat.h>
#include <faiss/gpu/StandardGpuResources.h>
#endif

#include "graft/dataset.h"
#include "graft/flat.h"
#include "graft_gpu.h"
extern "C" {
#include "testutil.h"  // graft_test_duplicates
}

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double median_time(int reps, F&& f) {
    f();  // warm-up
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        f();
        t.push_back(now_s() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void random_fill(std::vector<float>& x, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : x) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v = (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

struct Out {
    FILE* f;
    std::string run_id, date, commit, device, dataset = "random-uniform";
    void record(const char* system, const char* family, const char* index, int64_t n, int64_t d,
                int64_t nq, int64_t k, const std::string& params, double qps, double latency_ms,
                double recall, size_t gpu_peak, int threads) {
        fprintf(f,
                "{\"run_id\":\"%s\",\"date\":\"%s\",\"commit\":\"%s\",\"device\":\"%s\",\"bench\":\"exact\","
                "\"system\":\"%s\",\"family\":\"%s\",\"index\":\"%s\",\"dataset\":\"%s\","
                "\"n\":%lld,\"d\":%lld,\"nq\":%lld,\"k\":%lld,\"metric\":\"L2\",\"params\":%s,\"qps\":%.1f,"
                "\"latency_ms\":%.3f",
                run_id.c_str(), date.c_str(), commit.c_str(), device.c_str(), system, family, index,
                dataset.c_str(), (long long)n, (long long)d, (long long)nq, (long long)k, params.c_str(), qps, latency_ms);
        if (recall >= 0) fprintf(f, ",\"recall\":%.4f", recall);
        if (gpu_peak) fprintf(f, ",\"gpu_peak_bytes\":%zu", gpu_peak);
        if (threads) fprintf(f, ",\"threads\":%d", threads);
        fprintf(f, "}\n");
        fflush(f);
    }
};

#define CK(x)                                                                            \
    do {                                                                                 \
        auto e_ = (x);                                                                   \
        if (e_ != 0) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)e_); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

// Median device time of f() in seconds, with CUDA events, first of 6 runs as warm-up.
template <class F>
double event_median_s(F&& f) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int i = 0; i < 6; i++) {
        cudaEventRecord(e0);
        f();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t;
        cudaEventElapsedTime(&t, e0, e1);
        if (i) ms.push_back(t);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e-3;
}

// cuBLAS SGEMM rate (FLOP/s) for C(m x n) = A(k x m)^T B(k x n), median of 5; tf32: on TF32
// tensor cores (CUBLAS_TF32_TENSOR_OP_MATH), as the certified path runs it.
double sgemm_rate(int64_t m, int64_t n, int64_t kd, bool tf32 = false) {
    float *A, *B, *C;
    CK(cudaMalloc(&A, sizeof(float) * m * kd));
    CK(cudaMalloc(&B, sizeof(float) * n * kd));
    CK(cudaMalloc(&C, sizeof(float) * m * n));
    CK(cudaMemset(A, 0x3c, sizeof(float) * m * kd));  // ~0.01: no zeros, no overflow
    CK(cudaMemset(B, 0x3c, sizeof(float) * n * kd));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    CK(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    float alpha = -2.f, beta = 0.f;
    double t = event_median_s([&] {
        CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)kd, &alpha, A, (int)kd, B,
                       (int)kd, &beta, C, (int)m));
    });
    cublasDestroy(h);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    return 2.0 * m * n * kd / t;
}

// cuBLAS GemmEx rate (ops/s) for the same shapes as sgemm_rate, as a path runs it: INT8 (int8
// inputs, int32 accumulation and output) or FP16 (FP16 inputs and output, FP32 accumulation, no
// reduced-precision split-K); 0 when cuBLAS refuses the shape.
double gemmex_rate(int64_t m, int64_t n, int64_t kd, bool fp16) {
    const size_t in = fp16 ? 2 : 1, out = fp16 ? 2 : 4;
    void *A, *B, *C;
    CK(cudaMalloc(&A, in * m * kd));
    CK(cudaMalloc(&B, in * n * kd));
    CK(cudaMalloc(&C, out * m * n));
    CK(cudaMemset(A, fp16 ? 0x1c : 3, in * m * kd));  // FP16 0x1c1c ~ 0.004: no zeros, no overflow
    CK(cudaMemset(B, fp16 ? 0x1c : 5, in * n * kd));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    if (fp16)
        CK(cublasSetMathMode(h, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    const int32_t i_one = 1, i_zero = 0;
    const float f_one = 1.f, f_zero = 0.f;
    const cudaDataType t_in = fp16 ? CUDA_R_16F : CUDA_R_8I, t_out = fp16 ? CUDA_R_16F : CUDA_R_32I;
    auto gemm = [&] {
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)kd,
                            fp16 ? (const void*)&f_one : (const void*)&i_one, A, t_in, (int)kd, B, t_in, (int)kd,
                            fp16 ? (const void*)&f_zero : (const void*)&i_zero, C, t_out, (int)m,
                            fp16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
    };
    double rate = 0;
    cublasStatus_t st = gemm();
    if (st == CUBLAS_STATUS_SUCCESS) rate = 2.0 * m * n * kd / event_median_s([&] { CK(gemm()); });
    else printf("   %s GEMM %lld x %lld x %lld refused by cuBLAS (status %d)\n", fp16 ? "FP16" : "INT8",
                (long long)m, (long long)n, (long long)kd, (int)st);
    cublasDestroy(h);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    return rate;
}
double i8gemm_rate(int64_t m, int64_t n, int64_t kd) { return gemmex_rate(m, n, kd, false); }

bool uint8_valued(const std::vector<float>& x) {
    for (float v : x)
        if (!(v >= 0.f && v <= 255.f) || v != (float)(int)v) return false;
    return true;
}

// Dense INT8 tensor-core rate from NVIDIA's datasheet (ops/s; without sparsity), 0 when unknown:
// H100 / H200 SXM 1979 TOPS, H100 PCIe 1513.
double datasheet_i8_rate(const char* name) {
    const std::string n = name;
    if (n.find("H100") == std::string::npos && n.find("H200") == std::string::npos) return 0;
    return n.find("PCIe") != std::string::npos ? 1513e12 : 1979e12;
}

const char* path_name(int path) {
    return path == GRAFT_EXACT_INT8               ? "int8"
           : path == GRAFT_EXACT_TF32_CERTIFIED   ? "tf32-certified"
           : path == GRAFT_EXACT_FP16_CERTIFIED   ? "fp16-certified"
           : path == GRAFT_EXACT_FP16_FUSED       ? "fp16-fused"
                                                  : "fp32";
}

// Device-to-device copy bandwidth, bytes read + written per second.
double copy_bandwidth() {
    size_t bytes = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    double t = event_median_s([&] { CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    cudaFree(a);
    cudaFree(b);
    return 2.0 * bytes / t;
}

// Selection alone: graft_gpu_select_k over a rows x cols device matrix, seconds per row.
double select_seconds_per_row(int64_t rows, int64_t cols, int64_t k) {
    graft_gpu_ctx* ctx;
    CK(graft_gpu_ctx_create(0, (size_t)6 << 30, &ctx));
    std::vector<float> h((size_t)rows * cols);
    random_fill(h, 77);
    float* dv;
    float* dD;
    int64_t* dI;
    CK(cudaMalloc(&dv, sizeof(float) * h.size()));
    CK(cudaMalloc(&dD, sizeof(float) * rows * k));
    CK(cudaMalloc(&dI, sizeof(int64_t) * rows * k));
    CK(cudaMemcpy(dv, h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice));
    double t = median_time(5, [&] { CK(graft_gpu_select_k(ctx, dv, rows, cols, cols, k, dD, dI)); });
    cudaFree(dv);
    cudaFree(dD);
    cudaFree(dI);
    graft_gpu_ctx_destroy(ctx);
    return t / rows;
}

// Where graft's ids differ from FAISS IndexFlat's (nq x k each), the ranks whose difference a
// tie does not explain: FAISS's distance at that rank differs from graft's, or from the exact
// distance (double) of graft's id, by more than FP32 rounding of the GEMM formula,
// 1e-5 (||q||^2 + max ||b||^2) (as tests/gpu/test_gpu_exact.c).
int64_t not_ties(const std::vector<float>& xb, const std::vector<float>& xq, int64_t d, int64_t nq, int64_t k,
                 const float* Dg, const int64_t* Ig, const float* Df, const int64_t* If) {
    double bmax = 0;
    for (size_t i = 0; i < xb.size(); i += d) {
        double n2 = 0;
        for (int64_t j = 0; j < d; j++) n2 += (double)xb[i + j] * xb[i + j];
        bmax = std::max(bmax, n2);
    }
    int64_t bad = 0;
    for (int64_t q = 0; q < nq; q++) {
        const float* x = xq.data() + q * d;
        double q2 = 0;
        for (int64_t j = 0; j < d; j++) q2 += (double)x[j] * x[j];
        const double tol = 1e-5 * (q2 + bmax) + 1e-6;
        for (int64_t r = q * k; r < (q + 1) * k; r++) {
            if (Ig[r] == If[r]) continue;
            double e = 0;
            for (int64_t j = 0; Ig[r] >= 0 && j < d; j++) {
                const double t = (double)x[j] - xb[Ig[r] * d + j];
                e += t * t;
            }
            bad += Ig[r] < 0 || std::fabs((double)Dg[r] - Df[r]) > tol || std::fabs(e - Df[r]) > tol;
        }
    }
    return bad;
}

}  // namespace

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // a deadline's kill keeps every line printed so far
    std::string out_path = "bench_exact.jsonl", commit = "unknown", run_id, dense, smooth;
    bool quick = false, focus = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--out" && i + 1 < argc) out_path = argv[++i];
        else if (a == "--commit" && i + 1 < argc) commit = argv[++i];
        else if (a == "--run-id" && i + 1 < argc) run_id = argv[++i];
        else if (a == "--quick") quick = true;
        else if (a == "--focus") focus = true;
        else if (a == "--dense-sift" && i + 1 < argc) dense = argv[++i];
        else if (a == "--smooth-sift" && i + 1 < argc) smooth = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--out F.jsonl] [--commit C] [--run-id R] [--quick | --focus] [--dense-sift DIR] "
                    "[--smooth-sift DIR]\n", argv[0]);
            return 2;
        }
    }
    if (!graft_gpu_available()) {
        fprintf(stderr, "bench_exact: no CUDA device\n");
        return 1;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    char date[32];
    time_t tt = time(nullptr);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
    if (run_id.empty()) run_id = std::string("exact-") + date;
    Out out{fopen(out_path.c_str(), "a"), run_id, date, commit, prop.name};
    if (!out.f) {
        perror(out_path.c_str());
        return 1;
    }
    const int threads = omp_get_max_threads();
    printf("device: %s (%d SMs), host threads: %d, commit %s\n", prop.name, prop.multiProcessorCount,
           threads, commit.c_str());

    // Ceilings measured here, not datasheet numbers.
    const double bw = copy_bandwidth();
    const double peak_sgemm = sgemm_rate(8192, 8192, 8192);
    const double peak_i8 = i8gemm_rate(8192, 8192, 8192);
    printf("measured: copy %.2f TB/s (read+write), SGEMM 8192^3 %.1f TFLOP/s, INT8 GEMM 8192^3 %.0f TOPS\n",
           bw / 1e12, peak_sgemm / 1e12, peak_i8 / 1e12);

    // dataset "" is random-uniform; "random-uint8" uniform integers 0..255 (the INT8 path's data
    // without SIFT's structure); "dense-sift1m" reads DIR/base.u8bin and DIR/query.u8bin,
    // "smooth-sift1m" the same of --smooth-sift's DIR; "dup-sift1m" is grown from dense-sift1m.
    struct Shape { int64_t nb, d, nq; std::vector<int64_t> ks; std::string dataset; };
    std::vector<Shape> shapes = {{1000000, 128, 10000, {1, 10, 100, 1024, 2048, 4096}, ""},
                                 {1000000, 128, 10000, {1, 10, 100, 1024, 4096}, "random-uint8"},
                                 {1000000, 960, 1000, {10, 1024}, ""}};
    if (focus) shapes = {{1000000, 128, 10000, {10, 1024}, ""},
                         {1000000, 960, 1000, {10, 1024}, ""},
                         {1000000, 128, 10000, {10, 1024}, "random-uint8"}};
    if (!smooth.empty()) shapes.insert(shapes.begin(), Shape{1000000, 128, 10000, {10}, "smooth-sift1m"});
    if (!dense.empty()) {
        shapes.insert(shapes.begin(), Shape{1000000, 128, 10000, {10}, "dup-sift1m"});
        shapes.insert(shapes.begin(), Shape{1000000, 128, 10000, {10, 1024}, "dense-sift1m"});
    }
    if (quick) shapes = {{200000, 128, 2000, {10, 1024}, ""}, {200000, 128, 2000, {10, 1024}, "random-uint8"}};
    // GRAFT_EXACT_SETS=dense-sift1m,dup-sift1m (say) keeps those data sets alone (random-uniform
    // names both uniform shapes).
    if (const char* only = getenv("GRAFT_EXACT_SETS")) {
        const std::string list = std::string(",") + only + ",";
        std::vector<Shape> keep;
        for (const Shape& sh : shapes)
            if (list.find("," + (sh.dataset.empty() ? std::string("random-uniform") : sh.dataset) + ",") != std::string::npos)
                keep.push_back(sh);
        shapes = keep;
    }
    printf("\n%-10s %-8s %6s %6s %6s %12s %10s  %s\n", "system", "index", "d", "nq", "k", "QPS", "ms",
           "notes");
    for (const Shape& s : shapes) {
        std::vector<float> xb((size_t)s.nb * s.d), xq((size_t)s.nq * s.d);
        out.dataset = s.dataset.empty() ? "random-uniform" : s.dataset;
        if (s.dataset.empty()) {
            random_fill(xb, 1);
            random_fill(xq, 2);
        } else if (s.dataset == "random-uint8") {
            random_fill(xb, 3);
            random_fill(xq, 4);
            for (auto* x : {&xb, &xq})
                for (float& v : *x) v = std::min(255.f, std::floor(v * 256.f));
        } else {
            const std::string& dir = s.dataset == "smooth-sift1m" ? smooth : dense;
            float *b = nullptr, *q = nullptr;
            int64_t nb, nq, d, dq;
            CK(graft_dataset_read_f32((dir + "/base.u8bin").c_str(), 0, s.nb, &b, &nb, &d));
            CK(graft_dataset_read_f32((dir + "/query.u8bin").c_str(), 0, s.nq, &q, &nq, &dq));
            if (nb != s.nb || nq != s.nq || d != s.d || dq != s.d) {
                fprintf(stderr, "bench_exact: %s holds %lld x %lld base and %lld x %lld query vectors, want %lld x %lld "
                        "and %lld\n", dir.c_str(), (long long)nb, (long long)d, (long long)nq, (long long)dq,
                        (long long)s.nb, (long long)s.d, (long long)s.nq);
                return 1;
            }
            if (s.dataset == "dup-sift1m") {
                const int64_t rows = graft_test_duplicates(b, nb, q, nq, d, s.nb, 32768, s.nq, xb.data(), xq.data());
                CK(rows != s.nb);
            } else {
                std::copy(b, b + nb * d, xb.begin());
                std::copy(q, q + nq * dq, xq.begin());
            }
            free(b);
            free(q);
        }
        const double flops = 2.0 * s.nq * s.nb * s.d;
        double shape_rate = 0;
        for (int64_t n : {256, 512, 1024, 2048}) {
            double r = sgemm_rate(s.nb, n, s.d);
            printf("   SGEMM %lld x %lld x %lld: %.1f TFLOP/s\n", (long long)s.nb, (long long)n, (long long)s.d, r / 1e12);
            shape_rate = std::max(shape_rate, r);
        }
        const double gemm_floor = flops / shape_rate;
        double tf32_rate = 0;
        for (int64_t n : {512, 1024, 2048}) tf32_rate = std::max(tf32_rate, sgemm_rate(s.nb, n, s.d, true));
        const double tf32_floor = flops / tf32_rate;
        const double dist_bytes_floor = 2.0 * 4.0 * s.nq * s.nb / bw;
        // Certified FP16: the FP16 GEMM at the path's padded inner dimension (the H100 SXM
        // datasheet's dense 989 TFLOP/s if cuBLAS refuses), and an FP16 distance matrix.
        double f16_rate = 0;
        for (int64_t n : {512, 1024, 2048})
            f16_rate = std::max(f16_rate, gemmex_rate(s.nb, n, graft_gpu_fp16_row_halves(s.d), true));
        const double f16_floor = flops / (f16_rate > 0 ? f16_rate : 989e12);
        const double f16_dist_bytes_floor = 2.0 * 2.0 * s.nq * s.nb / bw;
        // Fused FP16 writes no matrix: its floor is the tensor cores' dense FP16 peak (the H100
        // SXM datasheet's 989 TFLOP/s), as cuBLAS's measured rate above includes its output.
        const double f16_peak_floor = flops / 989e12;
        // INT8: the same padded inner dimension as the path (graft_gpu_int8_row_bytes).
        const bool integer = uint8_valued(xb) && uint8_valued(xq);
        double i8_rate = 0;
        if (integer)
            for (int64_t n : {512, 1024, 2048}) i8_rate = std::max(i8_rate, i8gemm_rate(s.nb, n, graft_gpu_int8_row_bytes(s.d)));
        const double i8_floor = i8_rate > 0 ? flops / i8_rate : 0;
        const double i8_peak_floor = peak_i8 > 0 ? flops / peak_i8 : 0;
        const double i8_sheet = datasheet_i8_rate(prop.name), i8_sheet_floor = i8_sheet > 0 ? flops / i8_sheet : 0;
        if (integer)
            printf("-- integer data: INT8 GEMM at this shape %.0f TOPS -> %.2f ms (at the 8192^3 rate %.2f ms, at "
                   "the datasheet's dense %.0f TOPS %.2f ms); INT8 path floor = that + distance matrix write+read "
                   "= %.1f ms\n", i8_rate / 1e12, i8_floor * 1e3, i8_peak_floor * 1e3, i8_sheet / 1e12,
                   i8_sheet_floor * 1e3, (i8_floor + dist_bytes_floor) * 1e3);
        printf("-- %s nb=%lld d=%lld nq=%lld: best SGEMM at this shape %.1f TFLOP/s -> GEMM floor %.1f ms "
               "(%.0f QPS); TF32 %.1f TFLOP/s -> %.1f ms; distance matrix write+read %.1f ms; FP16 %.1f "
               "TFLOP/s -> %.1f ms, its FP16 distance matrix %.1f ms\n",
               out.dataset.c_str(), (long long)s.nb, (long long)s.d, (long long)s.nq, shape_rate / 1e12,
               gemm_floor * 1e3, s.nq / gemm_floor, tf32_rate / 1e12, tf32_floor * 1e3, dist_bytes_floor * 1e3,
               f16_rate / 1e12, f16_floor * 1e3, f16_dist_bytes_floor * 1e3);
        char params[512];
        int pn = snprintf(params, sizeof params, "{\"gemm_floor_ms\":%.2f,\"sgemm_tflops_shape\":%.2f,\"tf32_floor_ms\":%.2f,"
                          "\"tf32_tflops_shape\":%.2f,\"dist_rw_floor_ms\":%.2f,\"fp16_floor_ms\":%.2f,"
                          "\"fp16_tflops_shape\":%.2f,\"fp16_dist_rw_floor_ms\":%.2f",
                          gemm_floor * 1e3, shape_rate / 1e12, tf32_floor * 1e3, tf32_rate / 1e12, dist_bytes_floor * 1e3,
                          f16_floor * 1e3, f16_rate / 1e12, f16_dist_bytes_floor * 1e3);
        if (integer)
            pn += snprintf(params + pn, sizeof params - pn, ",\"i8_floor_ms\":%.2f,\"i8_tops_shape\":%.1f,"
                           "\"i8_tops_8192\":%.1f,\"i8_peak_floor_ms\":%.2f,\"i8_datasheet_floor_ms\":%.2f",
                           i8_floor * 1e3, i8_rate / 1e12, peak_i8 / 1e12, i8_peak_floor * 1e3, i8_sheet_floor * 1e3);
        snprintf(params + pn, sizeof params - pn, "}");
        out.record("reference", "flat", "cuBLAS SGEMM floor", s.nb, s.d, s.nq, 0, params,
                   s.nq / gemm_floor, gemm_floor * 1e3, -1, 0, 0);

        // The exact paths, 8 GiB of scratch: FP32 GEMM, certified TF32 (its floor: the TF32 GEMM
        // plus the distance matrix's write and read), certified FP16 (the FP16 GEMM plus half
        // those bytes), fused FP16 (the FP16 GEMM alone: no distance matrix) and on integer data
        // INT8 (its floor: the INT8 GEMM plus the FP32 bytes).
        std::vector<int> paths = {GRAFT_EXACT_FP32, GRAFT_EXACT_TF32_CERTIFIED, GRAFT_EXACT_FP16_CERTIFIED,
                                  GRAFT_EXACT_FP16_FUSED};
        if (integer) paths.push_back(GRAFT_EXACT_INT8);
        // GRAFT_EXACT_PATHS=4,5 (say) keeps those paths alone, for a quick comparison.
        if (const char* only = getenv("GRAFT_EXACT_PATHS")) {
            std::vector<int> keep;
            for (int p : paths)
                if (strchr(only, '0' + p)) keep.push_back(p);
            paths = keep;
        }
        for (int path : paths) {
            const size_t budget_gb = 8;
            graft_flat_params p;
            graft_flat_params_defaults(&p);
            p.device = 0;
            p.memory_budget = budget_gb << 30;
            p.exact_path = path;
            graft_flat* g;
            CK(graft_flat_new(s.d, &p, &g));
            CK(graft_flat_add(g, s.nb, xb.data()));
            const bool fp32 = path == GRAFT_EXACT_FP32;
            const double floor_s = fp32                                ? gemm_floor
                                   : path == GRAFT_EXACT_INT8            ? i8_floor + dist_bytes_floor
                                   : path == GRAFT_EXACT_FP16_CERTIFIED  ? f16_floor + f16_dist_bytes_floor
                                   : path == GRAFT_EXACT_FP16_FUSED      ? f16_peak_floor
                                                                         : tf32_floor + dist_bytes_floor;
            const size_t codes = path == GRAFT_EXACT_INT8 ? (size_t)s.nb * (graft_gpu_int8_row_bytes(s.d) + 4)
                                 : path == GRAFT_EXACT_FP16_CERTIFIED || path == GRAFT_EXACT_FP16_FUSED
                                     ? (size_t)s.nb * (graft_gpu_fp16_row_halves(s.d) * 2 + 4)
                                     : 0;
            for (int64_t k : s.ks) {
                std::vector<float> D((size_t)s.nq * k);
                std::vector<int64_t> I((size_t)s.nq * k);
                graft_flat_exact_counts c0, c1;
                graft_flat_get_exact_counts(g, &c0);
                double t = median_time(5, [&] { CK(graft_flat_search(g, s.nq, xq.data(), k, D.data(), I.data())); });
                graft_flat_get_exact_counts(g, &c1);
                // Shares of the queries of all 6 searches (median_time's warm-up and 5 timed).
                const double nqs = (double)std::max<int64_t>(1, c1.queries - c0.queries);
                const double fallback_frac = (double)(c1.fp32_fallbacks - c0.fp32_fallbacks) / nqs;
                const double band_frac = (double)(c1.band_reranks - c0.band_reranks) / nqs;
                const double second_frac = (double)(c1.second_passes - c0.second_passes) / nqs;
                // The path that ran (graft_flat_last_path), not the one asked for.
                const int ran_path = graft_flat_last_path(g);
                const char* ran = path_name(ran_path);
                snprintf(params, sizeof params,
                         "{\"memory_budget_gb\":%zu,\"path\":\"%s\",\"fp32_fallback_frac\":%.4f,\"band_frac\":%.4f,"
                         "\"second_frac\":%.4f,\"floor_ms\":%.2f}",
                         budget_gb, ran, fallback_frac, band_frac, second_frac, floor_s * 1e3);
                out.record("graft", "flat", "GraftFlat", s.nb, s.d, s.nq, k, params, s.nq / t, t * 1e3,
                           -1, graft_flat_gpu_scratch_peak(g) + (size_t)s.nb * (s.d + 1) * 4 + codes, 0);
                char notes[160] = "";
                if (ran_path == GRAFT_EXACT_FP16_FUSED)
                    snprintf(notes, sizeof notes, ", to fp32 %.4f, band re-rank %.4f, second pass %.4f", fallback_frac,
                             band_frac, second_frac);
                else if (path != GRAFT_EXACT_FP32 && path != GRAFT_EXACT_INT8)
                    snprintf(notes, sizeof notes, ", fp32 fallbacks %.4f", fallback_frac);
                printf("%-10s %-8s %6lld %6lld %6lld %12.0f %10.2f  %s ran, %.2fx its floor (%.1f ms)%s\n", "graft",
                       ran, (long long)s.d, (long long)s.nq, (long long)k, s.nq / t, t * 1e3, ran, t / floor_s,
                       floor_s * 1e3, notes);
            }
            graft_flat_free(g);
        }
        // Selection alone on 1024 rows of nb (the part graft adds on top of the GEMM).
        if (s.d == 128 && !focus && s.dataset.empty())
            for (int64_t k : s.ks) {
                double per_row = select_seconds_per_row(1024, s.nb, k);
                printf("%-10s %-8s %6s %6lld %6lld %12.0f %10.2f  select only (1024 rows of %lld), "
                       "row read floor %.2f ms per 10k rows\n",
                       "graft", "qms", "-", (long long)s.nq, (long long)k, 1.0 / per_row, per_row * s.nq * 1e3,
                       (long long)s.nb, 4.0 * s.nb * s.nq / bw * 1e3);
                snprintf(params, sizeof params, "{\"rows\":1024,\"cols\":%lld}", (long long)s.nb);
                out.record("graft", "select", "qms_select", s.nb, 0, s.nq, k, params, 1.0 / per_row,
                           per_row * s.nq * 1e3, -1, 0, 0);
            }

        // Agreement reference for recall: graft at k=10 on the first 200 queries vs FAISS CPU.
        const int64_t nq_cpu = std::min<int64_t>(s.nq, s.d == 128 ? 1000 : 200);
        {
            faiss::IndexFlatL2 cpu(s.d);
            cpu.add(s.nb, xb.data());
            for (int64_t k : {(int64_t)10, (int64_t)100}) {
                if (std::find(s.ks.begin(), s.ks.end(), k) == s.ks.end()) continue;
                std::vector<float> D((size_t)nq_cpu * k), Dg((size_t)nq_cpu * k);
                std::vector<faiss::Index::idx_t> I((size_t)nq_cpu * k);
                std::vector<int64_t> Ig((size_t)nq_cpu * k);
                double t = median_time(2, [&] { cpu.search(nq_cpu, xq.data(), k, D.data(), I.data()); });
                graft_flat* g;
                graft_flat_params p;
                graft_flat_params_defaults(&p);
                CK(graft_flat_new(s.d, &p, &g));
                CK(graft_flat_add(g, s.nb, xb.data()));
                CK(graft_flat_search(g, nq_cpu, xq.data(), k, Dg.data(), Ig.data()));
                graft_flat_free(g);
                double rec = bench::recall_at_k(Ig.data(), reinterpret_cast<int64_t*>(I.data()), nq_cpu, k);
                // graft (auto path) is exact: its ids equal FAISS's but for ties.
                const int64_t bad = not_ties(xb, xq, s.d, nq_cpu, k, Dg.data(), Ig.data(), D.data(),
                                             reinterpret_cast<int64_t*>(I.data()));
                snprintf(params, sizeof params, "{\"graft_agreement\":%.4f,\"graft_diff_not_ties\":%lld}", rec,
                         (long long)bad);
                out.record("faiss-cpu", "flat", "Flat", s.nb, s.d, nq_cpu, k, params, nq_cpu / t, t * 1e3,
                           -1, 0, threads);
                printf("%-10s %-8s %6lld %6lld %6lld %12.0f %10.2f  %d threads; graft GPU agrees: recall %.4f, "
                       "%lld differences not ties%s\n",
                       "faiss-cpu", "Flat", (long long)s.d, (long long)nq_cpu, (long long)k, nq_cpu / t,
                       t * 1e3, threads, rec, (long long)bad, bad ? "  NOT EXACT" : "");
            }
        }
        {
            const int64_t nq_ref = s.d == 128 ? 64 : 16, k = 10;
            std::vector<float> D((size_t)nq_ref * k);
            std::vector<int64_t> I((size_t)nq_ref * k);
            double t = median_time(1, [&] {
                CK(graft_knn_cpu(xb.data(), s.nb, xq.data(), nq_ref, s.d, k, GRAFT_METRIC_L2, -1, D.data(), I.data()));
            });
            out.record("reference", "flat", "graft_knn_cpu", s.nb, s.d, nq_ref, k, "{}", nq_ref / t, t * 1e3, -1, 0, threads);
            printf("%-10s %-8s %6lld %6lld %6lld %12.1f %10.2f  graft CPU reference (double), %d threads\n",
                   "reference", "cpu", (long long)s.d, (long long)nq_ref, (long long)k, nq_ref / t, t * 1e3, threads);
        }
#ifdef GRAFT_BENCH_FAISS_GPU
        {
            faiss::gpu::StandardGpuResources res;
            faiss::gpu::GpuIndexFlatL2 gidx(&res, (int)s.d);
            gidx.add(s.nb, xb.data());
            for (int64_t k : s.ks) {
                std::vector<float> D((size_t)s.nq * k);
                std::vector<faiss::Index::idx_t> I((size_t)s.nq * k);
                try {
                    double t = median_time(5, [&] { gidx.search(s.nq, xq.data(), k, D.data(), I.data()); });
                    out.record("faiss-gpu", "flat", "GpuIndexFlatL2", s.nb, s.d, s.nq, k, "{}", s.nq / t,
                               t * 1e3, -1, 0, 0);
                    printf("%-10s %-8s %6lld %6lld %6lld %12.0f %10.2f\n", "faiss-gpu", "GpuFlat",
                           (long long)s.d, (long long)s.nq, (long long)k, s.nq / t, t * 1e3);
                } catch (const std::exception& e) {
                    printf("%-10s %-8s %6lld %6lld %6lld %12s %10s  refused: %.80s\n", "faiss-gpu", "GpuFlat",
                           (long long)s.d, (long long)s.nq, (long long)k, "-", "-", e.what());
                }
            }
        }
#else
        printf("faiss-gpu: not built into this benchmark (configure with GRAFT_FAISS_GPU_DIR)\n");
#endif
    }
    fclose(out.f);
    return 0;
}
