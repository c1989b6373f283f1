#!/usr/bin/env python3
"""PageRank precision: L1 distances between DMG float, DMG double and GAPBS.

Method
  Every graph is one edge list that all programs read, symmetrized by each
  (self loops and duplicate arcs dropped, as DMG does by default and as
  GAPBS's builder does when it squishes its CSR):
    kron20   (or kronN) GAPBS's own Kronecker generator, written as an edge
             list in --work (`converter -g20 -e kron20.el`, unweighted);
    road-NY  (or any NAME with NAME.el in --graphs_dir) the published file.
  PageRank everywhere: d = 0.85, start 1/N, score(v) = (1-d)/N + d * sum
  over in-neighbours u of score(u)/outdeg(u), dangling mass not
  redistributed, --iters (20) iterations at tolerance 0.
    dmg float   `dmg run --algo=pagerank --precision=float --symmetrize
                --max_iters=20 --tolerance=0 --threads=T --output=FILE`
    dmg double  the same with --precision=double
    gapbs       GAPBS's own pull PageRank, unmodified: GAPBS (the GAP
                Benchmark Suite, ../shared/anchors/gapbs by default) is
                copied into --work and built there with its Makefile (as
                bench/vs_gapbs.py does; without it the script prints a line
                and exits 0), and a small driver written into --work
                (pr_dump.cc) includes its pr.cc with its main renamed, builds
                the graph as `pr -f FILE -s` does (its CLPageRank and
                Builder), calls PageRankPullGS(g, 20, 0) and writes every
                score (float ScoreT, %.9g). Its kernel is Gauss-Seidel
                (scores updated in place, new values visible at once), so it
                is run twice in the same process: with T OpenMP threads
                (`gapbs`, as GAPBS runs) and with one (`gapbs-1t`, serial
                vertex order: deterministic).
    ref         an independent reference (pr_ref.cc, written into --work):
                CSR from the same edge list, symmetrized, self loops and
                duplicate arcs dropped, N = largest id + 1 (as both
                systems); Jacobi iterations (DMG's semantics) in long double,
                written as doubles (%.17g).
    ref-gs      the same program's Gauss-Seidel iterations in serial vertex
                order, long double: what GAPBS's kernel computes with exact
                arithmetic, to tell its float rounding (gapbs-1t vs ref-gs)
                from its different iteration (gapbs vs ref).
  Vertex and arc counts of DMG (its run summary), GAPBS (num_nodes,
  num_edges_directed) and the reference are compared; a mismatch is printed
  and the L1 distances then cover the common vertex ids only.

Output: per graph, the sum of each score vector and the L1 distance
sum_v |a(v) - b(v)| of each pair (%.3g); --csv writes the same figures as
CSV (to stdout instead of the table when given alone, else to the file).

Example: bench/pr_precision.py --graphs=kron20,road-NY
             --graphs_dir=/work/shared/graphs --work=build/pr_precision
"""
import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "deploy", "experiments"))
import vs_gapbs  # noqa: E402  (build_gapbs: GAPBS copied and built in work)
from dmgexp import csvio, graphs, registry  # noqa: E402

# GAPBS's pull PageRank, unmodified, with every score written out.
PR_DUMP_CC = r"""// Written by bench/pr_precision.py: runs GAPBS's own PageRankPullGS
// (its pr.cc, included with its main renamed) and writes every score.
// usage: pr_dump OUT_T OUT_1 [GAPBS pr flags: -f FILE -s -i 20 -t 0]
#include <omp.h>
#include <cstdio>
#include <vector>

#define main gapbs_pr_main
#include "pr.cc"
#undef main

static bool Dump(const char* path, const pvector<ScoreT>& scores) {
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return false;
  for (size_t i = 0; i < scores.size(); i++)
    std::fprintf(f, "%zu %.9g\n", i, static_cast<double>(scores[i]));
  return std::fclose(f) == 0;
}

int main(int argc, char* argv[]) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pr_dump OUT_T OUT_1 [pr flags]\n");
    return 2;
  }
  std::vector<char*> args;
  args.push_back(argv[0]);
  for (int i = 3; i < argc; i++) args.push_back(argv[i]);
  CLPageRank cli(static_cast<int>(args.size()), args.data(), "pr_dump", 0, 20);
  if (!cli.ParseArgs()) return 2;
  Builder b(cli);
  Graph g = b.MakeGraph();
  const int threads = omp_get_max_threads();
  pvector<ScoreT> s = PageRankPullGS(g, cli.max_iters(), cli.tolerance());
  if (!Dump(argv[1], s)) return 3;
  omp_set_num_threads(1);
  pvector<ScoreT> s1 = PageRankPullGS(g, cli.max_iters(), cli.tolerance());
  if (!Dump(argv[2], s1)) return 3;
  std::printf("pr_dump: nodes %lld arcs %lld threads %d\n",
              static_cast<long long>(g.num_nodes()),
              static_cast<long long>(g.num_edges_directed()), threads);
  return 0;
}
"""

