"""How a dataset build tells its progress: ``progress(done, total)``, called from the building
thread with how many of its ``total`` prompts are through the bulk of the work (for the random
datasets, their first encoding). The caller draws it (the run's console shows it on stderr); a
build given none reports nothing."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int], None]
