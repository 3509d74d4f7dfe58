"""``python -m verification.mutants``: run the catalogue, or regenerate ``docs/mutants.md`` with ``--out``."""

from .runner import main

raise SystemExit(main())