# The reference: plain CSR, long double, Jacobi and serial Gauss-Seidel.
PR_REF_CC = r"""// Written by bench/pr_precision.py: PageRank reference in long double.
// usage: pr_ref EDGES.el ITERS OUT_JACOBI OUT_GS
// Symmetrized CSR (self loops and duplicate arcs dropped), N = max id + 1;
// d = 0.85, start 1/N, dangling mass not redistributed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

typedef long double Real;

static bool Write(const char* path, const std::vector<Real>& s) {
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return false;
  for (size_t i = 0; i < s.size(); i++)
    std::fprintf(f, "%zu %.17g\n", i, static_cast<double>(s[i]));
  return std::fclose(f) == 0;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: pr_ref EDGES ITERS OUT_JACOBI OUT_GS\n");
    return 2;
  }
  FILE* in = std::fopen(argv[1], "rb");
  if (in == nullptr) { std::perror(argv[1]); return 2; }
  const int iters = std::atoi(argv[2]);
  // Edge list: the first two integers of every line; '#'/'%' lines skipped.
  std::vector<uint32_t> src, dst;
  {
    std::vector<char> buf(1 << 22);
    uint64_t num[2] = {0, 0};
    int field = 0;        // fields completed on this line
    bool in_num = false, comment = false, line_start = true;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), in)) > 0) {
      for (size_t i = 0; i < n; i++) {
        const char c = buf[i];
        if (c == '\n') {
          if (in_num) field++;
          if (!comment && field >= 2) {
            src.push_back(static_cast<uint32_t>(num[0]));
            dst.push_back(static_cast<uint32_t>(num[1]));
          }
          field = 0; num[0] = num[1] = 0;
          in_num = comment = false; line_start = true;
          continue;
        }
        if (line_start && (c == '#' || c == '%')) comment = true;
        line_start = false;
        if (comment) continue;
        if (c >= '0' && c <= '9') {
          if (field < 2) num[field] = num[field] * 10 + (c - '0');
          in_num = true;
        } else if (in_num) {
          in_num = false;
          field++;
        }
      }
    }
    if (in_num) field++;
    if (!comment && field >= 2) {
      src.push_back(static_cast<uint32_t>(num[0]));
      dst.push_back(static_cast<uint32_t>(num[1]));
    }
    std::fclose(in);
  }
  uint64_t nv = 0;
  for (size_t i = 0; i < src.size(); i++)
    nv = std::max<uint64_t>(nv, std::max(src[i], dst[i]) + uint64_t{1});
  std::vector<uint64_t> off(nv + 1, 0);
  for (size_t i = 0; i < src.size(); i++) {
    if (src[i] == dst[i]) continue;
    off[src[i] + 1]++;
    off[dst[i] + 1]++;
  }
  for (uint64_t v = 0; v < nv; v++) off[v + 1] += off[v];
  std::vector<uint32_t> adj(off[nv]);
  {
    std::vector<uint64_t> pos(off.begin(), off.end() - 1);
    for (size_t i = 0; i < src.size(); i++) {
      if (src[i] == dst[i]) continue;
      adj[pos[src[i]]++] = dst[i];
      adj[pos[dst[i]]++] = src[i];
    }
  }
  std::vector<uint32_t>().swap(src);
  std::vector<uint32_t>().swap(dst);
  // Sort and drop duplicates per vertex, compacting in place.
  uint64_t w = 0;
  for (uint64_t v = 0; v < nv; v++) {
    const uint64_t b = off[v], e = off[v + 1];
    std::sort(adj.begin() + b, adj.begin() + e);
    const uint64_t start = w;
    for (uint64_t i = b; i < e; i++)
      if (i == b || adj[i] != adj[i - 1]) adj[w++] = adj[i];
    off[v] = start;
  }
  off[nv] = w;
  adj.resize(w);
  const Real d = 0.85L, base = (1.0L - d) / nv;
  std::vector<Real> deg(nv);
  for (uint64_t v = 0; v < nv; v++) deg[v] = off[v + 1] - off[v];
  auto contrib_of = [&](uint64_t v, Real s) {
    return deg[v] == 0 ? Real(0) : s / deg[v];
  };
  // Jacobi (DMG's iteration).
  std::vector<Real> s(nv, 1.0L / nv), c(nv), next(nv);
  for (int it = 0; it < iters; it++) {
    for (uint64_t v = 0; v < nv; v++) c[v] = contrib_of(v, s[v]);
    for (uint64_t v = 0; v < nv; v++) {
      Real sum = 0;
      for (uint64_t i = off[v]; i < off[v + 1]; i++) sum += c[adj[i]];
      next[v] = base + d * sum;
    }
    s.swap(next);
  }
  if (!Write(argv[3], s)) { std::perror(argv[3]); return 3; }
  // Gauss-Seidel in serial vertex order (GAPBS's PageRankPullGS, 1 thread).
  std::fill(s.begin(), s.end(), 1.0L / nv);
  for (uint64_t v = 0; v < nv; v++) c[v] = contrib_of(v, s[v]);
  for (int it = 0; it < iters; it++) {
    for (uint64_t v = 0; v < nv; v++) {
      Real sum = 0;
      for (uint64_t i = off[v]; i < off[v + 1]; i++) sum += c[adj[i]];
      s[v] = base + d * sum;
      c[v] = contrib_of(v, s[v]);
    }
  }
  if (!Write(argv[4], s)) { std::perror(argv[4]); return 3; }
  std::printf("pr_ref: nodes %llu arcs %llu\n",
              static_cast<unsigned long long>(nv),
              static_cast<unsigned long long>(w));
  return 0;
}
"""

