"""The static HTML site (`cbledger project site`): pure renderers from a folded state and each
run's gathered evidence to files under `results/site/`."""
