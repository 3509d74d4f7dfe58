"""A fuzzer of every public entry point of flashsampling (issue 36): Hypothesis draws calls -- shapes, dtypes,
devices (``meta`` included), strides, extreme values, wrong types, edge values of every argument, worlds of 1 to 4
gloo ranks whose arguments disagree -- and each call's outcome is classified (:mod:`tests.fuzz.oracle`).

``python -m tests.fuzz`` runs a full round and writes ``docs/fuzz.json`` and the table in ``docs/reliability.md``;
``tests/test_fuzz.py`` runs a fixed-seed slice in CI and checks that the committed table is the recorded one.
"""
