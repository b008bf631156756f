// The walk's memory floor: recorded walks replayed with every load independent (walk_replay.h).
#include "walk_replay.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

namespace bench {
namespace {

constexpr int kWarps = 4;     // a block: four warps, a query each (as the walk's blocks)
constexpr int kIds = 256;     // ids staged in shared memory at a time, a warp

struct Args {
    const float4* x;      // vectors, dw chunks a row
    const int4* graph;    // rows, rw chunks a row
    const float4* q;      // queries
    const int64_t *row_off, *vec_off;
    const int32_t *rows, *vecs;
    int64_t nq;
    int dw, rw;
    float* out;        // a query's squared distances, summed
    uint32_t* out_xor;  // the words of its rows and of its vectors, XORed: 2 a query
};

// The chunks of items lo..hi of a list (ids into a table of cw 16-byte chunks a row), 32 lanes
// over them in item-major order (a warp reads consecutive chunks of a row: coalesced, as the
// walk's teams read), U loads a lane issued before any is used. use(chunk, value).
template <int U, class T, class Use>
__device__ void gather(const T* __restrict__ table, int cw, const int32_t* __restrict__ list, int64_t lo,
                       int64_t hi, int32_t* ids, int lane, Use&& use) {
    for (int64_t b0 = lo; b0 < hi; b0 += kIds) {
        const int nb = (int)(hi - b0 < kIds ? hi - b0 : kIds);
        __syncwarp();
        for (int i = lane; i < nb; i += 32) ids[i] = list[b0 + i];
        __syncwarp();
        const int total = nb * cw;
        int c = 0, ch = lane;  // this lane's item and chunk
        while (ch >= cw) ch -= cw, c++;
        for (int e0 = 0; e0 < total; e0 += 32 * U) {
            T v[U];
            int at[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                at[u] = -1;
                v[u] = T{};
                if (e0 + 32 * u + lane < total) {  // a predicated load: past the end, no address read
                    at[u] = ch;
                    v[u] = __ldg(table + (int64_t)ids[c] * cw + ch);
                }
                ch += 32;
                while (ch >= cw) ch -= cw, c++;
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (at[u] >= 0) use(at[u], v[u]);
        }
    }
}

template <int U>
__global__ void __launch_bounds__(kWarps * 32) replay_kernel(Args A) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t qi = (int64_t)blockIdx.x * kWarps + warp;
    if (qi >= A.nq) return;
    float4* q = reinterpret_cast<float4*>(smem + (size_t)warp * (A.dw * 16 + kIds * 4));
    int32_t* ids = reinterpret_cast<int32_t*>(q + A.dw);
    for (int c = lane; c < A.dw; c += 32) q[c] = A.q[qi * A.dw + c];
    unsigned bits = 0;
    gather<U>(A.graph, A.rw, A.rows, A.row_off[qi], A.row_off[qi + 1], ids, lane,
           [&](int, int4 w) { bits ^= (unsigned)(w.x ^ w.y ^ w.z ^ w.w); });
    float acc = 0.f;
    unsigned vbits = 0;
    gather<U>(A.x, A.dw, A.vecs, A.vec_off[qi], A.vec_off[qi + 1], ids, lane, [&](int ch, float4 v) {
        vbits ^= __float_as_uint(v.x) ^ __float_as_uint(v.y) ^ __float_as_uint(v.z) ^ __float_as_uint(v.w);
        const float4 a = q[ch];
        const float dx = a.x - v.x, dy = a.y - v.y, dz = a.z - v.z, dd = a.w - v.w;
        acc = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, fmaf(dd, dd, acc))));
    });
    for (int o = 16; o > 0; o >>= 1) {
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
        bits ^= __shfl_xor_sync(0xffffffffu, bits, o);
        vbits ^= __shfl_xor_sync(0xffffffffu, vbits, o);
    }
    if (lane == 0) A.out[qi] = acc, A.out_xor[2 * qi] = bits, A.out_xor[2 * qi + 1] = vbits;
}

