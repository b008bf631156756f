"""Torch peer of bench_exact: dist = ||b||^2 - 2 q b^T in FP32 (TF32 off) + torch.topk, chunked.

Same shapes and accounting as bench/studies/bench_exact.cpp (queries from host memory, results back to
host memory, warm-up, median of 5) and the same JSON record fields (system "torch").
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--focus", action="store_true", help="bench_exact --focus's shapes: k = 10 and 1024 only")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    shapes = [(1000000, 128, 10000, [1, 10, 100, 1024, 2048, 4096]), (1000000, 960, 1000, [10])]
    if a.focus:
        shapes = [(1000000, 128, 10000, [10, 1024]), (1000000, 960, 1000, [10, 1024])]
    if a.quick:
        shapes = [(200000, 128, 2000, [10, 1024])]
    g = torch.Generator(device="cpu").manual_seed(0)
    with open(a.out, "a") as out:
        for nb, d, nq, ks in shapes:
            xb = torch.rand(nb, d, generator=g).to(dev)
            xq_host = torch.rand(nq, d, generator=g).pin_memory()
            bn = (xb * xb).sum(1)
            chunk = max(1, (2 << 30) // (4 * nb))  # 2 GiB of distances per chunk, like graft's budget
            for k in ks:
                def run():
                    xq = xq_host.to(dev, non_blocking=True)
                    Ds, Is = [], []
                    for i in range(0, nq, chunk):
                        q = xq[i:i + chunk]
                        dist = torch.addmm(bn.unsqueeze(0), q, xb.t(), beta=1.0, alpha=-2.0)
                        v, idx = torch.topk(dist, k, dim=1, largest=False, sorted=True)
                        Ds.append((v + (q * q).sum(1, keepdim=True)).clamp_min_(0))
                        Is.append(idx)
                    D = torch.cat(Ds).cpu()
                    I = torch.cat(Is).cpu()
                    return D, I
                run()
                torch.cuda.synchronize()
                ts = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    run()
                    torch.cuda.synchronize()
                    ts.append(time.perf_counter() - t0)
                t = sorted(ts)[2]
                rec = dict(run_id=a.run_id, date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           commit=a.commit, device=name, bench="exact", system="torch", family="flat",
                           index="addmm+topk", dataset="random-uniform", n=nb, d=d, nq=nq, k=k,
                           metric="L2", params=dict(chunk_rows=chunk, tf32=False, torch=torch.__version__),
                           qps=nq / t, latency_ms=t * 1e3)
                out.write(json.dumps(rec) + "\n")
                print(f"{'torch':<10} {'topk':<8} {d:6d} {nq:6d} {k:6d} {nq / t:12.0f} {t * 1e3:10.2f}")
            del xb, bn
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
