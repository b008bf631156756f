/* Internal: the sorted candidate lists of the CPU graph searches (plugin/graph/graph.c, plugin/graph/bang.c). */
#ifndef GRAFT_WORKLIST_H
#define GRAFT_WORKLIST_H
#include <stdint.h>

typedef struct {
    float d;
    int32_t id;
    int32_t expanded;
} cand;

/* The searches' order: distance, then smaller id. */
static inline int cand_less(float d, int32_t id, cand b) { return d < b.d || (d == b.d && id < b.id); }

/* Inserts (du, u) into the sorted list a[0..*size) of capacity cap unless it would fall off the
 * end; returns its position, or cap when it was not inserted. */
static inline int list_insert(cand* a, int* size, int cap, float du, int32_t u) {
    if (*size == cap && !cand_less(du, u, a[cap - 1])) return cap;
    int pos = *size < cap ? (*size)++ : cap - 1;
    for (; pos > 0 && cand_less(du, u, a[pos - 1]); pos--) a[pos] = a[pos - 1];
    a[pos] = (cand){du, u, 0};
    return pos;
}

/* Bit id of a FAISS IDSelectorBitmap-layout filter (NULL = everything allowed). */
static inline int is_allowed(const uint8_t* allowed, int64_t id) {
    return !allowed || (allowed[id >> 3] >> (id & 7) & 1);
}

#endif
