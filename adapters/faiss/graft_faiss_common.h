// What graft's faiss::Index subclasses share: the bridge from graft's status codes to FAISS
// exceptions, the metric mapping, and the named-parameter interface that faiss_graft_set_param /
// faiss_graft_get_param reach through FAISS's wrappers.
#pragma once

#include <faiss/MetricType.h>
#include <faiss/impl/FaissAssert.h>

#include "graft/graft.h"

namespace graft {

// Throws faiss::FaissException carrying graft's status name and message when rc != GRAFT_OK,
// so faiss_c returns its usual error code and faiss_get_last_error() reads graft's message.
void throw_if_error(int rc, const char* where);

// METRIC_L2 and METRIC_INNER_PRODUCT; any other metric throws, naming it.
graft_metric to_graft_metric(faiss::MetricType metric);

// Index-level parameters by name (see each index's set_param). Unknown names throw, listing the
// known ones.
struct NamedParameters {
    virtual ~NamedParameters() = default;
    virtual void set_param(const char* name, double value) = 0;
    virtual double get_param(const char* name) const = 0;
};

}  // namespace graft

// FAISS_THROW_IF_NOT_FMT without the "Error: 'cond' failed:" prefix: the message reads alone.
#define GRAFT_REQUIRE(cond, ...)                   \
    do {                                           \
        if (!(cond)) FAISS_THROW_FMT(__VA_ARGS__); \
    } while (0)
