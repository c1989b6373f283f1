"""What the experiment scripts share, so that each thing is done one way
(deploy/experiments/*.py and bench/*.py put this folder's parent on
sys.path):

  registry  the dmg binary and the algorithm names `dmg help` lists
  graphs    graph SPECs: generators, files, names in $DMG_GRAPHS_DIR
  daemons   memory nodes: one serving an image, or a cluster file's
            through deploy/cluster
  procs     children in their own process groups, killed on a timeout,
            Ctrl-C, SIGTERM, SIGHUP and at exit
  csvio     CSV files read and written
  plots     the plots' look and files (PNG, PDF, SVG); a sweep's figures
  report    summary.txt: the scaling table, the ablation's verdict
  stats     figures of a `dmg run --stats_json` file"""
