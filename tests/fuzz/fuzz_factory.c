/* libFuzzer target: the factory-string and parameter parsers (faiss_graft_index_factory,
 * faiss_graft_set_param / get_param). Input: "description\nname\nvalue", the first byte giving
 * d (1..128) and the metric. Only descriptions naming a graft index are built ("Graft" inside);
 * the others go to faiss_index_factory unchanged, FAISS's own parser. */
#include <string.h>

#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/error_c.h>

#include "fuzz_common.h"
#include "graft_faiss_c.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2 || size > 512) return 0;
    int d = 1 + (data[0] & 0x7f);
    FaissMetricType metric = data[0] & 0x80 ? METRIC_INNER_PRODUCT : METRIC_L2;
    char text[520];
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char* name = strchr(text, '\n');
    if (name) *name++ = '\0';
    char* value = name ? strchr(name, '\n') : NULL;
    if (value) *value++ = '\0';
    if (!strstr(text, "Graft")) return 0;
    /* Not on a GPU: a fuzz build has no CUDA, and ",gpu=N" must fail cleanly there. */
    FaissIndex* idx = NULL;
    if (faiss_graft_index_factory(&idx, d, text, metric) != 0) {
        if (idx) abort();
        const char* e = faiss_get_last_error();
        if (!e || !e[0]) abort();
        return 0;
    }
    if (faiss_Index_d(idx) != d) abort();
    if (name) {
        double v = value ? strtod(value, NULL) : 1.0, got;
        if (faiss_graft_set_param(idx, name, v) != 0 && !faiss_get_last_error()[0]) abort();
        if (faiss_graft_get_param(idx, name, &got) != 0 && !faiss_get_last_error()[0]) abort();
    }
    faiss_Index_free(idx);
    return 0;
}
