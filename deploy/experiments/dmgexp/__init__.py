"""Modules the experiment scripts share (deploy/experiments/*.py put this
folder's parent on sys.path): stats (figures of `dmg run --stats_json`
files) and report (the scaling table and the update_mode x direction
ablation's verdict, from the runner's results.csv rows)."""
