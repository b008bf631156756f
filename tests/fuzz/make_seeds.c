/* Writes the seed corpora of graft's fuzz targets into DIR/<target>/: small valid files made by
 * graft's own writers from real data (the first 300 sift5k vectors cut to 8 dimensions, three
 * Fashion-MNIST images), so that the fuzzers start from inputs that pass every check. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "graft/dataset.h"
#include "graft/graph.h"
#include "graft_faiss_c.h"
#include "testutil.h"

enum { N = 300, D = 8 };
static char dir[4096];

static void die(const char* what) {
    fprintf(stderr, "make_seeds: %s: %s | %s\n", what, graft_last_error(), faiss_get_last_error());
    exit(1);
}

/* DIR/target/name = prefix (plen bytes) + the bytes of file `src`. */
static void seed(const char* target, const char* name, const void* prefix, size_t plen,
                 const char* src) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) die(path);
    snprintf(path, sizeof path, "%s/%s/%s", dir, target, name);
    FILE* out = fopen(path, "wb");
    if (!out) die(path);
    fwrite(prefix, 1, plen, out);
    if (src) {
        FILE* in = fopen(src, "rb");
        if (!in) die(src);
        char buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, got, out);
        fclose(in);
    }
    fclose(out);
}

static const char* tmp(const char* name) {
    static char p[8192];
    snprintf(p, sizeof p, "%s/tmp-%s", dir, name);
    return p;
}

