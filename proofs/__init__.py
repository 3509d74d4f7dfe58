"""Executable checks of the proofs in this folder.

Every ``check_*.py`` runs on its own (``python proofs/check_gumbel_max.py``) and is importable
(``from proofs import check_gumbel_max``): its ``main()`` runs the full check and prints the numbers
quoted in the matching markdown file, and its functions take sizes so that ``tests/proofs`` can
run them small.
"""
