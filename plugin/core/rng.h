/* Internal: the seeded generator of every random draw in the core (initial graphs, samples). */
#ifndef GRAFT_RNG_H
#define GRAFT_RNG_H
#include <stdint.h>

/* SplitMix64 (Steele et al.): advances *s and returns the next 64 random bits. */
static inline uint64_t graft_splitmix64(uint64_t* s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
