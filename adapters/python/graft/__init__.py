"""graft: GPU graph indexes as faiss.Index objects of FAISS's own Python module.

    import faiss, graft
    index = graft.index_factory(d, "GraftGraph", faiss.METRIC_L2)  # was: faiss.index_factory(...)
    index.add(xb)
    D, I = index.search(xq, 10)

Every object handed out is a faiss.Index (its add/search/reconstruct are FAISS's numpy wrappers),
so FAISS's wrappers (IndexIDMap, IndexShards, IndexPreTransform, IndexRefineFlat) take it.
Errors raise RuntimeError with graft's message, as FAISS's own calls do.
"""

# FAISS first: the extension module below resolves FAISS's symbols against the _swigfaiss module
# this import loads (one FAISS per process; adapters/python/CMakeLists.txt says how).
import faiss

from . import swiggraft as _swig
from .swiggraft import (
    GraftIndexFlat,
    GraftIndexGraph,
    GraftIndexGraphPQ,
    SearchParametersGraftFlat,
    SearchParametersGraftGraph,
    SearchParametersGraftGraphPQ,
)

__all__ = [
    "GraftIndexFlat", "GraftIndexGraph", "GraftIndexGraphPQ",
    "SearchParametersGraftFlat", "SearchParametersGraftGraph", "SearchParametersGraftGraphPQ",
    "index_factory", "set_param", "get_param", "write_index", "read_index", "export_hnsw",
    "export_hnsw_cagra", "shard_count", "get_shard_param", "have_mpi", "mpi_add_local",
    "mpi_write_index", "mpi_read_index",
]


def _search_parameters_init(the_class):
    # FAISS's SearchParametersXX(sel=..., L=...) keyword form. Unlike FAISS 1.7.3's own wrapper
    # (which only keeps classes alive), any object passed (a selector) is referenced by the
    # parameters, since the C++ side does not own it.
    original_init = the_class.__init__

    def __init__(self, **kwargs):
        original_init(self)
        for name, value in kwargs.items():
            if not hasattr(self, name):
                raise AttributeError(f"{the_class.__name__} has no field {name!r}")
            setattr(self, name, value)
            if not isinstance(value, (bool, int, float)):
                self.referenced_objects = getattr(self, "referenced_objects", []) + [value]

    the_class.__init__ = __init__


for _cls in (SearchParametersGraftFlat, SearchParametersGraftGraph, SearchParametersGraftGraphPQ):
    _search_parameters_init(_cls)


def index_factory(d, description, metric=faiss.METRIC_L2):
    """faiss.index_factory that also knows graft's strings ("GraftFlat", "GraftGraph32,L=96",
    "GraftGraph,PQ16", "PCA64,GraftGraph", "IDMap,GraftFlat", ...; adapters/faiss/graft_faiss_c.h
    lists them). Other strings go to FAISS's factory unchanged. The result is owned by Python and
    keeps its sub-indexes alive as FAISS's factory results do."""
    return _swig.index_factory(int(d), description, int(metric))


def set_param(index, name, value):
    """Sets graft's named parameter (e.g. "L") on every graft index inside `index`, looking through
    IndexIDMap, IndexPreTransform, IndexShards/IndexReplicas and IndexRefine."""
    _swig.set_param(index, name, float(value))


def get_param(index, name):
    """The named parameter of the first graft index inside `index`, as a float."""
    return _swig.get_param(index, name)


def write_index(index, path):
    """faiss.write_index that also knows graft indexes (and IndexIDMap over them); other indexes
    are written by FAISS."""
    _swig.write_index(index, str(path))


def read_index(path, io_flags=0, gpus=None, shards=None):
    """Reads what write_index (graft's or FAISS's) wrote; graft records load into graft indexes.
    gpus places graft's indexes: "all", "cpu", a device number or a list of them (shard i onto
    the (i mod len)-th; a sharded index's shards round-robin over fewer or more GPUs than it has);
    shards=N spreads the vectors over N shards (ids kept, graphs built again; 1 = a single index).
    Neither: as written (graft_faiss_c.h, faiss_graft_read_index_placed)."""
    if gpus is None and shards is None:
        return _swig.read_index(str(path), int(io_flags))
    parts = []
    if gpus == "cpu":
        parts.append("cpu")
    elif gpus == "all":
        parts.append("gpus=all")
    elif gpus is not None:
        devs = [gpus] if isinstance(gpus, int) else list(gpus)
        parts.append("gpus=" + ",".join(str(int(g)) for g in devs))
    if shards is not None:
        parts.append(f"shards={int(shards)}")
    return _swig.read_index_placed(str(path), int(io_flags), ",".join(parts))


def shard_count(index):
    """How many shards (or replicas) a sharded graft index has (",gpus=", ",shards=", a FAISS
    IndexShards / IndexReplicas, looked up through IDMap and PreTransform); 1 for any other index."""
    return _swig.shard_count(index)


def get_shard_param(index, shard, name):
    """get_param of one shard, e.g. its "device" or, for graph + PQ shards, "gpu_bytes"."""
    return _swig.get_shard_param(index, int(shard), name)


def export_hnsw(index):
    """A new stock faiss.IndexHNSWFlat holding the graft graph index's vectors and graph."""
    return _swig.export_hnsw(index)


def export_hnsw_cagra(index):
    """A new stock faiss.IndexHNSWCagra (FAISS >= 1.9) holding the graft graph index's vectors and
    graph, base_level_only: searched on that level from random entry points, no adds. RuntimeError
    on an older FAISS."""
    return _swig.export_hnsw_cagra(index)


def have_mpi():
    """Whether this graft was built with MPI: index_factory then takes "MPI,<local>" (one index
    across the ranks of MPI_COMM_WORLD; import mpi4py's MPI first), docs/mpi.md."""
    return _swig.have_mpi()


def mpi_add_local(index, x):
    """Each rank adds its own rows x (n_r x d) to an index across MPI ranks; ids follow in rank
    order. Every rank calls it."""
    import numpy as np
    x = np.ascontiguousarray(x, dtype=np.float32)
    _swig.mpi_add_local(index, x.shape[0], faiss.swig_ptr(x))


def mpi_write_index(index, path):
    """Every rank writes its part of an index across MPI ranks to "<path>.rank<r>"."""
    _swig.mpi_write_index(index, str(path))


def mpi_read_index(path, placement="", timeout=0):
    """Every rank reads its part of what mpi_write_index wrote, on as many ranks (MPI_COMM_WORLD).
    placement: "" (as written), "cpu", "gpu=N", "gpu=local"; timeout in seconds (0: the default)."""
    return _swig.mpi_read_index(str(path), placement, float(timeout))
