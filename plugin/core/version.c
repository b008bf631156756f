#include "graft/graft.h"

#define GRAFT_STR2(x) #x
#define GRAFT_STR(x) GRAFT_STR2(x)
#define GRAFT_VERSION_NUMBERS \
    GRAFT_STR(GRAFT_VERSION_MAJOR) "." GRAFT_STR(GRAFT_VERSION_MINOR) "." GRAFT_STR(GRAFT_VERSION_PATCH)

const char* graft_version_string(void) {
#ifdef GRAFT_HAVE_CUDA
    /* The CUDA architectures the kernels were built for (CMake's list: NN-real is machine code
     * only, a plain NN adds PTX that newer GPUs compile at load time). */
    return GRAFT_VERSION_NUMBERS " (cuda " GRAFT_CUDA_ARCHS ", faiss " GRAFT_FAISS_VERSION_STRING ")";
#else
    return GRAFT_VERSION_NUMBERS " (cpu-only, faiss " GRAFT_FAISS_VERSION_STRING ")";
#endif
}

#include "graft_gpu.h"

int graft_gpu_available(void) { return graft_gpu_device_count() > 0; }
int graft_gpu_count(void) { return graft_gpu_device_count(); }
size_t graft_gpu_memory(int device) { return device >= 0 ? graft_gpu_device_memory(device) : 0; }
