"""``python -m verification.audit``: audit the samplers written elsewhere (``--help`` for the options)."""

from .runner import main

raise SystemExit(main())