VECTORS = ("dmg-float", "dmg-double", "gapbs", "gapbs-1t", "ref", "ref-gs")
PAIRS = (("dmg-float", "dmg-double"), ("dmg-float", "gapbs"),
         ("dmg-double", "gapbs"), ("dmg-float", "ref"),
         ("dmg-double", "ref"), ("gapbs", "ref"), ("gapbs", "ref-gs"),
         ("gapbs-1t", "ref-gs"), ("gapbs", "gapbs-1t"))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=7200):
    log("  $ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"pr_precision: {' '.join(cmd)} failed ({r.returncode}):\n"
                 f"{r.stdout[-1000:]}{r.stderr[-2000:]}")
    return r.stdout + r.stderr


def build_tool(work, name, text, flags):
    """Writes NAME.cc into work and compiles it when it is new or changed."""
    srcf, binf = os.path.join(work, name + ".cc"), os.path.join(work, name)
    old = None
    if os.path.exists(srcf):
        with open(srcf) as f:
            old = f.read()
    if old != text or not os.path.exists(binf):
        with open(srcf, "w") as f:
            f.write(text)
        run(["g++", "-std=c++11", "-O3"] + flags + [srcf, "-o", binf])
    return binf


def edge_list(name, a, gapbs):
    m = re.fullmatch(r"kron(\d+)", name)
    if not m:
        try:
            return graphs.resolve(name + ".el", a.graphs_dir, here=False, extensions=())
        except graphs.GraphNotFound as e:
            sys.exit(f"pr_precision: {e} (set --graphs_dir)")
    d = os.path.join(a.work, name)
    os.makedirs(d, exist_ok=True)
    el = os.path.join(d, name + ".el")
    if not os.path.exists(el):
        log(f"generating GAPBS kron-{m.group(1)}")
        tmp = el + ".tmp.el"  # GAPBS picks the format by the suffix
        run([os.path.join(gapbs, "converter"), "-g" + m.group(1), "-e", tmp])
        os.replace(tmp, el)
    return os.path.abspath(el)


def read_scores(path):
    out = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 2:
                continue  # a count or blank line
            v = int(p[0])
            if v != len(out):
                sys.exit(f"pr_precision: {path}: vertex {v} at line "
                         f"{len(out) + 1} (expected vertex order)")
            out.append(float(p[1]))
    return out


def l1(x, y):
    return sum(abs(p - q) for p, q in zip(x, y))


