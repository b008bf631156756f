"""One graft index across MPI ranks from Python (label mpi), run by mpirun with mpi4py:
graft.index_factory("MPI,GraftGraph,cpu") on MPI_COMM_WORLD equals one process's
"GraftGraph,cpu,shards=R" over the same parts on every rank; bad input on one rank raises on
every rank; the merge pipelined in 3 chunks; mpi_add_local; mpi_write_index / mpi_read_index.
Not a pytest file: every rank runs it whole (tests/python/CMakeLists.txt). Exits 1 on any
failure."""
import os
import sys
import tempfile

from mpi4py import MPI  # initializes MPI before graft's index needs it

import faiss
import graft
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Sift5k  # noqa: E402

comm = MPI.COMM_WORLD
rank, ranks = comm.rank, comm.size
root = os.environ.get("GRAFT_DATA_DIR") or os.environ.get("GRAFT_DATA_DIR_DEFAULT", "")
s = Sift5k(os.path.join(root, "sift5k"))
k = 10

index = graft.index_factory(s.d, "MPI,timeout=60,GraftGraph,cpu")
assert isinstance(index, faiss.Index)
index.add(s.xb)
assert index.ntotal == len(s.xb)
D, I = index.search(s.xq, k)
D0, I0 = comm.bcast((D, I), root=0)
assert np.array_equal(D, D0) and np.array_equal(I, I0), f"rank {rank}: results differ from rank 0's"
if rank == 0:
    one = graft.index_factory(s.d, f"GraftGraph,cpu,shards={ranks}")
    one.add(s.xb)
    Ds, Is = one.search(s.xq, k)
    assert np.array_equal(D, Ds) and np.array_equal(I, Is), "results differ from one process's shards"
    print(f"  MPI,GraftGraph,cpu = GraftGraph,cpu,shards={ranks}, recall@10 {s.recall(I):.4f}")

# Bad input on the last rank only: the same error everywhere, the index still usable.
try:
    index.search(s.xq[:4] if rank == ranks - 1 else s.xq[:5], k)
    raise AssertionError("a search whose n differs on one rank passed")
except RuntimeError as e:
    assert "disagree" in str(e), str(e)
D2, I2 = index.search(s.xq, k)
assert np.array_equal(I, I2)
# The merge pipelined in 3 chunks: the same bytes.
graft.set_param(index, "merge_chunks", 3)
D3, I3 = index.search(s.xq, k)
assert graft.get_param(index, "last_chunks") == 3
assert np.array_equal(D3, D) and np.array_equal(I3, I), "3 chunks: results differ from one chunk's"
graft.set_param(index, "merge_chunks", 0)
graft.set_param(index, "L", 96)
assert graft.get_param(index, "L") == 96 and graft.get_param(index, "ranks") == ranks

# Each rank its own part.
part = graft.index_factory(s.d, "MPI,GraftGraph,cpu")
lo, hi = rank * len(s.xb) // ranks, (rank + 1) * len(s.xb) // ranks
graft.mpi_add_local(part, s.xb[lo:hi])
Dp, Ip = part.search(s.xq, k)
assert np.array_equal(Ip, I), "mpi_add_local: results differ from add's"

# Written by every rank, read back.
folder = comm.bcast(tempfile.mkdtemp() if rank == 0 else None, root=0)
path = os.path.join(folder, "index")
graft.mpi_write_index(part, path)
back = graft.mpi_read_index(path, "cpu")
Db, Ib = back.search(s.xq, k)
assert np.array_equal(Ib, Ip) and np.array_equal(Db, Dp), "read back: results differ"
del back, part, index
comm.Barrier()
if rank == 0:
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    os.rmdir(folder)
    print(f"  python, {ranks} ranks: all checks passed")
