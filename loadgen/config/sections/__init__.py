"""`loadgen run`'s flags in five sections, each a frozen dataclass whose fields are declared by
their flags (``flag()``, loadgen/flag.py): the server, the dataset, the traffic, the output and
the report. `RunConfig` (loadgen/config/run_config.py) inherits them all, so a field reads flat
(``config.request_rate``); a function that needs one section takes that section's class.
"""

from loadgen.config.sections.dataset import Dataset
from loadgen.config.sections.output import Output
from loadgen.config.sections.report import Report
from loadgen.config.sections.server import Server
from loadgen.config.sections.traffic import Traffic

# In the order of RunConfig's fields.
SECTIONS = (Server, Dataset, Traffic, Output, Report)

__all__ = ["SECTIONS", "Dataset", "Output", "Report", "Server", "Traffic"]
