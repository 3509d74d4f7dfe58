"""Executable checks of the proofs in this folder.

Every ``check_*.py`` runs on its own (``python proofs/check_gumbel_max.py``) and is importable
(``from proofs import check_gumbel_max``): its ``collect()`` computes the numbers its markdown file quotes, its
``render()`` turns recorded results into the markdown tables, and ``main(["--write"])`` records them in
``proofs/results/`` and rewrites the tables (:mod:`proofs._generated`).  Its functions take sizes so that
``tests/proofs`` can run them small; the tests also check that the recorded results and the tables are current.
"""
