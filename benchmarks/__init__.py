"""nas' benchmarks, each a module run from the repository root as `python -m benchmarks.<name>`
(figures, commands and commits in benchmarks/RESULTS.md), and what they share: `scoring`
(hypervolume, KerasTuner's single score, per-trial overhead), `stamps` (machine, commit and
date of a figure), `launch` (a benchmark's own child processes) and `contenders` (the tools
race.py runs, one a module)."""
