// The walk's memory floor (issue 47): recorded walks replayed with every load independent.
//
// A GPU walk waits, each step, for a graph row and then for its fresh neighbours' vectors. The
// replay reads exactly the rows and vectors that the CPU reference's walks read (the same graph,
// the same L, probes 1; recorded by the reference itself, plugin/graph/walk_trace.h), query by
// query, a warp a query, but with no step waiting on another: every address is known before the
// first load, up to 8 16-byte loads a lane in flight, as many warps resident as fit, no worklist
// upkeep and no per-candidate reduction. No walk that reads these bytes can take less time on the
// same GPU, so walk kernel time / replay time bounds what overlapping a walk's memory round trips
// (several CTAs a query, several walks a warp, prefetch) can gain at that L. The replay held to
// fewer loads in flight or fewer resident warps (the walk's own limits) shows which of the two
// the walk lacks.
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

// The walks of nq queries: query q expanded rows[row_off[q] .. row_off[q + 1]) (vertex ids, in
// order) and computed the distances of vecs[vec_off[q] .. vec_off[q + 1]).
struct WalkTraces {
    std::vector<int64_t> row_off, vec_off;
    std::vector<int32_t> rows, vecs;
    // The host's reading, a query: the distances it computed, summed; its rows' R words and its
    // vectors' d words (float bits) XORed.
    std::vector<double> sum;
    std::vector<uint32_t> xor_rows, xor_vecs;
};

// The base vectors and the graph on device 0, for replays.
class WalkReplay {
public:
    // x: n x d floats (d % 4 == 0), graph: n x R ids (R % 4 == 0). False (printed) on a CUDA error.
    bool upload(const float* x, int64_t n, int64_t d, const int32_t* graph, int R);
    // The replay kernel's time for the nq queries xq (nq x d) and their walks t: the median of
    // reps timed launches after one untimed; *ms. in_flight: 16-byte loads a lane issues before
    // using any (1, 2, 4, 8; the floor: 8); blocks_per_sm: at most that many blocks of four warps
    // a multiprocessor (0: as many as fit; the walk's kernel holds 5). What it read, a query: its
    // vectors' squared L2 distances summed (*sums), its rows' words and its vectors' words XORed
    // (*xors, two a query), for the check against the host's reading of the same walks
    // (WalkTraces::sum, xor_rows, xor_vecs).
    bool time(const float* xq, int64_t nq, const WalkTraces& t, int in_flight, int blocks_per_sm, int reps,
              double* ms, std::vector<float>* sums, std::vector<uint32_t>* xors);
    WalkReplay() = default;
    WalkReplay(const WalkReplay&) = delete;  // owns device memory
    WalkReplay& operator=(const WalkReplay&) = delete;
    ~WalkReplay();

private:
    float* x_ = nullptr;
    int32_t* graph_ = nullptr;
    int64_t n_ = 0, d_ = 0;
    int R_ = 0;
};

}  // namespace bench
