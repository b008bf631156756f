/* Plugin-internal: the rule that joins graph rows which were pruned apart, shared by the build in
 * pieces (plugin/graph/pieces.c: a vector's rows of its two pieces) and the consolidation after
 * removals (plugin/graph/insert.c: a row's live neighbours and its removed neighbours' live ones). */
#ifndef GRAFT_MERGE_RULE_H
#define GRAFT_MERGE_RULE_H

/* For L2 a candidate c of v goes only when a kept u has GRAFT_MERGE_ALPHA * d(u, c) < d(v, c)
 * (squared distances; DiskANN's alpha, 1.095 on distances): the plain rule (1) on the union of
 * two pruned rows cut sift5k's mean degree from 12.9 to 9.1 and left vertices unreachable; 1.2
 * gives the whole graph's degree and recall (test_graph_cpu: sift5k 8 pieces 13.2 / 0.976 at
 * L = 32 vs 12.9 / 0.973; Fashion-MNIST 20k 10 pieces 10.2 / 0.966 at L = 16 vs 10.9 / 0.967).
 * No pruning at all: degree 18.5, recall 0.983. Inner product is not pruned (the plain rule cut
 * cosine sift5k's degree to 9.0 and its recall by 0.026, and a factor on negative dot products
 * prunes more, not less): the union, closest first, degree 18.7 against the whole graph's 12.8,
 * recall 0.982 against 0.975. Consolidation after removing 50% (test_living, recall@10 against a
 * fresh build over the rest): sift5k 0.991 vs 0.984 at L = 32 with 1.2, 0.973 with the plain
 * rule; Fashion-MNIST 6k 0.987 vs 0.986 at L = 16 with 1.2, 0.971 plain. */
#define GRAFT_MERGE_ALPHA 1.2f

#endif
