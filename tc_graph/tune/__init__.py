"""The autotuner, one module per job: `space` (the genes and their values), `search` (the
genetic search), `evaluate` (compile, run, compare and time candidates), `db` (the tuning
database) and `tuner` (`tune`, `autotune`, and what tg.optimize(tune=True) asks).

Dependencies run one way: the tuner uses the API and the compiler driver; the compiler
reads the database (`db.best_options`) and nothing else of this package. So this file
imports nothing: the compiler's import of `db` must not pull the tuner in.
"""