def one_graph(name, a, gapbs, tools):
    el = edge_list(name, a, gapbs)
    d = os.path.join(a.work, name)
    os.makedirs(d, exist_ok=True)
    files = {v: os.path.join(d, v + ".txt") for v in VECTORS}
    counts = {}
    for prec in ("float", "double"):
        log(f"{name}: dmg {prec}")
        out = run([a.dmg, "run", "--algo=pagerank", "--graph=" + el,
                   "--symmetrize", f"--max_iters={a.iters}", "--tolerance=0",
                   f"--threads={a.threads}", "--precision=" + prec,
                   "--output=" + files["dmg-" + prec]])
        m = re.search(r"(\d+) vertices, (\d+) arcs", out)
        if not m:
            sys.exit(f"pr_precision: no vertex/arc counts in dmg's "
                     f"summary:\n{out[-2000:]}")
        counts["dmg-" + prec] = (int(m.group(1)), int(m.group(2)))
    log(f"{name}: gapbs PageRankPullGS")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out = run([tools["pr_dump"], files["gapbs"], files["gapbs-1t"], "-f", el,
               "-s", "-i", str(a.iters), "-t", "0"], env=env)
    m = re.search(r"pr_dump: nodes (\d+) arcs (\d+)", out)
    if not m:
        sys.exit(f"pr_precision: no counts from pr_dump:\n{out[-2000:]}")
    counts["gapbs"] = (int(m.group(1)), int(m.group(2)))
    log(f"{name}: reference")
    out = run([tools["pr_ref"], el, str(a.iters), files["ref"],
               files["ref-gs"]])
    m = re.search(r"pr_ref: nodes (\d+) arcs (\d+)", out)
    counts["ref"] = (int(m.group(1)), int(m.group(2)))
    scores = {v: read_scores(files[v]) for v in VECTORS}
    notes = []
    if len(set(counts.values())) != 1:
        notes.append("COUNTS DIFFER (vertices, arcs): " + ", ".join(
            f"{k} {v[0]}/{v[1]}" for k, v in counts.items()))
    lens = {v: len(s) for v, s in scores.items()}
    if len(set(lens.values())) != 1:
        notes.append("score vectors differ in length (L1 over the common "
                     "ids only): " + ", ".join(
                         f"{k} {n}" for k, n in lens.items()))
    nv, na = counts["ref"]
    return {"graph": name, "vertices": nv, "arcs": na, "notes": notes,
            "sums": {v: sum(s) for v, s in scores.items()},
            "l1": {p: l1(scores[p[0]], scores[p[1]]) for p in PAIRS}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dmg", default=registry.default_dmg())
    ap.add_argument("--gapbs_src", default="../shared/anchors/gapbs")
    ap.add_argument("--graphs_dir", default=os.environ.get(
        "DMG_GRAPHS_DIR", "../shared/graphs"))
    ap.add_argument("--graphs", default="kron20,road-NY")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="build/pr_precision")
    ap.add_argument("--csv", nargs="?", const="-", default=None,
                    help="write CSV to this file; alone: CSV to stdout "
                         "instead of the table")
    a = ap.parse_args()
    if not os.path.isdir(a.gapbs_src):
        print(f"pr_precision: GAPBS not found at {a.gapbs_src}; skipping")
        return
    if not os.path.exists(a.dmg):
        sys.exit(f"pr_precision: {a.dmg} not found (build first)")
    a.dmg = os.path.abspath(a.dmg)
    os.makedirs(a.work, exist_ok=True)
    gapbs = vs_gapbs.build_gapbs(a.gapbs_src, a.work)
    tools = {
        "pr_dump": build_tool(a.work, "pr_dump", PR_DUMP_CC,
                              ["-fopenmp", "-I" + os.path.join(gapbs, "src")]),
        "pr_ref": build_tool(a.work, "pr_ref", PR_REF_CC, []),
    }
    results = [one_graph(n, a, gapbs, tools)
               for n in a.graphs.split(",") if n]
    if a.csv == "-":  # no table: the notes go to stderr
        for r in results:
            for n in r["notes"]:
                log(f"pr_precision: {r['graph']}: {n}")
    if a.csv != "-":
        print(f"PageRank, {a.iters} iterations at tolerance 0, d = 0.85; "
              f"dmg and gapbs with {a.threads} threads (gapbs-1t: one); "
              "ref/ref-gs: Jacobi/Gauss-Seidel in long double")
        for r in results:
            print(f"\n{r['graph']}: {r['vertices']} vertices, {r['arcs']} "
                  "arcs (symmetrized)")
            for n in r["notes"]:
                print("  " + n)
            print("  sum of scores")
            for v in VECTORS:
                print(f"    {v:<24} {r['sums'][v]:.9g}")
            print("  L1 distance")
            for p in PAIRS:
                print(f"    {p[0] + ' vs ' + p[1]:<24} {r['l1'][p]:.3g}")
    if a.csv is not None:
        csvio.write(a.csv, csv_rows(results),
                    ["graph", "vertices", "arcs", "figure", "a", "b", "value"])


def csv_rows(results):
    for r in results:
        head = dict(graph=r["graph"], vertices=r["vertices"], arcs=r["arcs"])
        for v in VECTORS:
            yield dict(head, figure="sum", a=v, b="", value=f"{r['sums'][v]:.9g}")
        for p in PAIRS:
            yield dict(head, figure="l1", a=p[0], b=p[1], value=f"{r['l1'][p]:.3g}")


if __name__ == "__main__":
    main()
