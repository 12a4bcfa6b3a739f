"""``python -m loadgen.mock``: the mock server, as ``python -m loadgen mock-server``.

The command lives in loadgen.cli (the only package that imports click), which imports this
package; importing it back from here would make an import cycle, so it is run by name.
"""

import runpy
import sys

sys.argv.insert(1, "mock-server")
runpy.run_module("loadgen", run_name="__main__", alter_sys=True)