static void index_seed(const char* name, const char* desc, const float* x, int train) {
    FaissIndex* idx;
    if (faiss_graft_index_factory(&idx, D, desc, METRIC_L2) != 0) die(desc);
    if (train && faiss_Index_train(idx, N, x) != 0) die("train");
    idx_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = 1000 + 7 * i;  // id maps get ids of their own
    if ((strncmp(desc, "IDMap", 5) == 0 ? faiss_Index_add_with_ids(idx, N, x, ids)
                                        : faiss_Index_add(idx, N, x)) != 0)
        die("add");
    if (faiss_graft_write_index_fname(idx, tmp(name)) != 0) die("write");
    seed("read_index", name, "", 0, tmp(name));
    remove(tmp(name));
    faiss_Index_free(idx);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    mkdir(dir, 0755);
    graft_test_sift s;
    graft_test_load_sift5k(&s);
    float* x = malloc(sizeof(float) * N * D);
    int32_t* xi = malloc(sizeof(int32_t) * N * D);
    uint8_t* xu = malloc(N * D);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++) {
            x[i * D + j] = s.xb[(size_t)i * s.d + j];
            xi[i * D + j] = (int32_t)x[i * D + j];
            xu[i * D + j] = (uint8_t)x[i * D + j];
        }

    /* dataset: selector byte (fuzz_dataset.c's kExt order) + the file. 40 rows keep them small. */
    static const char* const ext[] = {"fvecs", "ivecs", "bvecs", "fbin", "ibin", "u8bin"};
    const void* src[] = {x, xi, xu, x, xi, xu};
    const graft_dtype dt[] = {GRAFT_DTYPE_F32, GRAFT_DTYPE_I32, GRAFT_DTYPE_U8,
                              GRAFT_DTYPE_F32, GRAFT_DTYPE_I32, GRAFT_DTYPE_U8};
    for (unsigned char i = 0; i < 6; i++) {
        char f[64];
        snprintf(f, sizeof f, "seed.%s", ext[i]);
        if (graft_dataset_write(tmp(f), src[i], 40, D, dt[i]) != GRAFT_OK) die(f);
        seed("dataset", ext[i], &i, 1, tmp(f));
        remove(tmp(f));
    }

    /* fmnist: three real images as IDX, plain and gzip'd; first byte 0 = all rows. */
    float* img;
    int64_t nimg, dimg;
    char fm[4096];
    snprintf(fm, sizeof fm, "%s", "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
    if (graft_fmnist_read(fm, 3, &img, &nimg, &dimg) != GRAFT_OK) die(fm);
    unsigned char hdr[16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28};
    unsigned char px[3 * 784];
    for (int i = 0; i < 3 * 784; i++) px[i] = (unsigned char)img[i];
    free(img);
    FILE* p = fopen(tmp("idx"), "wb");
    fwrite(hdr, 1, 16, p), fwrite(px, 1, sizeof px, p), fclose(p);
    unsigned char zero = 0, two = 2;
    seed("fmnist", "plain", &zero, 1, tmp("idx"));
    seed("fmnist", "plain-2rows", &two, 1, tmp("idx"));
    gzFile g = gzopen(tmp("idx.gz"), "wb");
    gzwrite(g, hdr, 16), gzwrite(g, px, sizeof px), gzclose(g);
    seed("fmnist", "gzip", &zero, 1, tmp("idx.gz"));
    remove(tmp("idx")), remove(tmp("idx.gz"));

    /* vamana: an RNN-Descent graph of the 300 vectors; the first two bytes are n = 300. */
    graft_rnnd_params rp;
    graft_rnnd_params_defaults(&rp);
    rp.R = 8;
    graft_graph gr;
    if (graft_rnnd_build_cpu(x, N, D, &rp, &gr) != GRAFT_OK) die("rnnd");
    if (graft_vamana_write(tmp("vamana"), &gr) != GRAFT_OK) die("vamana");
    unsigned char n16[2] = {N & 0xff, N >> 8};
    seed("vamana", "rnnd8", n16, 2, tmp("vamana"));
    remove(tmp("vamana"));
    graft_graph_free(&gr);

    /* read_index: one record of each kind, on the CPU. */
    index_seed("flat", "GraftFlat,cpu", x, 0);
    index_seed("graph", "GraftGraph8,cpu", x, 0);
    index_seed("graph-fp16", "GraftGraph8,FP16,cpu", x, 0);
    index_seed("graph-sq8", "GraftGraph8,SQ8,cpu", x, 1);
    index_seed("bang", "GraftGraph8,PQ2,cpu", x, 1);
    index_seed("idmap", "IDMap,GraftGraph8,cpu", x, 0);
    index_seed("idmap2-flat", "IDMap2,GraftFlat,cpu", x, 0);
    index_seed("shards-flat", "GraftFlat,shards=2,cpu", x, 0);
    index_seed("shards-graph", "GraftGraph8,shards=3,cpu", x, 0);
    index_seed("replicas-bang", "GraftGraph8,PQ2,shards=2,replicas,cpu", x, 1);

    /* factory: descriptions from graft_faiss_c.h, each with a parameter it knows. */
    static const char* const fac[] = {
        "GraftFlat,cpu\nallow_tf32\n1",           "GraftFlat\ndevice_budget_mb\n64",
        "GraftGraph32,cpu,L=96\nL\n48",           "GraftGraph,cpu\nrho\n0.5",
        "GraftGraph,PQ4,cpu\nrerank\n1",          "GraftGraph32,PQ16x8,cpu,L=32\nmode\n2",
        "GraftGraph,PQ8,ooc,budget=64\ngpu_budget\n1e6", "IDMap2,GraftGraph,cpu\nprobes\n2",
        "PCA16,GraftFlat,cpu\nverbose\n1",        "OPQ4_16,GraftGraph16,PQ4,cpu\nbloom_log2\n12",
        "L2norm,GraftFlat,RFlat\nT1\n2",          "GraftFlat,gpu=3\n\n",
        "GraftGraph,SQ8,cpu,L=32\nrerank\n10",    "GraftGraph16,FP16,cpu\nstorage\n1",
        "GraftGraph,shards=2,cpu\nL\n32",        "IDMap,GraftFlat,gpus=0,0\n\n",
    };
    for (unsigned i = 0; i < sizeof fac / sizeof *fac; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%02u", i);
        unsigned char pre = (unsigned char)((i % 2 ? 0x80 : 0) | 127);  // d = 128, L2 or IP
        char path[8192];
        snprintf(path, sizeof path, "%s/factory", dir);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/factory/%s", dir, name);
        FILE* f = fopen(path, "wb");
        fwrite(&pre, 1, 1, f), fwrite(fac[i], 1, strlen(fac[i]), f), fclose(f);
    }
    free(x), free(xi), free(xu);
    graft_test_free_sift(&s);
    printf("make_seeds: corpora in %s\n", dir);
    return 0;
}