bool ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    printf("walk replay: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

// A device copy of count Ts (16 bytes more: a valid allocation for an empty list).
template <class T>
bool put(T** dev, const T* host, size_t count) {
    return ok(cudaMalloc(dev, count * sizeof(T) + 16), "cudaMalloc") &&
           ok(cudaMemcpy(*dev, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
}

}  // namespace

bool WalkReplay::upload(const float* x, int64_t n, int64_t d, const int32_t* graph, int R) {
    if (d % 4 || R % 4) {
        printf("walk replay: d = %lld and R = %d must be multiples of 4\n", (long long)d, R);
        return false;
    }
    n_ = n, d_ = d, R_ = R;
    return put(&x_, x, (size_t)n * d) && put(&graph_, graph, (size_t)n * R);
}

bool WalkReplay::time(const float* xq, int64_t nq, const WalkTraces& t, int in_flight, int blocks_per_sm, int reps,
                      double* ms, std::vector<float>* sums, std::vector<uint32_t>* xors) {
    void (*kernel)(Args) = in_flight == 1 ? replay_kernel<1> : in_flight == 2 ? replay_kernel<2>
                         : in_flight == 4 ? replay_kernel<4> : in_flight == 8 ? replay_kernel<8> : nullptr;
    if (!kernel) {
        printf("walk replay: in_flight = %d, not 1, 2, 4 or 8\n", in_flight);
        return false;
    }
    float* q = nullptr;
    float* out = nullptr;
    uint32_t* out_xor = nullptr;
    int64_t *row_off = nullptr, *vec_off = nullptr;
    int32_t *rows = nullptr, *vecs = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    int per_sm = 0, reserved = 0, optin = 0;
    bool good = put(&q, xq, (size_t)nq * d_) && put(&row_off, t.row_off.data(), t.row_off.size()) &&
                put(&vec_off, t.vec_off.data(), t.vec_off.size()) && put(&rows, t.rows.data(), t.rows.size()) &&
                put(&vecs, t.vecs.data(), t.vecs.size()) && ok(cudaMalloc(&out, nq * sizeof(float)), "cudaMalloc") &&
                ok(cudaMalloc(&out_xor, 2 * nq * sizeof(uint32_t)), "cudaMalloc") &&
                ok(cudaEventCreate(&e0), "event") && ok(cudaEventCreate(&e1), "event") &&
                ok(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0), "attribute") &&
                ok(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, 0), "attribute") &&
                ok(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), "attribute");
    const Args A{reinterpret_cast<const float4*>(x_), reinterpret_cast<const int4*>(graph_),
                 reinterpret_cast<const float4*>(q), row_off, vec_off, rows, vecs, nq, (int)(d_ / 4), R_ / 4, out, out_xor};
    size_t smem = (size_t)kWarps * (A.dw * 16 + kIds * 4);
    // At most blocks_per_sm blocks a multiprocessor (the walk's 5: its register bound): shared
    // memory padded so that no more fit.
    if (blocks_per_sm > 0 && per_sm / blocks_per_sm - reserved > (int)smem)
        smem = (size_t)std::min(per_sm / blocks_per_sm - reserved, optin);
    const unsigned blocks = (unsigned)((nq + kWarps - 1) / kWarps);
    if (good && smem > 48 * 1024)
        good = ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "smem");
    std::vector<double> times;
    for (int r = -1; good && r < reps; r++) {
        cudaEventRecord(e0);
        kernel<<<blocks, kWarps * 32, smem>>>(A);
        cudaEventRecord(e1);
        float t_ms = 0;
        good = ok(cudaGetLastError(), "replay_kernel") && ok(cudaEventSynchronize(e1), "replay_kernel") &&
               ok(cudaEventElapsedTime(&t_ms, e0, e1), "event");
        if (r >= 0) times.push_back(t_ms);
    }
    if (good) {
        std::sort(times.begin(), times.end());
        *ms = times[times.size() / 2];
        sums->resize(nq);
        xors->resize(2 * nq);
        good = ok(cudaMemcpy(sums->data(), out, nq * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
               ok(cudaMemcpy(xors->data(), out_xor, 2 * nq * sizeof(uint32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
    cudaFree(q), cudaFree(out), cudaFree(out_xor), cudaFree(row_off), cudaFree(vec_off), cudaFree(rows), cudaFree(vecs);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return good;
}

WalkReplay::~WalkReplay() {
    cudaFree(x_);
    cudaFree(graph_);
}

}  // namespace bench
