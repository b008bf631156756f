/* Stands in for the CUDA layer when graft is built without CUDA (GRAFT_CUDA=OFF): every entry
 * point of graft_gpu.h reports GRAFT_ENODEVICE, so the core still links and runs on the CPU. */
#include "graft/graft.h"
#include "graft_gpu.h"

#define NOGPU "graft was built without CUDA (GRAFT_CUDA=OFF)"

const char* graft_gpu_last_error(void) { return NOGPU; }
int graft_gpu_device_count(void) { return 0; }
size_t graft_gpu_device_memory(int device) { (void)device; return 0; }
int graft_gpu_ctx_create(int device, size_t budget, graft_gpu_ctx** out) {
    (void)device; (void)budget; (void)out;
    return GRAFT_ENODEVICE;
}
void graft_gpu_ctx_destroy(graft_gpu_ctx* ctx) { (void)ctx; }
void graft_gpu_ctx_set_tf32(graft_gpu_ctx* ctx, int allow) { (void)ctx; (void)allow; }
void graft_gpu_ctx_set_certified_tf32(graft_gpu_ctx* ctx, int on) { (void)ctx; (void)on; }
void graft_gpu_ctx_set_fused(graft_gpu_ctx* ctx, int on) { (void)ctx; (void)on; }
int64_t graft_gpu_ctx_last_fallbacks(const graft_gpu_ctx* ctx) { (void)ctx; return 0; }
int graft_gpu_ctx_last_path(const graft_gpu_ctx* ctx) { (void)ctx; return 0; }
void graft_gpu_ctx_last_band(const graft_gpu_ctx* ctx, int64_t* band, int64_t* second) {
    (void)ctx;
    *band = *second = 0;
}
size_t graft_gpu_ctx_scratch_peak(const graft_gpu_ctx* ctx) { (void)ctx; return 0; }
int graft_gpu_malloc(graft_gpu_ctx* ctx, void** p, size_t n) { (void)ctx; (void)p; (void)n; return GRAFT_ENODEVICE; }
void graft_gpu_free(graft_gpu_ctx* ctx, void* p) { (void)ctx; (void)p; }
int graft_gpu_upload(graft_gpu_ctx* c, void* d, const void* s, size_t n) { (void)c; (void)d; (void)s; (void)n; return GRAFT_ENODEVICE; }
int graft_gpu_download(graft_gpu_ctx* c, void* d, const void* s, size_t n) { (void)c; (void)d; (void)s; (void)n; return GRAFT_ENODEVICE; }
int graft_gpu_copy_d2d(graft_gpu_ctx* c, void* d, const void* s, size_t n) { (void)c; (void)d; (void)s; (void)n; return GRAFT_ENODEVICE; }
int graft_gpu_row_norms(graft_gpu_ctx* c, const float* x, int64_t n, int64_t d, float* o) {
    (void)c; (void)x; (void)n; (void)d; (void)o;
    return GRAFT_ENODEVICE;
}
int graft_gpu_gather_rows(graft_gpu_ctx* c, const float* s, const int32_t* idx, int64_t n, int64_t d,
                          float* t) {
    (void)c; (void)s; (void)idx; (void)n; (void)d; (void)t;
    return GRAFT_ENODEVICE;
}
int graft_gpu_exact_knn(graft_gpu_ctx* c, const graft_gpu_knn_args* a) { (void)c; (void)a; return GRAFT_ENODEVICE; }
int graft_gpu_int8_encode(graft_gpu_ctx* c, const float* x, int64_t n, int64_t d, int shift, int metric,
                          int8_t* x8, int32_t* term) {
    (void)c; (void)x; (void)n; (void)d; (void)shift; (void)metric; (void)x8; (void)term;
    return GRAFT_ENODEVICE;
}
int graft_gpu_fp16_encode(graft_gpu_ctx* c, const float* x, int64_t n, int64_t d, uint16_t* x16,
                          float* scale) {
    (void)c; (void)x; (void)n; (void)d; (void)x16; (void)scale;
    return GRAFT_ENODEVICE;
}
int graft_gpu_select_k(graft_gpu_ctx* c, const float* v, int64_t r, int64_t cols, int64_t ld, int64_t k,
                       float* ov, int64_t* oi) {
    (void)c; (void)v; (void)r; (void)cols; (void)ld; (void)k; (void)ov; (void)oi;
    return GRAFT_ENODEVICE;
}
int graft_gpu_grnnd_build(graft_gpu_ctx* c, const graft_gpu_vectors* x, int64_t n, int64_t d,
                          const graft_gpu_grnnd_params* p, int32_t* g, float* ms) {
    (void)c; (void)x; (void)n; (void)d; (void)p; (void)g; (void)ms;
    return GRAFT_ENODEVICE;
}
size_t graft_gpu_graph_search_scratch(const graft_gpu_search_args* a) {
    (void)a;
    return 0;
}
int graft_gpu_graph_search_walks(int64_t wave, int64_t nq, int64_t k) {
    (void)wave; (void)nq; (void)k;
    return 1;
}
int64_t graft_gpu_graph_search_resident(graft_gpu_ctx* c, const graft_gpu_search_args* a) {
    (void)c; (void)a;
    return 0;
}
int graft_gpu_graph_search(graft_gpu_ctx* c, const graft_gpu_search_args* a, float* ms) {
    (void)c; (void)a; (void)ms;
    return GRAFT_ENODEVICE;
}
int graft_gpu_graph_search_async(graft_gpu_ctx* c, const graft_gpu_search_args* a, graft_gpu_stream s) {
    (void)c; (void)a; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_stream_create(graft_gpu_ctx* c, graft_gpu_stream* out) { (void)c; (void)out; return GRAFT_ENODEVICE; }
void graft_gpu_stream_destroy(graft_gpu_ctx* c, graft_gpu_stream s) { (void)c; (void)s; }
int graft_gpu_stream_sync(graft_gpu_ctx* c, graft_gpu_stream s) { (void)c; (void)s; return GRAFT_ENODEVICE; }
int graft_gpu_event_create(graft_gpu_ctx* c, int timing, graft_gpu_event* out) {
    (void)c; (void)timing; (void)out;
    return GRAFT_ENODEVICE;
}
void graft_gpu_event_destroy(graft_gpu_ctx* c, graft_gpu_event e) { (void)c; (void)e; }
int graft_gpu_event_record(graft_gpu_ctx* c, graft_gpu_event e, graft_gpu_stream s) {
    (void)c; (void)e; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_event_sync(graft_gpu_ctx* c, graft_gpu_event e) { (void)c; (void)e; return GRAFT_ENODEVICE; }
int graft_gpu_stream_wait(graft_gpu_ctx* c, graft_gpu_stream s, graft_gpu_event e) {
    (void)c; (void)s; (void)e;
    return GRAFT_ENODEVICE;
}
int graft_gpu_event_elapsed_ms(graft_gpu_ctx* c, graft_gpu_event a, graft_gpu_event b, float* ms) {
    (void)c; (void)a; (void)b; (void)ms;
    return GRAFT_ENODEVICE;
}
int graft_gpu_host_alloc(graft_gpu_ctx* c, void** out, size_t n) { (void)c; (void)out; (void)n; return GRAFT_ENODEVICE; }
int graft_gpu_host_device_ptr(graft_gpu_ctx* c, void* h, void** out) { (void)c; (void)h; (void)out; return GRAFT_ENODEVICE; }
void graft_gpu_host_free(graft_gpu_ctx* c, void* p) { (void)c; (void)p; }
int graft_gpu_copy_async(graft_gpu_ctx* c, void* d, const void* s, size_t n, graft_gpu_stream st) {
    (void)c; (void)d; (void)s; (void)n; (void)st;
    return GRAFT_ENODEVICE;
}
int graft_gpu_memset_async(graft_gpu_ctx* c, void* d, int v, size_t n, graft_gpu_stream st) {
    (void)c; (void)d; (void)v; (void)n; (void)st;
    return GRAFT_ENODEVICE;
}
void graft_gpu_bang_scratch_size(const graft_gpu_bang_args* a, size_t* per_query, size_t* fixed) {
    (void)a;
    if (per_query) *per_query = 0;
    if (fixed) *fixed = 0;
}
int32_t* graft_gpu_bang_counters(const graft_gpu_bang_args* a) { (void)a; return NULL; }
int graft_gpu_bang_init(graft_gpu_ctx* c, const graft_gpu_bang_args* a, graft_gpu_stream s) {
    (void)c; (void)a; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_bang_step_a(graft_gpu_ctx* c, const graft_gpu_bang_args* a, const graft_gpu_bang_step* st,
                          graft_gpu_stream s) {
    (void)c; (void)a; (void)st; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_bang_step_b(graft_gpu_ctx* c, const graft_gpu_bang_args* a, const graft_gpu_bang_step* st,
                          graft_gpu_stream s) {
    (void)c; (void)a; (void)st; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_bang_store(graft_gpu_ctx* c, const graft_gpu_bang_args* a, const graft_gpu_bang_step* st,
                         graft_gpu_stream s) {
    (void)c; (void)a; (void)st; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_pq_encode(graft_gpu_ctx* c, const float* x, int64_t n, int d, int M, const float* cent,
                        uint8_t* codes, graft_gpu_stream s) {
    (void)c; (void)x; (void)n; (void)d; (void)M; (void)cent; (void)codes; (void)s;
    return GRAFT_ENODEVICE;
}
int graft_gpu_bang_rerank(graft_gpu_ctx* c, const graft_gpu_bang_args* a,
                          const graft_gpu_bang_rerank_args* r, graft_gpu_stream s) {
    (void)c; (void)a; (void)r; (void)s;
    return GRAFT_ENODEVICE;
}
void graft_gpu_fault_inject(long long nth) { (void)nth; }
long long graft_gpu_fault_count(void) { return 0; }
int graft_gpu_mem_free(int device, size_t* free_bytes) { (void)device; (void)free_bytes; return GRAFT_ENODEVICE; }
size_t graft_gpu_graph_insert_scratch(int64_t m, int R, int C) {
    (void)m; (void)R; (void)C;
    return 0;
}
int graft_gpu_graph_insert(graft_gpu_ctx* c, const graft_gpu_insert_args* a, graft_gpu_insert_counts* n) {
    (void)c; (void)a; (void)n;
    return GRAFT_ENODEVICE;
}
