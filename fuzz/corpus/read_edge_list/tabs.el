# Nodes: 4 Edges: 3
0	1
1	2
3	0
